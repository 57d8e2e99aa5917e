"""LLPC's printf without a buffer operand on amdpal (SPEC section 9): the buffer comes from LLPC's
user-data node (internal descriptor set -16, binding 6, in `!lgc.user.data.nodes`), whose top node's
offset goes into the table as `.user_data_offset`. User data dword N is the function's `i32 inreg
%userdataN` (LGC's name), else LGC's spill table at byte 4N. Modelled on LLPC's
`lgc/test/Transforms/LowerDebugPrintf/basic.lgc` and `lgc/test/CsLowerDebugPrintf.lgc`, written here.

The same modules run on the cpu device, where the node is not used: the runtime's
`@lgc.debug.printf.buffer` is the buffer (tests/test_llpc_printf.py)."""

from __future__ import annotations

import re

import pytest
from dprintf_cli import dprintf
from elf_oracles import each_reader

from lowering.codegen.emit import compile_assembly
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.elf_notes import read_table

STRINGS = (
    '@str = private unnamed_addr constant [10 x i8] c"Test: %u\\0A\\00", align 1\n'
    '@str4 = private unnamed_addr addrspace(4) constant [14 x i8] c"four %d %llx\\0A\\00", align 1\n'
    '@fmt = private unnamed_addr addrspace(4) constant [12 x i8] c"classic %u\\0A\\00"\n'
)
CALLS = (
    "  call void (...) @lgc.debug.printf(ptr nonnull @str, i32 42)\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(4) @str4, i32 %id, i64 255)\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt, i32 %id)\n"
)
USER_DATA = ", ".join(f"i32 inreg %userdata{n}" for n in range(6))
# The harness's entry calls the shader function, which has LGC's user-data parameters (an amdgpu_gfx
# library function's, here with the C convention so that the cpu device runs it too).
MODULE = (
    STRINGS
    + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
    + f"  call void @shade({', '.join(['i32 inreg 0'] * 6)}, i32 inreg 0, ptr addrspace(7) %buf, i32 %id)\n"
    + "  ret void\n}\n"
    + f"define void @shade({USER_DATA}, i32 inreg %spillTable, ptr addrspace(7) %buf, i32 %id) {{\nentry:\n"
    + CALLS
    + "  ret void\n}\n"
    + "declare void @lgc.debug.printf(...)\n"
)
# (top node, printf node or None): in a table at user data dword 1, at dword 4 of the table (LLPC's
# layout); a root descriptor in user data dwords 2..5; a root descriptor past the user-data parameters.
TABLE = (
    '!{!"DescriptorTableVaPtr", i32 7, i32 0, i32 1, i32 1, i32 1}',
    '!{!"DescriptorBuffer", i32 6, i32 0, i32 4, i32 4, i32 -16, i32 6, i32 4}',
)
ROOT = ('!{!"DescriptorMutable", i32 6, i32 0, i32 2, i32 4, i32 -16, i32 6, i32 4}', None)
SPILLED = ('!{!"DescriptorBuffer", i32 6, i32 0, i32 8, i32 4, i32 -16, i32 6, i32 4}', None)
LAYOUTS = {"table": (TABLE, 1), "root": (ROOT, 2), "spilled": (SPILLED, 8)}


def nodes(*tuples: str | None) -> str:
    """`!lgc.user.data.nodes` of the given tuples, after a push-constant node (numbered from !10)."""
    listed = ['!{!"PushConst", i32 9, i32 0, i32 0, i32 1}', *(node for node in tuples if node is not None)]
    references = ", ".join(f"!{10 + n}" for n in range(len(listed)))
    lines = [f"!lgc.user.data.nodes = !{{{references}}}"] + [
        f"!{10 + n} = {node}" for n, node in enumerate(listed)
    ]
    return "\n".join(lines) + "\n"


