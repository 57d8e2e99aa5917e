"""Unions of tables: `link_tables` (collisions are errors) and `FormatRegistry` (collisions are warnings)."""

import pytest

from metadata.elf_notes import note_only_elf
from metadata.errors import ElfError, LinkError, TableError
from metadata.layout import parse_layout
from metadata.linking import FormatRegistry, link_tables
from metadata.table import FormatEntry, FormatTable


def entry(text: str, layout: str = "i32") -> FormatEntry:
    return FormatEntry.for_call(text, parse_layout(layout))


A, B, C = entry("a %d\n"), entry("b %f\n", "f64"), entry("c\n", "")
# Same ID as A, another string: what a 48-bit hash collision looks like.
A_CLASH = FormatEntry(A.index, "clash %u\n", 1, (0,))


def test_link_tables_is_the_union_with_identical_entries_merged():
    union = link_tables([FormatTable([A, B]), FormatTable([B, C]), FormatTable()])
    assert list(union) == sorted([A, B, C], key=lambda item: item.index)
    assert link_tables([FormatTable([C, B]), FormatTable([A])]) == union
    assert link_tables([]) == FormatTable()


def test_link_tables_collision_names_both_strings():
    with pytest.raises(LinkError, match=rf"ID {A.index:#014x} collides: 'a %d\\n' .* and 'clash %u\\n'"):
        link_tables([FormatTable([A, B]), FormatTable([A_CLASH])])


def test_registry_keeps_the_first_entry_and_warns_with_both_strings_and_sources():
    registry = FormatRegistry()
    assert registry.load(FormatTable([A, B]), "first.elf") == []
    warnings = registry.load(FormatTable([A_CLASH, C]), "second.elf")
    assert len(warnings) == 1
    assert "'a %d\\n'" in warnings[0] and "'clash %u\\n'" in warnings[0]
    assert "first.elf" in warnings[0] and "second.elf" in warnings[0]
    assert warnings[0].endswith("keeping the one from first.elf")
    assert registry.warnings == warnings
    assert registry.lookup(A.index) == A and registry.get(A.index) == A
    assert registry.lookup(C.index) == C and registry.source_of(C.index) == "second.elf"
    assert registry.source_of(A.index) == "first.elf"
    assert registry.lookup(0x123) is None and registry.get(0x123) is None
    assert len(registry) == 3 and A.index in registry and 0x123 not in registry
    assert list(registry) == sorted([A, B, C], key=lambda item: item.index)
    assert [str(collision) for collision in registry.collisions] == [
        f"format string ID {A.index:#014x} collides: 'a %d\\n' (1 argument(s)) and 'clash %u\\n' "
        "(1 argument(s)), from first.elf and second.elf"
    ]


def test_registry_accumulates_warnings_and_ignores_identical_reloads():
    registry = FormatRegistry()
    registry.load(FormatTable([A]), "one")
    assert registry.load(FormatTable([A]), "one again") == []
    registry.load(FormatTable([A_CLASH]), "two")
    registry.load(FormatTable([A_CLASH]), "three")
    assert len(registry.warnings) == 2 and "three" in registry.warnings[1]
    assert registry.lookup(A.index) == A


def test_registry_loads_elf_files():
    registry = FormatRegistry()
    assert registry.load_elf(note_only_elf(FormatTable([A, B]).encode()), "pipeline.elf") == []
    assert registry.lookup(B.index).layout == parse_layout("f64")
    warnings = registry.load_elf(note_only_elf(FormatTable([A_CLASH]).encode()), "other.elf")
    assert "pipeline.elf" in warnings[0] and "other.elf" in warnings[0]


def test_registry_names_the_source_of_a_bad_file():
    registry = FormatRegistry()
    with pytest.raises(ElfError, match="^broken.bin: not an ELF file"):
        registry.load_elf(b"garbage", "broken.bin")
    bad_table = note_only_elf(b"\x81\xb5amdpal.format_strings\x01")
    with pytest.raises(TableError, match=r"^bad.elf: NT_AMDGPU_METADATA note in section 1 .*: .* not a map"):
        registry.load_elf(bad_table, "bad.elf")
    assert len(registry) == 0
