"""What real compilers write and real tools print, as this project's own test data (issue 32).

Three sources, each case with a note of where it comes from (repository, path, commit or test name; the
commits each section was checked against are listed at its head):
- LLPC: its lit inputs `lgc/test/Transforms/LowerDebugPrintf/basic.lgc` and `lgc/test/CsLowerDebugPrintf.lgc`,
  one case for each version in LLPC's history, written here in their shapes (not copies) and lowered for
  amdpal, with the entries, entry sizes and table keys LLPC's checks (or its code of the time) expect; and
  the abort example of its `docs/DdnDebugPrintf.md`.
- XGL: tables as LLPC writes them and buffers as its code writes them, with what XGL's
  `icd/api/debug_printf.cpp` prints for them in its two readings (until November 2024, since February
  2025), checked against a model of that reader (`tests/test_driver_corpus.py`); where this project
  prints otherwise on purpose, `ours` and `differs` say what and why (docs/llpc-and-vvl.md).
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
#
# Checked against GPUOpen-Drivers/llpc (snapshot 40cb8d95a, 2025-04-29): every version of
# `lgc/test/Transforms/LowerDebugPrintf/basic.lgc` (7b6abfca8 2023-06-16, f64d106c0 2024-06-26, fa78a160d
# 2024-08-28, 6aecd3da1 2024-12-23, eaf7c1d44 2025-02-28) and of `lgc/test/CsLowerDebugPrintf.lgc`
# (a0df5dfdb/b9c8de4bf 2023-03, dd7dd3b46/af2e25f8b 2023-04, 4b7460c21 and 0ed2b6e7a 2023-06-16, 38975915b
# 2023-06-20, f64d106c0 2024-06-26, 5278a3ff4, 3a396c77e, 6aecd3da1 2024-12-23, eaf7c1d44), LLPC's
# `LowerDebugPrintf.cpp` of each time (what its table holds where a lit file checks only the IR), LGC's
# `PipelineState::findResourceNode`, and `docs/DdnDebugPrintf.md` (eaf7c1d44). The modules below are
# written here in the shapes of those inputs, not copied.


@dataclass(frozen=True)
class Row:
    """A table entry as LLPC's checks expect it: its string, `.argument_count`, `.64bit_arguments`, and
    the dwords of each entry the device writes (its header included); `llpc_string` the `.string` LLPC
    writes when it is not this project's (LLPC writes a NUL-terminated array with its NUL)."""

    string: str
    count: int
    mask: tuple[int, ...]
    dwords: int
    llpc_string: str | None = None


@dataclass(frozen=True)
class LlpcLowering:
    """A module of an LLPC lit input's shape, lowered for amdpal: the entries, `.user_data_offset`, the
    warnings, and the keys of `amdpal.format_strings` LLPC writes (`llpc_keys`); `differs` says where
    this project's table deliberately differs (docs/llpc-and-vvl.md, "on purpose")."""

    name: str
    origin: str
    ir: str
    rows: tuple[Row, ...]
    user_data_offset: int | None = None
    warnings: tuple[str, ...] = ()  # what each warning says after the call it names
    llpc_keys: tuple[str, ...] = (".strings", ".version")
    differs: str = ""
    source: str = LLPC


@dataclass(frozen=True)
class LlpcMessage:
    """An abort message of `@lgc.abort.msg`: its dwords (the format string's, then the arguments'), what
    it prints; `ir`, when given, the call's operands as LLPC's document writes them."""

    name: str
    origin: str
    dwords: tuple[int, ...]
    text: str
    oracle: Oracle
    ir: str = ""
    source: str = LLPC


# basic.lgc of 2023-06-16 (7b6abfca8): the buffer an operand, the string a `global` (not `constant`) of
# LGC's constant address space, no user-data nodes.
BASIC_2023 = (
    '@str = internal addrspace(4) global [8 x i8] c"Test: %u"\n\n'
    "define spir_func void @simple(ptr addrspace(7) %buffer) !lgc.shaderstage !0 {\n"
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %buffer, ptr addrspace(4) @str, i32 42)\n"
    "  ret void\n}\n\n"
    "declare void @lgc.debug.printf(...)\n\n"
    "!0 = !{i32 7}\n"
)
# basic.lgc since 2024-06-26: a `spir_func` shader without user-data parameters, a printf without a buffer
# operand.
BASIC = (
    '@str = private unnamed_addr constant [8 x i8] c"Test: %u", align 1\n\n'
    "define spir_func void @simple() !lgc.shaderstage !0 {\n"
    "  call void (...) @lgc.debug.printf(ptr nonnull @str, i32 42)\n"
    "  ret void\n}\n\n"
    "declare void @lgc.debug.printf(...)\n\n"
    "!0 = !{i32 7}\n"
)


