"""Unions of format-string tables (SPEC section 6): strict when linking, forgiving when a driver loads.

Linking several ELFs or modules must not lose a string, so the same ID with different entries is a
LinkError. A driver that loads many pipelines into one table keeps the first entry and reports the
collision as a warning instead: the pipelines still run, and only the later string's output is at risk.

The features' tables beside it (`link_check_tables`) link by what the device writes, each as its entry
of `features.FEATURE_TABLES` says. A table whose rows are IDs the code writes into the printf buffer,
as a format string's is, has a function that merges several ELFs' (nothing renumbered; one ID with two
different rows is a LinkError). A table whose numbers are compiled into each shader's code, and whose
dumps do not say which shader wrote them, cannot be renumbered, and two in one ELF could not tell their
dumps apart: one ELF holds one, that of whichever input has it, and two inputs with different ones
are a LinkError naming why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .elf_notes import read_table
from .errors import LinkError
from .features import FEATURE_TABLES
from .table import TABLE_KEY, FormatTable, TableEntry, collision_message


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
    and the warnings of the tables that merge. LinkError naming both inputs for two different rows with
    one ID, or two different tables of a kind one ELF holds one of."""
    linked: dict[str, Any] = {}
    warnings: list[str] = []
    for table in FEATURE_TABLES:
        having = [(source, document[table.key]) for source, document in documents if table.key in document]
        if not having:
            continue
        if table.merge is not None:
            linked[table.key], merged = table.merged(having)
            warnings += merged
            continue
        different = [(source, value) for source, value in having if value != having[0][1]]
        if different:
            raise LinkError(
                f"{having[0][0]} and {different[0][0]} have different {table.key} tables, and one ELF holds "
                f"one: {table.one_shader}, and its dumps do not say which shader wrote them; decode each "
                "shader's dumps with its own ELF"
            )
        linked[table.key] = having[0][1]
    return linked, warnings
