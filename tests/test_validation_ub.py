"""Undefined behaviour checks (`--validate=ub`, SPEC 13): divisions and remainders by zero and
`INT_MIN / -1`, shifts by the width or more, `fptosi`/`fptoui` out of range or of NaN, `unreachable`
reached. Each planted error is reported at its site with the exact count, first invocation and operands
that a Python oracle of the program gives, the instruction yields 0 instead, and its clean twin reports
nothing and computes what the unchecked program computes (cpu on 1 and 2 threads, a GPU where present)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dprintf_cli import dprintf
from run_parts import table_of, validation_reports
from validation_runs import PLACES, entry, reports, run, words

from lowering.devices.harness import Ending
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
INVOCATIONS = 40
# (name, IR computing %r<name> as i32 from %id and %f (the ID as float)), in the order of their sites.
OPERATIONS = [
    ("udiv", "  %r = urem i32 %id, 3\n  %m = add i32 %r, {bump}\n  %rudiv = udiv i32 1000, %m\n"),
    ("srem", "  %rsrem = srem i32 %id, %m\n"),
    (
        "sdiv",
        "  %five = icmp eq i32 %id, 5\n  %d = select i1 %five, i32 {minus}, i32 7\n"
        "  %rsdiv = sdiv i32 -2147483648, %d\n",
    ),
    ("shl", "  %rshl = shl i32 1, {amount}\n"),
    ("fptosi", "  %g = fmul float %f, {scale}\n  %rfptosi = fptosi float %g to i32\n"),
    ("fptoui", "  %h = fsub float %f, {offset}\n  %rfptoui = fptoui float %h to i32\n"),
    (
        "nan",
        "  %seven = icmp eq i32 %id, 7\n  %z = select i1 %seven, float {zero}, float 1.0\n"
        "  %n = fdiv float 0.0, %z\n  %rnan = fptosi float %n to i32\n",
    ),
    (
        "vector",
        "  %v = insertelement <4 x i32> splat (i32 2), i32 %m, i32 2\n"
        "  %w = udiv <4 x i32> splat (i32 12), %v\n  %rvector = extractelement <4 x i32> %w, i32 2\n",
    ),
]
PLANTED = {"bump": "0", "minus": "-1", "amount": "%id", "scale": "1.0e8", "offset": "3.5", "zero": "0.0"}
CLEAN = {"bump": "1", "minus": "1", "amount": "%masked", "scale": "1.0e7", "offset": "-0.5", "zero": "2.0"}


def program(values: dict[str, str]) -> str:
    """Every operation of OPERATIONS, its result stored to %out[k * INVOCATIONS + id]."""
    body = "  %f = sitofp i32 %id to float\n  %masked = and i32 %id, 31\n"
    for number, (name, code) in enumerate(OPERATIONS):
        body += code.format(**values)
        body += (
            f"  %at{number} = add i64 %wide, {number * INVOCATIONS}\n"
            f"  %slot{number} = getelementptr i32, ptr addrspace(7) %out, i64 %at{number}\n"
            f"  store i32 %r{name}, ptr addrspace(7) %slot{number}\n"
        )
    return entry(body, buffers=["out"])


def oracle(values: dict[str, str]) -> tuple[dict[str, list[int]], list[list[int]]]:
    """The invocations each operation is undefined for, and the results (0 where undefined)."""
    planted = values is PLANTED
    bad: dict[str, list[int]] = {name: [] for name, _ in OPERATIONS}
    results = []
    for name, _ in OPERATIONS:
        column = []
        for n in range(INVOCATIONS):
            value, wrong = _operation(name, n, planted)
            if wrong:
                bad[name].append(n)
            column.append(0 if wrong else value)
        results.append(column)
    return bad, results


def _operation(name: str, n: int, planted: bool) -> tuple[int, bool]:
    """Operation `name` for invocation n: its i32 result (as unsigned bits) and whether it is undefined."""
    f = np.float32(n)
    m = n % 3 + (0 if planted else 1)
    if name == "srem":
        return (n % m if m else 0), m == 0
    if name in ("udiv", "vector"):
        numerator = {"udiv": 1000, "vector": 12}[name]
        return (numerator // m if m else 0), m == 0
    if name == "sdiv":
        divisor = (-1 if planted else 1) if n == 5 else 7
        wrong = divisor == -1
        return (0 if wrong else int(np.trunc(-(2**31) / divisor))) & 0xFFFFFFFF, wrong
    if name == "shl":
        amount = n if planted else n & 31
        return (1 << amount) & 0xFFFFFFFF if amount < 32 else 0, amount >= 32
    if name == "fptosi":
        g = float(f * np.float32(1.0e8 if planted else 1.0e7))
        return int(g) & 0xFFFFFFFF, not -(2.0**31) - 1 < g < 2.0**31
    if name == "fptoui":
        h = float(f - np.float32(3.5 if planted else -0.5))
        return int(h) & 0xFFFFFFFF if -1 < h < 2.0**32 else 0, not -1 < h < 2.0**32
    z = 0.0 if planted and n == 7 else 1.0
    return 0, z == 0.0  # 0.0 / z is 0 or NaN


@pytest.mark.parametrize("place", PLACES)
def test_each_planted_undefined_operation_is_reported_with_its_invocations_and_yields_zero(place):
    result = run(program(PLANTED), [4 * INVOCATIONS * len(OPERATIONS)], INVOCATIONS, place, validate="ub")
    bad, results = oracle(PLANTED)
    kinds = {"nan": "fptosi", "vector": "udiv"}
    assert reports(result) == [
        ("ub", kinds.get(name, name), "main", len(bad[name]), bad[name][0]) for name, _ in OPERATIONS
    ]
    found = words(result.data_buffers[0], INVOCATIONS * len(OPERATIONS))
    assert [value & 0xFFFFFFFF for value in found] == [value for column in results for value in column]
    lines = [report.line() for report in validation_reports(result)]
    assert "signed division overflow (-2147483648 / -1) (sdiv i32)" in lines[2]
    assert "shift by the width or more (shl i32), amounts 32..39" in lines[3]
    assert "(fptosi float to i32), invocation 22's 2.2e+09 (from 2.2e+09 to 3.9e+09)" in lines[4]
    assert "(fptosi float to i32), invocation 7's nan in @main" in lines[6]
    assert "division by zero (udiv <4 x i32>)" in lines[7]
    nan = next(
        report for report in validation_reports(result) if report.count == 1 and report.site.kind == "fptosi"
    )
    assert np.isnan(nan.example)


@pytest.mark.parametrize("place", PLACES)
def test_the_clean_twin_reports_nothing_and_computes_what_the_unchecked_program_does(place):
    size = [4 * INVOCATIONS * len(OPERATIONS)]
    checked = run(program(CLEAN), size, INVOCATIONS, place, validate="ub")
    unchecked = run(program(CLEAN), size, INVOCATIONS, place, validate=False)
    assert reports(checked) == []
    assert bytes(checked.data_buffers[0]) == bytes(unchecked.data_buffers[0])
    _, results = oracle(CLEAN)
    found = words(checked.data_buffers[0], INVOCATIONS * len(OPERATIONS))
    assert [value & 0xFFFFFFFF for value in found] == [value for column in results for value in column]


def test_operands_proven_in_range_are_not_checked():
    text = entry(
        "  %a = shl i32 %id, 3\n  %b = udiv i32 %id, 7\n  %c = sdiv i32 %id, -3\n"
        "  %m = and i32 %id, 31\n  %d = lshr i32 %id, %m\n"
        "  %e = ashr <2 x i32> splat (i32 5), <i32 1, i32 31>\n",
        buffers=[],
    )
    table = table_of(lower_sources([Source("test.ll", text)], validate="ub"), "validation")
    assert table.sites == () and table.removed == 5


def test_known_bits_prove_an_odd_divisor_and_a_short_shift_amount():
    """`or x, 1` is never 0 (unsigned divisions only: `sdiv` may meet -1); `lshr x, 27` of an i32 is
    below 32, `lshr x, 26` is not; `or x, 0` proves nothing."""
    text = entry(
        "  %odd = or i32 %id, 1\n  %q = udiv i32 -1, %odd\n  %r = urem i32 5, %odd\n"
        "  %s = sdiv i32 5, %odd\n  %same = or i32 %id, 0\n  %t = udiv i32 5, %same\n"
        "  %short = lshr i32 %id, 27\n  %a = shl i32 %q, %short\n"
        "  %long = lshr i32 %id, 26\n  %b = shl i32 %q, %long\n",
        buffers=[],
    )
    table = table_of(lower_sources([Source("test.ll", text)], validate="ub"), "validation")
    assert sorted(site.kind for site in table.sites) == ["sdiv", "shl", "udiv"]
    unproven = text.replace("or i32 %id, 1", "add i32 %id, 1").replace("lshr i32 %id, 27", "lshr i32 %id, 26")
    twin = table_of(lower_sources([Source("test.ll", unproven)], validate="ub"), "validation")
    assert sorted(site.kind for site in twin.sites) == ["sdiv", "shl", "shl", "udiv", "udiv", "urem"]
    assert table.removed - twin.removed == 3


NOINLINE_DIVISION = "define i32 @divide(i32 %a, i32 %b) noinline {\n  %q = sdiv i32 %a, %b\n  ret i32 %q\n}\n"


@pytest.mark.parametrize("place", PLACES)
def test_a_division_by_a_value_zero_for_some_invocations_in_a_noinline_function(place):
    body = (
        "  %m = urem i32 %id, 4\n  %b = sub i32 %m, 1\n"
        "  %q = call i32 @divide(i32 100, i32 %b)\n"
        "  %slot = getelementptr i32, ptr addrspace(7) %a, i64 %wide\n"
        "  store i32 %q, ptr addrspace(7) %slot\n"
    )
    result = run(entry(body, head=NOINLINE_DIVISION), [4 * 24], 24, place, validate="ub")
    zero = [n for n in range(24) if n % 4 == 1]
    assert reports(result) == [("ub", "sdiv", "divide", len(zero), 1)]
    expected = [0 if n % 4 == 1 else int(100 / (n % 4 - 1)) for n in range(24)]
    assert words(result.data_buffers[0], 24) == expected


UNREACHABLE = entry(
    "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf, "
    "ptr addrspace(4) @fmt, i32 %id)\n"
    "  %five = icmp eq i32 %id, 5\n  br i1 %five, label %bad, label %good\nbad:\n  unreachable\ngood:\n",
    buffers=[],
    head='@fmt = private unnamed_addr addrspace(4) constant [4 x i8] c"%u\\0A\\00"\n',
)


@pytest.mark.parametrize("place", PLACES)
def test_unreachable_reached_is_reported_and_ends_the_device_as_an_abort(place):
    result = run(UNREACHABLE, [], 12, place, validate="ub")
    assert reports(result) == [("ub", "unreachable", "main", 1, 5)]
    assert result.ending is Ending.ABORTED and result.loss == "an invocation reached `unreachable`"
    printed = [int(word) for word in result.printf.text().split()]
    assert 5 in printed and len(set(printed)) == len(printed)
    if place == ("cpu", 1):
        assert printed == list(range(6))  # in order, and nothing after the invocation lost


def test_the_command_reports_unreachable_reached_and_exits_3(tmp_path):
    source = tmp_path / "unreachable.ll"
    source.write_text(UNREACHABLE)
    done = dprintf("run", str(source), "--validate=ub", "--invocations", "12")
    assert done.returncode == 3
    assert done.stdout.split() == [str(n) for n in range(6)]
    assert done.stderr.splitlines() == [
        "error: `unreachable` reached in @main: 1 invocation, first 5",
        "error: device lost: an invocation reached `unreachable`",
    ]


# The same program with a debug location on its `unreachable`, which was then never a site: LLVM folded
# the branch to it away, and the command exited 0.
UNREACHABLE_LOCATED = (
    UNREACHABLE.replace("%id) {", "%id) !dbg !10 {").replace("  unreachable\n", "  unreachable, !dbg !11\n")
    + "!llvm.dbg.cu = !{!0}\n!llvm.module.flags = !{!2}\n"
    + "!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, emissionKind: FullDebug)\n"
    + '!1 = !DIFile(filename: "unreachable.c", directory: "/src")\n'
    + '!2 = !{i32 2, !"Debug Info Version", i32 3}\n'
    + '!10 = distinct !DISubprogram(name: "main", file: !1, line: 2, type: !12, unit: !0, '
    + "spFlags: DISPFlagDefinition)\n"
    + "!11 = !DILocation(line: 5, column: 3, scope: !10)\n"
    + "!12 = !DISubroutineType(types: !{})\n"
)


def test_an_unreachable_with_a_debug_location_is_a_site_reported_at_its_source_line(tmp_path):
    source = tmp_path / "unreachable.ll"
    source.write_text(UNREACHABLE_LOCATED)
    done = dprintf("run", str(source), "--validate=ub", "--invocations", "12")
    assert done.returncode == 3
    assert done.stdout.split() == [str(n) for n in range(6)]
    assert done.stderr.splitlines() == [
        "error: `unreachable` reached in @main at unreachable.c:5:3: 1 invocation, first 5",
        "error: device lost: an invocation reached `unreachable`",
    ]


def test_the_unreachable_after_an_abort_is_not_a_site():
    text = (SAMPLES / "abort.ll").read_text()
    table = table_of(lower_sources([Source("abort.ll", text)], validate="ub"), "validation")
    assert table.sites == ()
    result = run(
        text.replace("i32 %invocation_id)", "i32 %invocation_id, ptr addrspace(7) %unused)"),
        [4],
        8,
        validate="ub",
    )
    assert result.ending is Ending.ABORTED and validation_reports(result) == ()
    assert [message.text for message in result.abort.messages] == [
        "invocation 3: value -20 is negative (limit 0.0)"
    ]


def test_the_command_line_takes_classes_after_an_equals_sign(tmp_path):
    source = tmp_path / "ub.ll"
    source.write_text(program(PLANTED))
    done = dprintf(
        "run",
        str(source),
        "--validate=ub,bounds",
        "--buffer",
        str(4 * INVOCATIONS * len(OPERATIONS)),
        "--invocations",
        str(INVOCATIONS),
    )
    assert done.returncode == 4
    errors = done.stderr.splitlines()
    assert (
        len(errors) == len(OPERATIONS)
        and errors[0] == "error: division by zero (udiv i32) in @main: 14 invocations, first 0"
    )
    lowered = dprintf("lower", "--validate", str(source))  # a bare --validate takes no argument
    assert lowered.returncode == 0 and "lgc.validation.buffer.sizes" in lowered.stdout
    assert "udiv" in lowered.stdout and "validation.report" not in dprintf("lower", str(source)).stdout
    wrong = dprintf("run", str(source), "--validate=bounds,races")
    assert wrong.returncode == 2 and "unknown validation class 'races'" in wrong.stderr


def test_decode_reports_a_dump_with_the_sites_of_the_elf(tmp_path):
    source, elf, dump = tmp_path / "ub.ll", tmp_path / "ub.o", tmp_path / "printf.bin"
    source.write_text(program(PLANTED))
    compiled = dprintf("compile", str(source), "--target", "cpu", "--validate=ub", "-o", str(elf))
    assert compiled.returncode == 0, compiled.stderr
    result = run(program(PLANTED), [4 * INVOCATIONS * len(OPERATIONS)], INVOCATIONS, validate="ub")
    dump.write_bytes(bytes(result.printf_buffer))
    decoded = dprintf("decode", str(dump), "--elf", str(elf))
    assert decoded.returncode == 4
    assert decoded.stderr.splitlines() == [f"error: {report.line()}" for report in validation_reports(result)]


def test_the_gpu_code_carries_the_checks():
    from lowering.devices.device import EntryPoint
    from lowering.devices.nvptx import kernel_ptx
    from lowering.targets.runtime_globals import DATA_SIZES_GLOBAL
    from metadata.validation.live_ranges import VALIDATION_RANGES_GLOBAL

    sources = [
        Source("ub.ll", program(PLANTED)),
        Source("other.ll", UNREACHABLE.replace("@main(", "@other(")),
    ]
    lowered = lower_sources(sources, "nvptx", validate="all")
    globals_ = [DATA_SIZES_GLOBAL, VALIDATION_RANGES_GLOBAL]
    ptx = kernel_ptx(lowered.ir, EntryPoint("main", False, 1), runtime_globals=globals_)
    assert "lgc_validation_buffer_sizes" in ptx and "lgc_validation_ranges" in ptx
    assert "atom.global.or.b64" in ptx  # the stores mark their bytes written
    assert "trap;" in ptx  # @other's unreachable, reached


CPU_PLACES = [place for place in PLACES if place.values[0][0] == "cpu"]
NAN, INFINITY = float("nan"), float("inf")
# (float type, integer type, NumPy's types, values converted: defined, then undefined): the least
# defined value is -2^(N-1), where -2^(N-1)-1 is not a float of the type (float, double and half: the
# test is x < -2^(N-1)), and is a double for i32 (the test is x <= -2^31-1).
BOUNDS = [
    ("float", "i32", np.float32, np.int32, [-(2.0**31), 2147483520.0, -7.9], [-2147483904.0, 2.0**31]),
    (
        "double",
        "i64",
        np.float64,
        np.int64,
        [-(2.0**63), 9223372036854774784.0, 1.5],
        [-9223372036854777856.0, 2.0**63],
    ),
    ("half", "i16", np.float16, np.int16, [-32768.0, 32752.0, -3.5], [-32800.0, 32768.0]),
    ("double", "i32", np.float64, np.int32, [-2147483648.9, 2147483647.9, 2.5], [-2147483649.0, 2.0**31]),
]


@pytest.mark.parametrize("place", CPU_PLACES)
@pytest.mark.parametrize(
    ("source", "target", "floats", "integers", "defined", "undefined"),
    BOUNDS,
    ids=[f"{source}-{target}" for source, target, *_ in BOUNDS],
)
def test_fptosi_at_the_bounds_of_the_integer_type(
    place, source, target, floats, integers, defined, undefined
):
    """Each value in an invocation of its own: the least defined (-2^(N-1)) converts to INT_MIN
    unreported (to i64 it was reported while Python's floats rounded -2^63-1 to -2^63), and the
    greatest converts; the float below it, 2^(N-1), NaN and the infinities are reported and yield 0.
    The checks are the lowering's, the same for every target: the cpu runs them."""
    values = [*defined, *undefined, NAN, INFINITY, -INFINITY]
    body = (
        f"  %in.at = getelementptr {source}, ptr addrspace(7) %in, i64 %wide\n"
        f"  %x = load {source}, ptr addrspace(7) %in.at\n"
        f"  %r = fptosi {source} %x to {target}\n"
        f"  %out.at = getelementptr {target}, ptr addrspace(7) %out, i64 %wide\n"
        f"  store {target} %r, ptr addrspace(7) %out.at\n"
    )
    buffers = [floats(values).tobytes(), np.dtype(integers).itemsize * len(values)]
    result = run(entry(body, buffers=["in", "out"]), buffers, len(values), place, validate="ub")
    bad = len(defined)
    assert reports(result) == [("ub", "fptosi", "main", len(values) - bad, bad)]
    assert validation_reports(result)[0].example == floats(undefined[0])
    assert validation_reports(result)[0].values == (-INFINITY, INFINITY)
    found = np.frombuffer(bytes(result.data_buffers[1]), integers)
    assert found.tolist() == [int(floats(value)) for value in defined] + [0] * (len(values) - bad)
    assert found[0] == np.iinfo(integers).min