def user_data_nodes(visibility: bool = True, internal_set: int = -16) -> str:
    """`!lgc.user.data.nodes` as LLPC's lit inputs have them: a table at user data 0 holding the printf
    buffer (internal set, binding 6); LGC's node form with visibility (since 2023-06-20) or without."""
    shown = "i32 0, " if visibility else ""
    return (
        "!lgc.user.data.nodes = !{!4, !5}\n"
        f'!4 = !{{!"DescriptorTableVaPtr", i32 7, {shown}i32 0, i32 1, i32 1}}\n'
        f'!5 = !{{!"DescriptorBuffer", i32 6, {shown}i32 0, i32 4, i32 {internal_set}, i32 6, i32 4}}\n'
    )


# The printf buffer in a table at user data dword 0 (set -16, as since 2024-12-23), or a root descriptor
# at dwords 2..5; with the offset each gives `.user_data_offset`.
NODES = {
    "table": (user_data_nodes(), 0),
    "root": (
        "!lgc.user.data.nodes = !{!4}\n"
        '!4 = !{!"DescriptorMutable", i32 6, i32 0, i32 2, i32 4, i32 -16, i32 6, i32 4}\n',
        2,
    ),
}


def _cs_2023(declaration: str, call: str, nodes: str, extra: str = "") -> str:
    """CsLowerDebugPrintf.lgc of 2023: a compute entry of LGC's, the printf buffer from a descriptor (its
    operand), 'Output:%d\\n' of the invocation's X."""
    return (
        'target triple = "amdgcn--amdpal"\n\n'
        '@str.1 = internal addrspace(4) constant [10 x i8] c"Output:%d\\0A"\n\n'
        "define dllexport spir_func void @lgc.shader.CS.main() local_unnamed_addr #0 !lgc.shaderstage !8 {\n"
        ".entry:\n"
        "  %0 = call <3 x i32> @lgc.shader.input.LocalInvocationId(i32 47) #1\n"
        "  %1 = extractelement <3 x i32> %0, i64 0\n"
        "  %2 = call ptr addrspace(4) @lgc.descriptor.table.addr(i32 6, i32 6, i32 -1, i32 6, i32 -1) #1\n"
        "  %3 = load <4 x i32>, ptr addrspace(4) %2, align 16\n"
        "  %4 = call ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32> %3)\n"
        f"{extra}{call}"
        "  ret void\n}\n\n"
        f"{declaration}\n"
        "declare <3 x i32> @lgc.shader.input.LocalInvocationId(i32) #1\n"
        "declare ptr addrspace(4) @lgc.descriptor.table.addr(i32, i32, i32, i32, i32) #1\n"
        "declare ptr addrspace(7) @lgc.buffer.desc.to.ptr(<4 x i32>) #1\n\n"
        "attributes #0 = { nounwind }\n"
        "attributes #1 = { nounwind memory(none) }\n\n"
        f"{nodes}"
        "!8 = !{i32 7}\n"
    )


