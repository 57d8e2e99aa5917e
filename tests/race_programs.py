"""Random structured shaders over data buffers with one injected race each, their race-free twins, and
the races they must give (SPEC section 12), for the tests.

`RaceProgram(seed, kind)` writes a module whose entry `@main(printf, id, a, b)` runs a random tree of
statements (loops whose trip counts depend on the invocation, if/else, switches, early returns) whose
leaves access the two data buffers: each invocation its own words (loads, stores, a byte, an 8-byte
store, a memcpy and a memset between its own words), read-only inputs every invocation reads, counters
every invocation adds to atomically. None of that races. Then it injects one race of `kind`:

- write-racing-write: a store to a shared word of `b`;
- read-racing-write: a load of a shared word, and a store to it by one invocation only;
- atomic-racing-plain: an atomic add to a shared word and a plain load of it;

and its twin (`twin=True`) makes the same program race-free: the store goes to the invocation's own
word, the load reads its own word, the load is atomic. Each access has its own source line
(`races.gen.c:LINE:1`), which the table's sites are checked against.

`expected(n)` replays the accesses of invocations `0 .. n-1` (numpy, a mask of invocations a statement)
and derives the races from them as SPEC 12 and the report's rules define them: the oracle the
device's reports are checked against.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

SLOTS = 4  # words of its own an invocation has in each buffer
SHARED = 4  # words at the start of `b` the injected races use
INPUTS = 8  # read-only words at the start of `a`
COUNTERS = 4  # atomically counted words of `a`, after its inputs
WRITE, READ, ATOMIC = "write", "read", "atomic"
WRITE_WRITE, READ_WRITE, ATOMIC_PLAIN = "write-racing-write", "read-racing-write", "atomic-racing-plain"
KINDS = (WRITE_WRITE, READ_WRITE, ATOMIC_PLAIN)
FILE = "races.gen.c"
_OWN_BASE = {"a": INPUTS + COUNTERS, "b": SHARED}
_LEAVES = ("store", "load", "byte", "wide", "shared", "count", "copy", "fill")

Race = tuple  # (kind, buffer, least offset, greatest offset, words, (site, invocation), (site, invocation))


@dataclass
class _Access:
    """One access statement: its kind, its source line and its parameters."""

    kind: str
    line: int
    buffer: str = "b"
    slot: int = 0
    extra: int = 0  # a byte's offset; a range's words; the first of the shared words
    span: int = 1  # the shared words: invocation i accesses word `extra + i % span`

    def words(self, ids: np.ndarray) -> list[tuple[str, np.ndarray, str]]:
        """(buffer, words, class) of each access it makes for invocations `ids`, in site order."""
        own = _OWN_BASE[self.buffer] + ids * SLOTS + self.slot
        kind = self.kind
        if kind in ("store", "byte"):
            return [(self.buffer, own, WRITE)]
        if kind == "load":
            return [(self.buffer, own, READ)]
        if kind == "wide":
            return [(self.buffer, np.concatenate([own, own + 1]), WRITE)]
        if kind == "copy":  # memcpy: the destination in `a`, then the source in `b`
            span = [offset for offset in range(self.extra)]
            a = np.concatenate([_OWN_BASE["a"] + ids * SLOTS + self.slot + k for k in span])
            b = np.concatenate([_OWN_BASE["b"] + ids * SLOTS + self.slot + k for k in span])
            return [("a", a, WRITE), ("b", b, READ)]
        if kind == "fill":
            span = [_OWN_BASE["a"] + ids * SLOTS + self.slot + k for k in range(self.extra)]
            return [("a", np.concatenate(span), WRITE)]
        every = self.extra + ids % self.span
        shared_class = {
            "shared": READ,
            "count": ATOMIC,
            "poke": WRITE,
            "peek": READ,
            "bump": ATOMIC,
            "peek_atomic": ATOMIC,
        }[kind]
        buffer = "a" if kind in ("shared", "count") else "b"
        return [(buffer, every, shared_class)]

    def ir(self, name: str) -> list[str]:
        """Its instructions (`name` prefixes its values), the accesses carrying `!dbg !{line}`."""
        debug = f", !dbg !{self.line}"
        kind, buffer = self.kind, f"%{self.buffer}"
        pointer = "ptr addrspace(7)"
        lines = []
        if kind in ("shared", "count", "poke", "peek", "bump", "peek_atomic"):
            buffer = "%a" if kind in ("shared", "count") else "%b"
            lines += [
                f"%{name}.which = urem i64 %wide, {self.span}",
                f"%{name}.index = add i64 %{name}.which, {self.extra}",
                f"%{name}.at = getelementptr i32, {pointer} {buffer}, i64 %{name}.index",
            ]
        elif kind == "byte":
            lines += [
                f"%{name}.word = add i64 %{self.buffer}.own, {self.slot}",
                f"%{name}.bytes = mul i64 %{name}.word, 4",
                f"%{name}.index = add i64 %{name}.bytes, {self.extra}",
                f"%{name}.at = getelementptr i8, {pointer} {buffer}, i64 %{name}.index",
            ]
        else:
            owner = "a" if kind in ("copy", "fill") else self.buffer
            lines += [
                f"%{name}.index = add i64 %{owner}.own, {self.slot}",
                f"%{name}.at = getelementptr i32, {pointer} %{owner}, i64 %{name}.index",
            ]
        at = f"{pointer} %{name}.at"
        if kind in ("store", "poke"):
            lines.append(f"store i32 %id, {at}, align 4{debug}")
        elif kind in ("load", "shared", "peek"):
            lines.append(f"%{name}.value = load i32, {at}, align 4{debug}")
        elif kind == "peek_atomic":
            lines.append(f"%{name}.value = load atomic i32, {at} monotonic, align 4{debug}")
        elif kind == "byte":
            lines.append(f"store i8 7, {at}, align 1{debug}")
        elif kind == "wide":
            lines.append(f"store i64 -1, {at}, align 4{debug}")
        elif kind in ("count", "bump"):
            lines.append(f"%{name}.old = atomicrmw add {at}, i32 1 monotonic, align 4{debug}")
        elif kind == "copy":
            lines += [
                f"%{name}.from.index = add i64 %b.own, {self.slot}",
                f"%{name}.from = getelementptr i32, {pointer} %b, i64 %{name}.from.index",
                f"call void @llvm.memcpy.p7.p7.i64({at}, {pointer} %{name}.from, i64 {4 * self.extra}, "
                f"i1 false){debug}",
            ]
        else:  # fill
            lines.append(f"call void @llvm.memset.p7.i64({at}, i8 0, i64 {4 * self.extra}, i1 false){debug}")
        return lines


@dataclass
class _Block:
    label: str
    lines: list[str] = field(default_factory=list)


class RaceProgram:
    """One generated module (see the module docstring): its IR, its sites and its races."""

    def __init__(self, seed: int, kind: str, twin: bool = False, depth: int = 2) -> None:
        self.random = random.Random(seed * 3 + KINDS.index(kind))
        self.kind, self.twin, self.depth = kind, twin, depth
        self.accesses: list[_Access] = []
        self.number = 0
        tree = self._statements(depth)
        while len(self._lines(tree)) < 8:  # programs of a few accesses at least
            tree = self._statements(depth)
        self.injected = self._inject(tree)
        self.tree = tree
        self.lines()
        entry = [
            "%wide = zext i32 %id to i64",
            f"%own = mul i64 %wide, {SLOTS}",
            f"%a.own = add i64 %own, {_OWN_BASE['a']}",
            f"%b.own = add i64 %own, {_OWN_BASE['b']}",
        ]
        self.blocks: list[_Block] = [_Block("entry", entry)]
        self._emit("entry", tree)
        self.blocks[-1].lines.append("ret void")

    # Statements: ("loop", name, a, b, m, body), ("if", name, m, r, then, else), ("switch", name, m,
    # [bodies]), ("return", name, m, r), ("access", access), ("guarded", name, invocation, access).

    def _statements(self, depth: int) -> list:
        statements = []
        for _ in range(self.random.randint(2, 4)):
            choice = self.random.choice(
                ["loop", "if", "switch", "return", "leaf", "leaf"] if depth else ["leaf"]
            )
            self.number += 1
            name = f"{choice}{self.number}"
            if choice == "loop":
                a, b, m = self.random.randint(1, 5), self.random.randint(0, 3), self.random.randint(1, 3)
                statements.append(("loop", name, a, b, m, self._statements(depth - 1)))
            elif choice == "if":
                m = self.random.randint(2, 4)
                r = self.random.randrange(m)
                statements.append(
                    ("if", name, m, r, self._statements(depth - 1), self._statements(depth - 1))
                )
            elif choice == "switch":
                m = self.random.randint(2, 3)
                statements.append(("switch", name, m, [self._statements(depth - 1) for _ in range(m)]))
            elif choice == "return":
                m = self.random.randint(4, 7)
                statements.append(("return", name, m, self.random.randrange(m)))
            else:
                statements.append(("access", self._leaf()))
        return statements

    def _leaf(self) -> _Access:
        kind = self.random.choice(_LEAVES)
        access = _Access(kind, 0, self.random.choice("ab"), self.random.randrange(SLOTS))
        if kind == "byte":
            access.extra = self.random.randrange(4)
        elif kind == "wide":
            access.slot = self.random.randrange(SLOTS - 1)
        elif kind in ("copy", "fill"):
            access.slot = self.random.randrange(SLOTS - 1)
            access.extra = self.random.randint(1, SLOTS - access.slot)
        elif kind == "shared":
            access.extra = self.random.randrange(INPUTS)
            access.span = self.random.randint(1, INPUTS - access.extra)
        elif kind == "count":
            first = self.random.randrange(COUNTERS)
            access.extra, access.span = INPUTS + first, self.random.randint(1, COUNTERS - first)
        return access

    def _inject(self, tree: list) -> tuple[str, int, int]:
        """Put the race of `self.kind` (or its twin's code) at a top-level position where invocations
        0 .. 15 make it happen; the injected (kind, line, line)."""
        word = self.random.randrange(SHARED)
        span = self.random.randint(1, SHARED - word)
        slot = self.random.randrange(SLOTS)
        start = self.random.randrange(len(tree) + 1)
        for offset in range(len(tree) + 1):
            position = (start + offset) % (len(tree) + 1)
            first, second = self._injection(word, span, slot)
            candidate = [*tree[:position], *first, *tree[position:]]
            candidate.insert(self.random.randrange(position + len(first), len(candidate) + 1), second)
            happens = self._injected_race(candidate, self._lines(candidate))
            if happens is not None:  # in the program with the race; its twin then changes the code
                tree[:] = self._twinned(candidate) if self.twin else candidate
                return happens
        raise AssertionError("no position makes the injected race happen")

    def _injection(self, word: int, span: int, slot: int) -> tuple[list, tuple]:
        """The injected statements: the first (at the position) and the second (after it)."""

        def shared(kind: str) -> _Access:
            return _Access(kind, 0, extra=word, span=span, slot=slot)

        if self.kind == WRITE_WRITE:
            return [], ("access", shared("poke"))
        if self.kind == READ_WRITE:
            return [("access", shared("peek"))], ("guarded", "guard", 1, shared("poke"))
        return [("access", shared("bump"))], ("access", shared("peek"))

    def _twinned(self, tree: list) -> list:
        """The race-free twin of the injected statements (see the module docstring)."""
        for statement in tree:
            access = statement[-1] if statement[0] in ("access", "guarded") else None
            if access is None:
                continue
            if self.kind == WRITE_WRITE and access.kind == "poke":
                access.kind = "store"
            elif self.kind == READ_WRITE and access.kind == "peek":
                access.kind = "load"
            elif self.kind == ATOMIC_PLAIN and access.kind == "peek":
                access.kind = "peek_atomic"
        return tree

    def _lines(self, tree: list) -> dict[int, _Access]:
        """Number the accesses of `tree` in the order they are emitted (their source lines, 1, 2, ...)."""
        found: dict[int, _Access] = {}

        def visit(statements: list) -> None:
            for statement in statements:
                kind = statement[0]
                if kind in ("access", "guarded"):
                    access = statement[-1]
                    access.line = len(found) + 1
                    found[access.line] = access
                elif kind == "loop":
                    visit(statement[5])
                elif kind == "if":
                    visit(statement[4])
                    visit(statement[5])
                elif kind == "switch":
                    for body in statement[3]:
                        visit(body)

        visit(tree)
        return found

    def _injected_race(self, tree: list, lines: dict[int, _Access]) -> tuple[str, int, int] | None:
        """The injected race's (kind, line, line) when invocations 0 .. 15 of `tree` have it."""
        injected = [access for access in lines.values() if access.kind in ("poke", "peek", "bump")]
        sites = _numbered(lines)
        keys = {(access.line, cls): number for number, (access, _, cls) in enumerate(sites)}
        first, second = injected[0], injected[-1]
        if self.kind == READ_WRITE:
            first, second = (first, second) if first.kind == "peek" else (second, first)
        elif self.kind == ATOMIC_PLAIN:
            first, second = (first, second) if first.kind == "bump" else (second, first)
        wanted = (
            self.kind,
            keys[first.line, _class_of(first)],
            keys[second.line, _class_of(second)],
        )
        races = _oracle(tree, lines, 16)
        found = {(race[0], race[5][0], race[6][0]) for race in races}
        return (self.kind, first.line, second.line) if wanted in found else None

    # Emitting the IR.

    def _emit(self, label: str, tree: list) -> str:
        """Emit `tree` from the block `label` (the last so far); the label of the block it ends in."""
        for statement in tree:
            kind = statement[0]
            code = self.blocks[-1].lines
            if kind == "access":
                code += statement[1].ir(f"s{statement[1].line}")
            elif kind == "guarded":
                _, name, invocation, access = statement
                code += [
                    f"%{name}.c = icmp eq i32 %id, {invocation}",
                    f"br i1 %{name}.c, label %{name}.then, label %{name}.join",
                ]
                self.blocks.append(
                    _Block(f"{name}.then", access.ir(f"s{access.line}") + [f"br label %{name}.join"])
                )
                self.blocks.append(_Block(f"{name}.join"))
                label = f"{name}.join"
            elif kind == "return":
                _, name, m, r = statement
                code += [f"%{name}.r = urem i32 %id, {m}", f"%{name}.c = icmp eq i32 %{name}.r, {r}"]
                code.append(f"br i1 %{name}.c, label %{name}.ret, label %{name}.go")
                self.blocks += [_Block(f"{name}.ret", ["ret void"]), _Block(f"{name}.go")]
                label = f"{name}.go"
            elif kind in ("if", "switch"):
                label = self._emit_branches(statement)
            else:
                label = self._emit_loop(label, statement)
        return label

    def _emit_branches(self, statement: tuple) -> str:
        name = statement[1]
        code = self.blocks[-1].lines
        if statement[0] == "if":
            _, _, m, r, then, otherwise = statement
            code += [f"%{name}.r = urem i32 %id, {m}", f"%{name}.c = icmp eq i32 %{name}.r, {r}"]
            code.append(f"br i1 %{name}.c, label %{name}.arm0, label %{name}.arm1")
            bodies = [then, otherwise]
        else:
            _, _, m, bodies = statement
            code.append(f"%{name}.r = urem i32 %id, {m}")
            cases = " ".join(f"i32 {k}, label %{name}.arm{k}" for k in range(1, m))
            code.append(f"switch i32 %{name}.r, label %{name}.arm0 [ {cases} ]")
        for number, body in enumerate(bodies):
            self.blocks.append(_Block(f"{name}.arm{number}"))
            self._emit(f"{name}.arm{number}", body)
            self.blocks[-1].lines.append(f"br label %{name}.join")
        self.blocks.append(_Block(f"{name}.join"))
        return f"{name}.join"

    def _emit_loop(self, label: str, statement: tuple) -> str:
        _, name, a, b, m, body = statement
        self.blocks[-1].lines += [
            f"%{name}.p = mul i32 %id, {a}",
            f"%{name}.q = add i32 %{name}.p, {b}",
            f"%{name}.trips = urem i32 %{name}.q, {m + 1}",
            f"br label %{name}.head",
        ]
        head = _Block(f"{name}.head")
        self.blocks += [head, _Block(f"{name}.body")]
        end = self._emit(f"{name}.body", body)
        head.lines += [
            f"%{name}.i = phi i32 [ 0, %{label} ], [ %{name}.next, %{end} ]",
            f"%{name}.more = icmp ult i32 %{name}.i, %{name}.trips",
            f"br i1 %{name}.more, label %{name}.body, label %{name}.exit",
        ]
        self.blocks[-1].lines += [f"%{name}.next = add i32 %{name}.i, 1", f"br label %{name}.head"]
        self.blocks.append(_Block(f"{name}.exit"))
        return f"{name}.exit"

    def ir(self) -> str:
        lines = [
            "declare void @llvm.memcpy.p7.p7.i64(ptr addrspace(7), ptr addrspace(7), i64, i1)",
            "declare void @llvm.memset.p7.i64(ptr addrspace(7), i8, i64, i1)",
            "define void @main(ptr addrspace(7) %printf, i32 %id, ptr addrspace(7) %a, ptr addrspace(7) %b) "
            "!dbg !1000 {",
        ]
        for block in self.blocks:
            lines.append(f"{block.label}:")
            lines += [f"  {line}" for line in block.lines]
        lines.append("}")
        lines += [
            "!llvm.dbg.cu = !{!1001}",
            "!llvm.module.flags = !{!1003}",
            '!1001 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1002, producer: "races", '
            "emissionKind: FullDebug)",
            f'!1002 = !DIFile(filename: "{FILE}", directory: "")',
            '!1003 = !{i32 2, !"Debug Info Version", i32 3}',
            '!1000 = distinct !DISubprogram(name: "main", scope: !1002, file: !1002, line: 1, type: !1004, '
            "unit: !1001)",
            "!1004 = !DISubroutineType(types: !1005)",
            "!1005 = !{}",
        ]
        lines += [f"!{line} = !DILocation(line: {line}, column: 1, scope: !1000)" for line in self.lines()]
        return "\n".join(lines) + "\n"

    def lines(self) -> dict[int, _Access]:
        return self._lines(self.tree)

    def sites(self) -> list[tuple[str, str]]:
        """The table's sites as they must be: (source, class), in order."""
        return [(f"{FILE}:{access.line}:1", cls) for access, _, cls in _numbered(self.lines())]

    def buffer_sizes(self, invocations: int) -> list[int]:
        """The bytes of `a` and `b` for `invocations`."""
        return [4 * (_OWN_BASE["a"] + invocations * SLOTS), 4 * (_OWN_BASE["b"] + invocations * SLOTS)]

    def expected(self, invocations: int) -> list[Race]:
        """The races of invocations `0 .. invocations-1`, as the reports must give them, sorted."""
        return _oracle(self.tree, self.lines(), invocations)


def _class_of(access: _Access) -> str:
    return access.words(np.zeros(1, dtype=np.int64))[0][2]


def _numbered(lines: dict[int, _Access]) -> list[tuple[_Access, str, str]]:
    """(access, buffer, class) of each site the pass records, in its order: every access of a buffer
    that some access writes or adds to atomically (a buffer only read has no shadow)."""
    sites = [
        (access, buffer, cls)
        for _, access in sorted(lines.items())
        for buffer, _, cls in access.words(np.zeros(1, dtype=np.int64))
    ]
    shadowed = {buffer for _, buffer, cls in sites if cls != READ}
    return [site for site in sites if site[1] in shadowed]


def _oracle(tree: list, lines: dict[int, _Access], invocations: int) -> list[Race]:
    """The races invocations `0 .. invocations-1` of `tree` make (see `expected`)."""
    sites = _numbered(lines)
    numbers = {(access.line, buffer, cls): number for number, (access, buffer, cls) in enumerate(sites)}
    bits = max(len(sites) - 1, 0).bit_length()
    events: list[tuple[str, np.ndarray, str, np.ndarray]] = []  # buffer, words, class, packed values
    ids = np.arange(invocations, dtype=np.int64)

    def touch(access: _Access, mask: np.ndarray) -> None:
        chosen = ids[mask]
        for buffer, words, cls in access.words(chosen):
            number = numbers.get((access.line, buffer, cls))
            if number is None:
                continue
            repeat = len(words) // max(len(chosen), 1)
            events.append((buffer, words, cls, np.tile((chosen << bits) | number, repeat)))

    _replay(tree, ids, np.ones(invocations, dtype=bool), touch)
    races: list[Race] = []
    for buffer in "ab":
        size = _OWN_BASE[buffer] + invocations * SLOTS
        races += _buffer_races(buffer, size, [event[1:] for event in events if event[0] == buffer], bits)
    return sorted(races, key=lambda race: (race[1], race[2], KINDS.index(race[0]), race[5][0], race[6][0]))


def _replay(tree: list, ids: np.ndarray, running: np.ndarray, touch) -> np.ndarray:
    """Run `tree` for the invocations in `running`, calling `touch(access, mask)` for each access; the
    mask of those that did not return."""
    for statement in tree:
        kind = statement[0]
        if kind == "access":
            touch(statement[1], running)
        elif kind == "guarded":
            touch(statement[3], running & (ids == statement[2]))
        elif kind == "return":
            _, _, m, r = statement
            running = running & ~(ids % m == r)
        elif kind in ("if", "switch"):
            if kind == "if":
                _, _, m, r, then, otherwise = statement
                arms = [(then, ids % m == r), (otherwise, ids % m != r)]
            else:
                _, _, m, bodies = statement
                arms = [(body, ids % m == k) for k, body in enumerate(bodies)]
            after = np.zeros_like(running)
            for body, where in arms:
                after |= _replay(body, ids, running & where, touch)
            running = after
        else:
            _, _, a, b, m, body = statement
            trips = (((ids * a) & 0xFFFFFFFF) + b & 0xFFFFFFFF) % (m + 1)
            active, after = running, np.zeros_like(running)
            for step in range(m + 1):
                after |= active & (trips <= step)
                active = _replay(body, ids, active & (trips > step), touch)
            running = after
    return running


def _buffer_races(buffer: str, size: int, events: list, bits: int) -> list[Race]:
    """The races of one buffer from its accesses: per word and class the least and greatest packed
    value, then SPEC 12's kinds and the report's example rules, word by word."""
    least = {cls: np.full(size, np.iinfo(np.int64).max, dtype=np.int64) for cls in (WRITE, READ, ATOMIC)}
    greatest = {cls: np.full(size, -1, dtype=np.int64) for cls in (WRITE, READ, ATOMIC)}
    for words, cls, packed in events:
        np.minimum.at(least[cls], words, packed)
        np.maximum.at(greatest[cls], words, packed)
    lowest = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)  # the least and greatest invocation
    highest = np.full(size, -1, dtype=np.int64)
    for cls in least:
        here = greatest[cls] >= 0
        lowest = np.where(here, np.minimum(lowest, least[cls] >> bits), lowest)
        highest = np.where(here, np.maximum(highest, greatest[cls] >> bits), highest)
    groups: dict[tuple, list] = {}
    for word in np.flatnonzero(lowest < highest).tolist():  # the words of two invocations or more
        side = {
            cls: (int(least[cls][word]), int(greatest[cls][word]))
            for cls in least
            if greatest[cls][word] >= 0
        }
        for kind, first, second in _word_races(side, bits):
            groups.setdefault((kind, first & ((1 << bits) - 1), second & ((1 << bits) - 1)), []).append(
                (word, first, second)
            )
    number = "ab".index(buffer)
    return [
        (
            kind,
            number,
            4 * found[0][0],
            4 * found[-1][0],
            len(found),
            (found[0][1] & ((1 << bits) - 1), found[0][1] >> bits),
            (found[0][2] & ((1 << bits) - 1), found[0][2] >> bits),
        )
        for (kind, _, _), found in groups.items()
    ]


def _word_races(side: dict[str, tuple[int, int]], bits: int) -> list[tuple[str, int, int]]:
    """The (kind, first packed, second packed) of the races of one word whose classes have these least
    and greatest packed accesses."""

    def who(packed: int) -> int:
        return packed >> bits

    def site(packed: int) -> int:
        return packed & ((1 << bits) - 1)

    found = []
    if WRITE in side and who(side[WRITE][0]) != who(side[WRITE][1]):
        first, second = side[WRITE]
        if site(first) > site(second):  # one pair of sites, whichever is the least
            first, second = second, first
        found.append((WRITE_WRITE, first, second))
    plain = [side[cls] for cls in (READ, WRITE) if cls in side]
    merged = (min(pair[0] for pair in plain), max(pair[1] for pair in plain)) if plain else None
    for kind, one, other in (
        (READ_WRITE, side.get(READ), side.get(WRITE)),
        (ATOMIC_PLAIN, side.get(ATOMIC), merged),
    ):
        if one is None or other is None:
            continue
        pairs = [(x, y) for x in one for y in other]
        differing = [(x, y) for x, y in pairs if who(x) != who(y)]
        if differing:
            found.append((kind, *differing[0]))
    return found
