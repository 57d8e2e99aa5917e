"""A tested and a checked version of a loop, for `--validate=ub` (SPEC 13).

A test that branches to a report in every iteration keeps a GPU's compiler from unrolling and
interleaving the loop (ptxas unrolled the unchecked loop of `bench_validation.py` 13b eight times and
left the checked one rolled: 1.14x). A loop of one block with no side effect (no memory access, no call
but of the pure intrinsics below) whose induction, a step of 1 or -1 from a constant compared with a
constant, ends it within MAX_ITERATIONS is therefore run twice when it must be:

    preheader -> loop:    the instructions made safe (a divisor 1 where its test failed, a shift's or a
                          conversion's result frozen), every test ORed into `any`
              -> tested:  br any, checked, exit
              -> checked: the loop again from the same values, each instruction behind its own check,
                          as any other instruction (`validation`)
              -> exit:    the values the loop leaves, from `loop` or from `checked`

The loop has no side effect and computes from its starting values alone, so the checked run makes the
same iterations with the same operands: the records, their values and the values after the loop are
those of the checked loop alone, and the checked copy sits where the loop's checks would, so the sites
keep their order. The trip count is a constant of at most MAX_ITERATIONS, so a failure is reported
after a bounded delay and not lost to a loop that runs for ever (a bound known only at run time may be
2^64 iterations away: such a loop is checked in place).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.ir as ir

from metadata.validation.checks import DIVISIONS

from ...ir.functions import Block, Function
from ...ir.instructions import Instruction
from ...ir.lexer import bare_name, local_name, text_of, tokenize
from ...ir.opcodes import CASTS, FLOAT_ARITHMETIC, INTEGER_ARITHMETIC
from ...ir.types import parse_type
from ...ir.values import is_integer_constant
from ...services.helpers import signed
from .guards import debug_of, result_type_of
from .undefined_behaviour import UbTest

MAX_ITERATIONS = 1 << 16
_ARITHMETIC = INTEGER_ARITHMETIC | FLOAT_ARITHMETIC | {"freeze"}
_PURE = (
    _ARITHMETIC
    | CASTS
    | {"icmp", "fcmp", "select", "phi", "getelementptr", "extractelement", "insertelement", "br"}
)
_PURE_INTRINSICS = tuple(
    f"llvm.{name}."
    for name in "fabs abs smin smax umin umax minnum maxnum fma fmuladd sqrt floor ceil trunc copysign "
    "ctpop ctlz cttz bswap bitreverse fshl fshr".split()
)
_DEBUG_RECORD = "#dbg_"  # `#dbg_value(...)`: debug records, which run nothing
# An integer compare as a Python test of its operands' values (the signed ones read as signed first).
_UNSIGNED_COMPARES: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "ult": lambda a, b: a < b,
    "ule": lambda a, b: a <= b,
    "ugt": lambda a, b: a > b,
    "uge": lambda a, b: a >= b,
}
_COMPARES = _UNSIGNED_COMPARES | {
    f"s{name[1:]}": compare for name, compare in _UNSIGNED_COMPARES.items() if name[0] == "u"
}


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop of one block: its label, the one block entering it, and the one block it leaves to."""

    block: Block
    label: str
    preheader: str
    exit: str


def versionable_loops(function: Function) -> list[Loop]:
    """The loops of one block in `function` that can run twice: without side effects, ending within
    MAX_ITERATIONS, entered from one block and left to a block entered from nowhere else."""
    blocks = function.blocks or []
    predecessors: dict[str, list[str]] = {}
    for block in blocks:
        for successor in block.successors():
            predecessors.setdefault(successor, []).append(function.label_of(block))
    loops = []
    for block in blocks:
        label = function.label_of(block)
        successors = block.successors()
        if len(successors) != 2 or label not in successors or successors[0] == successors[1]:
            continue
        exit_label = successors[1 - successors.index(label)]
        entering = [found for found in predecessors.get(label, []) if found != label]
        if len(entering) != 1 or predecessors.get(exit_label) != [label]:
            continue
        if _pure(block) and _trip_count(block, label) is not None:
            loops.append(Loop(block, label, entering[0], exit_label))
    return loops


def _pure(block: Block) -> bool:
    """Whether running the block has no effect but its values: no memory access, no call but of a pure
    intrinsic."""
    for instruction in block.instructions:
        if instruction.text.startswith(_DEBUG_RECORD):
            continue
        call = instruction.call()
        if call is not None:
            if not bare_name(call.callee).startswith(_PURE_INTRINSICS):
                return False
        elif instruction.opcode not in _PURE:
            return False
    return True


