"""What real compilers write and real tools print, as this project's own test data (issue 32).

Three sources, each case with a note of where it comes from:
- LLPC: the shapes of its lit inputs `lgc/test/Transforms/LowerDebugPrintf/basic.lgc` and
  `lgc/test/CsLowerDebugPrintf.lgc` in their versions, written here (not copies), lowered for amdpal, with
  the table and entry sizes LLPC's checks expect; and the abort example of its `docs/DdnDebugPrintf.md`.
- XGL: tables as LLPC writes them and buffers as its code writes them, decoded as XGL's
  `icd/api/debug_printf.cpp` decodes them (one trailing NUL of `.string` taken off, the arguments past the
  conversions read and not printed, each conversion formatted by the C library).
- VVL: calls of its `docs/debug_printf.md` and of the kinds its `tests/unit/debug_printf*.cpp` make
  (narrow integers, misformatted calls), in the `vvl` dialect, with what VVL prints and how severely it
  says so: a narrow integer at its own width, signed for signed conversions; a mismatch a warning, the
  dwords the shader wrote read as the conversion reads them (VVL's decoder takes each value as its
  conversion says).

Where C's semantics apply, `oracle` gives the C format and arguments whose `snprintf` must print the
expected text; `tests/test_driver_corpus.py` runs every case and checks the oracle too.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

LLPC, XGL, VVL = "LLPC", "XGL", "VVL"

Oracle = tuple[str, tuple]  # a C format and the ctypes arguments snprintf prints the expected text with


def _double_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


# --- LLPC -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """A table entry as LLPC's checks expect it: its string, `.argument_count`, `.64bit_arguments`, and
    the dwords of each entry the device writes (its header included)."""

    string: str
    count: int
    mask: tuple[int, ...]
    dwords: int


@dataclass(frozen=True)
class LlpcLowering:
    """A module of an LLPC lit input's shape, lowered for amdpal."""

    name: str
    origin: str
    ir: str
    rows: tuple[Row, ...]
    user_data_offset: int | None = None
    warnings: tuple[str, ...] = ()  # what each warning says after the call it names
    source: str = LLPC


@dataclass(frozen=True)
class LlpcMessage:
    """An abort message of `@lgc.abort.msg`: its format string and argument dwords, what it prints."""

    name: str
    origin: str
    format: str
    arguments: tuple[int, ...]
    text: str
    oracle: Oracle
    source: str = LLPC


