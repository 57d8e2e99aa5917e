"""`dprintf compile IN.ll [...] -o OUT [--target amdpal|cpu] [--mcpu NAME]`: an ELF object with the table.

amdpal: the object LLVM's AMDGPU backend writes (default processor gfx1100), the table merged by the
backend into its PAL metadata note next to `amdpal.pipelines`. cpu: a host relocatable object, with a
`.note` section holding the table (SPEC section 6). Both are optimised at -O2.
"""

from __future__ import annotations

import argparse

from ...codegen.emit import compile_object
from . import EXIT_OK, write_output
from .lower_command import lower_inputs


def run(args: argparse.Namespace) -> int:
    lowered = lower_inputs(args)
    if isinstance(lowered, int):
        return lowered
    write_output(args.output, compile_object(lowered, args.mcpu, source=", ".join(args.inputs)))
    return EXIT_OK
