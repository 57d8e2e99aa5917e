"""One atomic add on `bufferOffset` for several warps of a thread block: the printf reservation on `nvptx`.

A warp-aggregated printf (`warp_aggregation`) makes one atomic add a warp, all on the one 64-bit
`bufferOffset` of the buffer (SPEC 4). One address takes about one atomic every 1.2 ns on an H100, so
2^24 invocations printing once make 2^19 atomics that take 0.64 ms, 2.6 times what writing their
entries takes (`bench_gpu.py` (c)). The warps of a thread block therefore combine their reservations
in shared memory, in batches, and each batch makes one atomic add:

    W = batch:20 | arrivals:12 | dwords:32     the open batch, and what its warps asked for
    D = batch:20 | readers:12  | base:32       batches done, readers of the last, its base

A warp's leader adds `1 << 32 | dwords` to W. The first to arrive in a batch (dwords 0 before it)
leads it: it waits until the batch before is done and every warp of that batch has read its base
(D = batch | 0 readers), closes its own batch (exchanges W for the next batch, empty), makes the atomic
add of the batch's dwords on `bufferOffset`, and publishes the base with the number of the others
(D = batch + 1 | arrivals - 1 | base). The others wait for D's batch to pass theirs, read the base and
take one from the readers. Each warp's region is the base plus the dwords asked before its own, as if
the batch's adds had been made one after another. While a leader's atomic is on its way, the warps
that arrive gather in the next batch: the busier the counter, the larger the batches.

Nobody waits on a warp that is not already waiting in turn or holding the base it waits for: a leader
waits on the leader before it and that batch's readers, who wait on that leader only; the first batch
waits on nobody. `bufferOffset` still grows by every dword asked, so the count of what did not fit is
exact. The published base is clamped to 2^32 - 1: a base that large is past any capacity
(`reserved0` is 32 bits), so every entry from it is dropped, as it would be unclamped.

The state is shared memory, which a thread block starts with garbage in: the kernel calls
`COMBINING_INIT` (thread 0: D = W = 0, and the buffer whose counter the block combines) and a barrier
before anything else (`devices.nvptx.kernel_ir`). A reservation on another buffer makes its own atomic.
"""

from __future__ import annotations

import llvmlite.ir as ir

from ..ir.building import I32, I64, constant, declared, internal_function, store_atomic
from ..targets.runtime_globals import COMBINING_INIT

_SHARED_ADDRESS_SPACE = 3
_WAITED, _ADDRESS, _OPEN = range(3)  # the state's words: D, the buffer's address, W
_BATCH_SHIFT, _COUNT_SHIFT = 44, 32  # batch:20 | arrivals or readers:12 | dwords or base:32
_BATCH_MASK, _COUNT_MASK, _LOW_MASK = (1 << 20) - 1, (1 << 12) - 1, (1 << 32) - 1
_PAUSE_NANOSECONDS = 32  # a waiting warp's pause between two looks at D


def define_combining(module: ir.Module, prefix: str, buffer_type: ir.Type) -> ir.Function:
    """The shared state, `COMBINING_INIT(buffer)` and `@<prefix>combined(counter, dwords) -> i64`: what
    the calling warp's own `atomicrmw add %counter, %dwords` would have returned."""
    state_type = ir.ArrayType(I64, 3)
    state = ir.GlobalVariable(module, state_type, f"{prefix}combining.state", addrspace=_SHARED_ADDRESS_SPACE)
    state.type = ir.PointerType(addrspace=_SHARED_ADDRESS_SPACE)
    state.linkage = "internal"
    state.initializer = ir.Constant(state_type, ir.Undefined)
    state.align = 8
    _define_init(module, state, buffer_type)
    return _define_combined(module, f"{prefix}combined", state, buffer_type)


def _word(builder: ir.IRBuilder, state: ir.Value, index: int) -> ir.Value:
    return builder.gep(state, [constant(index)], source_etype=I64, name=f"state.{index}")


def _define_init(module: ir.Module, state: ir.Value, buffer_type: ir.Type) -> None:
    """`COMBINING_INIT(buffer)`: the state of a thread block that has combined nothing yet. Not internal:
    the kernel that calls it is added later."""
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [buffer_type]), COMBINING_INIT)
    function.attributes.add("nounwind")
    builder = ir.IRBuilder(function.append_basic_block("entry"))
    builder.store(constant(0), _word(builder, state, _WAITED))
    builder.store(constant(0), _word(builder, state, _OPEN))
    builder.store(builder.ptrtoint(function.args[0], I64), _word(builder, state, _ADDRESS))
    builder.ret_void()


def _field(builder: ir.IRBuilder, word: ir.Value, shift: int, mask: int, name: str) -> ir.Value:
    return builder.and_(builder.lshr(word, constant(shift)), constant(mask), name=name)