# basic.lgc: a `spir_func` shader without user-data parameters, a printf without a buffer operand.
BASIC = (
    '@str = private unnamed_addr constant [8 x i8] c"Test: %u", align 1\n\n'
    "define spir_func void @simple() !lgc.shaderstage !0 {\n"
    "  call void (...) @lgc.debug.printf(ptr nonnull @str, i32 42)\n"
    "  ret void\n}\n\n"
    "declare void @lgc.debug.printf(...)\n\n"
    "!0 = !{i32 7}\n"
)
# Its `!lgc.user.data.nodes`: the printf buffer (internal set, binding 6) in a table at user data dword
# 0, or a root descriptor at dwords 2..5; LGC's node form, with visibility.
NODES = {
    "table": (
        "!lgc.user.data.nodes = !{!4, !5}\n"
        '!4 = !{!"DescriptorTableVaPtr", i32 7, i32 0, i32 0, i32 1, i32 1}\n'
        '!5 = !{!"DescriptorBuffer", i32 6, i32 0, i32 0, i32 4, i32 -16, i32 6, i32 4}\n',
        0,
    ),
    "root": (
        "!lgc.user.data.nodes = !{!4}\n"
        '!4 = !{!"DescriptorMutable", i32 6, i32 0, i32 2, i32 4, i32 -16, i32 6, i32 4}\n',
        2,
    ),
}
# CsLowerDebugPrintf.lgc of 2023: LGC's built-in calls, the buffer operand from a descriptor, one argument
# (an i64) more than 'Output:%d\n' converts; its nodes in LGC's earlier form (no visibility), set -1.
CS = """target triple = "amdgcn--amdpal"

@str.1 = internal addrspace(4) constant [10 x i8] c"Output:%d\\0A"

define dllexport spir_func void @lgc.shader.CS.main() local_unnamed_addr #0 !lgc.shaderstage !8 {
.entry:
  %0 = call <3 x i32> @lgc.shader.input.LocalInvocationId(i32 47) #1
  %1 = extractelement <3 x i32> %0, i64 0
  %2 = call ptr addrspace(4) @lgc.descriptor.table.addr(i32 6, i32 6, i32 -1, i32 6, i32 -1) #1
  %3 = load <4 x i32>, ptr addrspace(4) %2, align 16
  %4 = call ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32> %3)
  %5 = bitcast <2 x i32> zeroinitializer to i64
  call void (...) @lgc.debug.printf(ptr addrspace(7) %4, ptr addrspace(4) @str.1, i32 %1, i64 %5)
  ret void
}

declare void @lgc.debug.printf(...) #0
declare <3 x i32> @lgc.shader.input.LocalInvocationId(i32) #1
declare ptr addrspace(4) @lgc.descriptor.table.addr(i32, i32, i32, i32, i32) #1
declare ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32>) #1

attributes #0 = { nounwind }
attributes #1 = { nounwind memory(none) }

!lgc.user.data.nodes = !{!4, !5}
!4 = !{!"DescriptorTableVaPtr", i32 7, i32 0, i32 1, i32 1}
!5 = !{!"DescriptorBuffer", i32 6, i32 0, i32 4, i32 -1, i32 6, i32 4}
!8 = !{i32 7}
"""
# The same input as LLPC's lit inputs were written before LLVM's opaque pointers: typed pointers, the
# format string through a constant GEP, the buffer from `lgc.late.launder.fat.pointer`.
CS_TYPED = (
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
    .replace("declare ptr addrspace(4) @lgc.descriptor", "declare <4 x i32> addrspace(4)* @lgc.descriptor")
    .replace(
        "declare ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32>)",
        "declare i8 addrspace(7)* @lgc.late.launder.fat.pointer(<4 x i32>)",
    )
    .replace("memory(none)", "readnone")
)
_EXTRA = "1 argument(s) after the 1 conversion(s) of 'Output:%d\\n' are not printed"
_TEST_U = Row("Test: %u", 1, (0,), 3)

LLPC_LOWERINGS = (
    LlpcLowering(
        "basic.lgc",
        "basic.lgc as LLPC has it since December 2024: the node in a table at user data 0, set -16; "
        "LLPC's checks: the call lowered, the table with 'Test: %u' and .user_data_offset 0",
        BASIC + NODES["table"][0],
        (_TEST_U,),
        user_data_offset=0,
    ),
    LlpcLowering(
        "basic.lgc, set -1",
        "basic.lgc before December 2024, when LLPC's internal descriptor set was -1: the same checks",
        BASIC + NODES["table"][0].replace("i32 -16", "i32 -1"),
        (_TEST_U,),
        user_data_offset=0,
    ),
    LlpcLowering(
        "basic.lgc, root node",
        "basic.lgc's printf with its node a root descriptor at user data 2, as LGC's findResourceNode "
        "finds root nodes too",
        BASIC + NODES["root"][0],
        (_TEST_U,),
        user_data_offset=2,
    ),
    LlpcLowering(
        "basic.lgc, nodes without visibility",
        "basic.lgc's printf with its nodes in LGC's earlier form, without visibility, and set -1, as "
        "CsLowerDebugPrintf.lgc of 2023 writes its nodes",
        BASIC
        + "!lgc.user.data.nodes = !{!4, !5}\n"
        + '!4 = !{!"DescriptorTableVaPtr", i32 7, i32 0, i32 1, i32 1}\n'
        + '!5 = !{!"DescriptorBuffer", i32 6, i32 0, i32 4, i32 -1, i32 6, i32 4}\n',
        (_TEST_U,),
        user_data_offset=0,
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc",
        "CsLowerDebugPrintf.lgc of 2023: LLPC's checks: an entry of 5 dwords (header, i32, i64), "
        ".argument_count 2, .64bit_arguments [2]",
        CS,
        (Row("Output:%d\n", 2, (2,), 5),),
        warnings=(_EXTRA,),
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc, typed pointers",
        "CsLowerDebugPrintf.lgc as written before LLVM's opaque pointers (typed pointers, a constant GEP "
        "to the string); LLVM 22 reads them as opaque: the same entry",
        CS_TYPED,
        (Row("Output:%d\n", 2, (2,), 5),),
        warnings=(_EXTRA,),
    ),
)