_EXTRA_I64 = "  %5 = bitcast <2 x i32> zeroinitializer to i64\n"
_VARIADIC = "declare void @lgc.debug.printf(...) #0"
_VOID_CALL = (
    "  call void (...) @lgc.debug.printf(ptr addrspace(7) %4, ptr addrspace(4) @str.1, i32 %1, i64 %5)\n"
)
# March 2023 (a0df5dfdb, b9c8de4bf): the callee declared with the call's types, returning i64 (the buffer
# offset after the entry; unused), one argument; its nodes without visibility, set -1.
CS_2023_03 = _cs_2023(
    "declare i64 @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), i32) #0",
    '  %" " = call i64 @lgc.debug.printf(ptr addrspace(7) %4, ptr addrspace(4) @str.1, i32 %1)\n',
    user_data_nodes(visibility=False, internal_set=-1),
)
# April 2023 (dd7dd3b46, af2e25f8b): one argument more than the conversions, an i64.
CS_2023_04 = _cs_2023(
    "declare i64 @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), i32, i64) #0",
    '  %" " = call i64 @lgc.debug.printf(ptr addrspace(7) %4, ptr addrspace(4) @str.1, i32 %1, i64 %5)\n',
    user_data_nodes(visibility=False, internal_set=-1),
    _EXTRA_I64,
)
# 2023-06-16, 0ed2b6e7a ("lgc/debugprintf: various cleanups"): the variadic void form, nodes without
# visibility, set -1.
CS = _cs_2023(_VARIADIC, _VOID_CALL, user_data_nodes(visibility=False, internal_set=-1), _EXTRA_I64)
# 2023-06-20 to 2024-06 (38975915b): the same with the nodes' visibility.
CS_2023_06 = _cs_2023(_VARIADIC, _VOID_CALL, user_data_nodes(internal_set=-1), _EXTRA_I64)


def _cs_2024(internal_set: int) -> str:
    """CsLowerDebugPrintf.lgc since 2024-06-26: two printfs without a buffer operand, their strings
    NUL-terminated arrays as LLPC's SPIR-V reader makes them, the second of two doubles."""
    return (
        'target triple = "amdgcn--amdpal"\n\n'
        '@0 = private unnamed_addr constant [11 x i8] c"Output:%d\\0A\\00", align 1\n'
        '@1 = private unnamed_addr constant [22 x i8] c"workgroup size:%f,%f\\0A\\00", align 1\n\n'
        "define dllexport spir_func void @lgc.shader.CS.main() local_unnamed_addr #0 !lgc.shaderstage !8 {\n"
        ".entry:\n"
        "  %0 = call i32 @lgc.shader.input.LocalInvocationId(i32 49) #1\n"
        "  %1 = and i32 %0, 1023\n"
        "  call void (...) @lgc.debug.printf(ptr nonnull @0, i32 %1)\n"
        "  call void (...) @lgc.debug.printf(ptr nonnull @1, double 1.000000e+00, double 1.000000e+00)\n"
        "  ret void\n}\n\n"
        f"{_VARIADIC}\n"
        "declare i32 @lgc.shader.input.LocalInvocationId(i32) #1\n\n"
        "attributes #0 = { nounwind }\n"
        "attributes #1 = { nounwind memory(none) }\n\n"
        f"{user_data_nodes(internal_set=internal_set)}"
        "!8 = !{i32 7}\n"
    )


CS_2024_06 = _cs_2024(-1)
CS_2024_12 = _cs_2024(-16)

_EXTRA = "1 argument(s) after the 1 conversion(s) of 'Output:%d\\n' are not printed"
_TEST_U = Row("Test: %u", 1, (0,), 3)
_OUTPUT_EXTRA = Row("Output:%d\n", 2, (2,), 5)  # LLPC's code then: .argument_count 2, .64bit_arguments [2]
_OUTPUT_2024 = (
    Row("Output:%d\n", 1, (0,), 3, llpc_string="Output:%d\n\0"),
    Row("workgroup size:%f,%f\n", 2, (3,), 6, llpc_string="workgroup size:%f,%f\n\0"),
)
_WITH_OFFSET = (".strings", ".user_data_offset", ".version")
_OFFSET_SINCE = (
    "LLPC writes .user_data_offset since 2024-08-28 (fa78a160d); this project writes it whenever the "
    "buffer comes from the node"
)
_NUL_KEPT = "LLPC writes each .string with its NUL; this project up to it (XGL takes one trailing NUL off)"
_CS_ORIGIN = "GPUOpen-Drivers/llpc lgc/test/CsLowerDebugPrintf.lgc"
_BASIC_ORIGIN = "GPUOpen-Drivers/llpc lgc/test/Transforms/LowerDebugPrintf/basic.lgc"

