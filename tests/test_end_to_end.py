"""IR to text through the whole chain: lowering, the JIT, the buffer, the decoder; the oracle is C's snprintf.

Every argument type of SPEC section 1, scalar and every vector width, with the conversions that take it
(flags, widths, precisions, lengths), over boundary values given as constants, and values the code
computes from the invocation ID.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy
import pytest
from dprintf_ir import DECLARATIONS, PRINTF, c_format, call, constant, run_ir, string_global

from lowering.devices.harness import Ending
from metadata.layout import VECTOR_WIDTHS

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
INF, NAN = math.inf, math.nan
VALUES = {
    "i1": [0, 1],
    "i8": [0, 1, 127, 128, 255, 42],
    "i16": [0, 1, 0x7FFF, 0x8000, 0xFFFF, 12345],
    "i32": [0, 1, -1, 0x7FFF_FFFF, -0x8000_0000, 123456789],
    "i64": [0, 1, -1, (1 << 63) - 1, -(1 << 63), 1234567890123456789, 1 << 32],
    "half": [0.0, -0.0, 1.0, -2.5, 65504.0, 2.0**-14, 2.0**-24, INF, -INF, NAN, 0.1],
    "float": [0.0, -0.0, 1.5, -3.25e10, 1e-40, 3.4028234663852886e38, INF, -INF, NAN, 0.1],
    "double": [0.0, -0.0, 1 / 3, -1e300, 5e-324, 1e100, INF, -INF, NAN, 0.1, 123456.789],
}
CHARACTERS = [65, 122, 48, 33, 126]
# (flags, width and precision; length; conversion): C's spec is their concatenation, dprintf's puts `v<N>`
# before the length.
INTEGER_SPECS = [
    ("%", "", "d"), ("%", "", "i"), ("%", "", "u"), ("%", "", "o"), ("%", "", "x"), ("%", "", "X"),
    ("%#", "", "x"), ("%#", "", "o"), ("%+", "", "d"), ("% ", "", "d"), ("%-6", "", "d"), ("%05", "", "u"),
    ("%.3", "", "d"), ("%", "hh", "d"), ("%", "hh", "u"), ("%", "h", "d"), ("%#", "h", "x"),
]  # fmt: skip
CHARACTER_SPECS = [("%", "", "c"), ("%-3", "", "c")]
INTEGER64_SPECS = [
    ("%", "ll", "d"), ("%", "ll", "i"), ("%", "ll", "u"), ("%", "ll", "o"), ("%", "ll", "x"),
    ("%#", "ll", "X"), ("%+", "ll", "d"), ("%", "l", "d"), ("%", "l", "u"), ("%24", "ll", "d"),
    ("%-24", "ll", "x"), ("%.21", "ll", "d"),
]  # fmt: skip
FLOAT_SPECS = [
    ("%", "", "f"), ("%", "", "F"), ("%", "", "e"), ("%", "", "E"), ("%", "", "g"), ("%", "", "G"),
    ("%", "", "a"), ("%", "", "A"), ("%.3", "", "f"), ("%10.2", "", "e"), ("%-12", "", "g"),
    ("%+.0", "", "f"), ("%#", "", "g"), ("% .5", "", "e"), ("%", "l", "f"), ("%#.0", "", "e"),
    ("%012.4", "", "f"), ("%.0", "", "a"),
]  # fmt: skip


def specs_for(scalar: str) -> list[tuple[tuple[str, str, str], list]]:
    if scalar in ("half", "float", "double"):
        return [(spec, VALUES[scalar]) for spec in FLOAT_SPECS]
    if scalar == "i64":
        return [(spec, VALUES[scalar]) for spec in INTEGER64_SPECS]
    characters = [(spec, CHARACTERS) for spec in CHARACTER_SPECS] if scalar != "i1" else []
    return [(spec, VALUES[scalar]) for spec in INTEGER_SPECS] + characters


def arguments_for(values: list, width: int) -> list:
    """Scalars: each value. Vectors: the values in order, `width` to a vector, the last one filled up
    from the start."""
    if not width:
        return list(values)
    vectors = -(-len(values) // width)
    return [
        [values[(first * width + lane) % len(values)] for lane in range(width)] for first in range(vectors)
    ]


class Program:
    """Builds a module and, beside it, the text C's printf prints for each call."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self.body: list[str] = []

    def printf(self, format_text: str, arguments: list[tuple[str, str]]) -> None:
        name = f"fmt{len(self.strings)}"
        self.strings.append(string_global(name, format_text))
        self.body.append(call(PRINTF, "%buf", name, arguments))


