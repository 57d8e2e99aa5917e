"""The one contract between the core and an optional feature (issue 30).

The core (the pipeline, the pass context, the lowered module, the harness, the command line) names no
feature: it walks `lowering.features.FEATURES` and asks each one the questions below, as LLVM's pass
manager reads its registry and Triton's compiler its backends. A feature answers the hooks it needs;
every default here does nothing. Its modules live in its own folder, its driver side (table, decoding,
report) in `metadata/<feature>/`, and it is registered once, in `FEATURES`. A hook imports what it
needs when it is called, so that a command imports only the features its options turn on.

A feature has three kinds of values, each kept by its `name` where the core keeps them:
- its **setting**, from its keyword options (`setting`): None when the options leave it off;
- its **lowered part** (`PassContext.parts`, `LoweredModule.parts`): what its passes made that the ELF
  note and the run need, with `to_document()` giving its metadata table;
- its **run part** (`RunResult.parts`): what it decoded after a run, or from dumps (`decode`).
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from metadata.decoding.printf_buffer import PrintfDecoding

    from ..devices.slots import Bytes, LaunchPlan, Slots
    from ..services.context import PassContext
    from ..services.helpers import PrintfGate
    from ..targets.target import Target


class Command(enum.Enum):
    """The commands a feature's option can belong to."""

    LOWER = "lower"
    COMPILE = "compile"
    RUN = "run"
    PROFILE = "profile"
    DECODE = "decode"


LOWERING_COMMANDS = (Command.LOWER, Command.COMPILE, Command.RUN)  # the commands that choose what to lower


@dataclass(frozen=True)
class Option:
    """A keyword option of a feature: its keyword (as `lower_sources` and `run_sources` take it, and the
    parsed arguments' attribute), its default, the flag that spells it, its `argparse` arguments (`help`
    may be a function, called when the parser is built), and the commands that offer it. `lowers` is
    False for an option that only decodes or shows (no keyword of the pipeline). `alone`: the value of
    the flag given without one; its value then follows `=` only (`--flag`, `--flag=value`).
    `names_dump`: a `decode` option naming a dump its feature decodes (one file, or several)."""

    keyword: str
    default: Any
    flag: str
    arguments: Mapping[str, Any]
    commands: tuple[Command, ...] = LOWERING_COMMANDS
    lowers: bool = True
    alone: str | None = None
    names_dump: bool = False  # `decode`: the option names a dump its feature decodes

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        arguments = dict(self.arguments)
        if callable(arguments.get("help")):
            arguments["help"] = arguments["help"]()
        if self.alone is not None:
            arguments["metavar"] = self.metavar
        parser.add_argument(self.flag, dest=self.keyword, default=self.default, **arguments)

    @property
    def metavar(self) -> str:
        return str(self.arguments.get("metavar", "VALUE"))

    def takes(self, word: str) -> bool:
        """Whether `word` is a value of the option: its `type` reads it (a flag with `alone` takes its
        value after `=` only, so such a word after it and a space is a mistake to point out)."""
        read = self.arguments.get("type")
        if read is None:
            return False
        try:
            read(word)
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            return False
        return True


class ReportStage(enum.Enum):
    """Where in `run`'s text report a feature's lines go: right after the printf output's own warnings,
    among the findings after the abort messages, or last, after the device's."""

    AFTER_OUTPUT = "after output"
    FINDINGS = "findings"
    LAST = "last"


class LoweredPart(Protocol):
    """What a feature's passes give the lowered module: at least its metadata table."""

    def to_document(self) -> dict[str, Any]: ...


@dataclass
class RunReport:
    """What a feature adds to a report: `notes` (warnings said with the command's own, before the
    output), then, at `stage`, its `errors` and `warnings` and raw `text` on stderr; keys of the
    `--json` document; and whether it found errors (exit status 4)."""

    notes: Sequence[str] = ()
    errors: Sequence[str] = ()
    warnings: Sequence[str] = ()
    text: str = ""
    document: Mapping[str, Any] = field(default_factory=dict)
    found_errors: bool = False
    stage: ReportStage = ReportStage.FINDINGS


@dataclass(frozen=True)
class Relaunch:
    """A feature's reason to launch once more, said as a warning, and what it asks of that launch (its
    `plan_run` finds it in `LaunchPlan.asked`, by its name)."""

    message: str
    asked: Any


