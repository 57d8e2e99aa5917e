"""Code generation (SPEC section 6): amdpal ELFs whose PAL metadata note LLVM's backend writes with the
table, host objects with the `.note` section added, PTX for nvptx, and the target machines; each note
checked with `metadata.elf_notes.read_table` and against llvm-readelf-14 and pyelftools (`elf_oracles`)."""

from __future__ import annotations

import io
import re

import llvmlite.binding as llvm
import pytest
from dprintf_ir import ABORT, PRINTF
from elf_oracles import each_reader
from elftools.elf.elffile import ELFFile
from test_lowering_pass import ALL_TYPES, all_types_calls, module

from lowering.codegen.emit import compile_object, compile_ptx
from lowering.lowered_module import LoweredModule, Source
from lowering.pipeline import lower_sources
from lowering.targets.machines import UnknownProcessorError, host_target_machine, target_machine
from lowering.targets.target import get_target
from metadata.elf_notes import pal_metadata_ir, read_document, read_table
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable

EM_X86_64 = 62
EM_AMDGPU = 224


def compute_shader(callee: str = PRINTF) -> str:
    """A module whose `amdgpu_cs` entry makes one call per argument type (an entry point, so that the
    AMDGPU backend writes `amdpal.pipelines`)."""
    return module(all_types_calls(callee), callee=callee).replace(
        "define void @entry", "define amdgpu_cs void @entry"
    )


def lower(text: str, target: str) -> LoweredModule:
    return lower_sources([Source("shader.ll", text)], target)


def elf_header(elf: bytes) -> ELFFile:
    return ELFFile(io.BytesIO(elf))


@each_reader
@pytest.mark.parametrize("callee", [PRINTF, ABORT])
def test_amdpal_object_carries_the_table_next_to_the_pipelines(callee, reader):
    lowered = lower(compute_shader(callee), "amdpal")
    assert len(lowered.table) == len(ALL_TYPES)
    elf = compile_object(lowered)
    header = elf_header(elf).header
    assert header["e_machine"] == "EM_AMDGPU" and header["e_type"] == "ET_REL"
    assert read_table(elf) == lowered.table
    notes = reader.notes(elf)
    assert notes.isa_name == "amdgcn-amd-amdpal--gfx1100"
    assert notes.document is not None and notes.document["amdpal.pipelines"]
    assert notes.rows() == [entry.to_map() for entry in lowered.table]


@each_reader
def test_amdpal_table_is_merged_with_pal_metadata_already_in_the_module(reader):
    existing = FormatTable([FormatEntry.for_call("from before %u", parse_layout("i32"))])
    document = existing.encode({"amdpal.version": [3, 0]})
    lowered = lower(compute_shader() + pal_metadata_ir(document, node=0), "amdpal")
    elf = compile_object(lowered)
    assert read_document(elf)["amdpal.version"] == [3, 0]
    merged = FormatTable([*existing, *lowered.table])
    assert read_table(elf) == merged
    notes = reader.notes(elf)
    assert notes.document is not None and notes.document["amdpal.version"] == [3, 0]
    assert notes.rows() == [entry.to_map() for entry in merged]


@each_reader
def test_amdpal_object_for_another_processor(reader):
    elf = compile_object(lower(compute_shader(), "amdpal"), "gfx90a")
    assert reader.notes(elf).isa_name == "amdgcn-amd-amdpal--gfx90a"


@each_reader
def test_host_object_gets_the_note_section(reader):
    lowered = lower(module(all_types_calls()), "cpu")
    elf = compile_object(lowered)
    parsed = elf_header(elf)
    assert parsed.header["e_machine"] == "EM_X86_64" and parsed.header["e_type"] == "ET_REL"
    assert any(symbol.name == "entry" for symbol in parsed.get_section_by_name(".symtab").iter_symbols())
    assert read_table(elf) == lowered.table
    assert reader.notes(elf).rows() == [entry.to_map() for entry in lowered.table]


@pytest.mark.parametrize("callee", [PRINTF, ABORT])
def test_nvptx_lowering_becomes_ptx_with_global_atomics(callee):
    lowered = lower(module(all_types_calls(callee), callee=callee), "nvptx")
    ptx = compile_ptx(lowered)
    assert ".target sm_90" in ptx and ".address_size 64" in ptx
    assert len(re.findall(r"\batom\.global\.add\.u64\b", ptx)) == (len(ALL_TYPES) if callee == PRINTF else 1)
    assert "st.global" in ptx and "st.local" not in ptx and "generic" not in ptx
    if callee == ABORT:
        assert "fence.sc.sys" in ptx and re.search(r"\btrap;", ptx)


def test_host_target_machine_is_new_and_for_the_host_each_time():
    first, second = host_target_machine(), host_target_machine()
    assert first is not second
    assert first.triple == second.triple == llvm.get_process_triple()
    assert first.target_data is not None


def test_target_machines_for_each_target():
    assert target_machine(get_target("amdpal")).triple == "amdgcn-amd-amdpal"
    assert target_machine(get_target("nvptx"), "sm_80").triple == "nvptx64-nvidia-cuda"
    assert target_machine(get_target("cpu")).triple == llvm.get_process_triple()


@pytest.mark.parametrize(
    ("target", "cpu"), [("amdpal", "gfx9999"), ("nvptx", "sm_1"), ("cpu", "no-such-cpu")]
)
def test_an_unknown_processor_is_an_error(target, cpu):
    with pytest.raises(UnknownProcessorError, match=f"unknown processor '{cpu}' for target {target}"):
        target_machine(get_target(target), cpu)


def test_pal_metadata_of_several_linked_modules_is_merged():
    first = FormatTable([FormatEntry.for_call("first %d", parse_layout("i32"))])
    second = FormatTable([FormatEntry.for_call("second %f", parse_layout("f32"))])
    sources = [
        Source("a.ll", compute_shader() + pal_metadata_ir(first.encode({"amdpal.version": [3, 0]}), node=0)),
        Source(
            "b.ll",
            "define void @g() {\n  ret void\n}\n" + pal_metadata_ir(second.encode({"extra": 1}), node=0),
        ),
    ]
    lowered = lower_sources(sources, "amdpal")
    elf = compile_object(lowered)
    document = read_document(elf)
    assert document["amdpal.version"] == [3, 0] and document["extra"] == 1
    assert read_table(elf) == FormatTable([*first, *second, *lowered.table])
