"""`dprintf compile IN.ll [...] -o OUT [--target amdpal|cpu] [--mcpu NAME]`: an ELF object with the table.

amdpal: the object LLVM's AMDGPU backend writes (default processor gfx1100), the table merged by the
backend into its PAL metadata note next to `amdpal.pipelines`. cpu: a host relocatable object, with a
`.note` section holding the table (SPEC section 6). Both are optimised at -O2.
"""

from __future__ import annotations

import argparse

from ...codegen.emit import compile_object
from ...ir.diagnostics import LoweringError
from ...pipeline import lower_sources
from . import EXIT_OK, warn, write_output
from .lower_command import printf_options, read_sources, report


def run(args: argparse.Namespace) -> int:
    sources = read_sources(args.inputs)
    try:
        lowered = lower_sources(
            sources,
            args.target,
            validate=args.validate,
            dialect=args.format_dialect,
            instrument=args.instrument,
            races=args.races,
            **printf_options(args),
        )
    except LoweringError as failure:
        return report(failure)
    for message in lowered.warnings:
        warn(message)
    write_output(args.output, compile_object(lowered, args.mcpu, source=", ".join(args.inputs)))
    return EXIT_OK