def _wait(builder: ir.IRBuilder, state: ir.Value, until: ir.Value, ready: str) -> ir.Value:
    """Loop, pausing, until D equals `until` in the bits `ready` names (`batch`: the batch field;
    `idle`: the batch field and no readers); the D it saw then."""
    function = builder.function
    look, pause, seen = (function.append_basic_block(f"{ready}.{part}") for part in ("look", "pause", "seen"))
    builder.branch(look)
    builder.position_at_end(look)
    waited = builder.load_atomic(_word(builder, state, _WAITED), "monotonic", 8, typ=I64, name="waited")
    mask = _BATCH_MASK << _BATCH_SHIFT
    if ready == "idle":
        mask |= _COUNT_MASK << _COUNT_SHIFT
    done = builder.icmp_unsigned("==", builder.and_(waited, constant(mask)), until, name=f"{ready}.done")
    builder.cbranch(done, seen, pause)
    builder.position_at_end(pause)
    nanosleep = declared(builder.module, "llvm.nvvm.nanosleep", ir.VoidType(), [I32])
    builder.call(nanosleep, [constant(_PAUSE_NANOSECONDS, I32)])
    builder.branch(look)
    builder.position_at_end(seen)
    return waited


def _define_combined(module: ir.Module, name: str, state: ir.Value, buffer_type: ir.Type) -> ir.Function:
    """`@name(counter, dwords)`, see the module docstring. `noinline`: only a warp's leader calls it,
    and the kernel's own code stays as short as with one atomic."""
    function = internal_function(
        module, name, I64, [(buffer_type, "counter"), (I64, "dwords")], ["noinline", "nounwind"]
    )
    counter, dwords = function.args
    entry, alone, combine, lead, follow, done = (
        function.append_basic_block(label)
        for label in ("entry", "alone", "combine", "lead", "follow", "done")
    )
    builder = ir.IRBuilder(entry)
    combined = builder.load(_word(builder, state, _ADDRESS), typ=I64, name="combined")
    ours = builder.icmp_unsigned("==", builder.ptrtoint(counter, I64), combined, name="ours")
    builder.cbranch(ours, combine, alone)

    builder.position_at_end(alone)
    old_alone = builder.atomic_rmw("add", counter, dwords, "monotonic", name="old.alone")
    builder.branch(done)

    builder.position_at_end(combine)
    arrival = builder.or_(constant(1 << _COUNT_SHIFT), dwords, name="arrival")
    before = builder.atomic_rmw("add", _word(builder, state, _OPEN), arrival, "monotonic", name="before")
    batch = builder.lshr(before, constant(_BATCH_SHIFT), name="batch")
    asked = builder.and_(before, constant(_LOW_MASK), name="asked")
    following = builder.and_(builder.add(batch, constant(1)), constant(_BATCH_MASK), name="following")
    passed = builder.shl(following, constant(_BATCH_SHIFT), name="passed")
    builder.cbranch(builder.icmp_unsigned("==", asked, constant(0), name="first"), lead, follow)

    builder.position_at_end(lead)
    _wait(builder, state, builder.shl(batch, constant(_BATCH_SHIFT)), "idle")
    closed = builder.atomic_rmw("xchg", _word(builder, state, _OPEN), passed, "monotonic", name="closed")
    total = builder.and_(closed, constant(_LOW_MASK), name="total")
    base = builder.atomic_rmw("add", counter, total, "monotonic", name="base")
    arrivals = _field(builder, closed, _COUNT_SHIFT, _COUNT_MASK, "arrivals")
    readers = builder.shl(builder.sub(arrivals, constant(1)), constant(_COUNT_SHIFT), name="readers")
    low = builder.select(
        builder.icmp_unsigned("<", base, constant(_LOW_MASK)), base, constant(_LOW_MASK), name="base.low"
    )
    published = builder.or_(builder.or_(passed, readers), low, name="published")
    store_atomic(builder, published, _word(builder, state, _WAITED), "monotonic", 8)
    led = builder.block
    builder.branch(done)

    builder.position_at_end(follow)
    waited = _wait(builder, state, passed, "batch")
    builder.atomic_rmw("sub", _word(builder, state, _WAITED), constant(1 << _COUNT_SHIFT), "monotonic")
    old_follow = builder.add(builder.and_(waited, constant(_LOW_MASK)), asked, name="old.follow")
    followed = builder.block
    builder.branch(done)

    builder.position_at_end(done)
    old = builder.phi(I64, name="old")
    old.add_incoming(old_alone, alone)
    old.add_incoming(base, led)
    old.add_incoming(old_follow, followed)
    builder.ret(old)
    return function
