"""The internal helpers the checks of SPEC 13 call, built with `llvmlite.ir`: the search of the table of
live ranges behind a one-entry cache, the record of an access outside every range, and the shadow of
written bytes (`metadata.validation.live_ranges` has the layout of both).

    find(table, cache, address, end) -> -1 when [address, end) lies in one range of a data buffer,
        else 1 + the position of the nearest range below (0: none). `cache` is the caller's
        `[4 x i64]` stack slot: the last range found (begin, end, shadow, id), per invocation; a hit
        costs three compares, a miss one word of the validity bitmap (`_valid`), then where its bit
        does not accept the access, a search of `begin` through the table's index (`define_search`).
    range_failure(printf, header, invocation, table, address, below): the record of SPEC 13, through
        the printf helper `writer`: the address, the range below (id, end) and above (id, begin).
    shadow_check(shadow, offset, bytes) -> the offset of the first byte of [offset, offset+bytes) whose
        bit is clear, or -1 (also without a shadow: address 0).
    shadow_mark(shadow, offset, bytes): sets those bits, with an atomic `or` on each 64-bit word that
        lacks some (one word covers 64 bytes, which other invocations may be writing too).

Every helper is `alwaysinline`: the checks' fast paths then sit in the code they check, and the
optimiser keeps the cache in registers.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from metadata.validation.live_ranges import (
    BASE_WORD,
    BEGIN_COLUMN,
    BUCKETS_WORD,
    BUFFERS_WORD,
    COUNT_WORD,
    END_COLUMN,
    GRANULE_WORD,
    HEADER_WORDS,
    ID_COLUMN,
    NO_RANGE,
    RUNTIME_RANGE,
    SHADOW_COLUMN,
    SHADOW_WORD_BITS,
    SHADOW_WORD_SHIFT,
    SHIFT_WORD,
    VALID_WORD_BITS,
    VALID_WORD_SHIFT,
    VALID_WORDS_WORD,
)

from ...ir.building import I32, I64, constant, declared, internal_function

_ATTRIBUTES = ["alwaysinline", "nounwind"]
CACHE_WORDS = 4  # begin, end, shadow, id of the last range found
CACHE_BEGIN, CACHE_END, CACHE_SHADOW, CACHE_ID = range(CACHE_WORDS)
EMPTY_CACHE = (-1, 0)  # begin, end: no address is inside


def _word(builder: ir.IRBuilder, table: ir.Value, index: ir.Value, name: str) -> ir.Value:
    """The u64 word `index` of the table."""
    return builder.load(builder.gep(table, [index], source_etype=I64, name=f"{name}.at"), typ=I64, name=name)


def _column(count: ir.Value, column: int, position: ir.Value, builder: ir.IRBuilder) -> ir.Value:
    """The word index of entry `position` of `column` in a table of `count` ranges."""
    start = builder.add(constant(HEADER_WORDS), builder.mul(count, constant(column)))
    return builder.add(start, position)


SEARCH_WAYS = 8  # the search splits a wide window in this many parts a step


def define_search(module: ir.Module, name: str, table_type: ir.Type) -> ir.Function:
    """`search(table, address)`: the position of the last range whose begin is at most `address`, -1
    when there is none. The index gives the window of the address's bucket (`_window`: none or a few
    ranges); a window wider than SEARCH_WAYS is narrowed by steps that compare the address with the 7
    begins splitting it in 8 parts (three steps of a binary search at a time); then the up to
    SEARCH_WAYS begins left are compared at once. Every step's loads are independent of one another and
    of the same few cache lines, so a search waits on one round of loads a step, not one a begin, and
    the lanes of a warp take the same path through it."""
    function = internal_function(module, name, I64, [(table_type, "table"), (I64, "address")], _ATTRIBUTES)
    table, address = function.args
    start, loop, body, last = (
        function.append_basic_block(label) for label in ("start", "loop", "body", "last")
    )
    builder = ir.IRBuilder(start)
    first_low, first_size = _window(builder, table, address)
    builder.branch(loop)
    builder.position_at_end(loop)
    low = builder.phi(I64, name="low")  # the window: positions low .. low+size-1; the answer is at or
    size = builder.phi(I64, name="size")  # after low-1, and before low+size
    builder.cbranch(builder.icmp_unsigned(">", size, constant(SEARCH_WAYS), name="wide"), body, last)
    builder.position_at_end(body)
    step = builder.udiv(size, constant(SEARCH_WAYS), name="step")
    below = constant(0)  # how many of the splitting begins are at or below the address
    for part in range(1, SEARCH_WAYS):
        position = builder.add(low, builder.mul(step, constant(part)))
        below = builder.add(below, _at_or_below(builder, table, position, address))
    next_low = builder.add(low, builder.mul(below, step), name="low.next")
    last_part = builder.sub(size, builder.mul(step, constant(SEARCH_WAYS - 1)))
    final = builder.icmp_unsigned("==", below, constant(SEARCH_WAYS - 1))
    next_size = builder.select(final, last_part, step, name="size.next")
    builder.branch(loop)
    low.add_incoming(first_low, start)
    low.add_incoming(next_low, body)
    size.add_incoming(first_size, start)
    size.add_incoming(next_size, body)
    builder.position_at_end(last)
    taken = constant(0)  # begins of the window at or below the address
    for part in range(SEARCH_WAYS):
        # A part past the window reads begin[low] again (a word of the table even when low = count),
        # and counts for nothing.
        inside = builder.icmp_unsigned("<", constant(part), size)
        position = builder.select(inside, builder.add(low, constant(part)), low)
        taken = builder.add(
            taken, builder.and_(_at_or_below(builder, table, position, address), builder.zext(inside, I64))
        )
    builder.ret(builder.sub(builder.add(low, taken), constant(1), name="position"))
    return function


def _at_or_below(builder: ir.IRBuilder, table: ir.Value, position: ir.Value, address: ir.Value) -> ir.Value:
    """1 (an i64) when begin[position] is at or below `address`, else 0."""
    begin = _word(builder, table, builder.add(position, constant(HEADER_WORDS + BEGIN_COLUMN)), "begin")
    return builder.zext(builder.icmp_unsigned("<=", begin, address), I64)


def _first_at(builder: ir.IRBuilder, table: ir.Value) -> ir.Value:
    """The word index of the index's first[0], after shadow[K]."""
    count = _word(builder, table, constant(COUNT_WORD), "count")
    buffers = _word(builder, table, constant(BUFFERS_WORD), "buffers")
    return _column(count, SHADOW_COLUMN, buffers, builder)