def expected(invocations: int) -> str:
    return "".join(f"Test: 42\nfour {n} ff\nclassic {n}\n" for n in range(invocations))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_lower_loads_the_buffer_from_the_user_data(layout):
    node, offset = LAYOUTS[layout]
    lowered = lower_sources([Source("llpc.ll", MODULE + nodes(*node))], "amdpal")
    assert "@lgc.debug.printf" not in lowered.ir and "@lgc.debug.printf.buffer" not in lowered.ir
    assert lowered.table.other_keys == {".user_data_offset": offset}
    assert lowered.ir.count("addrspacecast ptr addrspace(8)") == 2  # the two calls without a buffer operand
    assert lowered.ir.count("atomicrmw add ptr addrspace(7) %buf, i64 3") == 1
    if layout == "table":  # the descriptor at byte 16 of the table whose low address is user data dword 1
        assert lowered.ir.count("zext i32 %userdata1 to i64") == 2
        assert lowered.ir.count("getelementptr i8, ptr addrspace(4) %table.address.ptr") == 2
        assert re.search(
            r"getelementptr i8, ptr addrspace\(4\) %table\.address\.ptr[.\w]*, i32 16\n", lowered.ir
        )
    elif layout == "root":  # the descriptor is user data dwords 2..5
        assert lowered.ir.count("insertelement <4 x i32>") == 8 and "%spillTable to" not in lowered.ir
        for lane in range(4):
            assert lowered.ir.count(f"i32 %userdata{2 + lane}, i32 {lane}") == 2
    else:  # dwords 8..11 are no parameter: loaded from the spill table at bytes 32..44
        assert lowered.ir.count("zext i32 %spillTable to i64") == 8
        assert sorted(
            re.findall(r"%dword\.ptr[.\w]* = getelementptr i8, ptr addrspace\(4\) \S+, i32 (\d+)", lowered.ir)
        ) == sorted([str(byte) for byte in (32, 36, 40, 44)] * 2)


@each_reader
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_compile_puts_the_user_data_offset_in_the_table(layout, tmp_path, reader):
    node, offset = LAYOUTS[layout]
    source, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    source.write_text(MODULE + nodes(*node))
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "amdpal")
    assert (done.returncode, done.stderr) == (0, "")
    table = read_table(elf.read_bytes())
    assert sorted(entry.string for entry in table) == ["Test: %u\n", "classic %u\n", "four %d %llx\n"]
    assert table.other_keys == {".user_data_offset": offset}
    inspect = dprintf("inspect", str(elf))
    assert inspect.stdout.endswith(f"  .user_data_offset: {offset}\n")
    document = reader.notes(elf).document
    assert document is not None and "amdpal.pipelines" not in document
    assert document["amdpal.format_strings"][".user_data_offset"] == offset


@pytest.mark.parametrize("with_node", [True, False])
def test_on_the_cpu_the_node_is_not_used(with_node, tmp_path):
    text = MODULE + (nodes(*TABLE) if with_node else "")
    source, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    source.write_text(text)
    assert run_sources([Source("llpc.ll", text)], invocations=3).text() == expected(3)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "cpu")
    assert (done.returncode, done.stderr) == (0, "")
    assert read_table(elf.read_bytes()).other_keys == {}
    run = dprintf("run", str(source), "--invocations", "2")
    assert (run.returncode, run.stdout, run.stderr) == (0, expected(2), "")


@each_reader
@pytest.mark.parametrize("with_node", [True, False])
def test_on_the_cpu_the_note_has_no_user_data_offset(with_node, tmp_path, reader):
    source, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    source.write_text(MODULE + (nodes(*TABLE) if with_node else ""))
    assert dprintf("compile", str(source), "-o", str(elf), "--target", "cpu").returncode == 0
    notes = reader.notes(elf)
    assert notes.document is not None and ".user_data_offset" not in notes.document["amdpal.format_strings"]
    assert sorted(row[".string"] for row in notes.rows()) == ["Test: %u\n", "classic %u\n", "four %d %llx\n"]


def test_without_the_node_amdpal_removes_only_the_calls_without_a_buffer(tmp_path):
    source, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    source.write_text(MODULE)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "amdpal")
    removed = "has no buffer operand and the module no printf buffer node: the call is removed"
    assert done.returncode == 0 and done.stderr.splitlines() == [
        f"warning: {source}:{line}: call {call} to @lgc.debug.printf in function @shade {removed}"
        for call, line in ((1, 11), (2, 12))
    ]
    table = read_table(elf.read_bytes())
    assert [entry.string for entry in table] == ["classic %u\n"] and table.other_keys == {}


ENTRY = (
    STRINGS + "define dllexport amdgpu_cs void @_amdgpu_cs_main(i32 inreg %globalTable, USER_DATA, "
    "ptr addrspace(7) inreg %buf, <3 x i32> %LocalInvocationId) {\n.entry:\n"
    "  %id = extractelement <3 x i32> %LocalInvocationId, i64 0\n" + CALLS + "  ret void\n}\n"
    "declare void @lgc.debug.printf(...)\n"
)