LLPC_LOWERINGS = (
    LlpcLowering(
        "basic.lgc of 2023-06-16",
        f"{_BASIC_ORIGIN} @7b6abfca8: the buffer an operand, `@str` a global of addrspace(4) not marked "
        "constant; PALMD checks: one entry, .64bit_arguments [0], .argument_count 1, 'Test: %u'; keys "
        ".strings, .version",
        BASIC_2023,
        (_TEST_U,),
    ),
    LlpcLowering(
        "basic.lgc of 2024-06-26",
        f"{_BASIC_ORIGIN} @f64d106c0: no buffer operand, the node in a table at user data 0, nodes with "
        "visibility, set -1; PALMD checks: the entry, keys .strings and .version only",
        BASIC + user_data_nodes(internal_set=-1),
        (_TEST_U,),
        user_data_offset=0,
        differs=_OFFSET_SINCE,
    ),
    LlpcLowering(
        "basic.lgc of 2024-08-28",
        f"{_BASIC_ORIGIN} @fa78a160d (and 785bd887d): the same input, set -1; PALMD checks: "
        ".user_data_offset: 0",
        BASIC + user_data_nodes(internal_set=-1),
        (_TEST_U,),
        user_data_offset=0,
        llpc_keys=_WITH_OFFSET,
    ),
    LlpcLowering(
        "basic.lgc since 2024-12-23",
        f"{_BASIC_ORIGIN} @6aecd3da1, eaf7c1d44 (unchanged at 40cb8d95a): set -16 (LLPC's "
        "InternalDescriptorSetId 0xFFFFFFF0 since 6aecd3da1); PALMD checks: .user_data_offset: 0",
        BASIC + NODES["table"][0],
        (_TEST_U,),
        user_data_offset=0,
        llpc_keys=_WITH_OFFSET,
    ),
    LlpcLowering(
        "basic.lgc's call, a root node",
        "not an LLPC lit input: basic.lgc's printf with its node a root descriptor at user data 2; LGC's "
        "PipelineState::findResourceNode (40cb8d95a) returns a matching root node as its own top node, "
        "and LowerDebugPrintf.cpp writes the top node's offsetInDwords as .user_data_offset",
        BASIC + NODES["root"][0],
        (_TEST_U,),
        user_data_offset=2,
        llpc_keys=_WITH_OFFSET,
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc of 2023-03",
        f"{_CS_ORIGIN} @a0df5dfdb, b9c8de4bf: `declare i64 @lgc.debug.printf(ptr addrspace(7), "
        'ptr addrspace(4), i32)`, its result `%" "` unused; CHECK: atomicrmw add 3, three stores; the '
        "table as LowerDebugPrintf.cpp of then writes it",
        CS_2023_03,
        (Row("Output:%d\n", 1, (0,), 3),),
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc of 2023-04",
        f"{_CS_ORIGIN} @dd7dd3b46, af2e25f8b: an i64 argument past the conversion; CHECK: atomicrmw add 5, "
        "five stores (header, i32, the i64's low and high dwords); LowerDebugPrintf.cpp of then: "
        ".argument_count 2, .64bit_arguments [2]",
        CS_2023_04,
        (_OUTPUT_EXTRA,),
        warnings=(_EXTRA,),
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc of 2023-06-16",
        f"{_CS_ORIGIN} @0ed2b6e7a (f47ccfdd5): the variadic `declare void @lgc.debug.printf(...)`, nodes "
        "without visibility; CHECK: atomicrmw add 5, five stores",
        CS,
        (_OUTPUT_EXTRA,),
        warnings=(_EXTRA,),
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc of 2023-06-20",
        f"{_CS_ORIGIN} @38975915b (to f64d106c0): the nodes with visibility, set -1; CHECK: atomicrmw add 5",
        CS_2023_06,
        (_OUTPUT_EXTRA,),
        warnings=(_EXTRA,),
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc of 2024-06-26",
        f"{_CS_ORIGIN} @f64d106c0 (5278a3ff4, 3a396c77e): two printfs without a buffer operand, the "
        "strings [11 x i8] 'Output:%d\\n\\0' and [22 x i8] 'workgroup size:%f,%f\\n\\0', two doubles; set "
        "-1; CHECK: atomicrmw add 3 then 6, the doubles low dword first; LowerDebugPrintf.cpp keeps the "
        "NUL (llvm-dialects' ImmutableStringAttr reads the array with getAsString)",
        CS_2024_06,
        _OUTPUT_2024,
        user_data_offset=0,
        differs=f"{_NUL_KEPT}; {_OFFSET_SINCE}",
    ),
    LlpcLowering(
        "CsLowerDebugPrintf.lgc since 2024-12-23",
        f"{_CS_ORIGIN} @6aecd3da1, eaf7c1d44 (unchanged at 40cb8d95a): set -16; otherwise as of 2024-06",
        CS_2024_12,
        _OUTPUT_2024,
        user_data_offset=0,
        llpc_keys=_WITH_OFFSET,
        differs=_NUL_KEPT,
    ),
)


