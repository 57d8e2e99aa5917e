"""LLPC's own lit inputs on amdpal (SPEC section 9), in their shapes, written here: `basic.lgc` (a
`spir_func` shader with the printf buffer's node in `!lgc.user.data.nodes` but no `%userdataN` or
`%spillTable` parameters, and a printf without a buffer operand) and `CsLowerDebugPrintf.lgc` (a
`dllexport spir_func` compute entry of LGC's, a printf with its buffer operand and one argument more
than its format string converts). Both lower and compile unmodified: the buffer of a function that takes
no user data comes from the runtime's `@lgc.debug.printf.buffer`, a buffer resource in the constant
address space, and the table keeps the node's `.user_data_offset`. The modules are the corpus's
(`driver_corpus`), which checks the tables of every version against LLPC's checks."""

from __future__ import annotations

import re

import pytest
from dprintf_cli import dprintf
from driver_corpus import BASIC, CS, CS_2023_03, NODES

from lowering.codegen.emit import compile_assembly
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.elf_notes import read_table


@pytest.mark.parametrize("layout", sorted(NODES))
def test_basic_takes_the_buffer_from_the_runtime_global_and_keeps_the_user_data_offset(layout, tmp_path):
    nodes, offset = NODES[layout]
    source, elf = tmp_path / "basic.lgc", tmp_path / "basic.elf"
    source.write_text(BASIC + nodes)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "amdpal")
    assert (done.returncode, done.stderr) == (0, "")
    table = read_table(elf.read_bytes())
    assert [(entry.string, entry.argument_count) for entry in table] == [("Test: %u", 1)]
    assert table.other_keys == {".user_data_offset": offset}
    assert dprintf("inspect", str(elf)).stdout.endswith(f"  .user_data_offset: {offset}\n")
    lowered = lower_sources([Source("basic.lgc", BASIC + nodes)], "amdpal").ir
    assert "@lgc.debug.printf.buffer = external addrspace(4) global ptr addrspace(8)" in lowered
    assert "load ptr addrspace(8), ptr addrspace(4) @lgc.debug.printf.buffer, align 16" in lowered
    assert "userdata" not in lowered and "s.getpc" not in lowered  # no user data read


def test_basic_on_gfx1100_loads_the_resource_once_and_adds_through_it():
    assembly = compile_assembly(lower_sources([Source("basic.lgc", BASIC + NODES["table"][0])], "amdpal"))
    code = assembly[assembly.index("simple:") : assembly.index("s_setpc_b64")]
    (resource,) = re.findall(r"s_load_b128 (s\[\d+:\d+\]), s\[\d+:\d+\], 0x0\n", code)
    assert re.findall(r"buffer_atomic_add_u64 v\[\d+:\d+\], \S+, (s\[\d+:\d+\]), 0", code) == [resource]
    assert "lgc.debug.printf.buffer@abs32@lo" in code or "lgc.debug.printf.buffer@rel32@lo" in code


def test_a_function_with_some_user_data_but_not_the_dword_it_needs_is_still_an_error(tmp_path):
    source = tmp_path / "basic.lgc"
    source.write_text(BASIC.replace("@simple()", "@simple(i32 inreg %userdata3)") + NODES["table"][0])
    done = dprintf("lower", str(source), "--target", "amdpal")
    assert done.returncode == 1
    assert done.stderr == (
        f"error: {source}:4: call 1 to @lgc.debug.printf in function @simple: the printf buffer's node "
        "lgc.user.data.nodes node 2 (DescriptorBuffer, offset 0, 4 dword(s), set 0xfffffff0, binding 6) "
        "needs user data dword 0, and @simple has no `i32 inreg %userdata0` parameter (nor an "
        "`i32 inreg %spillTable` to load it from)\n"
    )


def test_basic_runs_on_the_cpu_from_the_same_global():
    entry = "define void @main(ptr addrspace(7) %buf, i32 %id) {\n  call void @simple()\n  ret void\n}\n"
    result = run_sources([Source("basic.lgc", BASIC + entry + NODES["table"][0])], invocations=3)
    assert result.text() == "Test: 42" * 3


