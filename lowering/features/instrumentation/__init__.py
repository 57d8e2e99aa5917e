"""Instrumentation (SPEC 10): every basic block counts its entries (`counting`, on `edge_counters`,
`counter_flush`, `block_metrics`), into the counters the runtime allocates (`runtime`); `run` reports
the profile, and `dprintf profile` (`profile_command`, `profile_output`) shows it. The driver side is
`metadata.instrumentation`.

Registered in `lowering.features.FEATURES`; each hook imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..feature import Command, Feature, Option, ReportStage, RunReport

SHOWN_BY = (Command.PROFILE, Command.DECODE)  # the commands that show a profile as `profile` does

OPTIONS = (
    Option(
        "instrument",
        False,
        "--instrument",
        {"action": "store_true", "help": "count every basic block's entries (SPEC 10)"},
    ),
    Option(
        "instrumentation_buffer",
        None,
        "--instrumentation-buffer",
        {
            "metavar": "FILE",
            "help": "block counters dump (SPEC 10): the profile of the ELF's instrumentation table",
        },
        commands=(Command.DECODE,),
        lowers=False,
        names_dump=True,
    ),
    Option(
        "annotate",
        False,
        "--annotate",
        {
            "action": "store_true",
            "help": "print the source (or the IR, without debug information) with each line's counts",
        },
        commands=SHOWN_BY,
        lowers=False,
    ),
    Option(
        "arm_values",
        None,
        "--arm-values",
        {
            "metavar": "FILE",
            "help": "write the values vkGetShaderInstrumentationValuesARM returns to FILE, the metrics to "
            "FILE.json",
        },
        commands=SHOWN_BY,
        lowers=False,
    ),
    Option(
        "html",
        None,
        "--html",
        {"metavar": "FILE", "help": "write the profile as one self-contained HTML page"},
        commands=SHOWN_BY,
        lowers=False,
    ),
)

NAME = "instrumentation"  # where the context, the lowered module and the run keep its parts


class Instrumentation(Feature):
    name = NAME
    options = OPTIONS
    commands = {"profile": "lowering.features.instrumentation.profile_command"}
    command_help = {"profile": "run with every basic block counted; report the counts and costs (SPEC 10)"}
    counts_executions = True
    edits_lowered = True
    shows_dumps = True
    dump_help = "with --instrument, the block counters to DIR/instrumentation.bin"

    def setting(self, values: Mapping[str, Any]) -> bool | None:
        return True if values["instrument"] else None

    def helpers_target(self, target: Any, setting: Any) -> Any:
        """Printf inlined when counting blocks, so that its blocks are counted, and charged, at the lines
        that call it (a cold printf's function has no source lines)."""
        return dataclasses.replace(target, cold_printf=False) if target.cold_printf else target

    def after_lowering(self, context: Any, setting: Any) -> None:
        from . import counting

        counting.run(context)

    def plan_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_counters

        plan_counters(part, plan)

    def decode_run(self, part: Any, slots: Any, printf: Any) -> tuple[Any, Any]:
        from .runtime import profile_of

        return profile_of(part, slots), printf

    def run_report(self, run_part: Any, printf: Any) -> RunReport:
        return RunReport(
            text=run_part.profile.report(),
            document={"instrumentation": run_part.profile.to_document()},
            stage=ReportStage.LAST,
        )

    def dump(self, run_part: Any) -> Sequence[tuple[str, bytes]]:
        from .runtime import dumps

        return dumps(run_part)

    def decode_dumps(self, args: argparse.Namespace, elves: Sequence[tuple[str, bytes]]) -> Any:
        from .report import decode_counters

        return decode_counters(elves, args.instrumentation_buffer) if args.instrumentation_buffer else None

    def decode_output(self, run_part: Any, args: argparse.Namespace, on_stdout: bool) -> None:
        from .profile_output import write_profile

        write_profile(run_part.profile, args, run_part.listing, os.getcwd(), on_stdout=on_stdout)
