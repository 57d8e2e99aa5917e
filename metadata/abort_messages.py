"""Abort messages in the shader-abort proposal's layout, and LLPC's abort-message entries (SPEC sections
5 and 9).

A message, as `vkGetDeviceFaultDebugInfoKHR` returns it, is the NUL-terminated UTF-8 format string, zero
padding to 4 bytes, then the packed arguments (SPEC 4). LLPC's `call void (...) @lgc.abort.msg(i32 ...)`
passes such a message as dwords, and its table entry (LLPC's `docs/DdnDebugPrintf.md`) says which of them
are constant and holds those:

    .index: <ID>, .is_abort_message: 1, .data_count: <dwords of the message>,
    .constant_status: [bit j%64 of word j/64 set when dword j is constant], .constants: [in order]

so the device writes only the other dwords, as the arguments of an abort record's entry (SPEC 5), and
the decoder puts the message back together (`AbortMessageEntry.payload`) and formats it
(`format_message`).

Argument widths are not in the message. An integer conversion takes 64 bits exactly with `l` or `ll`
(SPEC 3), `%c` 32, a float conversion with `l` a double; a float conversion without `l` takes a float or
a double, each at its own size. Nor is the packing: the arguments follow the string packed (SPEC 4), or
as the proposal lays out message data, a struct of scalar layout: a 64-bit value (a double, a 64-bit
integer, a component of a vector of them) at an 8-byte boundary of the message, and the message's size
a multiple of 8 when it holds one (LLPC's example in its `docs/DdnDebugPrintf.md`, 'test: %lf %d\n',
has a dword of padding after its int). The argument dwords the message has after its string decide
(`argument_layout`): when exactly one choice of widths and packing places them, that is the placement
(the two packings place arguments alike when neither pads); when none or several do, the message is
not formatted (its payload is still whole), never formatted wrongly.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from .cformat import format_values
from .errors import BufferDecodeError, DprintfError, TableError
from .formats import FLOAT_CONVERSIONS, STRING_CONVERSION, Conversion, FormatString, parse_format
from .ids import abort_message_id
from .layout import Layout
from .wire import ENTRY_HEADER_DWORDS, ID_MASK, MAX_ENTRY_DWORDS, Value, argument_columns, row_values

INDEX_KEY = ".index"
ABORT_MESSAGE_KEY = ".is_abort_message"
DATA_COUNT_KEY = ".data_count"
CONSTANT_STATUS_KEY = ".constant_status"
CONSTANTS_KEY = ".constants"
MESSAGE_KEYS = (INDEX_KEY, ABORT_MESSAGE_KEY, DATA_COUNT_KEY, CONSTANT_STATUS_KEY, CONSTANTS_KEY)
MAX_VARIABLE_DWORDS = MAX_ENTRY_DWORDS - ENTRY_HEADER_DWORDS  # what one record's entry can carry
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_DWORDS = struct.Struct("<I")
_MAX_FREE_CONVERSIONS = 256  # float conversions without `l` whose widths the count decides


def khr_payload(format_string: str, arguments: bytes) -> bytes:
    """A message in the proposal's layout: the UTF-8 string, NUL, zero padding to 4 bytes, the arguments."""
    text = format_string.encode("utf-8") + b"\0"
    return text + bytes(-len(text) % 4) + arguments


def split_payload(payload: bytes) -> tuple[str, bytes]:
    """The format string and packed argument bytes of a KHR payload; BufferDecodeError if it is not one."""
    end = payload.find(b"\0")
    if end < 0:
        raise BufferDecodeError(
            f"abort payload of {len(payload)} byte(s) has no NUL-terminated format string"
        )
    try:
        text = payload[:end].decode("utf-8")
    except UnicodeDecodeError as failure:
        raise BufferDecodeError(f"abort payload format string is not UTF-8: {failure}") from None
    start = end + 1 + (-(end + 1) % 4)
    return text, payload[start:]


@dataclass(frozen=True, slots=True)
class MessageProblem:
    """Why a message cannot be formatted; `ambiguous` when only the widths of its floats are in doubt."""

    message: str
    ambiguous: bool = False


@dataclass(frozen=True, slots=True)
class FormattedMessage:
    """A message's format string, the argument values its payload holds, and the text C prints."""

    format: str
    values: tuple[Value, ...]
    text: str


