"""The internal `alwaysinline` helpers that replace each printf and abort call (SPEC sections 4 and 5).

The pass replaces a call by a call to a helper, one per (kind, buffer type, argument types), which
reserves the record with one atomic add and writes it. The branches (capacity check, abort's trap)
live in the helper, so each splice in the caller is one straight-line instruction; LLVM's always-inliner
then puts a copy of the helper in place of each call. This module classifies the arguments (how each IR
type is packed) and writes the helpers' IR.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from metadata.layout import (
    ABORT_SIZE_DWORDS,
    CAPACITY_BYTE_OFFSET,
    ENTRY_HEADER_DWORDS,
    FLOAT,
    HEADER_DWORDS,
    INTEGER,
    OFFSET_CLAMP_DWORDS,
    ArgType,
    Layout,
    abort_record_dwords,
    entry_dwords,
)

from .targets import Target

PRINTF = "printf"
ABORT = "abort"
SIGN_EXTENDED = "signext"  # the call operand attribute after which a narrow integer widens with its sign

# IR scalar -> (buffer kind, IR bits, cast that widens it, IR type stored): SPEC section 4.
_SCALARS = {
    "i1": (INTEGER, 1, "zext", "i32"),
    "i8": (INTEGER, 8, "zext", "i32"),
    "i16": (INTEGER, 16, "zext", "i32"),
    "i32": (INTEGER, 32, None, "i32"),
    "i64": (INTEGER, 64, None, "i64"),
    "half": (FLOAT, 16, "fpext", "float"),
    "float": (FLOAT, 32, None, "float"),
    "double": (FLOAT, 64, None, "double"),
}
_ALLOWED = f"{', '.join(_SCALARS)}, or fixed vectors of them"
_VECTOR = re.compile(r"<(\d+) x ([^<>]+)>\Z")


@dataclass(frozen=True, slots=True)
class Argument:
    """A variadic argument: its IR type, its buffer type, the cast that widens it and the IR type stored."""

    ir_type: str
    arg_type: ArgType
    cast: str | None
    stored: str


@functools.lru_cache(maxsize=256)
def classify(ir_type: str, sign_extended: bool = False) -> Argument | str:
    """How an argument of `ir_type` is packed (SPEC section 4), or why it cannot be. A narrow integer
    widens by zero extension, or by sign extension when `sign_extended` (its `signext`, SPEC 9)."""
    lanes, scalar = 0, ir_type
    vector = _VECTOR.match(ir_type)
    if vector is not None:
        lanes, scalar = int(vector.group(1)), vector.group(2)
    widening = _SCALARS.get(scalar)
    if widening is None:
        return (
            f"type {ir_type} is {_what_is(ir_type, scalar if vector else None)}; arguments must be {_ALLOWED}"
        )
    kind, bits, cast, stored = widening
    if sign_extended and cast == "zext":
        cast = "sext"
    return Argument(
        ir_type, ArgType.widened(kind, bits, lanes), cast, f"<{lanes} x {stored}>" if lanes else stored
    )


def _what_is(ir_type: str, element: str | None) -> str:
    if ir_type.startswith("<vscale"):
        return "a scalable vector"
    if element is not None:
        return f"a vector of {element}"
    if ir_type.startswith("ptr"):
        return "a pointer"
    if ir_type.startswith("["):
        return "an array"
    if ir_type[:1] in "{<%":
        return "a structure"
    if re.fullmatch(r"i\d+", ir_type):
        return "an integer of an unsupported width"
    return "not supported"


@dataclass(frozen=True, slots=True, eq=False)
class Helper:
    """An internal `alwaysinline` function writing one kind of record for one list of argument types.

    The pass makes one per (kind, buffer type, argument types, aggregated), so a helper is its own
    identity (and a cheap key for what depends on its layout). An `aggregated` helper reserves through
    the warp-aggregated reserve of its buffer type (`warp_aggregation`). An `outlined` helper is
    `noinline`: its calls stay calls (see `Target.outlines_calls_above`).
    """

    name: str
    kind: str
    buffer_type: str
    arguments: tuple[Argument, ...]
    aggregated: bool = False
    outlined: bool = False
    layout: Layout = field(init=False)
    entry_dwords: int = field(init=False)

    def __post_init__(self) -> None:
        layout = tuple(argument.arg_type for argument in self.arguments)
        object.__setattr__(self, "layout", layout)
        object.__setattr__(self, "entry_dwords", entry_dwords(layout))


def helper_definition(helper: Helper, target: Target, reserve: str | None = None) -> str:
    """The IR of a helper, called as `helper(buffer, i64 header, arguments...)`.

    Recipe: reserve the record with one 64-bit atomic add on `bufferOffset` (or through `reserve`, the
    warp-aggregated equivalent returning the same old value); clamp the old value to
    OFFSET_CLAMP_DWORDS; where the target checks capacity, go on only if `old + size <= reserved0`;
    write at dword `HEADER_DWORDS + clamped`. A printf entry is the 64-bit header `(id << 16) | size`
    (passed in, the ID differs per call) and the packed arguments. An abort record is the u64 entry
    size in bytes, that entry, and a zero dword when padding to 8 bytes, the size stored last with
    release ordering; then a fence and `llvm.trap`.
    """
    buffer, layout = helper.buffer_type, helper.layout
    is_abort = helper.kind == ABORT
    size = abort_record_dwords(layout) if is_abort else helper.entry_dwords
    parameters = ", ".join(
        [f"{buffer} %buffer", "i64 %header"]
        + [f"{argument.ir_type} %a{index}" for index, argument in enumerate(helper.arguments)]
    )
    exit_label = "stop" if is_abort else "done"
    inlining = "noinline" if helper.outlined else "alwaysinline"
    attributes = f"{inlining} nounwind noreturn" if is_abort else f"{inlining} nounwind"
    if reserve is None:
        reservation = f"atomicrmw add {buffer} %buffer, i64 {size} monotonic, align 8"
    else:
        reservation = f"call i64 @{reserve}({buffer} %buffer, i64 {size})"
    lines = [
        f"define internal void @{helper.name}({parameters}) {attributes} {{",
        "reserve:",
        f"  %old = {reservation}",
        f"  %low = icmp ult i64 %old, {OFFSET_CLAMP_DWORDS}",
        f"  %at = select i1 %low, i64 %old, i64 {OFFSET_CLAMP_DWORDS}",
    ]
    if target.checks_capacity:
        lines += [
            f"  %cap.ptr = getelementptr i8, {buffer} %buffer, i64 {CAPACITY_BYTE_OFFSET}",
            f"  %cap = load i32, {buffer} %cap.ptr, align 4",
            "  %cap.wide = zext i32 %cap to i64",
            f"  %end = add i64 %old, {size}",
            "  %fits = icmp ule i64 %end, %cap.wide",
            f"  br i1 %fits, label %write, label %{exit_label}",
            "write:",
        ]
    # `[HEADER_DWORDS x i32]` steps over the buffer header: dword HEADER_DWORDS + %at.
    lines.append(f"  %rec = getelementptr [{HEADER_DWORDS} x i32], {buffer} %buffer, i64 1, i64 %at")
    entry = "%rec"
    if is_abort:
        lines.append(f"  %entry = getelementptr i32, {buffer} %rec, i64 {ABORT_SIZE_DWORDS}")
        entry = "%entry"
    lines.append(f"  store i64 %header, {buffer} {entry}, align 4")
    dword = ENTRY_HEADER_DWORDS
    for index, argument in enumerate(helper.arguments):
        value = f"%a{index}"
        if argument.cast is not None:
            lines.append(
                f"  %a{index}.wide = {argument.cast} {argument.ir_type} {value} to {argument.stored}"
            )
            value = f"%a{index}.wide"
        lines += [
            f"  %a{index}.ptr = getelementptr i32, {buffer} {entry}, i64 {dword}",
            f"  store {argument.stored} {value}, {buffer} %a{index}.ptr, align 4",
        ]
        dword += argument.arg_type.dwords
    if is_abort and size > ABORT_SIZE_DWORDS + dword:
        lines += [
            f"  %pad.ptr = getelementptr i32, {buffer} {entry}, i64 {dword}",
            f"  store i32 0, {buffer} %pad.ptr, align 4",
        ]
    if is_abort:
        # payloadBytes last, released after the entry: a record whose writer died half-way reads as
        # size 0. Records are whole numbers of 8 bytes from an 8-byte aligned start, so this is aligned.
        lines.append(f"  store atomic i64 {helper.entry_dwords * 4}, {buffer} %rec release, align 8")
    lines += [f"  br label %{exit_label}", f"{exit_label}:"]
    lines += ["  fence seq_cst", "  call void @llvm.trap()", "  unreachable"] if is_abort else ["  ret void"]
    return "\n" + "\n".join(lines) + "\n}\n"
