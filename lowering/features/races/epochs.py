"""Barrier epochs for `--races` (SPEC 14, `metadata.races.table`; `recording` says how they are
recorded): the barriers of a module's entries that order its invocations' accesses, the epoch counter
each entry keeps, the lines that find a shadow's epoch copies, and the helpers that record an access
into the copy of its epoch.
"""

from __future__ import annotations

from metadata.races.table import EPOCHS_AT, REACHED_AT, SLOT_BYTES, WARP_WORDS

from ...ir.control_flow import ControlFlow
from ...ir.instructions import Instruction
from ...ir.module import Module
from ...services.buffer_accesses import Entry
from ...services.context import RUNTIME_BUFFER_TYPE
from ...targets.machines import alloca_address_space
from ...targets.target import Target
from ..workgroups.constructs import NUMBERED_BARRIERS, ConstructCall, Kind, construct_calls

_GROUP_SHIFT = WARP_WORDS.bit_length() - 1


class Barriers:
    """The workgroup barriers of a module's entries that order its invocations' accesses (the whole
    workgroup's: not an NVVM barrier of another number, nor a barrier of another kind), by entry."""

    def __init__(self, module: Module, entries: dict[str, Entry]) -> None:
        self.entries = entries
        self.found: dict[str, list[ConstructCall]] = {}
        for call in construct_calls(module):
            if call.construct.kind is Kind.BARRIER and _whole_workgroup(call):
                self.found.setdefault(call.function.name, []).append(call)

    def not_counted(self) -> list[str]:
        """A warning for each function still called that meets at barriers."""
        return [
            f"--races counts the barriers of entries only: @{name}'s {len(calls)} barrier(s), in a "
            "function not inlined into an entry, do not order its invocations' accesses (those on either "
            "side of them may be reported as racing)"
            for name, calls in self.found.items()
            if name not in self.entries
        ]

    def epochs(self) -> int | None:
        """The table's `.epochs`: None without barriers in an entry; the most an invocation can have
        where each barrier is on no cycle (its entry's barriers + 1); else 0 (not known)."""
        counted = {name: calls for name, calls in self.found.items() if name in self.entries}
        if not counted:
            return None
        most = 1
        for calls in counted.values():
            flow = ControlFlow(calls[0].function)
            if any(flow.on_cycle(flow.index[call.function.label_of(call.block)]) for call in calls):
                return 0
            most = max(most, len(calls) + 1)
        return most

    def count(self, prefix: str, target: Target) -> None:
        """Give every entry its epoch counter, stored 0 at its start and increased after each barrier."""
        space = alloca_address_space(target.name)
        pointer = f"ptr addrspace({space})" if space else "ptr"
        counter = f"%{prefix}races.epoch"
        for name, entry in self.entries.items():
            function = entry.function
            assert function.blocks is not None
            for number, call in enumerate(self.found.get(name, ())):
                now, then = f"%{prefix}races.epoch.{number}", f"%{prefix}races.epoch.{number}.next"
                call.block.insert_after(
                    call.instruction,
                    Instruction(f"{now} = load i32, {pointer} {counter}, align 4"),
                    Instruction(f"{then} = add i32 {now}, 1"),
                    Instruction(f"store i32 {then}, {pointer} {counter}, align 4"),
                )
            space_word = f", addrspace({space})" if space else ""
            function.blocks[0].instructions[:0] = [
                Instruction(f"{counter} = alloca i32, align 4{space_word}"),
                Instruction(f"store i32 0, {pointer} {counter}, align 4"),
            ]


def _whole_workgroup(call: ConstructCall) -> bool:
    """Whether a barrier waits for the whole workgroup (an NVVM numbered barrier only as barrier 0)."""
    if call.callee not in NUMBERED_BARRIERS:
        return True
    found = call.instruction.call()
    return found is not None and bool(found.arguments) and found.arguments[0].value == "0"


def copy_lines(names: str, k: int, shadow: str, classes: int) -> list[str]:
    """Buffer `k`'s epoch copies (its header's `epochs`, `%<names>epochs<k>`) and the bytes of one of
    its copies (`%<names>copy<k>`), from its shadow (`shadow`, typed) and its words; `classes` rows."""
    copy = f"%{names}copy{k}"
    pointer = shadow.rsplit(" ", 1)[0]
    return [
        f"{copy}.epochs.at = getelementptr i8, {shadow}, i64 {EPOCHS_AT}",
        f"%{names}epochs{k} = load i32, {pointer} {copy}.epochs.at, align 4",
        f"{copy}.groups.up = add i64 %{names}words{k}, {WARP_WORDS - 1}",
        f"{copy}.groups = lshr i64 {copy}.groups.up, {_GROUP_SHIFT}",
        f"{copy}.slots = add i64 %{names}words{k}, {copy}.groups",
        f"{copy} = mul i64 {copy}.slots, {SLOT_BYTES * classes}",
    ]


def epoch_helpers(names: str, shadow: str, per_warp: bool, more: dict[str, str] | None = None) -> list[str]:
    """With barrier epochs, `epoch.<helper>` for each record helper (`word`, `range`, and `mark` where
    warps record; each of `more`, its parameters by name): the access recorded by `<helper>` into the
    copy of its epoch (its rows, and its warps, shifted by the copies before it), or, past the copies,
    `epochsReached` raised to the epoch + 1 (`metadata.races.table`)."""
    buffer = RUNTIME_BUFFER_TYPE
    where = f"{shadow} %rows, i64 %words, {buffer} %base, {buffer} %pointer"
    who = "i32 %who, i32 %site, i64 %row"
    helpers = {"word": f"{where}, {who}", "range": f"{where}, i64 %bytes, {who}"}
    if per_warp:  # `warps.epoch_lanes_helper` records copy 0 and the epoch's; lane 0 by `epoch.mark`
        helpers["mark"] = f"{shadow} %rows, i64 %words, i64 %word, {who}"
    helpers.update(more or {})
    found = []
    for name, parameters in helpers.items():
        shifted = {"rows", "warps"} & {part.split("%")[-1] for part in parameters.split(", ")}
        shifts = "\n".join(
            f"  %{value}.copy = getelementptr i8, {shadow} %{value}, i64 %shift" for value in sorted(shifted)
        )
        arguments = ", ".join(
            f"{part}.copy" if part.split("%")[-1] in shifted else part for part in parameters.split(", ")
        )
        found.append(
            f"""define internal void @{names}epoch.{name}({shadow} %shadow, i64 %copy, i32 %epochs, \
i32 %epoch, {parameters}) alwaysinline {{
entry:
  %kept = icmp ult i32 %epoch, %epochs
  br i1 %kept, label %record, label %past
record:
  %number = add i32 %epoch, 1
  %number.wide = zext i32 %number to i64
  %shift = mul i64 %copy, %number.wide
{shifts}
  call void @{names}{name}({arguments})
  br label %done
past:
  %reached.at = getelementptr i8, {shadow} %shadow, i64 {REACHED_AT}
  %reached = add i32 %epoch, 1
  %was = atomicrmw umax {shadow} %reached.at, i32 %reached monotonic, align 4
  br label %done
done:
  ret void
}}"""
        )
    return found