# docs/DdnDebugPrintf.md's abort example: 'test: %lf %d\n' with a double and an int, the message data a
# struct of scalar layout: the double at byte 16, the int at 24, 4 bytes of padding to 32.
_EXAMPLE = struct.unpack("<4I", struct.pack("<dII", 2.5, 7, 0))
LLPC_MESSAGES = (
    LlpcMessage(
        "DdnDebugPrintf.md abort example",
        "LLPC's docs/DdnDebugPrintf.md: an abort message with a double, 'test: %lf %d\\n', 4 argument dwords "
        "(the last the padding of scalar layout)",
        "test: %lf %d\n",
        _EXAMPLE,
        "test: 2.500000 7\n",
        ("test: %lf %d\n", (ctypes.c_double(2.5), ctypes.c_int(7))),
    ),
    LlpcMessage(
        "abort message, an int before a double",
        "the proposal's scalar layout applied to 'code %d: %lf' (string in 4 dwords): the int at byte 16, "
        "4 bytes of padding, the double at 24",
        "code %d: %lf",
        struct.unpack("<4I", struct.pack("<iId", -3, 0, 0.25)),
        "code -3: 0.250000",
        ("code %d: %lf", (ctypes.c_int(-3), ctypes.c_double(0.25))),
    ),
)

# --- XGL ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class XglDecoding:
    """A table (its rows as LLPC writes them) and the entries of a buffer, each its ID and payload
    dwords; what XGL prints for them, and the warnings here (one per table entry, not per line)."""

    name: str
    origin: str
    rows: tuple[dict, ...]
    entries: tuple[tuple[int, tuple[int, ...]], ...]
    output: str
    oracle: tuple[Oracle, ...] = ()  # one per entry printed
    warnings: tuple[str, ...] = ()
    source: str = XGL


def _row(index: int, string: str, count: int, mask: int) -> dict:
    return {".index": index, ".string": string, ".argument_count": count, ".64bit_arguments": [mask]}