class Feature:
    """An optional feature as the core sees it (the module docstring says how the core uses it)."""

    name: str = ""
    options: tuple[Option, ...] = ()
    commands: Mapping[str, str] = {}  # its own subcommands: name -> the module with `run(args)`
    command_help: Mapping[str, str] = {}
    counts_executions: bool = False  # its code counts how often code runs: no pass may run code twice
    edits_lowered: bool = False  # `after_lowering` edits the finished module
    shows_dumps: bool = False  # `decode`: its dumps alone are shown by `decode_output`, not as a report
    dump_help: str = ""  # what `run --dump-buffers` writes for it, for the option's help

    # Options.
    def setting(self, values: Mapping[str, Any]) -> Any | None:
        """The feature's setting from its options' values (all its keywords are there); None: off."""
        return None

    def printf_gate(self, setting: Any) -> PrintfGate | None:
        """What every printf helper checks before it reserves, when this feature decides it."""
        return None

    # Lowering (`lowering.pipeline`), each only while the setting is not None.
    def needs_inlining(self, setting: Any) -> bool:
        """Whether it needs the functions inlined into the entries before its passes."""
        return False

    def after_inlining(self, context: PassContext, setting: Any) -> None:
        """Its passes over the printf-lowered (and, when a feature asked, inlined) module."""

    def helpers_target(self, target: Target, setting: Any) -> Target:
        """The target the printf and abort helpers are defined for, when the feature needs another."""
        return target

    def after_lowering(self, context: PassContext, setting: Any) -> None:
        """With `edits_lowered`: its passes over the finished module (helpers inlined)."""

    # The run (`lowering.devices.harness`), each only for a feature with a lowered part.
    def plan_run(self, part: Any, plan: LaunchPlan) -> None:
        """Add its runtime buffers (named slots) and runtime globals to the launch."""

    def complete_run(self, part: Any, plan: LaunchPlan) -> None:
        """What needs every feature's buffers in place (a table of them all)."""

    def printf_lookup(self, part: Any, lookup: Any) -> Any:
        """The format lookup printf's buffer is decoded with, when the feature writes records there."""
        return lookup

    def decode_run(
        self, part: Any, slots: Slots | None, printf: PrintfDecoding
    ) -> tuple[Any, PrintfDecoding]:
        """Its run part from its slots as the device left them (None: from `decode`'s dumps, which have
        only the printf buffer), and printf's decoding without its records."""
        return None, printf

    def relaunch(self, part: Any, run_part: Any) -> Relaunch | None:
        """After a launch: one more, when its run part shows that its buffers were sized too small for
        what the code did (the harness launches at most once more, for any feature)."""
        return None

    def explains_loss(self, run_part: Any) -> bool:
        """Whether its run part explains a device lost without an abort record (as an abort)."""
        return False

    def guards(self, slots: Slots) -> Sequence[tuple[str, Bytes]]:
        """Its slots whose guards the run checks: (the buffer's name in messages, its guard bytes)."""
        return ()

    # The command line (`lowering.cli`).
    def run_report(self, run_part: Any, printf: PrintfDecoding | None) -> RunReport:
        """What `run` and `decode` report of its run part (`printf`: the buffer's decoding, None for
        dumps decoded without one)."""
        return RunReport()

    def dump(self, run_part: Any) -> Sequence[tuple[str, bytes]]:
        """The files `run --dump-buffers` writes for it: (file name, bytes)."""
        return ()

    def decode_tables(self, elves: Sequence[tuple[str, bytes]]) -> Any | None:
        """`decode`: its lowered part from the ELFs' tables, for decoding the printf buffer (as a run's)."""
        return None

    def decode_dumps(self, args: argparse.Namespace, elves: Sequence[tuple[str, bytes]]) -> Any | None:
        """`decode`: its run part from the dumps its options name, None when none is given."""
        return None

    def decode_prefixes(self, args: argparse.Namespace, printf: PrintfDecoding) -> tuple[bool, list[str]]:
        """`decode`: whether its options prefix each entry that has a call site with it, and warnings."""
        return False, []

    def decode_output(self, run_part: Any, args: argparse.Namespace, on_stdout: bool) -> None:
        """`decode`: what it shows of a run part from dumps besides its report (on stdout when asked)."""
