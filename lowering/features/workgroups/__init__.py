"""Workgroups (SPEC 14): barriers, workgroup indices and shared memory. On a GPU target they become the
target's own intrinsics and `addrspace(3)` (`intrinsics`); on the cpu each entry that uses them gets a
workgroup function that runs a workgroup's invocations on one thread, in rounds from barrier to barrier
(`workgroup_functions`), recording where invocations did not all meet at a barrier, which `run`
reports (`runtime`, `report`). The driver side is `metadata.workgroups`.

Always on: a module without workgroup constructs is left as it is. The workgroup size is the launch's
(`--workgroup-size`, a core option of `run` and `profile`), never the lowering's.

Registered in `lowering.features.FEATURES`; each hook imports what it needs when it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..feature import Feature, RunReport

NAME = "workgroups"  # where the context, the lowered module and the run keep its parts


class Workgroups(Feature):
    name = NAME

    def setting(self, values: Mapping[str, Any]) -> bool:
        return True

    def after_inlining(self, context: Any, setting: Any) -> None:
        """A module with no construct (nor, for a GPU target, a workgroup scope to rename; for the cpu,
        shared memory) is left as it is, the passes' machinery not even imported (issue 35)."""
        from ...services.shared_memory import shared_variables
        from .constructs import construct_calls, scoped_instructions

        module = context.module
        if context.target.workgroup_intrinsics is not None:
            if construct_calls(module) or scoped_instructions(module):
                from . import intrinsics

                intrinsics.run(context)
        elif construct_calls(module) or shared_variables(module):
            from . import workgroup_functions

            workgroup_functions.run(context)

    def plan_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_records

        plan_records(part, plan)

    def decode_run(self, part: Any, slots: Any, printf: Any) -> tuple[Any, Any]:
        from .runtime import divergences

        return divergences(part, slots), printf

    def run_report(self, run_part: Any, printf: Any) -> RunReport:
        from .report import run_report

        return run_report(run_part)