def _string_dwords(text: bytes) -> tuple[int, ...]:
    padded = text + bytes(-len(text) % 4)
    return struct.unpack(f"<{len(padded) // 4}I", padded)


# docs/DdnDebugPrintf.md (eaf7c1d44): `@lgc.abort.msg(i32 1953719668, i32 1814372410, i32 1680154726,
# i32 10, i32 undef, i32 0, i32 1, i32 undef)`: 'test: %lf %d\n' (its comment shows a space before the
# newline that its dwords do not have), then a double (low dword undef, high 0), the int 1 and the padding
# of scalar layout to 32 bytes. `undef` is a constant 0 here (docs/llpc-and-vvl.md).
_DOC_DWORDS = (1953719668, 1814372410, 1680154726, 10, 0, 0, 1, 0)
_EXAMPLE = struct.unpack("<4I", struct.pack("<dII", 2.5, 7, 0))
LLPC_MESSAGES = (
    LlpcMessage(
        "DdnDebugPrintf.md abort example",
        "GPUOpen-Drivers/llpc docs/DdnDebugPrintf.md @eaf7c1d44, 'lgc.abort.msg' under SPIRVReader: the "
        "call's 8 dwords as written there, undef a constant 0",
        _DOC_DWORDS,
        "test: 0.000000 1\n",
        ("test: %lf %d\n", (ctypes.c_double(0.0), ctypes.c_int(1))),
        ir="i32 1953719668, i32 1814372410, i32 1680154726, i32 10, i32 undef, i32 0, i32 1, i32 undef",
    ),
    LlpcMessage(
        "DdnDebugPrintf.md's message with values",
        "the same message with a double 2.5 and an int 7 (derived): the double at byte 16, the int at 24, "
        "4 bytes of padding to 32",
        _string_dwords(b"test: %lf %d\n\0") + _EXAMPLE,
        "test: 2.500000 7\n",
        ("test: %lf %d\n", (ctypes.c_double(2.5), ctypes.c_int(7))),
    ),
    LlpcMessage(
        "abort message, an int before a double",
        "derived: the proposal's scalar layout applied to 'code %d: %lf' (string in 4 dwords): the int at "
        "byte 16, 4 bytes of padding, the double at 24",
        _string_dwords(b"code %d: %lf\0") + struct.unpack("<4I", struct.pack("<iId", -3, 0, 0.25)),
        "code -3: 0.250000",
        ("code %d: %lf", (ctypes.c_int(-3), ctypes.c_double(0.25))),
    ),
)

# --- XGL ------------------------------------------------------------------------------------------------
#
# Checked against GPUOpen-Drivers/xgl `icd/api/debug_printf.cpp` in its two readings: XGL_2023 (5301cf5
# 2023-04-14 to a367518 2024-11-27) and XGL_2025 (393503c 2025-02-28 to e9782eb 2025-04-29), which takes
# one trailing NUL off `.string` and reads `.argument_count` dwords for the arguments (a 64-bit one's high
# dword then read past them). Both: the conversions are found with the regular expression
# `(%){1}[-+#0]*[0-9]*((.)[0-9]+){0,1}(v[2-4])*((h)+|(l)+|j|z|t|L)*([diuoxXfFeEgGaAc]){1}`, each formatted
# alone by sprintf (glibc's here) from a 32-bit value (a float widened) or, with its `.64bit_arguments`
# bit, a 64-bit one; the text around them copied as it is (so `%%` stays `%%`); an argument past the
# conversions read and not printed; an unknown ID ends the buffer's decoding.

XGL_2023, XGL_2025 = "XGL 2023-04..2024-11", "XGL 2025-02.."


