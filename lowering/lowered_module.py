"""What the pass takes and gives: input modules and the lowered module with its table and target.

Its own module so that code generation, the devices and the harness name the lowered module without
importing the pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from metadata.table import FormatTable

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
    parts: Mapping[str, Any] = field(default_factory=dict)  # each enabled feature's, by its name

    def document(self) -> dict:
        """The metadata document keys besides the format-string table that the ELF note carries."""
        return tables_document(self.parts.values())


def tables_document(parts: Iterable[Any]) -> dict:
    """The metadata document keys of the features' lowered parts (each one's `to_document()`)."""
    return {key: value for part in parts for key, value in part.to_document().items()}
