"""Writing test programs in IR: format-string globals, printf and abort calls, constants; and the C oracle.

The oracle formats one value the way SPEC section 3 says C's printf sees it: an integer zero-extended to
32 bits (or 64) read back as the C type its conversion names, a float as the double it widens to, the
components of a vector one by one, joined by `, `.
"""

from __future__ import annotations

import ctypes
import re
import struct

import numpy

from lowering.devices.harness import RunResult, run_sources
from lowering.lowered_module import Source

LIBC = ctypes.CDLL(None)
PRINTF = "@lgc.debug.printf"
ABORT = "@lgc.debug.abort"
DECLARATIONS = (
    "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
    "declare void @lgc.debug.abort(ptr addrspace(7), ptr addrspace(4), ...)\n"
)
_SCALAR_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "half": 16, "float": 32, "double": 64}
_VECTOR = re.compile(r"<(\d+) x (\w+)>\Z")
_ORACLE_BYTES = 4096


def run_ir(text: str, **options) -> RunResult:
    """Lower and run `text` (a whole module) on the cpu device."""
    return run_sources([Source("test.ll", text)], **options)


def string_global(name: str, text: str) -> str:
    """`@name = private unnamed_addr addrspace(4) constant [n x i8] c"text\\00"`."""
    data = text.encode("utf-8") + b"\0"
    escaped = "".join(
        chr(byte) if 32 <= byte < 127 and byte not in b'"\\' else f"\\{byte:02X}" for byte in data
    )
    return f'@{name} = private unnamed_addr addrspace(4) constant [{len(data)} x i8] c"{escaped}"\n'


def call(callee: str, buffer: str, string: str, arguments: list[tuple[str, str]]) -> str:
    """A call of printf or abort with `buffer` (a value name), format global `string`, typed arguments."""
    operands = "".join(f", {ir_type} {value}" for ir_type, value in arguments)
    return (
        f"  call void (ptr addrspace(7), ptr addrspace(4), ...) {callee}"
        f"(ptr addrspace(7) {buffer}, ptr addrspace(4) @{string}{operands})\n"
    )


def constant(ir_type: str, value) -> str:
    """An IR constant of `ir_type` (a scalar or `<N x T>`) for a Python value (a sequence for a vector)."""
    vector = _VECTOR.match(ir_type)
    if vector:
        element = vector.group(2)
        return "<" + ", ".join(f"{element} {constant(element, item)}" for item in value) + ">"
    if ir_type == "i1":
        return "true" if value & 1 else "false"
    if ir_type.startswith("i"):
        return str(int(value))
    if ir_type == "half":
        return f"0xH{numpy.array(value, numpy.float16).view(numpy.uint16):04X}"
    widened = float(numpy.float32(value)) if ir_type == "float" else float(value)
    return f"0x{struct.unpack('<Q', struct.pack('<d', widened))[0]:016X}"


def buffer_value(ir_type: str, value):
    """What the buffer carries for a scalar: integers zero-extended (bits), floats widened to a double."""
    bits = _SCALAR_BITS[ir_type]
    if ir_type.startswith("i"):
        return int(value) & ((1 << bits) - 1)
    if ir_type == "half":
        return float(numpy.float16(value))
    return float(numpy.float32(value)) if ir_type == "float" else float(value)


def c_format(spec: str, ir_type: str, value) -> str:
    """C's snprintf of a (vector) value with the C spec `spec` (no `v<N>`), components joined by `, `."""
    vector = _VECTOR.match(ir_type)
    if vector:
        return ", ".join(c_format(spec, vector.group(2), item) for item in value)
    return _snprintf(spec, _c_argument(spec, buffer_value(ir_type, value)))


def _c_argument(spec: str, value):
    conversion = spec[-1]
    if conversion in "fFeEgGaA":
        return ctypes.c_double(value)
    signed = conversion in "di"
    if "l" in spec:
        return ctypes.c_longlong(_signed(value, 64)) if signed else ctypes.c_ulonglong(value)
    return ctypes.c_int(_signed(value, 32)) if signed or conversion == "c" else ctypes.c_uint(value)


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _snprintf(spec: str, argument) -> str:
    output = ctypes.create_string_buffer(_ORACLE_BYTES)
    written = LIBC.snprintf(output, _ORACLE_BYTES, spec.encode("ascii"), argument)
    assert 0 <= written < _ORACLE_BYTES
    return output.raw[:written].decode("utf-8", "surrogateescape")
