"""What the device recorded at each validation site (SPEC sections 11 and 13), as one report a site:
the number of failed checks, the first invocation, what they found; its `error:` line and its JSON.

A site's records arrive as the printf decoder's columns (`metadata.validation.table.Site.entry`), the
invocation IDs first; `reports_of` turns them into the report of the site's check. A site may give more
than one report: a signed division by zero and one that overflows, or reads of bytes never written in
two data buffers through one pointer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..wire import UNKNOWN_INVOCATION
from .checks import BOUNDS, DIVISIONS, INIT, RANGE, SHIFTS, UNREACHABLE
from .live_ranges import NO_RANGE, is_runtime_range, range_name

if TYPE_CHECKING:
    from .table import Site

_SIGNED = frozenset({"sdiv", "srem", "ashr", "fptosi"})
_READ_KINDS = frozenset({"load", "atomic load", "masked load", "gather"})  # out of bounds "from" a buffer


class CheckReport(Protocol):
    """A site's report: the site, how many checks failed there (`count`, a record each), in how many
    distinct invocations (`invocations`; None when the records cannot tell them apart), the first
    invocation that failed."""

    @property
    def site(self) -> Site: ...

    @property
    def count(self) -> int: ...

    @property
    def invocations(self) -> int | None: ...

    @property
    def first_invocation(self) -> int: ...

    def line(self) -> str:
        """The `error:` line, without the prefix."""
        ...

    def document(self) -> dict[str, Any]:
        """The report in the `--json` document's `validation` list."""
        ...


def _plural(count: int, noun: str) -> str:
    return f"1 {noun}" if count == 1 else f"{count} {noun}s"


def _invocations(report: CheckReport) -> str:
    """`8 invocations, first 24` where each invocation failed once; `5 failures in 1 invocation, first
    0` where some failed more than once (a loop); `4 failures, invocations unknown` where the records do
    not name them (a function whose address is taken)."""
    count, invocations = report.count, report.invocations
    if invocations is None or report.first_invocation == UNKNOWN_INVOCATION:
        return f"{_plural(count, 'failure')}, invocations unknown"
    first = f"first {report.first_invocation}"
    if invocations == count:
        return f"{_plural(invocations, 'invocation')}, {first}"
    return f"{_plural(count, 'failure')} in {_plural(invocations, 'invocation')}, {first}"


def distinct_invocations(invocations: np.ndarray) -> int | None:
    """How many distinct invocations the records name; None when one of them is UNKNOWN_INVOCATION.
    A bitmap over their span where it is no larger than 8 bytes a record, else a sort."""
    if not len(invocations):
        return 0
    least, greatest = int(invocations.min()), int(invocations.max())
    if greatest == UNKNOWN_INVOCATION:
        return None
    if greatest - least < 8 * len(invocations) + 4096:
        seen = np.zeros(greatest - least + 1, dtype=bool)
        seen[invocations - least] = True
        return int(np.count_nonzero(seen))
    return len(np.unique(invocations))


def _span(name: str, least: int, greatest: int) -> str:
    return f"{name} {least}" if least == greatest else f"{name}s {least}..{greatest}"


def _access(site: Site) -> str:
    """`store of 4 bytes`, `memcpy of bytes given at run time`."""
    size = f"{site.bytes} bytes" if site.bytes is not None else "bytes given at run time"
    return f"{site.kind} of {size}"


def _common(report: CheckReport) -> dict[str, Any]:
    site = report.site
    return {
        "check": site.check,
        "kind": site.kind,
        "function": site.function,
        "source": site.source,
        "count": report.count,
        "invocations": report.invocations,
        "first_invocation": report.first_invocation,
        "message": report.line(),
    }


@dataclass(frozen=True, slots=True)
class SiteReport:
    """Out-of-bounds accesses through a data buffer (SPEC 11) or a shared global (SPEC 14): the offset
    range, the buffer's size."""

    site: Site
    count: int  # failed checks: one record each
    invocations: int | None  # the distinct invocations among them; None when they are unknown
    first_invocation: int
    least_offset: int
    greatest_offset: int
    buffer_bytes: int

    def line(self) -> str:
        site = self.site
        direction = "from" if site.kind in _READ_KINDS else "to"
        # A site at position -1 is a shared global's (SPEC 14), whose name says what it is.
        buffer = (
            f"{site.buffer_name} ({self.buffer_bytes} bytes)"
            if site.buffer < 0
            else f"buffer {site.buffer} ({site.buffer_name}, {self.buffer_bytes} bytes)"
        )
        offsets = _span("offset", self.least_offset, self.greatest_offset)
        return (
            f"out-of-bounds {_access(site)} {direction} {buffer} at {offsets} in {site.where()}: "
            f"{_invocations(self)}"
        )

    def document(self) -> dict[str, Any]:
        site = self.site
        return {
            **_common(self),
            "bytes": site.bytes,
            "buffer": site.buffer,
            "buffer_name": site.buffer_name,
            "offsets": [self.least_offset, self.greatest_offset],
            "buffer_bytes": self.buffer_bytes,
        }


