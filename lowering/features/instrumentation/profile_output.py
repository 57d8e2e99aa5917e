"""How `dprintf profile` and `dprintf decode --instrumentation-buffer` show a profile (SPEC 10).

On stdout, the report (hottest lines and blocks first, blocks never entered), or with `--annotate` the
listings: each source file the table names, with each line's counts in the margin, or the IR when the
table has no source lines (or its files cannot be read). `--arm-values FILE` writes the values
`vkGetShaderInstrumentationValuesARM` returns, and the metrics as
`vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM` describes them to `FILE.json`; `--html FILE`
writes one self-contained page. Source files are looked for as the table names them, then beside the
input.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

from metadata.instrumentation.arm_values import arm_values, arm_values_document
from metadata.instrumentation.profile import Listing, Profile
from metadata.instrumentation.profile_html import html_page

from ...cli.commands import InputError, warn, write_output
from ...cli.process_ends import write_stdout

IrLines = Sequence[tuple[str, int | None]]


def write_profile(
    profile: Profile, args: argparse.Namespace, ir: IrLines, beside: str, on_stdout: bool = True
) -> None:
    """The profile in the files `args` names and, with `on_stdout`, on stdout: the `--json` document,
    the `--annotate` listings or the report. `ir` is the IR as instrumented, line by line with each
    line's block (empty when not known), `beside` the directory of the input, where source files are
    looked for too."""
    listings = _listings(profile, ir, beside) if args.annotate or args.html else []
    if args.arm_values:
        write_output(args.arm_values, arm_values(profile))
        document = json.dumps(arm_values_document(profile), indent=2) + "\n"
        write_output(f"{args.arm_values}.json", document)
    if args.html:
        write_output(args.html, html_page(profile, listings))
    if not on_stdout:
        return
    if getattr(args, "json", False):
        write_stdout((json.dumps(profile.to_document(), indent=1) + "\n").encode("utf-8"))
    elif args.annotate:
        if not listings:
            raise InputError(
                "--annotate needs the source files the debug information names, or the IR "
                "(which dprintf profile has)"
            )
        write_stdout("\n".join(listing.annotated() for listing in listings).encode("utf-8"))
    else:
        write_stdout(profile.report().encode("utf-8"))


def _listings(profile: Profile, ir: IrLines, beside: str) -> list[Listing]:
    """A listing of each source file the table names that can be read; the IR's when there is none."""
    listings = []
    for path in profile.source_files():
        text = _read_source(path, beside)
        if text is None:
            warn(f"cannot read {path}, named by the debug information: its lines are not annotated")
            continue
        listings.append(profile.source_listing(path, text))
    if not listings and ir:
        listings.append(profile.ir_listing(ir))
    return listings


def _read_source(path: str, beside: str) -> str | None:
    for candidate in (path, os.path.join(beside, path)):
        try:
            with open(candidate, encoding="utf-8", errors="replace") as stream:
                return stream.read()
        except OSError:
            continue
    return None