def _window(builder: ir.IRBuilder, table: ir.Value, address: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The first position and the size of the window of the address's bucket in the index
    (`metadata.validation.live_ranges`); below the index's base, the ranges that begin at or below it."""
    base = _word(builder, table, constant(BASE_WORD), "index.base")
    shift = _word(builder, table, constant(SHIFT_WORD), "index.shift")
    buckets = _word(builder, table, constant(BUCKETS_WORD), "index.buckets")
    index = _first_at(builder, table)
    above = builder.icmp_unsigned(">=", address, base, name="above")
    bucket = builder.lshr(builder.sub(address, base), shift, name="bucket.any")
    last = builder.sub(buckets, constant(1))
    bucket = builder.select(builder.icmp_unsigned("<", bucket, buckets), bucket, last, name="bucket.in")
    bucket = builder.select(above, bucket, constant(0), name="bucket")
    at = builder.add(index, bucket, name="first.at")
    first = _word(builder, table, at, "first")
    after = _word(builder, table, builder.add(at, constant(1)), "after")
    low = builder.select(above, first, constant(0), name="low.first")
    size = builder.select(above, builder.sub(after, first), first, name="size.first")
    return low, size


def define_find(
    module: ir.Module, name: str, table_type: ir.Type, cache_type: ir.Type, search: ir.Function, shadows: bool
) -> ir.Function:
    """`find(table, cache, address, end)` (see the module docstring); with `shadows`, a range found
    puts its data buffer's shadow into the cache too."""
    parameters = [(table_type, "table"), (cache_type, "cache"), (I64, "address"), (I64, "end")]
    function = internal_function(module, name, I64, parameters, _ATTRIBUTES)
    table, cache, address, end = function.args
    labels = ("start", "miss", "probe", "update", "fail", "hit")
    start, miss, probe, update, fail, hit = (function.append_basic_block(label) for label in labels)
    builder = ir.IRBuilder(start)

    def slot(index: int) -> ir.Value:
        return builder.gep(cache, [constant(index)], source_etype=I64, name=f"slot{index}")

    cached_begin = builder.load(slot(CACHE_BEGIN), typ=I64, name="cached.begin")
    cached_end = builder.load(slot(CACHE_END), typ=I64, name="cached.end")
    forward = builder.icmp_unsigned(">=", end, address, name="forward")  # no wrap past 2^64
    inside = builder.and_(
        builder.icmp_unsigned(">=", address, cached_begin), builder.icmp_unsigned("<=", end, cached_end)
    )
    builder.cbranch(builder.and_(inside, forward, name="cached"), hit, miss)
    builder.position_at_end(miss)
    if not shadows:  # a range found for its shadow needs its position: the search finds it
        searching = function.append_basic_block("search")
        builder.cbranch(builder.and_(_valid(builder, table, address, end), forward), hit, searching)
        builder.position_at_end(searching)
    position = builder.call(search, [table, address], name="position")
    count = _word(builder, table, constant(COUNT_WORD), "count")
    builder.cbranch(builder.icmp_signed(">=", position, constant(0)), probe, fail)
    builder.position_at_end(probe)
    range_end = _word(builder, table, _column(count, END_COLUMN, position, builder), "range.end")
    found = _word(builder, table, _column(count, ID_COLUMN, position, builder), "range.id")
    fits = builder.and_(builder.icmp_unsigned("<=", end, range_end), forward)
    data = builder.icmp_unsigned("<", found, constant(RUNTIME_RANGE), name="data")  # not the runtime's
    builder.cbranch(builder.and_(fits, data), update, fail)
    builder.position_at_end(update)
    begin = _word(builder, table, _column(count, BEGIN_COLUMN, position, builder), "range.begin")
    builder.store(begin, slot(CACHE_BEGIN))
    builder.store(range_end, slot(CACHE_END))
    if shadows:
        builder.store(_shadow_of(builder, table, count, found), slot(CACHE_SHADOW))
        builder.store(found, slot(CACHE_ID))
    builder.branch(hit)
    builder.position_at_end(fail)
    builder.ret(builder.add(position, constant(1), name="status"))
    builder.position_at_end(hit)
    builder.ret(constant(-1))
    return function


def _valid(builder: ir.IRBuilder, table: ir.Value, address: ir.Value, end: ir.Value) -> ir.Value:
    """Whether [address, end) lies in one granule whose bit of the validity bitmap is set: inside a data
    buffer's range. A granule past the bitmap reads word 0, and counts for nothing."""
    base = _word(builder, table, constant(BASE_WORD), "index.base")
    buckets = _word(builder, table, constant(BUCKETS_WORD), "index.buckets")
    granule = _word(builder, table, constant(GRANULE_WORD), "granule")
    words = _word(builder, table, constant(VALID_WORDS_WORD), "valid.words")
    offset = builder.sub(address, base, name="valid.offset")
    at = builder.lshr(offset, granule, name="granule.at")
    last = builder.lshr(builder.sub(builder.sub(end, constant(1)), base), granule, name="granule.last")
    word = builder.lshr(at, constant(VALID_WORD_SHIFT), name="valid.word")
    above = builder.icmp_unsigned(">=", address, base)
    covered = builder.and_(above, builder.icmp_unsigned("<", word, words))
    one = builder.and_(covered, builder.icmp_unsigned("==", at, last), name="one.granule")
    valid = builder.add(_first_at(builder, table), builder.add(buckets, constant(1)))  # after first[B]
    bits = _word(builder, table, builder.add(valid, builder.select(one, word, constant(0))), "valid.bits")
    within = builder.and_(at, constant(VALID_WORD_BITS - 1))
    bit = builder.trunc(builder.lshr(bits, within), ir.IntType(1), name="valid.bit")
    return builder.and_(one, bit, name="valid")


def _shadow_of(builder: ir.IRBuilder, table: ir.Value, count: ir.Value, found: ir.Value) -> ir.Value:
    """Data buffer `found`'s shadow address from the table, 0 for a range past the data buffers (a
    driver's): the word read is then the count, which every table has."""
    buffers = _word(builder, table, constant(BUFFERS_WORD), "buffers")
    has = builder.icmp_unsigned("<", found, buffers, name="has.shadow")
    index = builder.select(has, _column(count, SHADOW_COLUMN, found, builder), constant(0))
    return builder.select(has, _word(builder, table, index, "shadow"), constant(0), name="shadow.or.0")


def define_range_failure(
    module: ir.Module, name: str, buffer_type: ir.Type, table_type: ir.Type, writer: ir.Function
) -> ir.Function:
    """`range_failure(printf, header, invocation, table, address, below)`: the nearest ranges below and
    above the address from the table (NO_RANGE and 0 where there is none), written through `writer`."""
    parameters = [
        (buffer_type, "printf"),
        (I64, "header"),
        (I32, "invocation"),
        (table_type, "table"),
        (I64, "address"),
        (I64, "below"),
    ]
    function = internal_function(module, name, ir.VoidType(), parameters, _ATTRIBUTES)
    printf, header, invocation, table, address, below = function.args
    builder = ir.IRBuilder(function.append_basic_block("start"))
    count = _word(builder, table, constant(COUNT_WORD), "count")
    above = builder.add(below, constant(1), name="above")
    neighbours = []
    for position, exists, column in (
        (below, builder.icmp_signed(">=", below, constant(0)), END_COLUMN),
        (above, builder.icmp_signed("<", above, count), BEGIN_COLUMN),
    ):
        # A range that does not exist reads word 0 (the count), then gives way to NO_RANGE and 0.
        found = builder.select(exists, _column(count, ID_COLUMN, position, builder), constant(0))
        bound = builder.select(exists, _column(count, column, position, builder), constant(0))
        neighbours.append(builder.select(exists, _word(builder, table, found, "id"), constant(NO_RANGE)))
        neighbours.append(builder.select(exists, _word(builder, table, bound, "bound"), constant(0)))
    builder.call(writer, [printf, header, invocation, address, *neighbours])
    builder.ret_void()
    return function


# The work on one word of a shadow: (builder, the word's index, the mask of the bytes' bits in it, its
# address, the block to go on to); it ends its block with a branch there, or a return.
WordWork = Callable[[ir.IRBuilder, ir.Value, ir.Value, ir.Value, ir.Block], None]


def _for_each_word(function: ir.Function, table_type: ir.Type, work: WordWork) -> ir.Block:
    """Do `work` on each 64-bit word of the shadow `function.args[0]` that bytes [offset, offset+bytes)
    touch (none without a shadow or bytes): straight-line for bytes within one word, the common case,
    else a loop. The block reached after the last word, for the caller to end."""
    shadow, offset, size = function.args
    labels = ("start", "test", "one", "loop", "next", "done")
    start, test, one, loop, following, done = (function.append_basic_block(label) for label in labels)
    builder = ir.IRBuilder(start)
    nothing = builder.or_(
        builder.icmp_unsigned("==", shadow, constant(0)), builder.icmp_unsigned("==", size, constant(0))
    )
    builder.cbranch(nothing, done, test)
    builder.position_at_end(test)
    words = builder.inttoptr(shadow, table_type, name="words")
    last = builder.sub(builder.add(offset, size), constant(1), name="last")
    bits = constant(SHADOW_WORD_BITS - 1)
    first_word = builder.lshr(offset, constant(SHADOW_WORD_SHIFT), name="first.word")
    last_word = builder.lshr(last, constant(SHADOW_WORD_SHIFT), name="last.word")
    builder.cbranch(builder.icmp_unsigned("==", first_word, last_word, name="single"), one, loop)

    def mask(builder: ir.IRBuilder, low: ir.Value, high: ir.Value) -> ir.Value:
        """Bits low..high."""
        upto = builder.lshr(constant(-1), builder.sub(bits, high))
        return builder.shl(builder.lshr(upto, low), low, name="mask")

    builder.position_at_end(one)
    at = builder.gep(words, [first_word], source_etype=I64, name="at")
    work(builder, first_word, mask(builder, builder.and_(offset, bits), builder.and_(last, bits)), at, done)
    builder.position_at_end(loop)
    word = builder.phi(I64, name="w")
    low = builder.select(
        builder.icmp_unsigned("==", word, first_word), builder.and_(offset, bits), constant(0), name="low"
    )
    high = builder.select(
        builder.icmp_unsigned("==", word, last_word), builder.and_(last, bits), bits, name="high"
    )
    work(builder, word, mask(builder, low, high), builder.gep(words, [word], source_etype=I64), following)
    builder.position_at_end(following)
    step = builder.add(word, constant(1), name="w.next")
    builder.cbranch(builder.icmp_unsigned("<=", step, last_word), loop, done)
    word.add_incoming(first_word, test)
    word.add_incoming(step, following)
    return done


def _monotonic(scope: str | None) -> str:
    """The ordering of the shadow's atomics as llvmlite prints it: monotonic, at `scope` (the target's
    name for the whole device: `syncscope("device")` on nvptx is `ld.relaxed.gpu`, where the default,
    the system's, is `ld.relaxed.sys`)."""
    return f'syncscope("{scope}") monotonic' if scope else "monotonic"


def define_shadow_check(module: ir.Module, name: str, table_type: ir.Type, scope: str | None) -> ir.Function:
    """`shadow_check(shadow, offset, bytes)` (see the module docstring)."""
    parameters = [(I64, "shadow"), (I64, "offset"), (I64, "bytes")]
    function = internal_function(module, name, I64, parameters, _ATTRIBUTES)
    cttz = declared(module, "llvm.cttz.i64", I64, [I64, ir.IntType(1)])

    def check(
        builder: ir.IRBuilder, word: ir.Value, mask: ir.Value, at: ir.Value, following: ir.Block
    ) -> None:
        written = builder.load_atomic(at, _monotonic(scope), 8, name="written", typ=I64)
        missing = builder.and_(builder.not_(written), mask, name="missing")
        found = function.append_basic_block("found")
        builder.cbranch(builder.icmp_unsigned("!=", missing, constant(0)), found, following)
        builder.position_at_end(found)
        bit = builder.call(cttz, [missing, ir.Constant(ir.IntType(1), 1)], name="bit")
        builder.ret(builder.add(builder.shl(word, constant(SHADOW_WORD_SHIFT)), bit, name="first"))

    done = _for_each_word(function, table_type, check)
    ir.IRBuilder(done).ret(constant(-1))
    return function


def define_shadow_mark(module: ir.Module, name: str, table_type: ir.Type, scope: str | None) -> ir.Function:
    """`shadow_mark(shadow, offset, bytes)` (see the module docstring)."""
    parameters = [(I64, "shadow"), (I64, "offset"), (I64, "bytes")]
    function = internal_function(module, name, ir.VoidType(), parameters, _ATTRIBUTES)

    def mark(
        builder: ir.IRBuilder, word: ir.Value, mask: ir.Value, at: ir.Value, following: ir.Block
    ) -> None:
        written = builder.load_atomic(at, _monotonic(scope), 8, name="written", typ=I64)
        marked = builder.icmp_unsigned("==", builder.and_(written, mask), mask, name="marked")
        setting = function.append_basic_block("set")
        builder.cbranch(marked, following, setting)
        builder.position_at_end(setting)
        builder.atomic_rmw("or", at, mask, _monotonic(scope))
        builder.branch(following)

    done = _for_each_word(function, table_type, mark)
    ir.IRBuilder(done).ret_void()
    return function
