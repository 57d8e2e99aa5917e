"""LLPC's printf form (SPEC section 9): `call void (...) @lgc.debug.printf(ptr @str, ...)`, no buffer
operand, the format string in any address space, mixed with the buffer-operand form. On cpu and nvptx
the buffer is the one the runtime puts in `@lgc.debug.printf.buffer`; on amdpal, without LLPC's
user-data node, the calls are removed with a warning, and with it they load the buffer from user data
(tests/test_llpc_user_data.py), which a function without the user data parameters cannot."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from metadata.elf_notes import read_table

DPRINTF = [sys.executable, "-m", "lowering.cli"]
GPUS, NO_GPU = gpu_count()
STRINGS = (
    '@str = private unnamed_addr constant [10 x i8] c"Test: %u\\0A\\00", align 1\n'
    '@str4 = private unnamed_addr addrspace(4) constant [14 x i8] c"four %d %llx\\0A\\00", align 1\n'
    '@fmt = private unnamed_addr addrspace(4) constant [12 x i8] c"classic %u\\0A\\00"\n'
    '@plain = private unnamed_addr constant [7 x i8] c"plain\\0A\\00"\n'
)
BODY = (
    "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
    "  call void (...) @lgc.debug.printf(ptr nonnull @str, i32 42)\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(4) @str4, i32 %id, i64 255)\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt, i32 %id)\n"
    "  call void (...) @lgc.debug.printf(ptr @plain)\n"
    "  ret void\n}\n"
    "declare void @lgc.debug.printf(...)\n"
)
USER_DATA_NODES = (
    "!lgc.user.data.nodes = !{!4, !5}\n"
    '!4 = !{!"DescriptorTableVaPtr", i32 7, i32 0, i32 0, i32 1, i32 1}\n'
    '!5 = !{!"DescriptorBuffer", i32 6, i32 0, i32 0, i32 4, i32 -16, i32 6, i32 4}\n'
)


def expected(invocations: int) -> list[str]:
    return [
        line
        for n in range(invocations)
        for line in ("Test: 42\n", f"four {n} ff\n", f"classic {n}\n", "plain\n")
    ]


@pytest.mark.parametrize("defined", [False, True])
def test_printf_without_a_buffer_operand_writes_to_the_runtime_buffer(defined):
    definition = "@lgc.debug.printf.buffer = global ptr addrspace(7) null\n" if defined else ""
    module = STRINGS + definition + BODY
    result = run_sources([Source("llpc.ll", module)], invocations=3)
    assert result.text() == "".join(expected(3))
    lowered = lower_sources([Source("llpc.ll", module)]).ir
    assert lowered.count("@lgc.debug.printf.buffer = ") == 1
    assert lowered.count("load ptr addrspace(7), ptr @lgc.debug.printf.buffer") == 3


def test_the_two_forms_together_on_two_threads():
    result = run_sources([Source("llpc.ll", STRINGS + BODY)], invocations=64, threads=2)
    assert Counter(result.text().splitlines(keepends=True)) == Counter(expected(64))


def test_amdpal_removes_the_calls_with_a_warning_without_the_user_data_node(tmp_path):
    module, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    module.write_text(STRINGS + BODY)
    done = subprocess.run(
        [*DPRINTF, "compile", str(module), "-o", str(elf)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"warning: {module}:{line}: call {call} to @lgc.debug.printf in function @main has no buffer operand "
        "and the module no printf buffer node: the call is removed"
        for call, line in ((1, 7), (2, 8), (4, 10))
    ]
    inspect = subprocess.run([*DPRINTF, "inspect", str(elf)], capture_output=True, text=True, check=True)
    assert inspect.stdout.count(".string:") == 1 and '"classic %u\\n"' in inspect.stdout


def test_amdpal_with_the_user_data_node_and_no_user_data_takes_the_runtime_global(tmp_path):
    """A function without LGC's user-data parameters (`@main` here, LLPC's `basic.lgc`) loads the buffer
    from `@lgc.debug.printf.buffer`, as `@lgc.abort.msg` does; the table keeps `.user_data_offset`
    (tests/test_llpc_lit_inputs.py)."""
    module, elf = tmp_path / "llpc.ll", tmp_path / "llpc.o"
    module.write_text(STRINGS + BODY + USER_DATA_NODES)
    done = subprocess.run(
        [*DPRINTF, "compile", str(module), "-o", str(elf)], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    table = read_table(elf.read_bytes())
    assert len(table) == 4 and table.other_keys == {".user_data_offset": 0}


@pytest.mark.gpu
@pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
def test_printf_without_a_buffer_operand_on_the_gpu():
    result = run_sources([Source("llpc.ll", STRINGS + BODY)], invocations=1 << 12, device="nvptx")
    assert Counter(result.text().splitlines(keepends=True)) == Counter(expected(1 << 12))
