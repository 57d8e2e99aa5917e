"""Validation (SPEC 11, 13): checks compiled before accesses and instructions (`checks`), the buffers the
runtime gives them (`runtime`), and what `run` reports of the records they wrote (`report`). The
driver side is `metadata.validation`.

Registered in `lowering.features.FEATURES`; each hook imports what it needs when it runs, so that a run
without `--validate` imports none of it.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ..feature import Feature, Option, RunReport


def _classes(text: str) -> frozenset[str]:
    """`--validate=CLASSES`: the classes of checks, comma-separated (`metadata.validation.checks`)."""
    from metadata.validation.checks import ValidationOptionError, checks_of

    try:
        return checks_of(text)
    except ValidationOptionError as failure:
        raise argparse.ArgumentTypeError(str(failure)) from None


def _help() -> str:
    from metadata.validation.checks import ALL, CLASSES

    return (
        "compile checks into the shader: alone, every access against its buffer or the live ranges "
        f"(SPEC 11, 13); --validate=CLASSES takes {', '.join(CLASSES)} or {ALL}, comma-separated"
    )


NAME = "validation"  # where the context, the lowered module and the run keep its parts


class Validation(Feature):
    name = NAME
    options = (
        Option(
            "validate",
            False,
            "--validate",
            {"nargs": "?", "type": _classes, "metavar": "CLASSES", "help": _help},
            alone="bounds",
        ),
    )

    def setting(self, values: Mapping[str, Any]) -> frozenset[str] | None:
        from metadata.validation.checks import checks_of

        return checks_of(values["validate"]) or None

    def needs_inlining(self, setting: Any) -> bool:
        return True

    def after_inlining(self, context: Any, setting: Any) -> None:
        from . import checks

        checks.run(context)

    def plan_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_traps

        plan_traps(part, plan)

    def complete_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_live_ranges

        plan_live_ranges(part, plan)

    def printf_lookup(self, part: Any, lookup: Any) -> Any:
        from metadata.validation.table import CombinedLookup

        return CombinedLookup(lookup, part)

    def decode_run(self, part: Any, slots: Any, printf: Any) -> tuple[Any, Any]:
        from .report import split_records

        return split_records(part, printf)

    def explains_loss(self, run_part: Any) -> bool:
        from .report import reached_unreachable

        return reached_unreachable(run_part)

    def run_report(self, run_part: Any, printf: Any) -> RunReport:
        from .report import run_report

        return run_report(run_part, printf)

    def decode_tables(self, elves: Sequence[tuple[str, bytes]]) -> Any:
        from .report import merged_tables

        return merged_tables(elves)
