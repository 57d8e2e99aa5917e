"""A warp of 32 lanes running `llvmlite.ir` functions, for checking warp-level helpers on a machine
without a GPU: the IR the lowering builds (before LLVM and ptxas see it), executed as a GPU executes
it, lane by lane in lock step, with the NVVM intrinsics the helpers call.

Control flow follows the classic SIMT stack: at a branch that splits the active lanes, the lanes of the
true side run to the branch's immediate post-dominator, then those of the false side, then all of them
go on together. A warp-synchronous intrinsic checks that every lane its mask names is executing it
(else the GPU's behaviour would be undefined: the interpreter raises). Memory is sparse bytes, zero
where never written; pointers are integers.

Warps of thread blocks run together under a `Scheduler`: a thread each, one running at a time, the
turn passing to a warp chosen at random (seeded) at every atomic and every block barrier
(`barrier.sync`), which completes once every lane of the block that has not returned is there.
"""

from __future__ import annotations

import random
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import llvmlite.ir as ir
from llvmlite.ir import instructions as ins

LANES = 32
FULL = (1 << LANES) - 1


class WarpError(AssertionError):
    """What a GPU would not define: a warp-synchronous instruction some lane it names is not at."""


class Trap(Exception):  # noqa: N818 - what `llvm.trap` does to the warp
    """`llvm.trap` reached."""


class Memory:
    """Sparse little-endian bytes, 0 where never written."""

    def __init__(self) -> None:
        self.bytes: dict[int, int] = {}

    def read(self, address: int, size: int) -> bytes:
        return bytes(self.bytes.get(address + k, 0) for k in range(size))

    def write(self, address: int, data: bytes) -> None:
        for k, byte in enumerate(data):
            self.bytes[address + k] = byte

    def written(self, start: int, end: int) -> dict[int, int]:
        """The bytes written in `[start, end)`, by address."""
        return {address: byte for address, byte in self.bytes.items() if start <= address < end}


