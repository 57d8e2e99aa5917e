"""Calling conventions (SPEC section 9): LLPC's `spir_func` functions compile as the C convention on every
target, and a convention a backend cannot lower is a clean error from code generation."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

DPRINTF = [sys.executable, "-m", "lowering.cli"]
LLPC_STYLE = (
    '@fmt = private unnamed_addr addrspace(4) constant [14 x i8] c"twice %u: %u\\0A\\00"\n'
    "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
    "declare spir_func i32 @external(i32)\n"
    "define internal spir_func i32 @twice(i32 %x) {\n  %y = mul i32 %x, 2\n  ret i32 %y\n}\n"
    "define spir_func void @report(ptr addrspace(7) %buf, i32 %id) {\n"
    "  %t = call spir_func i32 @twice(i32 %id)\n"
    "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
    "ptr addrspace(4) @fmt, i32 %id, i32 %t)\n"
    "  ret void\n}\n"
)
ENTRIES = {
    "cpu": "define void @main(ptr addrspace(7) %buf, i32 %id) {\n"
    "  call spir_func void @report(ptr addrspace(7) %buf, i32 %id)\n  ret void\n}\n",
    "amdpal": "define amdgpu_cs void @main(ptr addrspace(7) inreg %buf, i32 %id) {\n"
    "  call spir_func void @report(ptr addrspace(7) %buf, i32 %id)\n  ret void\n}\n",
}


@pytest.mark.parametrize("target", ["cpu", "amdpal", "nvptx"])
def test_spir_func_becomes_the_c_convention_on_definitions_declarations_and_calls(target):
    text = LLPC_STYLE + ENTRIES["amdpal" if target == "amdpal" else "cpu"]
    lowered = lower_sources([Source("llpc.ll", text)], target)
    assert "spir_func" not in lowered.ir
    assert "define internal i32 @twice(i32 %x) {" in lowered.ir
    assert "  %t = call i32 @twice(i32 %id)" in lowered.ir and "  call void @report(" in lowered.ir


def test_spir_func_code_runs_on_the_cpu_device():
    result = run_sources([Source("llpc.ll", LLPC_STYLE + ENTRIES["cpu"])], invocations=3)
    assert result.printf.text() == "twice 0: 0\ntwice 1: 2\ntwice 2: 4\n"


def test_spir_func_code_compiles_for_amdpal(tmp_path):
    source, elf = tmp_path / "llpc.ll", tmp_path / "llpc.elf"
    source.write_text(LLPC_STYLE + ENTRIES["amdpal"])
    done = subprocess.run([*DPRINTF, "compile", str(source), "-o", str(elf)], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert elf.read_bytes().startswith(b"\x7fELF")
    listed = subprocess.run([*DPRINTF, "inspect", str(elf)], capture_output=True, text=True).stdout
    assert "twice %u: %u\\n" in listed


def test_a_convention_the_backend_cannot_lower_is_a_clean_error(tmp_path):
    source, elf = tmp_path / "x86.ll", tmp_path / "x86.elf"
    source.write_text("define x86_fastcallcc void @f() {\n  ret void\n}\n")
    done = subprocess.run([*DPRINTF, "compile", str(source), "-o", str(elf)], capture_output=True, text=True)
    assert done.returncode == 1 and not elf.exists()
    assert (
        done.stderr.startswith("error: LLVM failed while compiling for amdpal")
        and "calling convention" in done.stderr
    )