@dataclass(frozen=True, slots=True)
class RangeReport:
    """Accesses through a pointer outside every live range (SPEC 13), with the first invocation's
    address and the nearest ranges below and above it."""

    site: Site
    count: int  # failed checks: one record each
    invocations: int | None  # the distinct invocations among them; None when they are unknown
    first_invocation: int
    address: int
    below: tuple[int, int]  # (id, end); id NO_RANGE when there is none
    above: tuple[int, int]  # (id, begin)
    buffer_names: tuple[str, ...] = ()

    def line(self) -> str:
        return (
            f"{_access(self.site)} {self._where()} in {self.site.where()}: "
            f"{_invocations(self)} ({self._neighbours()})"
        )

    def _where(self) -> str:
        below, end = self.below
        if below != NO_RANGE and self.address < end and is_runtime_range(below):
            return f"into {range_name(below)}, which is the runtime's, not the shader's,"
        return "outside every live range"

    def _neighbours(self) -> str:
        """`at 0x...: 4 bytes past the end of buffer 0 (%a), 60 bytes before buffer 1 (%b)`."""
        names = self.buffer_names
        parts = []
        below, end = self.below
        if below != NO_RANGE:
            name = range_name(below, names)
            if self.address >= end:
                parts.append(f"{self.address - end} bytes past the end of {name}")
            elif is_runtime_range(below):
                parts.append(f"{end - self.address} bytes before the end of {name}")
            else:
                parts.append(f"{end - self.address} bytes before the end of {name}, running past it")
        above, begin = self.above
        if above != NO_RANGE:
            parts.append(f"{begin - self.address} bytes before {range_name(above, names)}")
        found = ", ".join(parts) or "the table of live ranges is empty"
        return f"invocation {self.first_invocation} at {self.address:#x}: {found}"

    def document(self) -> dict[str, Any]:
        below, above = self.below, self.above
        return {
            **_common(self),
            "bytes": self.site.bytes,
            "address": self.address,
            "below": None if below[0] == NO_RANGE else {"id": below[0], "end": below[1]},
            "above": None if above[0] == NO_RANGE else {"id": above[0], "begin": above[1]},
        }


@dataclass(frozen=True, slots=True)
class InitReport:
    """Reads of bytes of one data buffer that no invocation wrote and no file gave (SPEC 13)."""

    site: Site
    count: int  # failed checks: one record each
    invocations: int | None  # the distinct invocations among them; None when they are unknown
    first_invocation: int
    buffer: int
    least_offset: int
    greatest_offset: int
    buffer_names: tuple[str, ...] = ()

    def line(self) -> str:
        site = self.site
        direction = "on" if site.kind == "atomic" else "from"
        return (
            f"{_access(site)} {direction} {range_name(self.buffer, self.buffer_names)} reads bytes never "
            f"written, the first at {_span('offset', self.least_offset, self.greatest_offset)} in "
            f"{site.where()}: {_invocations(self)}"
        )

    def document(self) -> dict[str, Any]:
        return {
            **_common(self),
            "bytes": self.site.bytes,
            "buffer": self.buffer,
            "offsets": [self.least_offset, self.greatest_offset],
        }


@dataclass(frozen=True, slots=True)
class UbReport:
    """Undefined behaviour one instruction would have had (SPEC 13): what, how often, which operands."""

    site: Site
    count: int  # failed checks: one record each
    invocations: int | None  # the distinct invocations among them; None when they are unknown
    first_invocation: int
    problem: str
    values: tuple[float | int, float | int] | None = None  # the least and greatest operand
    example: float | int | None = None  # the first invocation's operand

    def line(self) -> str:
        site = self.site
        if site.kind == UNREACHABLE:
            return f"`unreachable` reached in {site.where()}: {_invocations(self)}"
        what = f"{site.kind} {site.value_type}" if site.value_type else site.kind
        return f"{self.problem} ({what}){self._operands()} in {site.where()}: {_invocations(self)}"

    def _operands(self) -> str:
        """The operands that went wrong: shift amounts' range, the values converted."""
        kind = self.site.kind
        if self.values is None or kind in DIVISIONS:
            return ""
        least, greatest = self.values
        if kind in SHIFTS:
            amounts = _span("amount", int(least), int(greatest))
            return f", {amounts}"
        example = f", invocation {self.first_invocation}'s {_number(self.example)}"
        if isinstance(least, float) and np.isnan(least):
            return example  # every value was NaN
        return f"{example} (from {_number(least)} to {_number(greatest)})"

    def document(self) -> dict[str, Any]:
        return {
            **_common(self),
            "type": self.site.value_type,
            "problem": self.problem,
            "values": None if self.values is None else [_json_number(value) for value in self.values],
            "example": _json_number(self.example),
        }