def _trip_count(block: Block, label: str) -> int | None:
    """How many times the loop runs when its branch compares an induction (its phi, or the phi stepped)
    of step 1 or -1 from a constant with a constant, and leaves within MAX_ITERATIONS; else None."""
    defined = {instruction.result: instruction for instruction in block.instructions if instruction.result}
    branch = block.instructions[-1].operands
    compare = defined.get(branch[0].value) if len(branch) == 3 else None
    if compare is None or compare.opcode != "icmp" or len(compare.operands) != 2:
        return None
    predicate, left, right = (
        compare.operands[0].type,
        _last_token(compare.operands[0].value),
        compare.operands[1].text,
    )
    on_left = left in defined
    induction = _induction(defined, left if on_left else right, label)
    bound = right if on_left else left
    if induction is None or bound in defined or not is_integer_constant(bound) or predicate not in _COMPARES:
        return None
    start, step, stepped, width = induction
    modulus, goes_on = 1 << width, bare_name(branch[1].value) == label
    value, limit = start % modulus, int(bound) % modulus
    for count in range(1, MAX_ITERATIONS + 1):
        following = (value + step) % modulus
        compared = following if stepped else value
        first, second = (compared, limit) if on_left else (limit, compared)
        if predicate[0] == "s":
            first, second = signed(first, width), signed(second, width)
        if _COMPARES[predicate](first, second) != goes_on:
            return count
        value = following
    return None


def _induction(defined: dict[str, Instruction], value: str, label: str) -> tuple[int, int, bool, int] | None:
    """When `value` is the loop's phi of a constant start, or that phi stepped, stepping by 1 or -1:
    (start, step, whether `value` is the stepped one, the width in bits); else None."""
    found = defined.get(value)
    stepped = found is not None and found.opcode != "phi"
    phi = defined.get(_stepped(found) or "") if stepped else found
    if phi is None or phi.opcode != "phi":
        return None
    incoming = _incoming(phi)
    following = defined.get(incoming.get(label, ""))
    if following is None or _stepped(following) != phi.result or (stepped and following is not found):
        return None
    starts = [start for source, start in incoming.items() if source != label]
    width = _phi_head(phi).partition(" phi ")[2]
    if (
        len(starts) != 1
        or not is_integer_constant(starts[0])
        or not (width[:1] == "i" and width[1:].isdigit())
    ):
        return None
    operands = following.operands
    constant = operands[1].text if operands[0].value == phi.result else operands[0].value
    sign = 1 if following.opcode == "add" else -1
    step = {"1": sign, "-1": -sign}.get(constant)
    return None if step is None else (int(starts[0]), step, stepped, int(width[1:]))


def _stepped(instruction: Instruction | None) -> str | None:
    """The value an `add`/`sub` of a constant steps, or None."""
    if instruction is None or instruction.opcode not in ("add", "sub") or len(instruction.operands) != 2:
        return None
    first, second = instruction.operands[0].value, instruction.operands[1].text
    if is_integer_constant(second):
        return first
    return second if instruction.opcode == "add" and is_integer_constant(first) else None


def _last_token(text: str) -> str:
    return tokenize(text)[-1][1]


def _incoming(phi: Instruction) -> dict[str, str]:
    """A phi's incoming values by the label (bare) they come from."""
    tokens = [token for _, token in phi.tokens]
    found = {}
    for index, token in enumerate(tokens):
        if token == "[":
            close = tokens.index("]", index)
            found[bare_name(tokens[close - 1])] = " ".join(tokens[index + 1 : close - 2])
    return found


def _phi_head(phi: Instruction) -> str:
    """A phi's text up to its first incoming: `%x = phi i32`."""
    tokens = phi.tokens
    return text_of(tokens, 0, next(n for n, (_, token) in enumerate(tokens) if token == "["))