def format_message(payload: bytes) -> FormattedMessage | str:
    """The message a payload holds, formatted as C's printf would; or why it cannot be (a string)."""
    try:
        string, arguments = split_payload(payload)
        fmt = parse_format(string)
    except DprintfError as failure:
        return str(failure)
    if len(arguments) % 4:
        return f"{string!r}: its arguments take {len(arguments)} byte(s), not whole dwords"
    placement = argument_layout(fmt, len(arguments) // 4, (len(payload) - len(arguments)) // 4)
    if isinstance(placement, MessageProblem):
        return placement.message
    packed = placement.packed(arguments)
    row = np.zeros((1, ENTRY_HEADER_DWORDS + len(packed) // 4), dtype="<u4")
    row[0, ENTRY_HEADER_DWORDS:] = np.frombuffer(packed, dtype="<u4")
    values = row_values(argument_columns(placement.layout, row), 0, 1)[0]
    return FormattedMessage(string, values, format_values(fmt, values))


@dataclass(frozen=True, slots=True)
class Placement:
    """A message's arguments: their layout, and where each starts, in dwords after the format string."""

    layout: Layout
    offsets: tuple[int, ...]

    def packed(self, arguments: bytes) -> bytes:
        """The arguments' bytes packed as SPEC 4 packs them, without the padding between them."""
        return b"".join(
            arguments[4 * offset : 4 * (offset + arg.dwords)]
            for arg, offset in zip(self.layout, self.offsets, strict=True)
        )


def argument_layout(fmt: FormatString, dwords: int, start: int = 0) -> Placement | MessageProblem:
    """Where the arguments of `fmt` are in the `dwords` argument dwords of a message whose format string
    takes `start` dwords (see the module docstring), or why there is no single placement."""
    conversions = fmt.conversions
    if any(conversion.conversion == STRING_CONVERSION for conversion in conversions):
        return MessageProblem(
            f"{fmt.text!r}: '%s' takes a constant string's index in a table entry, which a message of "
            "dwords has no way to name"
        )
    fixed = [_fixed_width(conversion) for conversion in conversions]
    if sum(wide is None for wide in fixed) > _MAX_FREE_CONVERSIONS:
        return MessageProblem(_ambiguous(fmt, dwords), ambiguous=True)
    lanes = [conversion.vector or 1 for conversion in conversions]
    found: list[tuple[tuple[bool, ...], tuple[int, ...]]] = []
    several, sizes = False, set()
    for aligned in (False, True):
        ways, placement, reached = _placements(fixed, lanes, dwords, start, aligned)
        sizes |= reached
        several |= ways > 1
        if placement is not None and placement not in found:
            found.append(placement)
    if several or len(found) > 1:
        return MessageProblem(_ambiguous(fmt, dwords), ambiguous=True)
    if not found:
        return MessageProblem(
            f"{fmt.text!r} takes {_sizes(sizes)} argument dword(s), the message has {dwords}"
        )
    ((widths, offsets),) = found
    layout = tuple(
        conversion.argument_type(wide) for conversion, wide in zip(conversions, widths, strict=True)
    )
    return Placement(layout, offsets)


def _ambiguous(fmt: FormatString, dwords: int) -> str:
    return (
        f"{fmt.text!r} with {dwords} argument dword(s) is ambiguous: its float conversions without 'l' can "
        "be floats and doubles in more than one way"
    )


def _sizes(sizes: set[int]) -> str:
    """`3`, `3 or 4`, `3 to 8`: the argument dwords a string's arguments can take."""
    ordered = sorted(sizes)
    if len(ordered) == 1:
        return f"{ordered[0]}"
    return f"{ordered[0]}{' or ' if len(ordered) == 2 else ' to '}{ordered[-1]}"


_State = tuple[int, bool]  # the dwords taken so far, and whether a 64-bit argument is among them


def _placements(
    fixed: list[bool | None], lanes: list[int], dwords: int, start: int, aligned: bool
) -> tuple[int, tuple[tuple[bool, ...], tuple[int, ...]] | None, set[int]]:
    """In how many ways (0, 1, or 2 for several) the arguments fill `dwords`: packed (SPEC 4) or, when
    `aligned`, as the proposal's struct of scalar layout (a 64-bit argument at an 8-byte boundary of
    the message, whose size is then a multiple of 8); each argument's width and offset when in one
    way; and every size the arguments can take. Counted over the states the arguments leave, keeping
    the choice that made each (a float without `l` is 32 or 64 bits)."""
    states: dict[_State, int] = {(0, False): 1}
    steps: list[dict[_State, tuple[_State, bool, int]]] = []
    for choices, count in zip(fixed, lanes, strict=True):
        following: dict[_State, int] = {}
        step: dict[_State, tuple[_State, bool, int]] = {}
        for state, ways in states.items():
            taken, any_wide = state
            for wide in (False, True) if choices is None else (choices,):
                at = taken + (start + taken) % 2 if aligned and wide else taken
                after = (at + count * (2 if wide else 1), any_wide or wide)
                following[after] = min(2, following.get(after, 0) + ways)
                step.setdefault(after, (state, wide, at))
        states = following
        steps.append(step)
    ends: dict[int, list[_State]] = {}
    for taken, any_wide in states:
        end = taken + (start + taken) % 2 if aligned and any_wide else taken
        ends.setdefault(end, []).append((taken, any_wide))
    finals = ends.get(dwords, [])
    ways = min(2, sum(states[state] for state in finals))
    if ways != 1:
        return ways, None, set(ends)
    (state,) = finals
    widths, offsets = [], []
    for step in reversed(steps):
        state, wide, at = step[state]
        widths.append(wide)
        offsets.append(at)
    return 1, (tuple(reversed(widths)), tuple(reversed(offsets))), set(ends)


def static_problem(entry: AbortMessageEntry) -> MessageProblem | None:
    """What is wrong with a message before it runs, when its constant dwords hold its whole format string:
    the string must be one, and exactly one argument layout must fill the dwords after it. None when
    nothing is wrong, or nothing can be known (a dword of the string is written at run time)."""
    head = entry.constant_head()
    if head is None:
        return None
    if b"\0" not in head:
        return MessageProblem("the message has no NUL-terminated format string")
    try:
        string, _ = split_payload(head)
        fmt = parse_format(string)
    except DprintfError as failure:
        return MessageProblem(str(failure))
    placement = argument_layout(fmt, entry.data_count - len(head) // 4, len(head) // 4)
    return placement if isinstance(placement, MessageProblem) else None


def _fixed_width(conversion: Conversion) -> bool | None:
    """Whether the conversion's argument is 64-bit, or None when it may be either (a float without `l`)."""
    if conversion.conversion in FLOAT_CONVERSIONS:
        return True if conversion.length == "l" else None
    return conversion.value_bits == 64


@dataclass(frozen=True, slots=True)
class AbortMessageEntry:
    """One abort-message row of the table: ID, the message's dwords, which are constant, their values,
    and the row's keys this project does not use (msgpack-packed, kept as read; `.is_abort_message` too
    when it is not the 1 LLPC writes, so that it is written back as it was)."""

    index: int
    data_count: int
    constant_status: tuple[int, ...]
    constants: tuple[int, ...]
    other_keys: bytes = b""

    @classmethod
    def for_dwords(cls, dwords: Sequence[int | None]) -> AbortMessageEntry:
        """The entry of a message whose dwords are `dwords`: each a constant, or None when only the device
        knows it. Its ID is `ids.abort_message_id` of them."""
        status = [0] * ((len(dwords) + 63) // 64)
        for position, dword in enumerate(dwords):
            if dword is not None:
                status[position // 64] |= 1 << (position % 64)
        constants = tuple(dword for dword in dwords if dword is not None)
        return cls(abort_message_id(dwords), len(dwords), tuple(status), constants)

    def is_constant(self, dword: int) -> bool:
        return bool(self.constant_status[dword // 64] >> (dword % 64) & 1)

    @property
    def variable_dwords(self) -> int:
        """The dwords the device writes: those that are not constant."""
        return self.data_count - len(self.constants)

    @property
    def entry_dwords(self) -> int:
        """The size of the entry in the abort record: its header and the variable dwords."""
        return ENTRY_HEADER_DWORDS + self.variable_dwords

    def payload(self, variable: Sequence[int]) -> bytes:
        """The message: the constants and the device's `variable` dwords, each in its place."""
        constants, written = iter(self.constants), iter(variable)
        return b"".join(
            _DWORDS.pack(next(constants) if self.is_constant(position) else int(next(written)))
            for position in range(self.data_count)
        )

    def constant_head(self) -> bytes | None:
        """The message's first dwords up to the one holding the format string's NUL (all of them when
        none does), when they are all constant; None when the device writes one of them."""
        head = bytearray()
        constants = iter(self.constants)
        for position in range(self.data_count):
            if not self.is_constant(position):
                return None
            head += _DWORDS.pack(next(constants))
            if 0 in head[-4:]:
                break
        return bytes(head)

    @property
    def string(self) -> str | None:
        """The format string, when the constant dwords hold it whole (up to its NUL) and it is UTF-8."""
        head = self.constant_head()
        try:
            return split_payload(head)[0] if head is not None else None
        except BufferDecodeError:
            return None

    def describe(self) -> str:
        string = self.string
        shown = repr(string) if string is not None else "(its format string not in its constants)"
        return f"abort message {shown} ({self.data_count} dword(s), {self.variable_dwords} written)"

    def to_map(self) -> dict[str, Any]:
        other = msgpack.unpackb(self.other_keys, raw=False, strict_map_key=False) if self.other_keys else {}
        return {
            INDEX_KEY: self.index,
            ABORT_MESSAGE_KEY: 1,
            DATA_COUNT_KEY: self.data_count,
            CONSTANT_STATUS_KEY: list(self.constant_status),
            CONSTANTS_KEY: list(self.constants),
            **other,
        }

    @classmethod
    def from_map(cls, row: dict[Any, Any], where: str) -> AbortMessageEntry:
        """Check and read an abort-message row; TableError naming `where` and the key when malformed."""
        for key in MESSAGE_KEYS:
            _require(key in row, f"{where} has no {key}")
        index, count, status, constants = (
            row[key] for key in (INDEX_KEY, DATA_COUNT_KEY, CONSTANT_STATUS_KEY, CONSTANTS_KEY)
        )
        _require(
            type(index) is int and 0 <= index <= ID_MASK,
            f"{where}{INDEX_KEY} is not a 48-bit unsigned integer",
        )
        _require(type(count) is int and count > 0, f"{where}{DATA_COUNT_KEY} is not a positive dword count")
        _require(
            isinstance(status, list) and all(type(word) is int and 0 <= word <= _U64 for word in status),
            f"{where}{CONSTANT_STATUS_KEY} is not an array of unsigned 64-bit integers",
        )
        words = (count + 63) // 64
        _require(
            len(status) == words,
            f"{where}{CONSTANT_STATUS_KEY} has {len(status)} word(s) for {count} dword(s), expected {words}",
        )
        _require(
            count % 64 == 0 or status[-1] >> (count % 64) == 0,
            f"{where}{CONSTANT_STATUS_KEY} sets bits past {DATA_COUNT_KEY} ({count})",
        )
        _require(
            isinstance(constants, list)
            and all(type(word) is int and 0 <= word <= _U32 for word in constants),
            f"{where}{CONSTANTS_KEY} is not an array of unsigned 32-bit integers",
        )
        marked = sum(word.bit_count() for word in status)
        _require(
            len(constants) == marked,
            f"{where}{CONSTANTS_KEY} has {len(constants)} value(s), {CONSTANT_STATUS_KEY} marks {marked}",
        )
        _require(
            count - marked <= MAX_VARIABLE_DWORDS,
            f"{where}: {count - marked} dwords are not constant, more than an entry of {MAX_ENTRY_DWORDS} "
            "dwords carries",
        )
        flag = row[ABORT_MESSAGE_KEY]
        other = {
            key: value
            for key, value in row.items()
            if key not in MESSAGE_KEYS or key == ABORT_MESSAGE_KEY and not (type(flag) is int and flag == 1)
        }
        packed = msgpack.packb(other, use_bin_type=True) if other else b""
        return cls(index, count, tuple(status), tuple(constants), packed)


def is_abort_message_row(row: Any) -> bool:
    """Whether a table row says it is an abort message (`.is_abort_message` true, as LLPC writes 1)."""
    return isinstance(row, dict) and bool(row.get(ABORT_MESSAGE_KEY, False))


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise TableError(message)