def test_cs_lower_debug_printf_compiles_with_its_extra_argument_a_warning(tmp_path):
    source, elf = tmp_path / "CsLowerDebugPrintf.lgc", tmp_path / "cs.elf"
    source.write_text(CS)
    done = dprintf("compile", str(source), "-o", str(elf), "--target", "amdpal")
    assert done.returncode == 0
    assert done.stderr == (
        f"warning: {source}:13: call 1 to @lgc.debug.printf in function @lgc.shader.CS.main: 1 argument(s) "
        "after the 1 conversion(s) of 'Output:%d\\n' are not printed\n"
    )
    (entry,) = read_table(elf.read_bytes())  # as LLPC's checks: 5 dwords, 2 arguments, the second 64-bit
    assert (entry.string, entry.argument_count, entry.sixty_four_bit) == ("Output:%d\n", 2, (2,))
    lowered = lower_sources([Source("cs.lgc", CS)], "amdpal").ir
    assert "spir_func" not in lowered and "atomicrmw add ptr addrspace(7) %4, i64 5 monotonic" in lowered
    assert "store i64 %5, ptr addrspace(7)" in lowered


def test_arguments_past_the_conversions_are_written_a_component_an_argument_and_not_printed():
    entry = "define void @main(ptr addrspace(7) %buf, i32 %id) {\n  call void @simple()\n  ret void\n}\n"
    extra = BASIC.replace("i32 42)", "i32 42, <2 x double> <double 1.0, double 2.0>, i16 -1)")
    sources = [Source("basic.lgc", extra + entry + NODES["table"][0])]
    assert run_sources(sources, invocations=2).text() == "Test: 42" * 2
    (row,) = [entry.to_map() for entry in lower_sources(sources).table]
    assert (row[".argument_count"], row[".64bit_arguments"]) == (4, [0b0110])


def test_too_few_arguments_stay_an_error():
    text = CS.replace(", i32 %1, i64 %5)", ")")
    with pytest.raises(Exception, match="'Output:%d\\\\n' has 1 conversion\\(s\\) but 0 argument"):
        lower_sources([Source("cs.lgc", text)], "amdpal")


def test_a_module_with_typed_pointers_is_read_as_llvm_reads_it():
    """Not an LLPC lit input (those had opaque pointers from their first version, March 2023): the same
    call written with typed pointers, the format string through a constant GEP, reads as LLVM 22 reads it,
    with opaque pointers: the same entry."""
    typed = (
        CS.replace("call ptr addrspace(4) @lgc.descriptor", "call <4 x i32> addrspace(4)* @lgc.descriptor")
        .replace("ptr addrspace(4) %2", "<4 x i32> addrspace(4)* %2")
        .replace(
            "call ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32> %3)",
            "call i8 addrspace(7)* @lgc.late.launder.fat.pointer(<4 x i32> %3)",
        )
        .replace(
            "@lgc.debug.printf(ptr addrspace(7) %4, ptr addrspace(4) @str.1,",
            "@lgc.debug.printf(i8 addrspace(7)* %4, i8 addrspace(4)* getelementptr inbounds ([10 x i8], "
            "[10 x i8] addrspace(4)* @str.1, i64 0, i64 0),",
        )
        .replace(
            "declare ptr addrspace(4) @lgc.descriptor", "declare <4 x i32> addrspace(4)* @lgc.descriptor"
        )
        .replace(
            "declare ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32>)",
            "declare i8 addrspace(7)* @lgc.late.launder.fat.pointer(<4 x i32>)",
        )
        .replace("memory(none)", "readnone")
    )
    assert "addrspace(4)* getelementptr" in typed and "ptr addrspace(7) @lgc.buffer" not in typed
    (entry,) = lower_sources([Source("typed.lgc", typed)], "amdpal").table
    (expected,) = lower_sources([Source("cs.lgc", CS)], "amdpal").table
    assert entry == expected


def test_llpcs_printf_of_2023_is_read_while_its_result_is_unused():
    """LLPC's `declare i64 @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), i32)` of March to June
    2023 returned the buffer offset after its entry, which nothing here computes."""
    (entry,) = lower_sources([Source("cs.lgc", CS_2023_03)], "amdpal").table
    assert (entry.string, entry.argument_count) == ("Output:%d\n", 1)
    used = CS_2023_03.replace("  ret void\n", '  %next = add i64 %" ", 1\n  ret void\n', 1)
    with pytest.raises(Exception, match="its result is used: LLPC's printf of 2023"):
        lower_sources([Source("cs.lgc", used)], "amdpal")