def test_gfx1100_loads_the_descriptor_from_the_table_and_adds_to_the_buffer():
    """LLPC's layout: the table's low address in user data (s1, after the global table in s0); the ISA
    makes it whole with s_getpc_b64, loads the 4-dword descriptor with one s_load_b128 for both calls,
    and reserves each entry with a buffer atomic through that descriptor."""
    module = ENTRY.replace("USER_DATA", "i32 inreg %userdata0, i32 inreg %userdata1") + nodes(*TABLE)
    assembly = compile_assembly(lower_sources([Source("cs.ll", module)], "amdpal"))
    code = assembly[assembly.index("_amdgpu_cs_main:") : assembly.index("s_endpgm")]
    assert code.count("s_getpc_b64") == 1
    (load,) = re.findall(r"s_load_b128 (s\[\d+:\d+\]), s\[\d+:\d+\], 0x10\n", code)
    atomics = re.findall(r"buffer_atomic_add_u64 v\[\d+:\d+\], \S+, (s\[\d+:\d+\]), 0.*glc", code)
    assert atomics.count(load) == 2 and len(atomics) == 3  # and one through %buf
    assert code.index("s_load_b128") < code.index("buffer_atomic_add_u64")


def test_gfx1100_takes_a_root_descriptor_straight_from_the_user_data_sgprs():
    user_data = ", ".join(f"i32 inreg %userdata{n}" for n in range(6))
    module = ENTRY.replace("USER_DATA", user_data) + nodes(*ROOT)
    assembly = compile_assembly(lower_sources([Source("cs.ll", module)], "amdpal"))
    code = assembly[assembly.index("_amdgpu_cs_main:") : assembly.index("s_endpgm")]
    assert "s_load" not in code and "s_getpc_b64" not in code
    # user data dwords 2..5 arrive in s3..s6 (s0 is the global table): the descriptor, used as it is
    # or copied to an aligned quad.
    atomics = re.findall(r"buffer_atomic_add_u64 v\[\d+:\d+\], \S+, (s\[\d+:\d+\]), 0", code)
    assert len(atomics) == 3 and len(set(atomics)) == 2