_OUTPUT = _row(0x1E5F0E7DA2A1, "Output:%d\n", 2, 0b10)
_LARGE = (1 << 40) + 5
XGL_DECODINGS = (
    XglDecoding(
        "argument count above the conversions",
        "XGL's debug_printf.cpp reads .argument_count arguments and formats the conversions: the table of "
        "CsLowerDebugPrintf.lgc ('Output:%d\\n', 2 arguments, the second 64-bit) prints Output:7",
        (_OUTPUT,),
        ((_OUTPUT[".index"], (7, 0, 0)), (_OUTPUT[".index"], (8, 0xFFFFFFFF, 0xFFFFFFFF))),
        "Output:7\nOutput:8\n",
        (("Output:%d\n", (ctypes.c_int(7),)), ("Output:%d\n", (ctypes.c_int(8),))),
        warnings=("'Output:%d\\n' has 1 conversion(s) and .argument_count 2",),
    ),
    XglDecoding(
        "an extra 32-bit argument",
        "the same with the extra argument an i32 (.64bit_arguments [0]): entries of 4 dwords",
        (_row(0x2A, "Output:%d\n", 2, 0),),
        ((0x2A, (7, 9)),),
        "Output:7\n",
        (("Output:%d\n", (ctypes.c_int(7),)),),
        warnings=("'Output:%d\\n' has 1 conversion(s) and .argument_count 2",),
    ),
    XglDecoding(
        "a string ending in NUL",
        "LLPC writes a string that reached it as a NUL-terminated array with its NUL; XGL takes one off",
        (_row(0x3B, "Test: %u\0", 1, 0),),
        ((0x3B, (42,)),),
        "Test: 42",
        (("Test: %u", (ctypes.c_uint(42),)),),
    ),
    XglDecoding(
        "a NUL inside the string",
        "a NUL before the end is not the terminator XGL takes off: the entry is not used",
        (_row(0x3C, "Te\0st: %u\0", 1, 0),),
        ((0x3C, (42,)),),
        "",
        warnings=(".string contains a NUL character before its end",),
    ),
    XglDecoding(
        "basic.lgc's table",
        "basic.lgc's table with .user_data_offset (kept, not used by the decoder), three invocations",
        (_row(0x4D, "Test: %u", 1, 0),),
        tuple((0x4D, (n,)) for n in range(3)),
        "Test: 0Test: 1Test: 2",
        tuple(("Test: %u", (ctypes.c_uint(n),)) for n in range(3)),
    ),
    XglDecoding(
        "64-bit arguments",
        "two 64-bit arguments (.64bit_arguments [3]), each two dwords, low first",
        (_row(0x5E, "%llx %lld\n", 2, 0b11),),
        ((0x5E, (_LARGE & 0xFFFFFFFF, _LARGE >> 32, 0xFFFFFFFB, 0xFFFFFFFF)),),
        "10000000005 -5\n",
        (("%llx %lld\n", (ctypes.c_ulonglong(_LARGE), ctypes.c_longlong(-5))),),
    ),
    XglDecoding(
        "floats and a double",
        "32-bit floats formatted as the doubles they widen to, a double from its two dwords",
        (_row(0x6F, "%f %e %g\n", 3, 0b100),),
        (
            (
                0x6F,
                (
                    _float_bits(1.5),
                    _float_bits(-0.125),
                    _double_bits(1e-5) & 0xFFFFFFFF,
                    _double_bits(1e-5) >> 32,
                ),
            ),
        ),
        "1.500000 -1.250000e-01 1e-05\n",
        (("%f %e %g\n", (ctypes.c_double(1.5), ctypes.c_double(-0.125), ctypes.c_double(1e-5))),),
    ),
    XglDecoding(
        "a percent sign",
        "'%%' prints one '%' and takes no argument",
        (_row(0x70, "100%% %d\n", 1, 0),),
        ((0x70, (0xFFFFFFFF,)),),
        "100% -1\n",
        (("100%% %d\n", (ctypes.c_int(-1),)),),
    ),
)

# --- VVL ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VvlCall:
    """A printf call in the vvl dialect: its format string and IR arguments; what VVL prints (None when
    it refuses the call), and what it says: a warning or an error, each a fragment of the message."""

    name: str
    origin: str
    format: str
    arguments: str
    output: str | None
    oracle: Oracle | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    source: str = VVL