class Versions:
    """Puts one loop's tested and checked versions in place, its tests given (`ub_test` of each
    instruction of the loop that has one, with its names)."""

    def __init__(self, function: Function, loop: Loop, prefix: str) -> None:
        self.function = function
        self.loop = loop
        self.prefix = prefix
        self.tested = f"{prefix}tested"
        self.checked = f"{prefix}checked"
        self.defined = {
            instruction.result: instruction for instruction in loop.block.instructions if instruction.result
        }
        self.names = {bare_name(value): f"{prefix}c.{bare_name(value)}" for value in self.defined}
        self.names[loop.label] = self.checked

    def leaving_types(self) -> dict[str, str] | None:
        """The types of the loop's values used after it other than by the exit's phis; None when one
        is of an instruction `result_type_of` does not read."""
        exit_block = self.function.block(self.loop.exit)
        used: dict[str, str] = {}
        for block, instruction in self.function.instructions():
            if block is self.loop.block or (block is exit_block and instruction.opcode == "phi"):
                continue
            for _, token in instruction.tokens:
                if token in self.defined and token not in used:
                    found = result_type_of(self.defined[token])
                    if found is None:
                        return None
                    used[token] = found
        return used

    def make(self, tests: list[tuple[Instruction, UbTest, str]], leaving: dict[str, str]) -> Block:
        """The versions, from the tests (instruction, test, the names its lines use); the loop's block
        becomes the tested one, which it returns."""
        checked = self._clone()
        block = self.loop.block
        any_value = f"%{self.prefix}any"
        previous = any_value
        edits: dict[Instruction, list[Instruction]] = {}
        for instruction, test, names in tests:
            anyone = f"%{names}any"
            lines = [
                *test.lines,
                f"%{names}bad.frozen = freeze i1 %{names}bad",  # a test of a poison operand: true or false
                f"{anyone} = or i1 {previous}, %{names}bad.frozen",
            ]
            edits[instruction] = [*(Instruction(line) for line in lines), *_safe(instruction, test, names)]
            previous = anyone
        block.rewrite(edits)
        block.instructions.insert(
            0,
            Instruction(
                f"{any_value} = phi i1 [ false, {local_name(self.loop.preheader)} ], [ {previous}, "
                f"{local_name(self.loop.label)} ]"
            ),
        )
        block.instructions[-1] = block.instructions[-1].with_locals({self.loop.exit: self.tested})
        tested = Block(
            self.tested,
            [
                Instruction(
                    f"br i1 {previous}, label {local_name(self.checked)}, label {local_name(self.loop.exit)}"
                )
            ],
        )
        blocks = self.function.blocks or []
        blocks[blocks.index(block) + 1 : blocks.index(block) + 1] = [tested, checked]
        self._leave(self.function.block(self.loop.exit), leaving)
        return block

    def _clone(self) -> Block:
        """The checked copy: every value and the loop's label renamed, entered from the tested block."""
        renames = {**self.names, self.loop.preheader: self.tested}
        instructions = [instruction.with_locals(renames) for instruction in self.loop.block.instructions]
        instructions[-1] = _without_loop_id(instructions[-1])
        return Block(self.checked, instructions)

    def _leave(self, exit_block: Block, leaving: dict[str, str]) -> None:
        """The exit's phis take each value from either version; the loop's other values used after it
        go through new phis of the exit."""
        phis = [instruction for instruction in exit_block.instructions if instruction.opcode == "phi"]
        rest = exit_block.instructions[len(phis) :]
        outs = {value: f"{self.prefix}out.{bare_name(value)}" for value in leaving}
        exit_block.instructions = [
            *(self._either(_phi_head(phi), _incoming(phi)[self.loop.label]) for phi in phis),
            *(
                self._either(f"{local_name(outs[value])} = phi {kind}", value)
                for value, kind in leaving.items()
            ),
            *rest,
        ]
        renames = {bare_name(value): out for value, out in outs.items()}
        done = {id(self.loop.block), id(exit_block)}
        for block in self.function.blocks or []:
            if id(block) not in done and self.function.label_of(block) not in (self.tested, self.checked):
                block.instructions = [instruction.with_locals(renames) for instruction in block.instructions]
        exit_block.instructions[len(phis) + len(outs) :] = [
            instruction.with_locals(renames) for instruction in rest
        ]

    def _either(self, head: str, value: str) -> Instruction:
        """`head` (`%x = phi T`) taking `value` from the tested loop and its copy from the checked."""
        tested, checked = local_name(self.tested), local_name(self.checked)
        return Instruction(f"{head} [ {value}, {tested} ], [ {self._renamed(value)}, {checked} ]")

    def _renamed(self, value: str) -> str:
        """The checked copy's name of a value of the loop; any other value as it is."""
        return local_name(self.names[bare_name(value)]) if value in self.defined else value


def _safe(instruction: Instruction, test: UbTest, names: str) -> list[Instruction]:
    """The instruction as the tested loop runs it: where its test failed, a division by 1, and a shift's
    or conversion's result (poison then) frozen."""
    result = instruction.result
    assert result is not None
    debug = debug_of(instruction)
    if test.kind in DIVISIONS:
        operands = instruction.operands
        value_type = operands[0].type
        shape = parse_type(value_type)
        one = f"splat ({shape.element} 1)" if isinstance(shape, ir.VectorType) else "1"
        safe = f"%{names}divisor"
        exact = " exact" if any(token == "exact" for _, token in instruction.tokens[:4]) else ""
        return [
            Instruction(
                f"{safe} = select i1 %{names}bad, {value_type} {one}, {value_type} {operands[1].text}"
            ),
            Instruction(f"{result} = {test.kind}{exact} {value_type} {operands[0].value}, {safe}{debug}"),
        ]
    raw = f"%{names}raw"
    return [instruction.renamed(raw), Instruction(f"{result} = freeze {test.result_type} {raw}{debug}")]


def _without_loop_id(branch: Instruction) -> Instruction:
    """The branch without its `!llvm.loop` attachment: the loop's id names one loop, the original."""
    tokens = branch.tokens
    at = next((n for n, (_, token) in enumerate(tokens) if token == "!llvm.loop"), None)
    if at is None:
        return branch
    return Instruction(text_of(tokens[: at - 1] + tokens[at + 2 :]))
