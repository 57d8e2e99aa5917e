"""Linking validation tables (`amdpal.validation`): a site is an ID the code writes into the printf
buffer, as a format string's is, so the sites of several ELFs are their union, nothing renumbered, and
one ID with two different sites is a LinkError."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import DprintfError, LinkError
from .table import VALIDATION_KEY, ValidationTable, site_collision_message


def link_validation(having: Sequence[tuple[str, Any]]) -> tuple[Any, list[str]]:
    """The `amdpal.validation` value of the linked document (the one value when every input has the
    same) and the warnings: rows that cannot be used (left out), data buffers the inputs name
    differently. LinkError naming both inputs for two different sites with one ID."""
    if all(table == having[0][1] for _, table in having):
        return having[0][1], []
    warnings: list[str] = []
    merged = ValidationTable(checks=())
    sources: dict[int, str] = {}  # where each site comes from
    named_by = having[0][0]  # the input whose data buffers' names the linked table has
    for source, value in having:
        try:
            table = ValidationTable.from_document({VALIDATION_KEY: value})
        except DprintfError as failure:
            raise LinkError(f"{source}: {failure}") from None
        assert table is not None
        warnings += [f"{source}: {message}" for message in table.warnings]
        for kept, other in merged.collisions(table):
            raise LinkError(site_collision_message(kept, sources[kept.index], other, source))
        names = merged.common_names(table)
        if names not in (merged.buffer_names, table.buffer_names):
            warnings.append(
                f"{named_by} and {source} name their data buffers differently "
                f"({', '.join(merged.buffer_names)} and {', '.join(table.buffer_names)}): the linked table "
                "names them by position from the first difference on"
            )
        sources.update({site.index: source for site in table.sites if site.index not in sources})
        merged = merged.merged(table)
    return merged.to_document()[VALIDATION_KEY], warnings