@dataclass(frozen=True)
class XglDecoding:
    """A table (its rows as LLPC writes them) and the entries of a buffer, each its ID and payload
    dwords; what XGL (`xgl`, the reading it is checked against) prints for them, what this project prints
    where it deliberately differs (`ours`, with `differs` saying why), and the warnings here (one per
    table entry, not per line)."""

    name: str
    origin: str
    rows: tuple[dict, ...]
    entries: tuple[tuple[int, tuple[int, ...]], ...]
    output: str
    xgl: tuple[str, ...] = (XGL_2023, XGL_2025)
    ours: str | None = None
    differs: str = ""
    warnings: tuple[str, ...] = ()
    issues: tuple[str, ...] = ()  # what the decoder reports of the buffer, a fragment each
    source: str = XGL

    @property
    def printed(self) -> str:
        """What this project prints."""
        return self.output if self.ours is None else self.ours


def _row(index: int, string: str, count: int, mask: int) -> dict:
    return {".index": index, ".string": string, ".argument_count": count, ".64bit_arguments": [mask]}


# LLPC's 48-bit hash of 'Output:%d\n' in CsLowerDebugPrintf.lgc's CHECK lines of 2023-03 (a0df5dfdb): the
# header dwords -1902706685 (0x8E970003: size 3, ID bits 0..15) and -455574279 (ID bits 16..47).
LLPC_OUTPUT_ID = 0xE4D87CF9 << 16 | 0x8E97
_OUTPUT = _row(LLPC_OUTPUT_ID, "Output:%d\n", 2, 0b10)
_LARGE = (1 << 40) + 5
_ONE = struct.unpack("<2I", struct.pack("<d", 1.0))
_DEBUG_PRINTF = "GPUOpen-Drivers/xgl icd/api/debug_printf.cpp"
XGL_DECODINGS = (
    XglDecoding(
        "argument count above the conversions",
        f"{_DEBUG_PRINTF} @a367518: DecodeSpecifier formats only the conversions; the table of "
        "CsLowerDebugPrintf.lgc of 2023 ('Output:%d\\n', 2 arguments, the second 64-bit, LLPC's own ID) "
        "prints Output:7; XGL_2025 reads 2 dwords of the 3 and misreads the next entry",
        (_OUTPUT,),
        ((LLPC_OUTPUT_ID, (7, 0, 0)), (LLPC_OUTPUT_ID, (8, 0xFFFFFFFF, 0xFFFFFFFF))),
        "Output:7\nOutput:8\n",
        xgl=(XGL_2023,),
        warnings=("'Output:%d\\n' has 1 conversion(s) and .argument_count 2",),
    ),
    XglDecoding(
        "an extra 32-bit argument",
        f"{_DEBUG_PRINTF}: the same with the extra argument an i32 (.64bit_arguments [0]): 2 dwords",
        (_row(0x2A, "Output:%d\n", 2, 0),),
        ((0x2A, (7, 9)),),
        "Output:7\n",
        warnings=("'Output:%d\\n' has 1 conversion(s) and .argument_count 2",),
    ),
    XglDecoding(
        "a string ending in NUL",
        f"{_DEBUG_PRINTF} @393503c: DecodeFormatStringsFromElf takes one trailing NUL off .string, as "
        "LLPC writes a string that reached it as an array (CsLowerDebugPrintf.lgc since 2024-06-26)",
        (_row(0x3B, "Test: %u\0", 1, 0),),
        ((0x3B, (42,)),),
        "Test: 42",
        xgl=(XGL_2025,),
    ),
    XglDecoding(
        "a string ending in NUL, before 2025",
        f"{_DEBUG_PRINTF} @a367518: .string copied whole, and the text after the last conversion with it: "
        "the NUL is written out",
        (_row(0x3B, "Test: %u\0", 1, 0),),
        ((0x3B, (42,)),),
        "Test: 42\0",
        xgl=(XGL_2023,),
        ours="Test: 42",
        differs="one trailing NUL is taken off, as XGL does since 2025-02-28",
    ),
    XglDecoding(
        "a NUL inside the string",
        f"{_DEBUG_PRINTF} @e9782eb: only the last NUL is taken off; the text is copied byte for byte, the "
        "NUL inside it too, and the regular expression finds %u past it",
        (_row(0x3C, "Te\0st: %u\0", 1, 0),),
        ((0x3C, (42,)),),
        "Te\0st: 42",
        xgl=(XGL_2025,),
        ours="",
        differs="a NUL before the end makes the entry unusable here (C's printf would stop at it)",
        warnings=(".string contains a NUL character before its end",),
        issues=("unknown format string ID",),
    ),
    XglDecoding(
        "basic.lgc's table",
        f"{_DEBUG_PRINTF}: basic.lgc's table with .user_data_offset (not used by the reader), three entries",
        (_row(0x4D, "Test: %u", 1, 0),),
        tuple((0x4D, (n,)) for n in range(3)),
        "Test: 0Test: 1Test: 2",
    ),
    XglDecoding(
        "64-bit arguments",
        f"{_DEBUG_PRINTF} @a367518: each 64-bit argument two dwords, low first, formatted as uint64_t "
        "(%u, %o, %x, %X) or int64_t (%d, %i, %c); XGL_2025 reads 2 dwords of the 4",
        (_row(0x5E, "%llx %lld\n", 2, 0b11),),
        ((0x5E, (_LARGE & 0xFFFFFFFF, _LARGE >> 32, 0xFFFFFFFB, 0xFFFFFFFF)),),
        "10000000005 -5\n",
        xgl=(XGL_2023,),
    ),
    XglDecoding(
        "floats and a double",
        f"{_DEBUG_PRINTF} @a367518: a 32-bit float passed to sprintf as the double it widens to, a double "
        "from its two dwords",
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
        xgl=(XGL_2023,),
    ),
    XglDecoding(
        "CsLowerDebugPrintf.lgc's table of 2024",
        f"{_DEBUG_PRINTF} @a367518 reading the table LLPC wrote for CsLowerDebugPrintf.lgc of 2024-06-26 "
        "(each .string with its NUL, two doubles): the NULs are written out",
        (_row(0x71, "Output:%d\n\0", 1, 0), _row(0x72, "workgroup size:%f,%f\n\0", 2, 0b11)),
        ((0x71, (5,)), (0x72, (*_ONE, *_ONE))),
        "Output:5\n\0workgroup size:1.000000,1.000000\n\0",
        xgl=(XGL_2023,),
        ours="Output:5\nworkgroup size:1.000000,1.000000\n",
        differs="one trailing NUL is taken off, as XGL does since 2025-02-28",
    ),
    XglDecoding(
        "a percent sign",
        f"{_DEBUG_PRINTF}: '%%' matches no conversion of its regular expression, so the text around the "
        "conversions, copied as it is, keeps it",
        (_row(0x70, "100%% %d\n", 1, 0),),
        ((0x70, (0xFFFFFFFF,)),),
        "100%% -1\n",
        ours="100% -1\n",
        differs="'%%' prints '%', as C's printf prints it (and VVL, and LLPC's SPIR-V sources mean)",
    ),
    XglDecoding(
        "an unknown ID",
        f"{_DEBUG_PRINTF}: ProcessDebugPrintfBuffer (PostQueueProcess before 2025) breaks out of its loop "
        "at an entry whose ID is not in the table: nothing after it is printed",
        (_row(0x73, "n=%u\n", 1, 0),),
        ((0x73, (1,)), (0x99, (5,)), (0x73, (2,))),
        "n=1\n",
        ours="n=1\nn=2\n",
        differs="the entry header's size frames the unknown entry: it is reported and skipped, the rest "
        "decoded",
        issues=("unknown format string ID 0x000000000099",),
    ),
    XglDecoding(
        "LLPC's vector entry",
        f"{_DEBUG_PRINTF}: LLPC writes only a vector's first component and counts one argument "
        "(LowerDebugPrintf.cpp's getDwordValues returns inside its loop); XGL formats '%v4f' alone with "
        "sprintf, which glibc prints as it is",
        (_row(0x74, "v %v4f\n", 1, 0),),
        ((0x74, (_float_bits(1.5),)),),
        "v %v4f\n",
        ours="",
        differs="an entry whose size does not hold its conversions' arguments is reported, not decoded",
        issues=("has 3 dword(s) but its arguments need 6: not decoded",),
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
