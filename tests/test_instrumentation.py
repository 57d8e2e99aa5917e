"""Shader instrumentation (SPEC section 10): the pass, the table, exact counts on the cpu device.

The oracle for counts is `instrumented_programs`: random structured shaders interpreted in Python from
the same invocation IDs. The table is checked against the decoder and against llvm-readelf-14 and
pyelftools (`elf_oracles`).
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from dprintf_cli import DPRINTF
from elf_oracles import Reader, each_reader
from run_parts import profile_of, table_of

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import find_entry, run_lowered, run_sources
from lowering.devices.nvptx import kernel_ptx
from lowering.features.instrumentation.counter_flush import CounterFlush
from lowering.features.instrumentation.edge_counters import edge_plan
from lowering.ir.reading import parse_source
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.machines import module_layout, optimize, target_machine
from lowering.targets.target import CounterPlacement, get_target
from metadata.elf_notes import read_document
from metadata.instrumentation.arm_values import arm_values, arm_values_document
from metadata.instrumentation.table import (
    INSTRUMENTATION_KEY,
    METRIC_NAMES,
    BlockInfo,
    InstrumentationError,
    InstrumentationTable,
    read_counter_values,
    read_counters,
)
from tests.instrumented_programs import Program
from tests.warp_interpreter import LANES, Warp

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
GPUS, NO_GPU = gpu_count()
gpu = pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")
AT_SCALE = 1 << 24
METRIC = {name: index for index, name in enumerate(METRIC_NAMES)}


def _counts_by_label(result) -> Counter:
    profile = profile_of(result)
    return Counter(
        {
            (block.function, block.block.lstrip("%")): count
            for block, count in zip(profile.table.blocks, profile.counts, strict=True)
        }
    )


@pytest.mark.parametrize("placement", list(CounterPlacement), ids=lambda placement: placement.value)
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threads", [1, 2])
def test_generated_shaders_count_every_block_exactly(seed: int, threads: int, placement) -> None:
    program = Program(seed)
    invocations = 97
    target = dataclasses.replace(get_target("cpu"), counter_placement=placement)
    lowered = lower_sources([Source(f"generated{seed}.ll", program.ir())], target, instrument=True)
    result = run_lowered(lowered, invocations=invocations, threads=threads)
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
    table = profile_of(result).table
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
    table = table_of(lowered, "instrumentation")
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


def test_a_landing_pad_keeps_its_clauses_when_its_block_is_counted() -> None:
    """LLVM prints an invoke's destinations and a landing pad's clauses on lines of their own; read as
    instructions of their own, a counter went between the landing pad and its `cleanup` (invalid IR)."""
    text = (
        "declare i32 @personality(...)\n"
        "define void @other() {\n  ret void\n}\n"
        "define void @main(ptr addrspace(7) %printf, i32 %id) personality ptr @personality {\n"
        "entry:\n  invoke void @other() to label %go unwind label %caught\n"
        "caught:\n  %pad = landingpad { ptr, i32 } cleanup\n  resume { ptr, i32 } %pad\n"
        "go:\n  ret void\n}\n"
    )
    lowered = lower_sources([Source("invoke.ll", text)], instrument=True)
    assert table_of(lowered, "instrumentation") is not None
    assert [(block.function, block.block) for block in table_of(lowered, "instrumentation").blocks] == [
        ("other", "%0"),
        ("main", "entry"),
        ("main", "caught"),
        ("main", "go"),
    ]


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
    assert table_of(expected, "instrumentation") is not None and table == table_of(
        expected, "instrumentation"
    )
    document = reader.notes(output).document
    assert document is not None
    assert (
        document[INSTRUMENTATION_KEY]
        == table_of(expected, "instrumentation").to_document()[INSTRUMENTATION_KEY]
    )
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
    assert table_of(lowered, "instrumentation") is not None
    document = reader.notes(output).document
    assert document is not None and "amdpal.format_strings" in document
    assert (
        document[INSTRUMENTATION_KEY]
        == table_of(lowered, "instrumentation").to_document()[INSTRUMENTATION_KEY]
    )


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
    assert document == json.loads(json.dumps(profile_of(result).to_document()))
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
    assert values.read_bytes() == arm_values(profile_of(result))
    assert json.loads(Path(f"{values}.json").read_text()) == arm_values_document(profile_of(result))
    text = page.read_text()
    assert "profile.c" in text and "sqrtf(distance)" in text and "<script" not in text
    assert done.stdout == profile_of(result).report()


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


@pytest.mark.parametrize("placement", list(CounterPlacement), ids=lambda placement: placement.value)
def test_a_buffer_of_several_slices_sums_them(placement: CounterPlacement) -> None:
    """`.slices` copies of the counters (nvptx: four a multiprocessor); a counter is their sum, and a
    block's count its counter's, or (counters on edges) what its `.count` makes of them."""
    target = dataclasses.replace(get_target("nvptx"), counter_placement=placement)
    lowered = lower_sources(
        [Source("profile.ll", (SAMPLES / "profile.ll").read_text())], target, instrument=True
    )
    table = table_of(lowered, "instrumentation")
    counters = table.counter_count
    assert (
        counters == len(table.blocks)
        if placement is CounterPlacement.BLOCKS
        else counters < len(table.blocks)
    )
    assert table.slices == 512 and table.buffer_size() == 16 + 8 * counters * 512
    assert InstrumentationTable.from_document(table.to_document()) == table
    copies = [(slice_ * 1000 + counter) for slice_ in range(table.slices) for counter in range(counters)]
    data = table.initial_buffer()[:16] + b"".join(count.to_bytes(8, "little") for count in copies)
    summed = tuple(
        sum(slice_ * 1000 + counter for slice_ in range(table.slices)) for counter in range(counters)
    )
    assert read_counter_values(data, table) == summed
    assert read_counters(data, table) == table.block_counts(summed)
    with pytest.raises(InstrumentationError, match="slices"):
        read_counters(data[:-8], table)
    document = table.to_document()
    document["amdpal.instrumentation"][".slices"] = 0
    with pytest.raises(InstrumentationError, match="0 slices"):
        InstrumentationTable.from_document(document)


# Counters on edges (`CounterPlacement.EDGES`): the plan, against walks through random graphs.


def _random_graph(rng: random.Random) -> tuple[list[list[int]], list[bool]]:
    """A function's graph: each block's distinct successors (never the entry), and whether it exits."""
    blocks = rng.randint(1, 12)
    successors = [rng.sample(range(1, blocks), min(blocks - 1, rng.randint(0, 3))) for _ in range(blocks)]
    exits = [not targets or rng.random() < 0.2 for targets in successors]
    return successors, exits


def _walk(successors, exits, rng: random.Random) -> list[tuple[int, int | None]] | None:
    """The edges of one call (None for leaving), or None for a walk that does not leave in 300 steps."""
    block, taken = 0, []
    for _ in range(300):
        choices = [*successors[block], *([None] if exits[block] else [])]
        following = rng.choice(choices)
        taken.append((block, following))
        if following is None:
            return taken
        block = following
    return None


@pytest.mark.parametrize("seed", range(300))
def test_edge_counters_give_every_block_its_count(seed: int) -> None:
    """Random graphs, random calls through them: each counter adds where the plan places it, and each
    block's count worked out from the counters equals the times the calls entered it."""
    rng = random.Random(seed)
    successors, exits = _random_graph(rng)
    plan = edge_plan(successors, exits)
    entered = [0] * len(successors)
    counters = [0] * len(plan.placements)
    for _ in range(rng.randint(0, 40)):
        walk = _walk(successors, exits, rng)
        if walk is None:
            continue
        for block, following in walk:
            entered[block] += 1
            for k, placement in enumerate(plan.placements):
                if placement.block != block:
                    continue
                counters[k] += {
                    "start": 1,
                    "end": following is not None,
                    "exits": following is None,
                    "taken": following == placement.successor,
                }[placement.at]
    table = InstrumentationTable(
        tuple(_block(index, count) for index, count in enumerate(plan.counts)), counters=len(counters)
    )
    assert table.block_counts(counters) == tuple(entered)
    edges = sum(map(len, successors)) + sum(exits) + 1  # and the entry's, from the virtual node
    assert len(counters) == edges - (len(successors) + 1) + _parts(successors, exits), "one a cycle"


