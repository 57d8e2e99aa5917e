"""Shader instrumentation (SPEC section 10): the pass, the table, exact counts on the cpu device.

The oracle for counts is `instrumented_programs`: random structured shaders interpreted in Python from
the same invocation IDs. The table is checked against the decoder and against llvm-readelf-14 and
pyelftools (`elf_oracles`).
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from dprintf_cli import DPRINTF
from elf_oracles import Reader, each_reader

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import find_entry, run_sources
from lowering.devices.nvptx import kernel_ptx
from lowering.ir.reading import parse_source
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.machines import optimize, target_machine
from metadata.elf_notes import read_document
from metadata.instrumentation import (
    INSTRUMENTATION_KEY,
    METRIC_NAMES,
    InstrumentationError,
    InstrumentationTable,
    read_counters,
)
from metadata.reports.arm_instrumentation import arm_values, arm_values_document
from tests.instrumented_programs import Program

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
AT_SCALE = 1 << 24
METRIC = {name: index for index, name in enumerate(METRIC_NAMES)}


def _counts_by_label(result) -> Counter:
    profile = result.profile
    return Counter(
        {
            (block.function, block.block.lstrip("%")): count
            for block, count in zip(profile.table.blocks, profile.counts, strict=True)
        }
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threads", [1, 2])
def test_generated_shaders_count_every_block_exactly(seed: int, threads: int) -> None:
    program = Program(seed)
    invocations = 97
    result = run_sources(
        [Source(f"generated{seed}.ll", program.ir())],
        invocations=invocations,
        threads=threads,
        instrument=True,
    )
    assert not result.device_lost, result.loss
    blocks, lines = program.expected(range(invocations))
    counted = _counts_by_label(result)
    for label in program.labels():
        assert counted[label] == blocks[label], label
    assert Counter(result.text().splitlines(keepends=True)) == lines
    written = sum(count for (_, label), count in counted.items() if label.startswith("write"))
    assert written == sum(lines.values())  # each printf's write block once an entry


def test_the_sample_counts_every_block_exactly() -> None:
    result = run_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], invocations=64, instrument=True
    )
    counted = _counts_by_label(result)
    ids = range(64)
    loop = sum(id_ % 8 for id_ in ids)
    shaded = sum(1 for id_ in ids if id_ % 3 == 0)
    printed = sum(1 for id_ in ids if id_ % 16 == 3)
    assert counted[("main", "entry")] == 64
    assert counted[("main", "loop")] == loop
    assert counted[("main", "after")] == 64
    assert counted[("main", "shade")] == shaded
    assert counted[("falloff", "entry")] == shaded
    assert counted[("main", "print")] == printed
    assert counted[("main", "done")] == 64
    table = result.profile.table
    loop_block = next(block for block in table.blocks if block.block == "loop")
    # uitofp, fma, add, icmp, br: one conversion, one fma, two integer operations, one branch
    assert loop_block.static[METRIC["cvt"]] == 1
    assert loop_block.static[METRIC["fma"]] == 1
    assert loop_block.static[METRIC["int"]] == 2
    assert loop_block.static[METRIC["branch"]] == 1
    assert loop_block.static[METRIC["instructions"]] == 5
    assert loop_block.source == "profile.c:11"
    assert (loop_block.first_line, loop_block.last_line) == (10, 11)
    falloff = next(block for block in table.blocks if block.function == "falloff")
    assert falloff.static[METRIC["sfu"]] == 1 and falloff.static[METRIC["fp"]] == 1


def test_blocks_are_numbered_in_function_then_block_order_after_printf_is_lowered() -> None:
    lowered = lower_sources([Source("profile.ll", (SAMPLES / "profile.ll").read_text())], instrument=True)
    table = lowered.instrumentation
    assert [block.index for block in table.blocks] == list(range(len(table.blocks)))
    names = [(block.function, block.block) for block in table.blocks]
    assert names[0] == ("falloff", "entry")
    assert names[1:7] == [
        ("main", f"%{label}") if label.isdigit() else ("main", label)
        for label in ["entry", "loop", "after", "shade", "report", "print"]
    ]
    assert any(label.startswith("write") for _, label in names)  # printf's own block counts too
    assert "lgc.instrumentation.buffer" in lowered.ir


ABORTING = """
@message = private unnamed_addr addrspace(4) constant [12 x i8] c"stop at %u\\0A\\00"
declare void @lgc.debug.abort(ptr addrspace(7), ptr addrspace(4), ...)
define void @main(ptr addrspace(7) %printf_buffer, ptr addrspace(7) %abort_buffer, i32 %id) {
entry:
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %body ]
  %more = icmp ult i32 %i, 3
  br i1 %more, label %body, label %check
