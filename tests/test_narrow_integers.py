"""Narrow integers widen as the call operand's attribute says (SPEC section 9): `signext` by sign
extension, as C promotes a signed `char` or `short`; `zeroext` or none by zero extension. Checked against
C's snprintf of the promoted value, for values computed at run time from the invocation ID."""

from __future__ import annotations

import ctypes

import pytest
from dprintf_ir import DECLARATIONS, LIBC, run_ir, string_global

SPECS = "%d %u %hd %hhd %x %c|"
CONVERSIONS = len(SPECS.split())
INVOCATIONS = 512


def module(ir_type: str, attribute: str) -> str:
    """Invocation i prints (i * 37 - 200) truncated to `ir_type` with every conversion of SPECS."""
    operand = f"{ir_type} {attribute} %v".replace("  ", " ")
    operands = ", ".join([operand] * CONVERSIONS)
    return (
        string_global("fmt", SPECS)
        + DECLARATIONS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + "  %scaled = mul i32 %id, 37\n"
        + "  %wide = sub i32 %scaled, 200\n"
        + f"  %v = trunc i32 %wide to {ir_type}\n"
        + "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
        + f"ptr addrspace(7) %buf, ptr addrspace(4) @fmt, {operands})\n"
        + "  ret void\n}\n"
    )


def promoted(ir_type: str, attribute: str, invocation: int) -> int:
    """The int C's printf sees: the truncated value sign- or zero-extended to 32 bits."""
    bits = int(ir_type[1:])
    value = (invocation * 37 - 200) & ((1 << bits) - 1)
    if attribute == "signext" and value >> (bits - 1):
        value -= 1 << bits
    return value


def oracle(value: int) -> bytes:
    output = ctypes.create_string_buffer(256)
    written = LIBC.snprintf(output, 256, SPECS.encode(), *[ctypes.c_int(value)] * CONVERSIONS)
    return output.raw[:written]


@pytest.mark.parametrize("ir_type", ["i8", "i16"])
@pytest.mark.parametrize("attribute", ["signext", "zeroext", ""])
def test_narrow_integers_widen_as_their_attribute_says(ir_type, attribute):
    result = run_ir(module(ir_type, attribute), invocations=INVOCATIONS)
    expected = b"".join(oracle(promoted(ir_type, attribute, n)) for n in range(INVOCATIONS))
    assert b"".join(result.printf.output_chunks()) == expected
    assert result.issues == []


VECTOR_SPECS = "%v2d %v2u %v2x %v2hd %v2hhd|"


@pytest.mark.parametrize("ir_type", ["i8", "i16"])
def test_a_vectors_narrow_components_widen_as_an_unmarked_scalar_does(ir_type):
    """The decision for C's dialect (SPEC 4 and 9): a narrow integer widens as its operand's attribute
    says, and LLVM takes no `signext` on a vector, so a vector's components are zero-extended, as a
    scalar without an attribute is; `h`/`hh` read them back signed, as C's `%hd` reads a short."""
    vector = f"<2 x {ir_type}> %pair"
    text = (
        string_global("fmt", VECTOR_SPECS)
        + DECLARATIONS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + "  %scaled = mul i32 %id, 37\n  %wide = sub i32 %scaled, 200\n"
        + f"  %v = trunc i32 %wide to {ir_type}\n"
        + f"  %half = insertelement <2 x {ir_type}> zeroinitializer, {ir_type} %v, i32 0\n"
        + f"  %pair = insertelement <2 x {ir_type}> %half, {ir_type} %v, i32 1\n"
        + "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
        + f"ptr addrspace(4) @fmt, {', '.join([vector] * 5)})\n"
        + "  ret void\n}\n"
    )
    result = run_ir(text, invocations=INVOCATIONS)
    scalar_specs = "%d, %d %u, %u %x, %x %hd, %hd %hhd, %hhd|"
    output = ctypes.create_string_buffer(256)
    expected = b""
    for n in range(INVOCATIONS):
        value = ctypes.c_int(promoted(ir_type, "", n))
        written = LIBC.snprintf(output, 256, scalar_specs.encode(), *[value] * 10)
        expected += output.raw[:written]
    assert b"".join(result.printf.output_chunks()) == expected


def test_signext_on_a_vector_is_llvms_error():
    text = module("i16", "signext").replace("i16 signext %v", "<2 x i16> signext zeroinitializer")
    with pytest.raises(Exception, match="Attribute 'signext' applied to incompatible type"):
        run_ir(text)