def _parts(successors: list[list[int]], exits: list[bool]) -> int:
    """The connected parts of the graph of the blocks and the virtual node (the last), undirected."""
    virtual = len(successors)
    neighbours: dict[int, set[int]] = {node: set() for node in range(virtual + 1)}
    pairs = [(virtual, 0), *((b, t) for b, targets in enumerate(successors) for t in targets)]
    pairs += [(b, virtual) for b, leaves in enumerate(exits) if leaves]
    for first, second in pairs:
        neighbours[first].add(second)
        neighbours[second].add(first)
    seen: set[int] = set()
    parts = 0
    for node in neighbours:
        if node not in seen:
            parts += 1
            work = [node]
            while work:
                found = work.pop()
                if found not in seen:
                    seen.add(found)
                    work += neighbours[found]
    return parts


def _block(index: int, count) -> BlockInfo:
    return BlockInfo(index, "f", f"b{index}", None, None, None, (1,) * len(METRIC_NAMES), (), count)


def test_a_table_of_counters_on_edges_round_trips_and_refuses_counts_it_cannot_make() -> None:
    target = dataclasses.replace(get_target("cpu"), counter_placement=CounterPlacement.EDGES)
    source = Source("profile.ll", (SAMPLES / "profile.ll").read_text())
    table = table_of(lower_sources([source], target, instrument=True), "instrumentation")
    document = table.to_document()
    found = document["amdpal.instrumentation"]
    assert found[".counters"] == table.counters < len(table.blocks)
    assert all(set(block[".count"]) == {".add", ".subtract"} for block in found[".blocks"])
    assert InstrumentationTable.from_document(document) == table
    missing = json.loads(json.dumps(document))
    del missing["amdpal.instrumentation"][".blocks"][1][".count"]
    with pytest.raises(InstrumentationError, match="block 1 has no .count"):
        InstrumentationTable.from_document(missing)
    outside = json.loads(json.dumps(document))
    outside["amdpal.instrumentation"][".blocks"][2][".count"][".add"] = [table.counters]
    with pytest.raises(InstrumentationError, match="block 2 counts with a counter outside"):
        InstrumentationTable.from_document(outside)
    by_block = json.loads(json.dumps(document))
    del by_block["amdpal.instrumentation"][".counters"]
    with pytest.raises(InstrumentationError, match="has a .count, but the table has no .counters"):
        InstrumentationTable.from_document(by_block)


