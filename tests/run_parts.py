"""The features' parts of a run or a lowered module, as the tests read them (`RunResult.parts`,
`LoweredModule.parts`, by each feature's name); None where the feature was off."""

from __future__ import annotations

from typing import Any

from lowering.devices.harness import RunResult
from lowering.lowered_module import LoweredModule


def validation_reports(result: RunResult) -> tuple | None:
    """Each site's failed checks (`--validate`)."""
    part = result.parts.get("validation")
    return None if part is None else part.reports


def races_found(result: RunResult) -> tuple | None:
    """The races, per buffer, kind and pair of sites (`--races`)."""
    part = result.parts.get("races")
    return None if part is None else part.races


def race_shadows(result: RunResult) -> tuple:
    part = result.parts.get("races")
    return () if part is None else part.shadows


def profile_of(result: RunResult) -> Any:
    """The profile of the block counters (`--instrument`)."""
    part = result.parts.get("instrumentation")
    return None if part is None else part.profile


def dropped_lines(result: RunResult) -> tuple:
    """Each site that passed `--max-lines-per-site`, with the lines it dropped."""
    part = result.parts.get("printf gates")
    return () if part is None else part.dropped


def line_limit(result: RunResult) -> int | None:
    part = result.parts.get("printf gates")
    return None if part is None else part.limit


def table_of(lowered: LoweredModule, name: str) -> Any:
    """A feature's table in a lowered module: `validation`, `races`, `instrumentation`, `printf gates`."""
    part = lowered.parts.get(name)
    if part is None:
        return None
    return part.table if name == "instrumentation" else part.line_limit if name == "printf gates" else part