_BIG = 0x2000000000000001
_DOCS = "VVL's docs/debug_printf.md"
_NARROW = "VVL's debug_printf tests of int16_t/int8_t (issue 32 quotes its expected lines): a narrow integer"
_MISFORMATTED = "VVL's debug_printf tests of misformatted calls: VVL warns and prints"
_VEC4 = "<4 x float> <float 1.0, float 2.0, float 3.0, float 4.0>"
VVL_CALLS = (
    VvlCall(
        "a float to 2 decimals",
        f"{_DOCS}: 'Here's a float value to 2 decimals %1.2f'",
        "Here's a float value to 2 decimals %1.2f",
        "float 0x400921CAC0000000",
        "Here's a float value to 2 decimals 3.14",
        ("Here's a float value to 2 decimals %1.2f", (ctypes.c_double(3.1415),)),
    ),
    VvlCall(
        "a vector of floats",
        f"{_DOCS}: '%1.2v4f' of (1.2, 2.2, 3.2, 4.2), the components joined by ', '",
        "Here's a vector of floats %1.2v4f",
        "<4 x float> <float 0x3FF3333340000000, float 0x40019999A0000000, float 0x40099999A0000000, "
        "float 0x4010CCCCC0000000>",
        "Here's a vector of floats 1.20, 2.20, 3.20, 4.20",
        (
            "Here's a vector of floats %1.2f, %1.2f, %1.2f, %1.2f",
            tuple(ctypes.c_double(value) for value in (1.2, 2.2, 3.2, 4.2)),
        ),
    ),
    VvlCall(
        "%lu and %lx",
        f"{_DOCS}: a 64-bit unsigned integer in decimal with %lu and in hex with %lx",
        "Unsigned long as decimal %lu and as hex 0x%lx",
        f"i64 {_BIG}, i64 {_BIG}",
        "Unsigned long as decimal 2305843009213693953 and as hex 0x2000000000000001",
        ("Unsigned long as decimal %lu and as hex 0x%lx", (ctypes.c_ulonglong(_BIG),) * 2),
    ),
    VvlCall(
        "padding",
        f"{_DOCS}: '[%8u]' and '[%08x]' of 42",
        "Padded [%8u] and zero padded hex [%08x]",
        "i32 42, i32 42",
        "Padded [      42] and zero padded hex [0000002a]",
        ("Padded [%8u] and zero padded hex [%08x]", (ctypes.c_uint(42), ctypes.c_uint(42))),
    ),
    VvlCall(
        "%ul",
        f"{_DOCS}: VVL's '%ul', a 64-bit integer in hex",
        "as hex 0x%ul",
        f"i64 {_BIG}",
        "as hex 0x2000000000000001",
        ("as hex 0x%lx", (ctypes.c_ulonglong(_BIG),)),
    ),
    VvlCall(
        "int16_t %x",
        f"{_NARROW} at its own width: int16_t -123 with %x is 0xff85 (the 0x written in the format here)",
        "0x%x",
        "i16 signext -123",
        "0xff85",
        ("0x%hx", (ctypes.c_int(-123),)),
    ),
    VvlCall(
        "int16_t vector %v2d",
        f"{_NARROW}, signed for a signed conversion: an i16vec2 of -123 with %v2d",
        "%v2d",
        "<2 x i16> <i16 -123, i16 -123>",
        "-123, -123",
        ("%hd, %hd", (ctypes.c_int(-123), ctypes.c_int(-123))),
    ),
    VvlCall(
        "int8_t %x",
        f"{_NARROW} at its own width: int8_t -123 with %x is 0x85",
        "0x%x",
        "i8 signext -123",
        "0x85",
        ("0x%hhx", (ctypes.c_int(-123),)),
    ),
    VvlCall(
        "int8_t vector %v2d",
        f"{_NARROW}, signed for a signed conversion: an i8vec2 of -123 with %v2d",
        "%v2d",
        "<2 x i8> <i8 -123, i8 -123>",
        "-123, -123",
        ("%hhd, %hhd", (ctypes.c_int(-123), ctypes.c_int(-123))),
    ),
    VvlCall(
        "int16_t %d and %u",
        f"{_NARROW}: signed for %d, unsigned at 16 bits for %u",
        "%d %u",
        "i16 signext -123, i16 signext -123",
        "-123 65413",
        ("%hd %hu", (ctypes.c_int(-123), ctypes.c_int(-123))),
    ),
    VvlCall(
        "a larger vector",
        f"{_MISFORMATTED} the conversion's components of a larger vector",
        "%v2f",
        _VEC4,
        "1.000000, 2.000000",
        ("%f, %f", (ctypes.c_double(1.0), ctypes.c_double(2.0))),
        warnings=("is <4 x float> for '%v2f': its first 2 components printed",),
    ),
    VvlCall(
        "a vector for a scalar",
        f"{_MISFORMATTED} the first component of a vector given to a scalar conversion",
        "%f",
        "<2 x float> <float 1.0, float 2.0>",
        "1.000000",
        ("%f", (ctypes.c_double(1.0),)),
        warnings=("is <2 x float> for '%f': its first component printed",),
    ),
    VvlCall(
        "a smaller vector",
        f"{_MISFORMATTED} a vector shorter than its %vN, padded with zeros",
        "%v4f",
        "<2 x float> <float 1.5, float 2.5>",
        "1.500000, 2.500000, 0.000000, 0.000000",
        ("%f, %f, %f, %f", tuple(ctypes.c_double(value) for value in (1.5, 2.5, 0, 0))),
        warnings=("has 2 component(s) for '%v4f': padded with zeros",),
    ),
    VvlCall(
        "a scalar for a vector",
        f"{_MISFORMATTED} a scalar given to %v2d, padded with zeros",
        "%v2d",
        "i32 5",
        "5, 0",
        ("%d, %d", (ctypes.c_int(5), ctypes.c_int(0))),
        warnings=("has 1 component(s) for '%v2d': padded with zeros",),
    ),
    VvlCall(
        "%d with a float",
        f"{_MISFORMATTED} the float's bits read as the int %d takes",
        "%d",
        "float 1.5",
        "1069547520",
        ("%d", (ctypes.c_int(_float_bits(1.5)),)),
        warnings=("is float for '%d', which takes an integer: its bits are printed",),
    ),
    VvlCall(
        "%f with an int",
        f"{_MISFORMATTED} the int's bits read as the float %f takes",
        "%f",
        f"i32 {_float_bits(0.75)}",
        "0.750000",
        ("%f", (ctypes.c_double(0.75),)),
        warnings=("is i32 for '%f', which takes a floating-point value: its bits are printed",),
    ),
    VvlCall(
        "%u with a 64-bit value",
        f"{_MISFORMATTED} the low 32 bits of a 64-bit value given to %u",
        "%u",
        f"i64 {(3 << 32) + 5}",
        "5",
        ("%u", (ctypes.c_uint(5),)),
        warnings=("is i64 for '%u': its low 32 bits are printed",),
    ),
    VvlCall(
        "%lu with an int",
        f"{_MISFORMATTED} an int given to %lu, widened to the 64 bits it takes",
        "%lu",
        "i32 42",
        "42",
        ("%lu", (ctypes.c_ulong(42),)),
        warnings=("is i32 for '%lu', which takes a 64-bit integer: widened",),
    ),
    VvlCall(
        "%lu with a bool",
        f"{_MISFORMATTED} a bool given to %lu, 1 for true",
        "%lu",
        "i1 true",
        "1",
        ("%lu", (ctypes.c_ulong(1),)),
        warnings=("is i1 for '%lu', which takes a 64-bit integer: widened",),
    ),
    VvlCall(
        "%ld with a negative int",
        f"{_MISFORMATTED} an int given to %ld, widened with its sign for a signed conversion",
        "%ld",
        "i32 -7",
        "-7",
        ("%ld", (ctypes.c_long(-7),)),
        warnings=("is i32 for '%ld', which takes a 64-bit integer: widened",),
    ),
    VvlCall(
        "%v2d with floats",
        f"{_MISFORMATTED} each float component's bits read as an int",
        "%v2d",
        "<2 x float> <float 1.0, float -2.0>",
        "1065353216, -1073741824",
        ("%d, %d", (ctypes.c_int(_float_bits(1.0)), ctypes.c_int(_float_bits(-2.0) - (1 << 32)))),
        warnings=("is float for '%v2d', which takes an integer: its bits are printed",),
    ),
    VvlCall(
        "arguments past the conversions",
        f"{_MISFORMATTED} the conversions' arguments; the others are not printed",
        "%d",
        "i32 1, i32 2",
        "1",
        ("%d", (ctypes.c_int(1),)),
        warnings=("1 argument(s) after the 1 conversion(s) of '%d\\n' are not printed",),
    ),
    VvlCall(
        "an empty format string",
        "VVL's debug_printf tests of misformatted calls: an empty format string is an error in VVL",
        "",
        "",
        None,
        error="the format string is empty, which VVL refuses",
    ),
)

CASES: tuple = (*LLPC_LOWERINGS, *LLPC_MESSAGES, *XGL_DECODINGS, *VVL_CALLS)


def counts() -> dict[str, int]:
    """How many cases each source gives."""
    tally: dict[str, int] = {}
    for case in CASES:
        tally[case.source] = tally.get(case.source, 0) + 1
    return tally