body:
  %next = add i32 %i, 1
  br label %loop
check:
  %stop = icmp eq i32 %id, 5
  br i1 %stop, label %abort, label %done
abort:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.abort({ABORT_ARGUMENTS})
  ret void
done:
  ret void
}
""".replace("{ABORT_ARGUMENTS}", "ptr addrspace(7) %abort_buffer, ptr addrspace(4) @message, i32 %id")


def test_an_invocation_that_aborts_keeps_its_counts() -> None:
    result = run_sources([Source("abort.ll", ABORTING)], invocations=9, instrument=True)
    assert result.device_lost and result.loss == "shader abort"
    counted = _counts_by_label(result)
    ran = 6  # invocations 0..5, the last aborting after its loop
    assert counted[("main", "entry")] == ran
    assert counted[("main", "body")] == 3 * ran
    assert counted[("main", "loop")] == 4 * ran
    assert counted[("main", "check")] == ran
    assert counted[("main", "abort")] == 1
    assert counted[("main", "done")] == ran - 1


@each_reader
def test_cpu_elf_note_carries_the_table(tmp_path: Path, reader: Reader) -> None:
    output = tmp_path / "profile.o"
    subprocess.run(
        [
            *DPRINTF,
            "compile",
            str(SAMPLES / "profile.ll"),
            "--target",
            "cpu",
            "--instrument",
            "-o",
            str(output),
        ],
        check=True,
    )
    table = InstrumentationTable.from_document(read_document(output.read_bytes()))
    expected = lower_sources([Source("profile.ll", (SAMPLES / "profile.ll").read_text())], instrument=True)
    assert expected.instrumentation is not None and table == expected.instrumentation
    document = reader.notes(output).document
    assert document is not None
    assert document[INSTRUMENTATION_KEY] == expected.instrumentation.to_document()[INSTRUMENTATION_KEY]
    assert any(block[".source"] == "profile.c:11" for block in document[INSTRUMENTATION_KEY][".blocks"])


@each_reader
def test_amdpal_object_carries_the_table(tmp_path: Path, reader: Reader) -> None:
    output = tmp_path / "profile.elf"
    subprocess.run(
        [*DPRINTF, "compile", str(SAMPLES / "profile.ll"), "--instrument", "-o", str(output)], check=True
    )
    lowered = lower_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], "amdpal", instrument=True
    )
    assert lowered.instrumentation is not None
    document = reader.notes(output).document
    assert document is not None and "amdpal.format_strings" in document
    assert document[INSTRUMENTATION_KEY] == lowered.instrumentation.to_document()[INSTRUMENTATION_KEY]


def test_amdpal_flushes_the_counters_with_buffer_atomics() -> None:
    lowered = lower_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], "amdpal", instrument=True
    )
    machine = target_machine(lowered.target)
    module = parse_source("profile.ll", lowered.ir)
    optimize(module, machine)
    disassembly = machine.emit_assembly(module)
    assert "buffer_atomic_add_u64" in disassembly  # the flush, through the buffer resource


def test_nvptx_sums_a_warps_counts_with_redux_and_one_atomic() -> None:
    lowered = lower_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], "nvptx", instrument=True
    )
    ptx = kernel_ptx(
        lowered.ir,
        find_entry(lowered.ir, "main", lowered.target),
        runtime_globals=["lgc.instrumentation.buffer"],
    )
    assert "redux.sync.add." in ptx
    assert "activemask" in ptx
    assert "atom.global.add.u64" in ptx or "red.global.add.u64" in ptx


def test_profile_command_reports_json_and_annotates(tmp_path: Path) -> None:
    sample = str(SAMPLES / "profile.ll")
    done = subprocess.run(
        [*DPRINTF, "profile", sample, "--invocations", "64", "--json"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert done.stderr.count("invocation ") == 4  # the run's printf output, on stderr
    result = run_sources([Source("profile.ll", Path(sample).read_text())], invocations=64, instrument=True)
    assert document == json.loads(json.dumps(result.profile.to_document()))
    annotated = subprocess.run(
        [*DPRINTF, "profile", sample, "--invocations", "64", "--annotate"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loop_line = next(line for line in annotated.splitlines() if "fmaf" in line)
    assert loop_line.split("|")[1].strip() == str(sum(id_ % 8 for id_ in range(64)))


def test_decode_reads_a_counters_dump_with_the_elf(tmp_path: Path) -> None:
    sample = str(SAMPLES / "profile.ll")
    elf, dumps = tmp_path / "profile.o", tmp_path / "dumps"
    subprocess.run(
        [*DPRINTF, "compile", sample, "--target", "cpu", "--instrument", "-o", str(elf)], check=True
    )
    subprocess.run(
        [*DPRINTF, "run", sample, "--instrument", "--invocations", "64", "--dump-buffers", str(dumps)],
        capture_output=True,
        check=True,
    )
    counters = dumps / "instrumentation.bin"
    decoded = subprocess.run(
        [*DPRINTF, "decode", "--elf", str(elf), "--instrumentation-buffer", str(counters), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    profiled = subprocess.run(
        [*DPRINTF, "profile", sample, "--invocations", "64", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(decoded.stdout) == json.loads(profiled.stdout)
    wrong = tmp_path / "short.bin"
    wrong.write_bytes(counters.read_bytes()[:40])
    failed = subprocess.run(
        [*DPRINTF, "decode", "--elf", str(elf), "--instrumentation-buffer", str(wrong)],
        capture_output=True,
        text=True,
    )
    assert failed.returncode == 1 and failed.stderr.startswith("error: ") and "Traceback" not in failed.stderr


@pytest.mark.parametrize("seed", range(12))
def test_the_vectorised_oracle_agrees_with_the_interpreter(seed: int) -> None:
    """The oracle of the GPU checks at 2^24 invocations (numpy masks) against the scalar interpreter."""
    program = Program(seed, depth=3)
    blocks, lines = program.expected(range(300))
    at_scale, printed = program.expected_at_scale(300)
    assert +at_scale == +blocks
    by_label: Counter = Counter()
    for line, count in lines.items():
        by_label[line.split(" ")[0]] += count
    assert +printed == +by_label


def test_profile_writes_the_proposals_values_and_the_page(tmp_path: Path) -> None:
    sample = str(SAMPLES / "profile.ll")
    values, page = tmp_path / "values.bin", tmp_path / "profile.html"
    done = subprocess.run(
        [
            *DPRINTF,
            "profile",
            sample,
            "--invocations",
            "64",
            "--arm-values",
            str(values),
            "--html",
            str(page),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = run_sources([Source("profile.ll", Path(sample).read_text())], invocations=64, instrument=True)
    assert values.read_bytes() == arm_values(result.profile)
    assert json.loads(Path(f"{values}.json").read_text()) == arm_values_document(result.profile)
    text = page.read_text()
    assert "profile.c" in text and "sqrtf(distance)" in text and "<script" not in text
    assert done.stdout == result.profile.report()


def test_without_debug_information_the_ir_is_annotated() -> None:
    annotated = subprocess.run(
        [*DPRINTF, "profile", str(SAMPLES / "hello.ll"), "--invocations", "3", "--annotate"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    store = next(line for line in annotated.splitlines() if "store i32 %invocation_id" in line)
    assert store.split("|")[1].strip() == "3"
    ret = next(line for line in annotated.splitlines() if line.rstrip().endswith("ret void"))
    assert ret.split("|")[1].strip() == "3"


def test_decode_needs_something_to_decode(tmp_path: Path) -> None:
    elf = tmp_path / "hello.o"
    subprocess.run(
        [*DPRINTF, "compile", str(SAMPLES / "hello.ll"), "--target", "cpu", "-o", str(elf)], check=True
    )
    failed = subprocess.run([*DPRINTF, "decode", "--elf", str(elf)], capture_output=True, text=True)
    assert failed.returncode == 1 and failed.stderr.startswith("error: nothing to decode")
    dump = tmp_path / "counters.bin"
    dump.write_bytes(bytes(24))
    failed = subprocess.run(
        [*DPRINTF, "decode", "--elf", str(elf), "--instrumentation-buffer", str(dump)],
        capture_output=True,
        text=True,
    )
    assert (
        failed.returncode == 1
        and "amdpal.instrumentation" in failed.stderr
        and "Traceback" not in failed.stderr
    )


# On the GPU: 2^24 invocations, every block's count against the numpy oracle.


@gpu
@pytest.mark.gpu
def test_nvptx_counts_the_sample_exactly() -> None:
    sample = (SAMPLES / "profile.ll").read_text()
    result = run_sources(
        [Source("profile.ll", sample)], device="nvptx", invocations=AT_SCALE, instrument=True
    )
    counted = _counts_by_label(result)
    thirds = len(range(0, AT_SCALE, 3))
    assert counted[("main", "entry")] == counted[("main", "done")] == AT_SCALE
    assert counted[("main", "loop")] == sum(range(8)) * (AT_SCALE // 8)
    assert counted[("main", "shade")] == counted[("falloff", "entry")] == thirds
    assert counted[("main", "print")] == len(range(3, AT_SCALE, 16))


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 2, 5])
def test_nvptx_counts_generated_shaders_exactly(seed: int) -> None:
    """At 2^20 invocations (the oracle of the largest takes minutes at 2^24: bench_instrumentation.py
    checks three at 2^24); shaders 2 and 5 are those that caught lanes summing under a stale mask."""
    program = Program(seed, depth=2)
    invocations = 1 << 20
    result = run_sources(
        [Source(f"generated{seed}.ll", program.ir())],
        device="nvptx",
        invocations=invocations,
        instrument=True,
    )
    assert not result.device_lost, result.loss
    blocks, _ = program.expected_at_scale(invocations)
    counted = _counts_by_label(result)
    assert {label: counted[label] for label in program.labels()} == {
        label: blocks[label] for label in program.labels()
    }


@gpu
@pytest.mark.gpu
def test_nvptx_an_invocation_that_aborts_keeps_its_counts() -> None:
    """The trap ends every invocation still running, a warp's flush perhaps half done; the counts of the
    invocation that aborted, flushed before its trap, are all in host memory."""
    result = run_sources([Source("abort.ll", ABORTING)], device="nvptx", invocations=1 << 16, instrument=True)
    assert result.loss == "shader abort"
    counted = _counts_by_label(result)
    assert counted[("main", "abort")] == 1
    assert counted[("main", "entry")] >= 1 and counted[("main", "check")] >= 1
    assert counted[("main", "loop")] >= 4 and counted[("main", "body")] >= 3


def test_a_buffer_of_several_slices_sums_them() -> None:
    """`.slices` copies of the counters (nvptx: one per multiprocessor); a block's count is their sum."""
    lowered = lower_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], "nvptx", instrument=True
    )
    table = lowered.instrumentation
    assert table.slices == 128 and table.buffer_size() == 16 + 8 * len(table.blocks) * 128
    assert InstrumentationTable.from_document(table.to_document()) == table
    blocks = len(table.blocks)
    copies = [(slice_ * 1000 + block) for slice_ in range(table.slices) for block in range(blocks)]
    data = table.initial_buffer()[:16] + b"".join(count.to_bytes(8, "little") for count in copies)
    assert read_counters(data, table) == tuple(
        sum(slice_ * 1000 + block for slice_ in range(table.slices)) for block in range(blocks)
    )
    with pytest.raises(InstrumentationError, match="slices"):
        read_counters(data[:-8], table)
    document = table.to_document()
    document["amdpal.instrumentation"][".slices"] = 0
    with pytest.raises(InstrumentationError, match="0 slices"):
        InstrumentationTable.from_document(document)