def size_of(type_: ir.Type) -> int:
    if isinstance(type_, ir.IntType):
        return max(1, type_.width // 8)
    if isinstance(type_, (ir.ArrayType, ir.VectorType)):
        return type_.count * size_of(type_.element)
    if isinstance(type_, ir.PointerType):
        return 8
    return {ir.HalfType(): 2, ir.FloatType(): 4, ir.DoubleType(): 8}[type_]


_FLOATS = {ir.HalfType(): "<e", ir.FloatType(): "<f", ir.DoubleType(): "<d"}


def encode(type_: ir.Type, value) -> bytes:
    if isinstance(type_, ir.VectorType):
        return b"".join(encode(type_.element, item) for item in value)
    if type_ in _FLOATS:
        return struct.pack(_FLOATS[type_], value)
    return (value % (1 << (8 * size_of(type_)))).to_bytes(size_of(type_), "little")


def decode(type_: ir.Type, data: bytes):
    if isinstance(type_, ir.VectorType):
        step = size_of(type_.element)
        return tuple(decode(type_.element, data[k : k + step]) for k in range(0, len(data), step))
    if type_ in _FLOATS:
        return struct.unpack(_FLOATS[type_], data)[0]
    value = int.from_bytes(data, "little")
    return value & ((1 << type_.width) - 1) if isinstance(type_, ir.IntType) else value


def _lanes(mask: int) -> list[int]:
    return [lane for lane in range(LANES) if mask >> lane & 1]


@dataclass
class Warp:
    """One warp: its memory, where the module's globals are, and each lane's special registers (`tid.x`
    and so on: a lane's `sreg` value is `registers[name][lane]`)."""

    memory: Memory = field(default_factory=Memory)
    globals: dict[str, int] = field(default_factory=dict)
    registers: dict[str, list[int]] = field(default_factory=dict)
    stores: list[tuple[int, dict[int, tuple[int, int]]]] = field(default_factory=list)
    scheduler: Scheduler | None = None
    number: int = 0  # in its scheduler

    def run(self, function: ir.Function, mask: int, arguments: Sequence[Sequence]) -> list:
        """Run `function` on the lanes of `mask`, `arguments[lane]` each; what each lane returned. Each
        store instruction executed is recorded in `stores`: its address space, and each lane's address
        and bytes."""
        values = {
            id(parameter): [row[k] if mask >> lane & 1 else None for lane, row in enumerate(arguments)]
            for k, parameter in enumerate(function.args)
        }
        return _Call(self, function, mask, values).run()


class _Call:
    """One call of a function by the lanes of a mask: the SIMT stack over its blocks."""

    def __init__(self, warp: Warp, function: ir.Function, mask: int, values: dict[int, list]) -> None:
        self.warp, self.function, self.mask = warp, function, mask
        self.values = values  # id(value) -> a value a lane
        self.came_from: list[ir.Block | None] = [None] * LANES
        self.returned: list = [None] * LANES
        self.post_dominator = _immediate_post_dominators(function)

    def run(self) -> list:
        finished = 0
        stack: list[tuple[ir.Block, int, ir.Block | None]] = [(self.function.blocks[0], self.mask, None)]
        while stack:
            block, mask, meeting = stack.pop()
            mask &= ~finished
            while mask and block is not meeting:
                outcome = self._block(block, mask)
                if outcome is None:  # returned
                    finished |= mask
                    break
                (taken, target), (other, elsewhere) = outcome
                for lane in _lanes(mask):
                    self.came_from[lane] = block
                if taken and other:
                    join = self.post_dominator[block.name]
                    stack += [(join, mask, meeting), (elsewhere, other, join), (target, taken, join)]
                    break
                block, mask = (target, taken) if taken else (elsewhere, other)
        return self.returned

    def _block(self, block: ir.Block, mask: int):
        phis = [i for i in block.instructions if isinstance(i, ins.PhiInstr)]
        incoming = {}
        for phi in phis:
            incoming[id(phi)] = [
                self._value(next(v for v, b in phi.incomings if b is self.came_from[lane]), lane)
                if mask >> lane & 1
                else None
                for lane in range(LANES)
            ]
        self.values.update(incoming)
        for instruction in block.instructions:
            if isinstance(instruction, ins.PhiInstr):
                continue
            if isinstance(instruction, ins.Ret):
                for lane in _lanes(mask):
                    operands = instruction.operands
                    self.returned[lane] = self._value(operands[0], lane) if operands else None
                return None
            if isinstance(instruction, ins.Branch):
                return (mask, instruction.operands[0]), (0, None)
            if isinstance(instruction, ins.ConditionalBranch):
                condition, true, false = instruction.operands
                taken = sum(1 << lane for lane in _lanes(mask) if self._value(condition, lane))
                return (taken, true), (mask & ~taken, false)
            if isinstance(instruction, ins.Unreachable):
                raise WarpError(f"unreachable reached in @{self.function.name}")
            self.values[id(instruction)] = self._execute(instruction, mask)
        raise WarpError(f"block {block.name} has no terminator")

    def _value(self, value: ir.Value, lane: int):
        if isinstance(value, ir.Constant):
            return _constant(value)
        if isinstance(value, ir.GlobalVariable):
            return self.warp.globals[value.name]
        return self.values[id(value)][lane]

    def _execute(self, instruction: ins.Instruction, mask: int) -> list:
        if isinstance(instruction, ins.CallInstr):
            return self._call(instruction, mask)
        if isinstance(instruction, ins.AtomicRMW) and self.warp.scheduler is not None:
            self.warp.scheduler.switch(self.warp)
        results: list = [None] * LANES
        for lane in _lanes(mask):
            operands = [self._value(operand, lane) for operand in instruction.operands]
            results[lane] = _lane_instruction(self.warp.memory, instruction, operands)
        if isinstance(instruction, (ins.StoreInstr, ins.StoreAtomicInstr)):
            value, pointer = instruction.operands
            size = size_of(value.type)
            lanes = {lane: (self._value(pointer, lane), size) for lane in _lanes(mask)}
            self.warp.stores.append((pointer.type.addrspace, lanes))
        return results

    def _call(self, call: ins.CallInstr, mask: int) -> list:
        callee = call.callee
        arguments = [[self._value(argument, lane) for argument in call.args] for lane in range(LANES)]
        if not callee.is_declaration:
            return _Call(
                self.warp,
                callee,
                mask,
                {
                    id(parameter): [arguments[lane][k] if mask >> lane & 1 else None for lane in range(LANES)]
                    for k, parameter in enumerate(callee.args)
                },
            ).run()
        name = callee.name
        if name == "llvm.nvvm.barrier.cta.sync.all":
            if self.warp.scheduler is None:
                raise WarpError("a block barrier in a warp that runs alone")
            self.warp.scheduler.barrier(self.warp, mask)
            return [None] * LANES
        if name.startswith("llvm.nvvm.read.ptx.sreg."):
            register = name.rpartition(".sreg.")[2]
            special = {"laneid": list(range(LANES)), "lanemask.lt": [(1 << k) - 1 for k in range(LANES)]}
            values = special.get(register) or self.warp.registers[register]
            return [values[lane] if mask >> lane & 1 else None for lane in range(LANES)]
        intrinsic = _WARP_INTRINSICS.get(name)
        if intrinsic is not None:
            return intrinsic(mask, arguments)
        lane_intrinsic = _LANE_INTRINSICS[name.rsplit(".", 1)[0] if name not in _LANE_INTRINSICS else name]
        return [lane_intrinsic(*arguments[lane]) if mask >> lane & 1 else None for lane in range(LANES)]


class _Aborted(Exception):  # noqa: N818 - what a warp's thread sees when another warp failed
    """Another warp of the scheduler failed: this one stops."""


@dataclass
class _Barrier:
    """A thread block's barrier: the lanes that have not returned, those waiting, and their warps."""

    live: int = 0
    arrived: int = 0
    waiting: set[int] = field(default_factory=set)


class Scheduler:
    """Warps of thread blocks running a function together, each in a thread of its own, one at a time."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.condition = threading.Condition()
        self.warps: list[tuple[Warp, int, ir.Function, int, Sequence[Sequence]]] = []
        self.barriers: dict[int, _Barrier] = {}
        self.runnable: set[int] = set()
        self.turn: int | None = None
        self.failure: BaseException | None = None
        self.returned: list[list] = []

    def add(
        self, warp: Warp, block: int, function: ir.Function, mask: int, arguments: Sequence[Sequence]
    ) -> None:
        """A warp of thread block `block` to run `function` on the lanes of `mask` (as `Warp.run`)."""
        warp.scheduler, warp.number = self, len(self.warps)
        self.warps.append((warp, block, function, mask, arguments))
        self.barriers.setdefault(block, _Barrier()).live += len(_lanes(mask))

    def run(self) -> list[list]:
        """Run every warp to its end; what each lane of each warp returned. Raises what a warp raised,
        or WarpError when the warps wait on each other for ever."""
        self.returned = [[] for _ in self.warps]
        self.runnable = set(range(len(self.warps)))
        threads = [threading.Thread(target=self._main, args=(number,)) for number in range(len(self.warps))]
        for thread in threads:
            thread.start()
        with self.condition:
            self._pass()
        for thread in threads:
            thread.join()
        if self.failure is not None:
            raise self.failure
        return self.returned

    def switch(self, warp: Warp) -> None:
        """Give the turn to a warp chosen at random (this one, maybe), and wait for it to come back."""
        with self.condition:
            self._pass()
            self._wait(warp.number)

    def barrier(self, warp: Warp, mask: int) -> None:
        """The lanes of `mask` arrive at their block's barrier, and wait for it to complete."""
        with self.condition:
            barrier = self.barriers[self.warps[warp.number][1]]
            barrier.arrived += len(_lanes(mask))
            barrier.waiting.add(warp.number)
            self.runnable.discard(warp.number)
            self._complete(barrier)
            self._pass()
            self._wait(warp.number)

    def _main(self, number: int) -> None:
        warp, _, function, mask, arguments = self.warps[number]
        try:
            with self.condition:
                self._wait(number)
            self.returned[number] = warp.run(function, mask, arguments)
        except _Aborted:
            return
        except BaseException as failure:  # noqa: BLE001 - handed to `run`'s caller
            with self.condition:
                self.failure = self.failure or failure
                self.condition.notify_all()
            return
        with self.condition:
            barrier = self.barriers[self.warps[number][1]]
            barrier.live -= len(_lanes(mask))  # its lanes return: they no longer hold the barrier up
            self.runnable.discard(number)
            self._complete(barrier)
            self._pass()

    def _complete(self, barrier: _Barrier) -> None:
        if barrier.waiting and barrier.arrived == barrier.live:
            self.runnable |= barrier.waiting
            barrier.waiting.clear()
            barrier.arrived = 0

    def _pass(self) -> None:
        """(The condition held.) The turn to a runnable warp; a failure when none is and some wait."""
        if self.runnable:
            self.turn = self.rng.choice(sorted(self.runnable))
        elif any(barrier.waiting for barrier in self.barriers.values()) and self.failure is None:
            self.failure = WarpError("the warps wait at barriers that never complete")
        self.condition.notify_all()

    def _wait(self, number: int) -> None:
        self.condition.wait_for(lambda: self.turn == number or self.failure is not None)
        if self.failure is not None:
            raise _Aborted


def _constant(constant: ir.Constant):
    value = constant.constant
    if isinstance(constant.type, ir.VectorType):
        if value is ir.Undefined:
            return (0,) * constant.type.count
        return tuple(_constant(item) for item in value)
    if value is ir.Undefined or value is None:
        return 0
    if isinstance(constant.type, ir.IntType):
        return int(value) & ((1 << constant.type.width) - 1)
    return value


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


_BINARY: dict[str, Callable[[int, int, int], int]] = {
    "add": lambda a, b, _: a + b,
    "sub": lambda a, b, _: a - b,
    "mul": lambda a, b, _: a * b,
    "and": lambda a, b, _: a & b,
    "or": lambda a, b, _: a | b,
    "xor": lambda a, b, _: a ^ b,
    "shl": lambda a, b, _: a << b,
    "lshr": lambda a, b, _: a >> b,
    "ashr": lambda a, b, bits: _signed(a, bits) >> b,
    "udiv": lambda a, b, _: a // b,
    "urem": lambda a, b, _: a % b,
}
_COMPARE: dict[str, Callable[[int, int, int], bool]] = {
    "eq": lambda a, b, _: a == b,
    "ne": lambda a, b, _: a != b,
    "ult": lambda a, b, _: a < b,
    "ule": lambda a, b, _: a <= b,
    "ugt": lambda a, b, _: a > b,
    "uge": lambda a, b, _: a >= b,
    "slt": lambda a, b, bits: _signed(a, bits) < _signed(b, bits),
    "sgt": lambda a, b, bits: _signed(a, bits) > _signed(b, bits),
}


def _lane_instruction(memory: Memory, instruction: ins.Instruction, operands: list):
    """One lane's result of an instruction that is not a call or a terminator."""
    opname, type_ = instruction.opname, instruction.type
    if opname in _BINARY:
        return _BINARY[opname](*operands, type_.width) & ((1 << type_.width) - 1)
    if isinstance(instruction, ins.ICMPInstr):
        bits = (
            instruction.operands[0].type.width if isinstance(instruction.operands[0].type, ir.IntType) else 64
        )
        return int(_COMPARE[instruction.op](*operands, bits))
    if isinstance(instruction, ins.SelectInstr):
        condition, true, false = operands
        return true if condition else false
    if isinstance(instruction, ins.CastInstr):
        return _cast(opname, instruction.operands[0].type, type_, operands[0])
    if isinstance(instruction, ins.GEPInstr):
        return _address(instruction, operands)
    if isinstance(instruction, (ins.LoadInstr, ins.LoadAtomicInstr)):
        return decode(type_, memory.read(operands[0], size_of(type_)))
    if isinstance(instruction, (ins.StoreInstr, ins.StoreAtomicInstr)):
        value, pointer = operands
        memory.write(pointer, encode(instruction.operands[0].type, value))
        return None
    if isinstance(instruction, ins.AtomicRMW):
        pointer, value = operands
        old = decode(type_, memory.read(pointer, size_of(type_)))
        memory.write(pointer, encode(type_, _ATOMIC[instruction.operation](old, value)))
        return old
    if isinstance(instruction, ins.ExtractElement):
        return operands[0][operands[1]]
    if isinstance(instruction, ins.InsertElement):
        vector, value, index = operands
        return (*vector[:index], value, *vector[index + 1 :])
    if isinstance(instruction, ins.Fence):
        return None
    raise WarpError(f"the interpreter has no {opname}: {instruction}")


_ATOMIC: dict[str, Callable[[int, int], int]] = {"add": lambda a, b: a + b, "umax": max}


def _cast(opname: str, source: ir.Type, target: ir.Type, value):
    if opname in ("zext", "ptrtoint", "inttoptr"):
        return value
    if opname == "trunc":
        return value & ((1 << target.width) - 1)
    if opname == "sext":
        return _signed(value, source.width) & ((1 << target.width) - 1)
    if opname in ("fpext", "fptrunc"):
        return decode(target, encode(target, value))
    if opname == "bitcast":
        return decode(target, encode(source, value))
    raise WarpError(f"the interpreter has no {opname}")


def _address(gep: ins.GEPInstr, operands: list) -> int:
    pointer, *indices = operands
    type_ = gep.source_etype
    address = pointer + _signed(indices[0], gep.indices[0].type.width) * size_of(type_)
    for index, operand in zip(indices[1:], gep.indices[1:], strict=True):
        type_ = type_.element
        address += _signed(index, operand.type.width) * size_of(type_)
    return address


def _check_mask(name: str, mask: int, named: int) -> None:
    if named & ~mask:
        raise WarpError(f"{name} names lanes {named & ~mask:#010x} that are not executing it")


def _shuffle(mask: int, arguments: list) -> list:
    results: list = [None] * LANES
    for lane in _lanes(mask):
        named, value, source, clamp = arguments[lane]
        _check_mask("shfl.sync", mask, named)
        assert clamp == 31, clamp
        source &= 31
        if not named >> source & 1:
            raise WarpError(f"lane {lane} shuffles from lane {source}, outside the mask {named:#010x}")
        results[lane] = arguments[source][1]
    return results


def _match_any(mask: int, arguments: list) -> list:
    results: list = [None] * LANES
    for lane in _lanes(mask):
        named, value = arguments[lane]
        _check_mask("match.any.sync", mask, named)
        results[lane] = sum(1 << other for other in _lanes(named) if arguments[other][1] == value)
    return results


def _barrier(mask: int, arguments: list) -> list:
    for lane in _lanes(mask):
        _check_mask("bar.warp.sync", mask, arguments[lane][0])
        if arguments[lane][0] != mask:
            raise WarpError(f"bar.warp.sync with mask {arguments[lane][0]:#010x}, lanes {mask:#010x} here")
    return [None] * LANES


def _redux_add(mask: int, arguments: list) -> list:
    results: list = [None] * LANES
    for lane in _lanes(mask):
        value, named = arguments[lane]
        _check_mask("redux.sync", mask, named)
        results[lane] = sum(arguments[other][0] for other in _lanes(named)) & 0xFFFFFFFF
    return results


def _vote_any(mask: int, arguments: list) -> list:
    results: list = [None] * LANES
    for lane in _lanes(mask):
        named, _ = arguments[lane]
        _check_mask("vote.any.sync", mask, named)
        results[lane] = int(any(arguments[other][1] for other in _lanes(named)))
    return results


def _vote_all(mask: int, arguments: list) -> list:
    results: list = [None] * LANES
    for lane in _lanes(mask):
        named, _ = arguments[lane]
        _check_mask("vote.all.sync", mask, named)
        results[lane] = int(all(arguments[other][1] for other in _lanes(named)))
    return results


def _is_constant(mask: int, arguments: list) -> list:
    """`llvm.is.constant`: LLVM answers true only for a value it folded to a constant, the same in
    every lane; here true exactly where the active lanes agree (what the code may then assume)."""
    values = {arguments[lane][0] for lane in _lanes(mask)}
    return [int(len(values) == 1) if mask >> lane & 1 else None for lane in range(LANES)]


def _trap(*_: object) -> None:
    raise Trap


_WARP_INTRINSICS: dict[str, Callable[[int, list], list]] = {
    "llvm.nvvm.activemask": lambda mask, _: [mask] * LANES,
    "llvm.nvvm.shfl.sync.idx.i32": _shuffle,
    "llvm.nvvm.match.any.sync.i64": _match_any,
    "llvm.nvvm.bar.warp.sync": _barrier,
    "llvm.nvvm.redux.sync.add": _redux_add,
    "llvm.nvvm.vote.any.sync": _vote_any,
    "llvm.nvvm.vote.all.sync": _vote_all,
    "llvm.is.constant.i64": _is_constant,
}
_LANE_INTRINSICS: dict[str, Callable[..., int | None]] = {
    "llvm.ctpop": lambda value: bin(value).count("1"),
    "llvm.cttz": lambda value, _: (value & -value).bit_length() - 1 if value else 32,
    "llvm.trap": _trap,
    "llvm.umin": min,
    "llvm.smin": lambda a, b: a if _signed(a, 64) < _signed(b, 64) else b,
    "llvm.smax": lambda a, b: a if _signed(a, 64) > _signed(b, 64) else b,
}


def _immediate_post_dominators(function: ir.Function) -> dict[str, ir.Block]:
    """Each block's immediate post-dominator (by name); blocks that return have none."""
    blocks = list(function.blocks)
    successors = {block.name: _successors(block) for block in blocks}
    names = [block.name for block in blocks]
    exit_ = "<exit>"
    dominated = {name: set(names) | {exit_} for name in names}
    changed = True
    while changed:
        changed = False
        for name in names:
            after = [dominated[s.name] for s in successors[name]] or [{exit_}]
            new = {name} | set.intersection(*after)
            if new != dominated[name]:
                dominated[name], changed = new, True
    by_name = {block.name: block for block in blocks}
    found = {}
    for name in names:
        strict = dominated[name] - {name, exit_}
        for candidate in strict:
            if strict <= dominated[candidate]:
                found[name] = by_name[candidate]
    return found


def _successors(block: ir.Block) -> list[ir.Block]:
    terminator = block.instructions[-1]
    if isinstance(terminator, ins.Branch):
        return [terminator.operands[0]]
    if isinstance(terminator, ins.ConditionalBranch):
        return list(terminator.operands[1:])
    return []
