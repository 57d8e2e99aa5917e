"""Races between invocations (SPEC 12): every data-buffer access that can race recorded into its
buffer's shadow (`recording`), the shadows the runtime allocates (`runtime`), and the races `run` and
`decode` report (`report`). The driver side is `metadata.races`.

Registered in `lowering.features.FEATURES`; each hook imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from ..feature import Command, Feature, Option, Relaunch, RunReport

NAME = "races"  # where the context, the lowered module and the run keep its parts


class Races(Feature):
    name = NAME
    dump_help = "with --races, each shadow to DIR/races<N>.bin"
    options = (
        Option(
            "races",
            False,
            "--races",
            {
                "action": "store_true",
                "help": "record data-buffer accesses; report races between invocations (SPEC 12)",
            },
        ),
        Option(
            "races_shadow",
            [],
            "--races-shadow",
            {
                "action": "append",
                "metavar": "PATH",
                "help": "a shadow dump (SPEC 12), or a directory of them (races<N>.bin): the races of the "
                "ELF's races table (repeatable)",
            },
            commands=(Command.DECODE,),
            lowers=False,
            names_dump=True,
        ),
    )

    def setting(self, values: Mapping[str, Any]) -> bool | None:
        return True if values["races"] else None

    def needs_inlining(self, setting: Any) -> bool:
        return True

    def after_inlining(self, context: Any, setting: Any) -> None:
        from . import recording

        recording.run(context)  # after the checks (registry order): an access is recorded once it passed

    def plan_run(self, part: Any, plan: Any) -> None:
        from .runtime import plan_shadows

        plan_shadows(part, plan)

    def decode_run(self, part: Any, slots: Any, printf: Any) -> tuple[Any, Any]:
        from .runtime import shadows_of

        return shadows_of(part, slots), printf

    def relaunch(self, part: Any, run_part: Any) -> Relaunch | None:
        from .runtime import relaunch

        return relaunch(run_part)

    def guards(self, slots: Any) -> Sequence[tuple[str, Any]]:
        from .runtime import shadow_guards

        return shadow_guards(slots)

    def run_report(self, run_part: Any, printf: Any) -> RunReport:
        from .report import run_report

        return run_report(run_part)

    def dump(self, run_part: Any) -> Sequence[tuple[str, bytes]]:
        from .report import dumps

        return dumps(run_part)

    def decode_dumps(self, args: argparse.Namespace, elves: Sequence[tuple[str, bytes]]) -> Any:
        from .report import decode_shadows

        return decode_shadows(elves, args.races_shadow) if args.races_shadow else None