def _number(value: float | int | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _json_number(value: float | int | None) -> float | int | str | None:
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def reports_of(site: Site, columns: Sequence[np.ndarray], buffer_names: Sequence[str]) -> list[CheckReport]:
    """The reports of the records of `site` (their columns, in buffer order)."""
    names = tuple(buffer_names)
    invocations = np.asarray(columns[0], dtype=np.int64)
    if site.check == BOUNDS:
        offsets = np.asarray(columns[1]).astype(np.uint64).view(np.int64)
        return [
            SiteReport(
                site,
                len(invocations),
                distinct_invocations(invocations),
                int(invocations.min()),
                int(offsets.min()),
                int(offsets.max()),
                int(columns[2][0]),
            )
        ]
    if site.check == RANGE:
        first = int(invocations.argmin())
        address, below, below_end, above, above_begin = (int(column[first]) for column in columns[1:])
        return [
            RangeReport(
                site,
                len(invocations),
                distinct_invocations(invocations),
                int(invocations[first]),
                address,
                (below, below_end),
                (above, above_begin),
                names,
            )
        ]
    if site.check == INIT:
        return _init_reports(site, invocations, columns, names)
    return _ub_reports(site, invocations, columns)


def _init_reports(
    site: Site, invocations: np.ndarray, columns: Sequence[np.ndarray], names: tuple[str, ...]
) -> list[CheckReport]:
    offsets, buffers = np.asarray(columns[1], dtype=np.int64), np.asarray(columns[2])
    reports: list[CheckReport] = []
    for buffer in np.unique(buffers):
        mine = buffers == buffer
        reports.append(
            InitReport(
                site,
                int(mine.sum()),
                distinct_invocations(invocations[mine]),
                int(invocations[mine].min()),
                int(buffer),
                int(offsets[mine].min()),
                int(offsets[mine].max()),
                names,
            )
        )
    return reports


def _ub_reports(site: Site, invocations: np.ndarray, columns: Sequence[np.ndarray]) -> list[CheckReport]:
    kind = site.kind
    if len(columns) == 1:
        return [
            UbReport(
                site,
                len(invocations),
                distinct_invocations(invocations),
                int(invocations.min()),
                "unreachable reached",
            )
        ]
    raw = np.asarray(columns[1])
    values = raw if raw.dtype.kind == "f" else raw.astype(np.uint64)
    if kind in _SIGNED and values.dtype.kind == "u":
        values = values.view(np.int64)
    problems: list[tuple[str, np.ndarray]]
    if kind in DIVISIONS:
        zero = values == 0
        problems = [("division by zero", zero), (_overflow(site), ~zero)]
    elif kind in SHIFTS:
        problems = [("shift by the width or more", np.ones(len(values), dtype=bool))]
    else:
        problems = [("conversion of a value out of range or NaN", np.ones(len(values), dtype=bool))]
    reports: list[CheckReport] = []
    for problem, mine in problems:
        if not mine.any():
            continue
        chosen, who = values[mine], invocations[mine]
        first = int(who.argmin())
        finite = chosen[~np.isnan(chosen)] if chosen.dtype.kind == "f" else chosen
        span = (finite.min().item(), finite.max().item()) if len(finite) else (float("nan"), float("nan"))
        reports.append(
            UbReport(
                site,
                len(who),
                distinct_invocations(who),
                int(who[first]),
                problem,
                span,
                chosen[first].item(),
            )
        )
    return reports


def _overflow(site: Site) -> str:
    bits = (site.value_type or "i64").rsplit("i", 1)[-1].rstrip(">")
    least = -(1 << (int(bits) - 1)) if bits.isdigit() else "INT_MIN"
    operation = "%" if site.kind == "srem" else "/"
    return f"signed division overflow ({least} {operation} -1)"
