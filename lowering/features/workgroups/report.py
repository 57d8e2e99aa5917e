"""What `run` reports of workgroups: one `error:` a barrier at which the invocations of a workgroup did
not all meet (SPEC 14, exit status 4), `barrier_divergence` in the `--json` document."""

from __future__ import annotations

from collections.abc import Sequence

from metadata.workgroups.table import Divergence

from ..feature import RunReport


def run_report(divergences: Sequence[Divergence]) -> RunReport:
    if not divergences:
        return RunReport()
    return RunReport(
        errors=[divergence.line() for divergence in divergences],
        document={"barrier_divergence": [divergence.to_document() for divergence in divergences]},
        found_errors=True,
    )
