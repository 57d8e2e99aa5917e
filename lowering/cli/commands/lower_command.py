"""`dprintf lower IN.ll [IN2.ll ...] [-o OUT.ll] [--target cpu|amdpal|nvptx]`: the lowered IR text.

The inputs are linked into one module first, so their calls share one table. Every problem in the
input is reported, one `error:` line each, and then nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ...ir.diagnostics import LoweringError
from ...lowered_module import LoweredModule, Source
from ...pipeline import lower_sources
from . import EXIT_BAD_INPUT, EXIT_OK, InputError, error, lowering_options, read_text, warn, write_output

STDIN = "-"
STDIN_NAME = "<stdin>"


def run(args: argparse.Namespace) -> int:
    lowered = lower_inputs(args)
    if isinstance(lowered, int):
        return lowered
    write_output(args.output, lowered.ir)
    return EXIT_OK


def lower_inputs(args: argparse.Namespace) -> LoweredModule | int:
    """The command's inputs lowered with its options, its warnings printed; or, after reporting each
    problem, the exit status."""
    try:
        lowered = lower_sources(read_sources(args.inputs), args.target, **lowering_options(args))
    except LoweringError as failure:
        return report(failure)
    for message in lowered.warnings:
        warn(message)
    return lowered


def read_sources(paths: Sequence[str]) -> list[Source]:
    """The input modules; `-` is stdin (named `<stdin>` in messages), which can be read once only."""
    if list(paths).count(STDIN) > 1:
        raise InputError("'-' (stdin) can be given only once")
    return [Source(STDIN_NAME if path == STDIN else path, read_text(path)) for path in paths]


def report(failure: LoweringError) -> int:
    """Print each diagnostic as its own `error:` line; the exit status for bad input."""
    for diagnostic in failure.diagnostics:
        error(str(diagnostic))
    return EXIT_BAD_INPUT