def constants_program() -> tuple[Program, str]:
    """One printf per type, width and spec, all its values as constants; and the expected text."""
    program, expected = Program(), []
    for scalar in VALUES:
        for width in (0, *VECTOR_WIDTHS):
            ir_type = f"<{width} x {scalar}>" if width else scalar
            for (prefix, length, conversion), values in specs_for(scalar):
                vector = f"v{width}" if width else ""
                dprintf_spec = f"{prefix}{vector}{length}{conversion}"
                c_spec = f"{prefix}{length}{conversion}"
                arguments = arguments_for(values, width)
                label = f"{ir_type} [{c_spec}]:"
                program.printf(
                    label.replace("%", "%%") + f" {dprintf_spec}" * len(arguments) + "|\n",
                    [(ir_type, constant(ir_type, argument)) for argument in arguments],
                )
                expected.append(
                    label + "".join(f" {c_format(c_spec, ir_type, a)}" for a in arguments) + "|\n"
                )
    return program, "".join(expected)


DERIVED = """\
  %product = mul i32 %id, 7919
  %b = sub i32 %product, 50000
  %b8 = trunc i32 %b to i8
  %b16 = trunc i32 %b to i16
  %b64 = sext i32 %b to i64
  %w64 = mul i64 %b64, 3000000000
  %h = sitofp i32 %b to half
  %f = sitofp i32 %b to float
  %fq = fdiv float %f, 7.000000e+00
  %d = sitofp i32 %b to double
  %dq = fdiv double %d, 3.000000e+00
  %v = insertelement <4 x i32> <i32 1, i32 2, i32 3, i32 4>, i32 %b, i32 2
  %vf = insertelement <3 x float> <float 1.500000e+00, float 0.0, float -2.000000e+00>, float %fq, i32 0
"""
DERIVED_FORMAT = "derived %d %hhd %hu %lld %llx %g %f %.9e %a %v4x %.3v3f %c\n"
DERIVED_ARGUMENTS = [
    ("i32", "%b"), ("i8", "%b8"), ("i16", "%b16"), ("i64", "%w64"), ("i64", "%w64"), ("half", "%h"),
    ("float", "%fq"), ("double", "%dq"), ("double", "%dq"), ("<4 x i32>", "%v"), ("<3 x float>", "%vf"),
    ("i32", "%letter"),
]  # fmt: skip


def derived_text(invocation: int) -> str:
    """What C prints for DERIVED_FORMAT with the values DERIVED computes for `invocation`."""
    b = numpy.int32(numpy.uint32((invocation * 7919 - 50000) & 0xFFFF_FFFF).view(numpy.int32))
    w64 = (int(b) * 3_000_000_000) & ((1 << 64) - 1)
    fq = numpy.float32(b) / numpy.float32(7)
    dq = float(b) / 3.0
    values = [
        ("%d", "i32", int(b)), ("%hhd", "i8", int(b)), ("%hu", "i16", int(b)), ("%lld", "i64", w64),
        ("%llx", "i64", w64), ("%g", "half", float(numpy.float16(b))), ("%f", "float", float(fq)),
        ("%.9e", "double", dq), ("%a", "double", dq), ("%x", "<4 x i32>", [1, 2, int(b), 4]),
        ("%.3f", "<3 x float>", [float(fq), 0.0, -2.0]), ("%c", "i32", 97 + invocation),
    ]  # fmt: skip
    pieces = iter(c_format(spec, ir_type, value) for spec, ir_type, value in values)
    return "derived " + " ".join(pieces) + "\n"


def test_every_type_width_and_conversion_prints_what_c_prints():
    constants, expected_constants = constants_program()
    module = (
        "".join(constants.strings)
        + string_global("derived", DERIVED_FORMAT)
        + DECLARATIONS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + "  %first = icmp eq i32 %id, 0\n  br i1 %first, label %constants, label %derived\n"
        + "constants:\n"
        + "".join(constants.body)
        + "  br label %derived\nderived:\n"
        + DERIVED
        + "  %letter = add i32 %id, 97\n"
        + call(PRINTF, "%buf", "derived", DERIVED_ARGUMENTS)
        + "  ret void\n}\n"
    )
    invocations = 4
    result = run_ir(module, invocations=invocations)
    assert result.ending is Ending.COMPLETED and result.issues == []
    assert result.printf.dropped_dwords == 0
    expected = expected_constants + "".join(derived_text(n) for n in range(invocations))
    got = result.text()
    for got_line, expected_line in zip(got.splitlines(), expected.splitlines(), strict=True):
        assert got_line == expected_line
    assert got == expected


@pytest.mark.parametrize("threads", [1, 2])
def test_every_invocation_of_a_sample_prints_its_lines(threads):
    result = run_ir(
        SAMPLES.joinpath("functions_dbg.ll").read_text(encoding="utf-8"), invocations=40, threads=threads
    )
    lines = result.text().splitlines(keepends=True)
    expected = []
    for n in range(40):
        expected.append(f"invocation {n}: shade({n}) = {c_format('%.2f', 'float', n * 0.5 + 1.0)}\n")
        if n % 2 == 0:
            expected += [f"invocation {n} takes the even path, step {step} of 2\n" for step in range(2)]
    if threads == 1:
        assert lines == expected
    else:
        assert sorted(lines) == sorted(expected)
