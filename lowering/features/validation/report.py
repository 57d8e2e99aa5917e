"""What `run` and `decode` report of validation (SPEC 11, 13): the records failed checks wrote into the
printf buffer, taken out of its output and reported one `error:` line a site (exit status 4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from metadata.decoding.printf_buffer import PrintfDecoding
from metadata.validation.checks import UNREACHABLE
from metadata.validation.reports import CheckReport
from metadata.validation.table import ValidationTable, left_out, site_collision_message, split_decoding

from ...cli.commands import table_of
from ..feature import RunReport


@dataclass(frozen=True)
class ValidationRun:
    """The sites that recorded failed checks, each with its report, and the table of every site."""

    reports: tuple[CheckReport, ...]
    table: ValidationTable


def split_records(table: ValidationTable, printf: PrintfDecoding) -> tuple[ValidationRun, PrintfDecoding]:
    """The failed checks' records taken out of `printf` (decoded with the sites' layouts too)."""
    kept, reports = split_decoding(printf, table)
    return ValidationRun(tuple(reports), table), kept


def reached_unreachable(run: ValidationRun) -> bool:
    """Whether an invocation recorded reaching `unreachable`, which ends it as an abort does (SPEC 13)."""
    return any(report.site.kind == UNREACHABLE for report in run.reports)


def run_report(run: ValidationRun, printf: PrintfDecoding) -> RunReport:
    """One `error:` line a site; when the printf buffer overflowed, how many failed checks may be
    missing (at most one a record of the table's smallest). `--json`: the sites under `validation`."""
    warnings = []
    if run.reports and printf.dropped_dwords:
        most = printf.dropped_dwords // run.table.smallest_record_dwords
        warnings.append(
            f"validation: the printf buffer dropped {printf.dropped_dwords} dword(s), so up to {most} failed "
            "check(s) did not fit: the counts above are lower bounds, and a site whose every record was "
            "dropped is not shown (a larger --buffer-size keeps them all)"
        )
    unchecked = left_out(run.table.unchecked, "--validate left {} unchecked")
    return RunReport(
        notes=(*run.table.warnings, *([unchecked] if unchecked else [])),
        errors=[report.line() for report in run.reports],
        warnings=warnings,
        document={"validation": [report.document() for report in run.reports]},
        found_errors=bool(run.reports),
    )


def merged_tables(elves: Sequence[tuple[str, bytes]]) -> ValidationTable | None:
    """The validation sites of every ELF (read where they are; an ELF without any adds none), None when
    none has a site; its `warnings` each row not used and each site ID two ELFs give different sites
    (the first is kept)."""
    merged = ValidationTable(checks=())
    warnings: list[str] = []
    sources: dict[int, str] = {}
    for path, elf in elves:
        table = table_of(path, elf, ValidationTable.from_document)
        if table is None:
            continue
        warnings += [f"{path}: {message}" for message in table.warnings]
        warnings += [
            f"{site_collision_message(kept, sources[kept.index], other, path)}: keeping the first"
            for kept, other in merged.collisions(table)
        ]
        sources.update({site.index: path for site in table.sites if site.index not in sources})
        merged = merged.merged(table)
    return replace(merged, warnings=tuple(warnings)) if merged.sites or warnings else None
