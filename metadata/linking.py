"""Unions of format-string tables (SPEC section 6): strict when linking, forgiving when a driver loads.

Linking several ELFs or modules must not lose a string, so the same ID with different entries is a
LinkError. A driver that loads many pipelines into one table keeps the first entry and reports the
collision as a warning instead: the pipelines still run, and only the later string's output is at risk.

The check tables beside it (`link_check_tables`) link by what the device writes. A validation site is
an ID the code writes into the printf buffer, as a format string's is: the sites of several ELFs are
their union, nothing renumbered, and one ID with two different sites is a LinkError. The races sites,
the instrumentation counters and the per-site line counters are numbers compiled into each shader's
code (a site's number packed into the shadow's keys, a block's counter's position in its buffer), and
their dumps (a shadow, a counters buffer) do not say which shader wrote them: renumbering would
disagree with the code, and two such tables in one ELF could not tell their dumps apart. So one ELF
holds one of each: that of whichever input has it, and two inputs with different ones are a LinkError.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .call_sites import LINE_LIMIT_KEY
from .elf_notes import read_table
from .errors import DprintfError, LinkError
from .instrumentation import INSTRUMENTATION_KEY
from .races import RACES_KEY
from .table import TABLE_KEY, FormatTable, TableEntry, collision_message
from .validation import VALIDATION_KEY, ValidationTable, site_collision_message

# The tables whose numbers the code and the dumps hold, and what they number.
_ONE_SHADER_TABLES = {
    RACES_KEY: "its site numbers are compiled into the shader's code and packed into the shadow",
    INSTRUMENTATION_KEY: "its counters' positions in the buffer are compiled into the shader's code",
    LINE_LIMIT_KEY: "its sites' counters' positions in the buffer are compiled into the shader's code",
}


def link_tables(tables: Iterable[FormatTable]) -> FormatTable:
    """The union of `tables`; identical entries merge, the same ID with another entry is a LinkError.
    Unusable rows are kept, once each; other table keys are kept, and one key with two values is a
    LinkError too."""
    union = FormatTable()
    for table in tables:
        for entry in table:
            union.add(entry)
        conflicts = _keep_the_rest(union, table)
        if conflicts:
            raise LinkError(conflicts[0])
    return union


def _keep_the_rest(union: FormatTable, table: FormatTable) -> list[str]:
    """Add `table`'s unusable rows and other keys to `union`; a message per key it has with another value."""
    for row in table.unusable:
        union.keep(row)
    conflicts = []
    for key, value in table.other_keys.items():
        known = union.other_keys.setdefault(key, value)
        if known != value:
            conflicts.append(f"{TABLE_KEY} key {key} is {known!r} in one table and {value!r} in another")
    return conflicts


@dataclass(frozen=True, slots=True)
class Collision:
    """Two entries with one ID, and where each came from; the first is the one kept."""

    kept: TableEntry
    kept_source: str
    ignored: TableEntry
    ignored_source: str

    def __str__(self) -> str:
        sources = f"from {self.kept_source} and {self.ignored_source}"
        return f"{collision_message(self.kept, self.ignored)}, {sources}"


class FormatRegistry:
    """The format strings of every pipeline a driver has loaded, looked up by ID like a FormatTable."""

    def __init__(self) -> None:
        self.table = FormatTable()
        self.collisions: list[Collision] = []
        self.conflicts: list[str] = []  # other table keys loaded with two values (the first is kept)
        self.unusable: list[str] = []  # why each unusable row of a loaded table is not used
        self._sources: dict[int, str] = {}

    @property
    def warnings(self) -> list[str]:
        """One message per collision so far, naming both strings and both sources."""
        return [_warning(collision) for collision in self.collisions]

    def load(self, table: FormatTable, source: str) -> list[str]:
        """Add the entries of `table`, loaded from `source` (its unusable rows and other keys kept too);
        the warnings: the table's own, its collisions, other keys it has with another value."""
        found = []
        for entry in table:
            known = self.table.get(entry.index)
            if known is None:
                self.table.add(entry)
                self._sources[entry.index] = source
            elif known != entry:
                found.append(Collision(known, self._sources[entry.index], entry, source))
        self.collisions.extend(found)
        conflicts = [f"{source}: {message}" for message in _keep_the_rest(self.table, table)]
        self.conflicts.extend(conflicts)
        own = [f"{source}: {message}" for message in table.warnings]
        self.unusable.extend(own)
        return own + [_warning(collision) for collision in found] + conflicts

    def load_elf(self, elf: bytes, source: str) -> list[str]:
        """Load the table of an ELF file; ElfError or TableError naming `source` when it is unreadable."""
        return self.load(read_table(elf, source=source), source)

    def lookup(self, index: int) -> TableEntry | None:
        return self.table.get(index)

    get = lookup

    def source_of(self, index: int) -> str | None:
        """Where the entry with this ID was loaded from."""
        return self._sources.get(index)

    def __contains__(self, index: object) -> bool:
        return index in self.table

    def __iter__(self) -> Iterator[TableEntry]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


def _warning(collision: Collision) -> str:
    return f"{collision}; keeping the one from {collision.kept_source}"


def link_check_tables(documents: Sequence[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], list[str]]:
    """The check tables of the named metadata documents, linked (see above), as the keys of one document;
    and the warnings: rows of a validation table that cannot be used (left out), data buffers the
    inputs name differently. LinkError naming both inputs for two different sites with one ID, or two
    different tables of a kind one ELF holds one of."""
    linked: dict[str, Any] = {}
    for key, reason in _ONE_SHADER_TABLES.items():
        having = [(source, document[key]) for source, document in documents if key in document]
        different = [(source, table) for source, table in having if table != having[0][1]]
        if different:
            raise LinkError(
                f"{having[0][0]} and {different[0][0]} have different {key} tables, and one ELF holds one: "
                f"{reason}, and its dumps do not say which shader wrote them; decode each shader's dumps "
                "with its own ELF"
            )
        if having:
            linked[key] = having[0][1]
    validation, warnings = _link_validation(documents)
    if validation is not None:
        linked[VALIDATION_KEY] = validation
    return linked, warnings


def _link_validation(documents: Sequence[tuple[str, dict[str, Any]]]) -> tuple[Any, list[str]]:
    """The `amdpal.validation` value of the linked document (None when no input has one; the one value
    when every input that has one has the same) and the warnings."""
    having = [
        (source, document[VALIDATION_KEY]) for source, document in documents if VALIDATION_KEY in document
    ]
    if not having or all(table == having[0][1] for _, table in having):
        return (having[0][1] if having else None), []
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
