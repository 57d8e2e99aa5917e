"""Short returning tails copied into the cold blocks that branch back to them (`codegen/ptx_tails`):
the branch then goes to the cold block alone, the paths never meet, and what runs is unchanged; tails
that branch, call, wait on other threads or are long stay shared. The lowered kernel of a never-taken
printf gets the copy, and ptxas takes it where the CUDA toolkit is installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lowering.codegen.ptx_tails import MAX_TAIL_INSTRUCTIONS, copy_returning_tails


def compute_kernel(with_printf: bool) -> str:
    """bench_gpu's compute kernel (d), 32 arithmetic instructions, with its never-taken printf or not."""
    sys.path.insert(0, str(Path(__file__).parent / "benchmarks"))
    import bench_gpu

    return bench_gpu.lowered_kernel_ptx(bench_gpu.compute_ir(with_printf, 8), takes_abort_buffer=True)


def function(tail: str) -> str:
    """A PTX function whose rare branch (to $L__BB0_4) comes back to `tail` then `ret`."""
    return (
        ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
        "\tsetp.num.f32 \t%p3, %r1, %r2;\n"
        "\t@%p3 bra \t$L__BB0_5;\n\tbra.uni \t$L__BB0_4;\n$L__BB0_5:\n"
        f"{tail}"
        "$L__BB0_6:\n\tret;\n"
        "$L__BB0_4:\n\tatom.global.add.u64 \t%rd4, [%rd2], 5;\n\tbra.uni \t$L__BB0_5;\n\n}\n"
    )


STORE = "\tmul.wide.s32 \t%rd9, %r1, 4;\n\tadd.s64 \t%rd10, %rd3, %rd9;\n\tst.global.b32 \t[%rd10], %r21;\n"


def test_the_cold_block_gets_its_own_copy_of_a_short_returning_tail():
    copied = copy_returning_tails(function(STORE))
    assert copied == (
        ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
        "\tsetp.num.f32 \t%p3, %r1, %r2;\n"
        "\t@!%p3 bra \t$L__BB0_4;\n$L__BB0_5:\n"
        f"{STORE}"
        "$L__BB0_6:\n\tret;\n"
        "$L__BB0_4:\n\tatom.global.add.u64 \t%rd4, [%rd2], 5;\n\tbra.uni \t$L__BB0_5_tail;\n\n"
        f"$L__BB0_5_tail:\n{STORE}\tret;\n}}\n"
    )


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param("\tbar.sync \t0;\n", id="barrier"),
        pytest.param("\tshfl.sync.idx.b32 \t%r3, %r2, 0, 31, -1;\n", id="shuffle"),
        pytest.param("\t@%p4 bra \t$L__BB0_6;\n", id="branch"),
        pytest.param("\t{ // callseq 0, 0\n\tcall.uni f, ();\n\t}\n", id="call"),
        pytest.param(STORE * (MAX_TAIL_INSTRUCTIONS // 3 + 1), id="long"),
    ],
)
def test_tails_that_branch_call_wait_or_are_long_stay_shared(tail):
    assert copy_returning_tails(function(tail)) == function(tail)


def test_a_never_taken_printf_returns_by_itself_in_the_lowered_kernel():
    ptx = compute_kernel(True)
    kernel = ptx[ptx.index(".entry") :]
    assert "@!%p" in kernel and kernel.count("_tail:") == 1 and kernel.count("\tret;") == 2
    assert "_tail:" not in compute_kernel(False)


@pytest.mark.skipif(not shutil.which("ptxas"), reason="needs ptxas (the CUDA toolkit)")
def test_ptxas_takes_the_kernel_with_copied_tails(tmp_path):
    source = tmp_path / "kernel.ptx"
    source.write_text(compute_kernel(True))
    result = subprocess.run(
        ["ptxas", "-arch=sm_90", str(source), "-o", str(tmp_path / "kernel.cubin")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