MALFORMED = {
    "not a tuple": (
        "!{}",
        "lgc.user.data.nodes node 2 is not a tuple of a type name and at least 3 integers",
    ),
    "an operand": (
        '!{!"DescriptorBuffer", i32 6, i32 0, !"x", i32 4, i32 -16, i32 6, i32 4}',
        'lgc.user.data.nodes node 2 (DescriptorBuffer) operand 3 is `!"x"`, not an integer constant',
    ),
    "too few operands": (
        '!{!"DescriptorBuffer", i32 6, i32 0, i32 0, i32 4, i32 -16}',
        "lgc.user.data.nodes node 2 (DescriptorBuffer) has 6 operand(s), not the 8 of LGC's form (type, "
        "matchType, visibility, offset, size, set, binding, stride) nor the 7 of LGC's earlier form, without "
        "visibility (type, matchType, offset, size, set, binding, stride)",
    ),
    "a short table of the earlier form": (
        '!{!"DescriptorTableVaPtr", i32 7, i32 1, i32 1}',
        "lgc.user.data.nodes node 2 (DescriptorTableVaPtr) has 4 operand(s), not the 6 of LGC's form (type, "
        "matchType, visibility, offset, size, count) nor the 5 of LGC's earlier form, without visibility "
        "(type, matchType, offset, size, count)",
    ),
    "a short table": (
        '!{!"DescriptorTableVaPtr", i32 7, i32 0, i32 1, i32 1, i32 3}',
        "lgc.user.data.nodes node 2 (DescriptorTableVaPtr, offset 1, 1 dword(s)), a table of 3, is not "
        "followed by 3 other nodes",
    ),
    "not a buffer": (
        '!{!"DescriptorSampler", i32 6, i32 0, i32 2, i32 4, i32 -16, i32 6, i32 4}',
        "the printf buffer's node lgc.user.data.nodes node 2 (DescriptorSampler, offset 2, 4 dword(s), set "
        "0xfffffff0, binding 6) holds no 128-bit buffer descriptor: it must be one of DescriptorBuffer, "
        "DescriptorConstBuffer, DescriptorMutable",
    ),
    "too far": (
        '!{!"DescriptorBuffer", i32 6, i32 0, i32 1073741824, i32 4, i32 -16, i32 6, i32 4}',
        "lgc.user.data.nodes node 2 (DescriptorBuffer, offset 1073741824, 4 dword(s), set 0xfffffff0, "
        "binding 6) is past the first 536870912 dwords, which the code addresses",
    ),
    "too small": (
        '!{!"DescriptorBuffer", i32 6, i32 0, i32 2, i32 2, i32 -16, i32 6, i32 2}',
        "the printf buffer's node lgc.user.data.nodes node 2 (DescriptorBuffer, offset 2, 2 dword(s), set "
        "0xfffffff0, binding 6) is too small for a 4-dword buffer descriptor",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_node_is_an_error_naming_it(case, tmp_path):
    node, message = MALFORMED[case]
    source, output = tmp_path / "llpc.ll", tmp_path / "out.ll"
    source.write_text(MODULE + nodes(node))
    done = dprintf("lower", str(source), "--target", "amdpal", "-o", str(output))
    assert (done.returncode, done.stderr) == (1, f"error: {source}: {message}\n") and not output.exists()


# LLPC's earlier forms: the internal set -1 until December 2024 (with either node form), and node
# tuples without visibility (CsLowerDebugPrintf.lgc's of 2023).
EARLIER = {
    "set -1": (TABLE[0], TABLE[1].replace("i32 -16", "i32 -1"), 1),
    "no visibility": (
        '!{!"DescriptorTableVaPtr", i32 7, i32 1, i32 1, i32 1}',
        '!{!"DescriptorBuffer", i32 6, i32 4, i32 4, i32 -1, i32 6, i32 4}',
        1,
    ),
    "no visibility, root": ('!{!"DescriptorBuffer", i32 6, i32 2, i32 4, i32 -16, i32 6, i32 4}', None, 2),
}


@pytest.mark.parametrize("form", sorted(EARLIER))
def test_llpcs_earlier_forms_are_read_as_llpc_read_them(form):
    """LLPC's checks of those versions expect the call lowered and the table written."""
    *node, offset = EARLIER[form]
    lowered = lower_sources([Source("llpc.ll", MODULE + nodes(*node))], "amdpal")
    assert lowered.warnings == () and lowered.table.other_keys == {".user_data_offset": offset}
    assert sorted(entry.string for entry in lowered.table) == ["Test: %u\n", "classic %u\n", "four %d %llx\n"]
    assert lowered.ir.count("addrspacecast ptr addrspace(8)") == 2


def test_the_current_internal_set_is_found_before_the_earlier_one():
    earlier = '!{!"DescriptorBuffer", i32 6, i32 0, i32 8, i32 4, i32 -1, i32 6, i32 4}'
    lowered = lower_sources([Source("llpc.ll", MODULE + nodes(earlier, *ROOT))], "amdpal")
    assert lowered.table.other_keys == {".user_data_offset": 2}


def test_user_data_parameters_must_be_i32_inreg(tmp_path):
    source = tmp_path / "llpc.ll"
    source.write_text(MODULE.replace("i32 inreg %userdata1,", "i32 %userdata1,") + nodes(*TABLE))
    done = dprintf("lower", str(source), "--target", "amdpal")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {source}:{line}: call {call} to @lgc.debug.printf in function @shade: parameter "
        "%userdata1 of @shade is `i32 %userdata1`, not `i32 inreg`"
        for call, line in ((1, 11), (2, 12))
    ]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_validation_takes_the_user_data_helpers_and_the_runtime_global(layout, tmp_path):
    """`--validate` parses the module before the helpers are defined: they and the runtime's global are
    declared meanwhile."""
    node, _ = LAYOUTS[layout]
    source = tmp_path / "llpc.ll"
    source.write_text(MODULE + nodes(*node))
    lowered = lower_sources([Source("llpc.ll", MODULE + nodes(*node))], "amdpal", validate=True)
    assert lowered.table.other_keys == {".user_data_offset": LAYOUTS[layout][1]}
    shade = lowered.ir[lowered.ir.index("define void @shade") :]
    assert shade[: shade.index("\n}\n")].count("addrspacecast ptr addrspace(8)") == 2
    assert "declare ptr addrspace(7)" not in lowered.ir and "declare i32" not in lowered.ir
    run = dprintf("run", str(source), "--invocations", "2", "--validate")
    assert (run.returncode, run.stdout, run.stderr) == (0, expected(2), "")