def test_a_count_below_zero_from_flushes_an_abort_cut_short_reads_as_zero() -> None:
    blocks = (_block(0, ((0,), (1,))), _block(1, ((1,), ())))
    table = InstrumentationTable(blocks, counters=2)
    assert table.block_counts([5, 7]) == (0, 7)
    assert table.block_counts([7, 5]) == (2, 5)
    assert read_counters(table.buffer([7, 5]), table) == (2, 5)


class _RandomFlow:
    """A function of random control flow, and an interpreter of it: blocks `b0 .. b{n-1}` that each
    step a generator of the invocation, spend fuel and branch on the result (`switch`es whose default
    leaves or goes to a block, several cases to one block; `br i1` between two blocks), and `exit`. Its
    edges include the critical ones that counters count by a branch's condition."""

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.blocks = rng.randint(2, 9)
        self.kinds: list[tuple[str, list[int | None]]] = []
        for block in range(self.blocks):
            kind = "switch" if block == self.blocks - 1 else rng.choice(["switch", "default", "branch"])
            if kind == "branch":
                later = [*range(block + 1, self.blocks), None]
                targets = [rng.randrange(1, self.blocks), rng.choice(later)]
            else:
                targets = [
                    rng.randrange(1, self.blocks)
                    for _ in range(rng.randint(2 if kind == "default" else 1, 3))
                ]
            self.kinds.append((kind, targets))

    def ir(self) -> str:
        code = [
            "define void @main(ptr addrspace(7) %printf_buffer, i32 %id) {",
            "b0:",
            "  %state = alloca i32\n  %fuel = alloca i32",
            "  %seed = mul i32 %id, -1640531535\n  store i32 %seed, ptr %state\n  store i32 12, ptr %fuel",
        ]
        for block, (kind, targets) in enumerate(self.kinds):
            if block:
                code.append(f"b{block}:")
            n = f".{block}"
            code.append(
                f"  %s{n} = load i32, ptr %state\n  %s1{n} = mul i32 %s{n}, 1664525\n"
                f"  %s2{n} = add i32 %s1{n}, 1013904223\n  store i32 %s2{n}, ptr %state\n"
                f"  %f{n} = load i32, ptr %fuel\n  %f1{n} = sub i32 %f{n}, 1\n  store i32 %f1{n}, ptr %fuel\n"
                f"  %h{n} = lshr i32 %s2{n}, 16\n  %empty{n} = icmp sle i32 %f1{n}, 0"
            )
            label = [f"%b{target}" if target is not None else "%exit" for target in targets]
            if kind == "switch":
                cases = " ".join(f"i32 {k}, label {label[k]}" for k in range(len(targets)))
                code.append(
                    f"  %m{n} = urem i32 %h{n}, {len(targets) + 1}\n"
                    f"  %c{n} = select i1 %empty{n}, i32 {len(targets)}, i32 %m{n}\n"
                    f"  switch i32 %c{n}, label %exit [ {cases} ]"
                )
            elif kind == "default":
                cases = " ".join(f"i32 {k}, label {label[k]}" for k in range(1, len(targets)))
                code.append(
                    f"  %m{n} = urem i32 %h{n}, {len(targets)}\n"
                    f"  %c{n} = select i1 %empty{n}, i32 99, i32 %m{n}\n"
                    f"  switch i32 %c{n}, label {label[0]} [ {cases} i32 99, label %exit ]"
                )
            else:
                code.append(
                    f"  %bit{n} = and i32 %h{n}, 1\n  %odd{n} = icmp ne i32 %bit{n}, 0\n"
                    f"  %go{n} = select i1 %empty{n}, i1 false, i1 %odd{n}\n"
                    f"  br i1 %go{n}, label {label[0]}, label {label[1]}"
                )
        return "\n".join([*code, "exit:\n  ret void\n}\n"])

    def counts(self, invocations: int) -> Counter:
        entered: Counter = Counter()
        for id_ in range(invocations):
            state, fuel, block = (id_ * 2654435761) % (1 << 32), 12, 0
            while block is not None:
                entered[f"b{block}"] += 1
                state = (state * 1664525 + 1013904223) % (1 << 32)
                fuel -= 1
                high, empty = state >> 16, fuel <= 0
                kind, targets = self.kinds[block]
                if kind == "switch":
                    choice = len(targets) if empty else high % (len(targets) + 1)
                    block = targets[choice] if choice < len(targets) else None
                elif kind == "default":
                    block = None if empty else targets[high % len(targets)]
                else:
                    block = targets[0] if not empty and high & 1 else targets[1]
            entered["exit"] += 1
        return entered


