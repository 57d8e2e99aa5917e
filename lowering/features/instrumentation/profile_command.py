"""`dprintf profile IN.ll`: run IN.ll with every basic block counted, and show the profile (SPEC 10).

The run is `dprintf run --instrument`'s: the same options, invocations, devices and buffers. Its printf
output goes to stderr, with the warnings and abort messages `run` prints, so that stdout holds the
profile alone: the report, the `--annotate` listings or the `--json` document (`profile_output`).
Exit status as `run`'s: 3 when the device was lost by an abort (the profile then holds every count
made before it), 1 when it was lost otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys

from ...cli.commands import lowering_options, warn
from ...cli.commands.decode_command import report_aborts, report_printf, report_stage
from ...cli.commands.run_command import (
    EXIT_STATUS,
    STDIN,
    feature_reports,
    refit_warnings,
    report_device,
    run_input,
)
from ..feature import ReportStage
from . import NAME
from .profile_output import write_profile


def run(args: argparse.Namespace) -> int:
    result = run_input(args, instrument=True, **lowering_options(args))
    reports = feature_reports(result)
    for message in [*refit_warnings(result), *result.lowering_warnings]:
        warn(message)
    sys.stderr.write("".join(result.printf.text_chunks(verbose=True)))
    report_printf(result.printf)
    report_stage(reports, ReportStage.AFTER_OUTPUT)
    report_aborts(result.abort)
    for message in result.guard_issues:
        warn(message)
    report_device(result)
    if result.status.interruption is not None:
        raise result.status.interruption
    instrumented = result.parts[NAME]
    write_profile(instrumented.profile, args, instrumented.listing, input_directory(args.input))
    return EXIT_STATUS[result.ending]


def input_directory(path: str) -> str:
    """Where source files named by the debug information are looked for besides where they say."""
    return os.path.dirname(os.path.abspath(path)) if path != STDIN else os.getcwd()
