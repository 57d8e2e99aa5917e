"""What the pass takes and gives: input modules and the lowered module with its table and target.

Its own module so that code generation, the devices and the harness name the lowered module without
importing the pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.call_sites import LineLimit
from metadata.instrumentation import InstrumentationTable
from metadata.races import RaceTable
from metadata.table import FormatTable
from metadata.validation import ValidationTable

from .targets.target import Target


@dataclass(frozen=True)
class Source:
    """One input module: its file name for diagnostics (`<stdin>` for `-`) and its textual IR."""

    name: str
    text: str


@dataclass(frozen=True)
class LoweredModule:
    """The lowered, verified IR (no `lgc.debug.*` calls left), the table of its calls, and its target."""

    ir: str
    table: FormatTable
    target: Target
    warnings: tuple[str, ...] = ()  # what the pass did that a user should know (calls it removed)
    validation: ValidationTable | None = None  # the check sites, when lowered with `validate`
    instrumentation: InstrumentationTable | None = None  # the blocks, when lowered with `instrument`
    listing: tuple[tuple[str, int | None], ...] = ()  # instrumented: the IR before, lines with their block
    races: RaceTable | None = None  # the recorded sites and shadows, when lowered with `races`
    line_limit: LineLimit | None = None  # with `max_lines_per_site`: the limit and the counted sites

    def document(self) -> dict:
        """The metadata document keys besides the format-string table that the ELF note carries."""
        return tables_document(self.validation, self.instrumentation, self.races, self.line_limit)


def tables_document(
    *tables: ValidationTable | InstrumentationTable | RaceTable | LineLimit | None,
) -> dict:
    """The metadata document keys of the passes' tables that are there."""
    return {key: value for table in tables if table is not None for key, value in table.to_document().items()}
