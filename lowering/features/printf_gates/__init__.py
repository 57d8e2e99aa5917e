"""The printf gates (issue 23): what printf calls do besides writing. `--verbose` gives each call its
own entry with its site and invocation ID, `--only-invocations` lets only some invocations print,
`--max-lines-per-site` stops a site past a number of lines. The gate itself is the printf helpers'
(`services.helpers.PrintfGate`, `services.printf_sites`, `passes.invocation_ids`); here are the line
counters the runtime allocates and the lines they dropped (`runtime`). The driver side is
`metadata.printf_gates`.

Registered in `lowering.features.FEATURES`; each hook imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from ..feature import Command, Feature, Option, RunReport

NAME = "printf gates"  # where the context, the lowered module and the run keep its parts
MAX_LINES = (1 << 32) - 1
UNSITED = "carry no call site: not prefixed"


def _invocation_list(text: str) -> tuple[tuple[int, int], ...]:
    from metadata.printf_gates.invocations import invocation_ranges

    try:
        return invocation_ranges(text)
    except ValueError as failure:
        raise argparse.ArgumentTypeError(str(failure)) from None


def _line_count(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= MAX_LINES:
        raise argparse.ArgumentTypeError(f"{text!r} is not from 0 to {MAX_LINES}")
    return value


LOWERING = (Command.LOWER, Command.COMPILE, Command.RUN, Command.PROFILE)

OPTIONS = (
    Option(
        "verbose",
        False,
        "--verbose",
        {
            "action": "store_true",
            "help": "each printf line prefixed with its call site and invocation (an entry per call site)",
        },
        commands=LOWERING,
    ),
    Option(
        "only_invocations",
        None,
        "--only-invocations",
        {
            "type": _invocation_list,
            "metavar": "LIST",
            "help": "only these invocation IDs print: IDs and ranges, e.g. 0,17,100-131",
        },
        commands=LOWERING,
    ),
    Option(
        "max_lines_per_site",
        None,
        "--max-lines-per-site",
        {
            "type": _line_count,
            "metavar": "N",
            "help": "a printf call site writes at most N lines; the dropped ones are counted per site",
        },
        commands=LOWERING,
    ),
    Option(
        "verbose",
        False,
        "--verbose",
        {
            "action": "store_true",
            "help": "prefix each line with its call site and invocation (entries compiled with --verbose)",
        },
        commands=(Command.DECODE,),
        lowers=False,
    ),
)


class PrintfGates(Feature):
    name = NAME
    options = OPTIONS

    def setting(self, values: Mapping[str, Any]) -> Any:
        from ...services.helpers import PrintfGate

        invocations, limit, verbose = (
            values["only_invocations"],
            values["max_lines_per_site"],
            values["verbose"],
        )
        if not verbose and invocations is None and limit is None:
            return None
        return PrintfGate(invocations, limit, verbose)

    def printf_gate(self, setting: Any) -> Any:
        return setting

    def needs_inlining(self, setting: Any) -> bool:
        return bool(setting.takes_invocation)

    def after_inlining(self, context: Any, setting: Any) -> None:
        """The gate, and with a line limit the table of the sites its counters count."""
        from metadata.printf_gates.line_limit import LineLimit

        from .runtime import Gated

        limit = setting.line_limit
        context.parts[NAME] = Gated(
            setting, LineLimit(limit, context.gated_sites) if limit is not None else None
        )

    def plan_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_gates

        plan_gates(part, plan)

    def decode_run(self, part: Any, slots: Any, printf: Any) -> tuple[Any, Any]:
        from .runtime import dropped_lines

        return dropped_lines(part, slots), printf

    def run_report(self, run_part: Any, printf: Any) -> RunReport:
        from .runtime import run_report

        return run_report(run_part) if run_part is not None else RunReport()

    def decode_prefixes(self, args: argparse.Namespace, printf: Any) -> tuple[bool, list[str]]:
        """`decode --verbose`: each entry with a call site prefixed; a warning when some have none."""
        if not getattr(args, "verbose", False):
            return False, []
        if any(group.format.entry.site is None for group in printf.groups):
            unsited = "the entries of an ELF compiled without --verbose carry no call site: not prefixed"
            return True, [f"--verbose: {unsited}"]
        return True, []
