"""The barriers of a module (SPEC 14) as the table `amdpal.workgroups` names them, and the records of
barrier divergence the device writes.

Barrier k (from 0, in the order the lowering numbered them) is a row of `.barriers`: the function its
call is in (the entry it was inlined into), the call's number among that function's barrier calls, its
source line, and the intrinsic it called. Where the code checks that a workgroup's invocations meet
at the same barrier, the runtime points `@lgc.workgroup.divergence` at one record a barrier, zeroed
but for the workgroup: `u32 workgroups` (the workgroups in which some invocations waited at it
while others had exited or waited at another barrier), `u32 first` (the least such workgroup's index,
`NONE` when none). After the records, one `u32` flag a workgroup and barrier, zeroed: workgroup w's
for barrier k at byte `8 * B + 4 * (w * B + k)` (B barriers), which the nvptx device's checks set as
they count a workgroup once (`lowering.features.workgroups.barrier_checks`); the cpu's workgroup
functions count with a flag of their own, on their stack. Both are the same whatever the schedule: a
workgroup's rounds run on one thread, and the records are summed and taken the least of with atomics.
There, each check also compares the invocations that met at the barrier with those of the workgroup,
`@lgc.workgroup.invocations` (`i32`, the launch's invocations, which the runtime sets; 0: not known,
not compared).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..call_sites import CallSite
from ..errors import TableError

WORKGROUPS_KEY = "amdpal.workgroups"
VERSION = 1
DIVERGENCE_GLOBAL = "lgc.workgroup.divergence"  # a pointer to the records, one a barrier
INVOCATIONS_GLOBAL = "lgc.workgroup.invocations"  # i32: the launch's invocations
FLAG = struct.Struct("<I")  # a workgroup's flag for a barrier: counted
RECORD = struct.Struct("<II")  # workgroups that diverged there, the least of them
NONE = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Barrier:
    """A barrier call: its site (function, number among the function's barrier calls, source line)
    and the intrinsic it calls."""

    site: CallSite
    callee: str

    def describe(self) -> str:
        return f"{self.site.describe()} ({self.callee})"

    def to_map(self) -> dict[str, Any]:
        return {**self.site.to_map(), ".callee": self.callee}

    @classmethod
    def from_map(cls, row: Any, where: str) -> Barrier:
        site = CallSite.from_map(row, where)
        callee = row.get(".callee")
        if not isinstance(callee, str):
            raise TableError(f"{where} has no .callee string")
        return cls(site, callee)


@dataclass(frozen=True, slots=True)
class Divergence:
    """A barrier at which invocations of a workgroup did not all meet: in how many workgroups, and the
    least of them."""

    barrier: Barrier
    workgroups: int
    first: int

    def line(self) -> str:
        return (
            f"barrier divergence at {self.barrier.describe()}: in {self.workgroups} workgroup(s) "
            f"(the first is workgroup {self.first}) some invocations waited at it while others of their "
            "workgroup had exited or waited at another barrier (SPEC 14: every invocation of a workgroup "
            "meets the same barrier)"
        )

    def to_document(self) -> dict[str, Any]:
        return {
            "function": self.barrier.site.function,
            "call": self.barrier.site.call,
            "source": self.barrier.site.source,
            "callee": self.barrier.callee,
            "workgroups": self.workgroups,
            "first_workgroup": self.first,
        }


@dataclass(frozen=True, slots=True)
class WorkgroupTable:
    """The module's barriers, in the order of their numbers (and of their divergence records)."""

    barriers: tuple[Barrier, ...]

    def initial_records(self, workgroups: int) -> bytes:
        """The records before a run of `workgroups` workgroups: no workgroup counted, none the least,
        and the flags clear."""
        barriers = len(self.barriers)
        return RECORD.pack(0, NONE) * barriers + bytes(FLAG.size * barriers * workgroups)

    def divergences(self, records: bytes | bytearray | memoryview) -> list[Divergence]:
        """The barriers whose records (as the device left them) counted a divergent workgroup."""
        found = []
        for number, barrier in enumerate(self.barriers):
            workgroups, first = RECORD.unpack_from(records, RECORD.size * number)
            if workgroups:
                found.append(Divergence(barrier, workgroups, first))
        return found

    def to_document(self) -> dict[str, Any]:
        if not self.barriers:
            return {}
        return {
            WORKGROUPS_KEY: {
                ".version": VERSION,
                ".barriers": [barrier.to_map() for barrier in self.barriers],
            }
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> WorkgroupTable | None:
        """The table of a metadata document, None when it has none; TableError when it is malformed."""
        table = document.get(WORKGROUPS_KEY)
        if table is None:
            return None
        if not isinstance(table, dict) or table.get(".version") != VERSION:
            raise TableError(f"{WORKGROUPS_KEY} is not a map of .version {VERSION}")
        rows = table.get(".barriers")
        if not isinstance(rows, list):
            raise TableError(f"{WORKGROUPS_KEY} has no .barriers")
        where = f"{WORKGROUPS_KEY}.barriers"
        return cls(tuple(Barrier.from_map(row, f"{where}[{n}]") for n, row in enumerate(rows)))