@pytest.mark.parametrize("seed", [*range(16), 41, 50])  # 41 and 50 count an edge `br i1` takes when true
def test_random_control_flow_counts_every_block_exactly_with_counters_on_edges(seed: int) -> None:
    """Counters on edges, every kind of place included (a switch's case and default, a branch's either
    side), against the interpreter."""
    flow = _RandomFlow(seed)
    target = dataclasses.replace(get_target("cpu"), counter_placement=CounterPlacement.EDGES)
    lowered = lower_sources([Source(f"flow{seed}.ll", flow.ir())], target, instrument=True)
    result = run_lowered(lowered, invocations=200)
    counted = {label: count for (_, label), count in _counts_by_label(result).items() if count}
    assert counted == dict(flow.counts(200))


@pytest.mark.parametrize("seed", range(40))
def test_a_warps_flush_adds_each_count_summed_over_its_active_lanes(seed: int) -> None:
    """The nvptx flush helper, run by `warp_interpreter` on a warp of random active lanes and counts
    (small ones summed by one `redux.sync`, counts of 2^27 and more in pieces, counts every lane shares
    as LLVM's constants): each counter of the copy its multiprocessor and warp slot pick gains its lanes'
    sum, modulo 2^64."""
    rng = random.Random(seed)
    target = get_target("nvptx")
    flush = CounterFlush(target, module_layout("nvptx")[1])
    counters, blocks = rng.randint(1, 6), 10
    first = rng.randrange(blocks - counters + 1)
    function = flush.helpers.get_global(flush.define("flush", first, counters, blocks))
    # The copy: the multiprocessor's number (132 on an H100, beyond the copies' 128 too) and the warp's
    # slot there (of 64), four copies a multiprocessor.
    sm, slot = rng.randrange(132), rng.randrange(64)
    pointer, buffer = 0x100, 0x10_0000
    warp = Warp(
        globals={flush.buffer_global.name: pointer},
        registers={"smid": [sm] * LANES, "warpid": [slot] * LANES},
    )
    warp.memory.write(pointer, buffer.to_bytes(8, "little"))
    mask = rng.randrange(1, 1 << LANES)
    kinds = [rng.choice(["small", "medium", "wide", "shared", "zero"]) for _ in range(counters)]
    shared = [rng.randrange(1 << 20) for _ in range(counters)]
    values = {
        "small": lambda k: rng.randrange(1 << 27),
        "medium": lambda k: rng.randrange(1 << 27, 1 << 32),  # 32 lanes' sum needs more than 32 bits
        "wide": lambda k: rng.randrange(1 << 64),
        "shared": lambda k: shared[k],
        "zero": lambda k: 0,
    }
    counts = [[values[kind](k) for k, kind in enumerate(kinds)] for _ in range(LANES)]
    warp.run(function, mask, counts)
    copy = buffer + 16 + 8 * blocks * ((4 * sm + slot % 4) % target.counter_slices)
    for k in range(counters):
        added = int.from_bytes(warp.memory.read(copy + 8 * (first + k), 8), "little")
        assert added == sum(counts[lane][k] for lane in range(LANES) if mask >> lane & 1) % (1 << 64), kinds[
            k
        ]
    assert set(warp.memory.bytes) <= {
        *range(pointer, pointer + 8),
        *range(copy + 8 * first, copy + 8 * (first + counters)),
    }


def test_printf_counted_on_nvptx_is_inlined_so_its_blocks_are_charged_to_the_lines_that_call_it() -> None:
    """nvptx makes printf a cold call, whose function has no source lines; counting blocks inlines it."""
    source = Source("profile.ll", (SAMPLES / "profile.ll").read_text())
    cold = dataclasses.replace(get_target("nvptx"), cold_printf=True)
    assert "define internal void @dprintf.printf" in lower_sources([source], cold).ir
    lowered = lower_sources([source], cold, instrument=True)
    assert "@dprintf.printf" not in lowered.ir
    write = next(
        block for block in table_of(lowered, "instrumentation").blocks if block.block.startswith("write")
    )
    assert write.function == "main" and write.source == "profile.c:15"
