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
- VVL: a case for each test of its `tests/unit/debug_printf.cpp` whose expected text depends on how the
  values it passes are formatted (not its two disabled ones, nor those of stages, descriptors and run-time
  addresses) and for each of its 31 tests of misformatted calls, its documented examples, and a few calls
  derived from its shader pass and decoder, in the `vvl` dialect: what VVL prints (its decoder reading
  the dwords its pass wrote) and whether it prints, warns or refuses; where this project differs on
  purpose, `ours` and `differs` say what and why (docs/llpc-and-vvl.md).

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
#
# Checked against KhronosGroup/Vulkan-ValidationLayers (snapshot 9fe6278b5): `tests/unit/debug_printf.cpp`
# (its `NegativeDebugPrintf` tests that format values, each case named after its test, the shader's GLSL
# written as IR; VVL's expected text `expects`, which its error monitor finds in the message), its 31
# `Misformatted*` tests (pipeline creation only: `BasicFormattingTest(shader, warning)` says whether VVL
# warns or errs), `layers/gpuav/spirv/debug_printf_pass.cpp` (what the shader writes, what VVL warns about
# or refuses) and `layers/gpuav/debug_printf/debug_printf.cpp` (how VVL reads the dwords back: what it
# prints after a warning, the record last in the buffer, zeros after it), and `docs/debug_printf.md`.

PRINTS, WARNS, REFUSES = "prints", "warns", "refuses"


@dataclass(frozen=True)
class VvlCall:
    """A printf call in the vvl dialect: its format string and IR arguments; what VVL prints (`output`,
    None when it refuses the call) and whether it prints, warns or refuses (`vvl`); what this project
    says (`warnings`, `error`: a fragment of each message) and, where it deliberately differs from VVL,
    what it prints (`ours`) and why (`differs`)."""

    name: str
    origin: str
    format: str
    arguments: str
    output: str | None
    vvl: str = PRINTS
    oracle: Oracle | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    expects: str | None = None  # VVL's test: the text its error monitor expects in the message
    ours: str | None = None
    differs: str = ""
    source: str = VVL

    @property
    def printed(self) -> str | None:
        """What this project prints."""
        return self.output if self.ours is None else self.ours


def _f32(value: float) -> str:
    """An IR `float` constant of `value` rounded to a float, as LLVM writes one."""
    rounded = struct.unpack("<f", struct.pack("<f", value))[0]
    return f"float 0x{_double_bits(rounded):016X}"


def _f64(value: float) -> str:
    return f"double 0x{_double_bits(value):016X}"


def _f16_bits(value: float) -> int:
    """The half a GLSL `float16_t(value)` holds: glslang folds the float toward zero (VVL's Float16 test
    expects 3.3 to print 3.298828, not the 3.300781 of the nearest half)."""
    bits = struct.unpack("<H", struct.pack("<e", value))[0]
    return bits - 1 if abs(struct.unpack("<e", struct.pack("<H", bits))[0]) > abs(value) else bits


def _f16(value: float) -> str:
    return f"half 0xH{_f16_bits(value):04X}"


def _vector(*components: str) -> str:
    """`<N x T> <T a, T b...>` of typed components."""
    return f"<{len(components)} x {components[0].split()[0]}> <{', '.join(components)}>"


def _c(value: float) -> ctypes.c_double:
    """A float argument as C's printf receives it: the float rounded, widened to a double."""
    return ctypes.c_double(struct.unpack("<f", struct.pack("<f", value))[0])


def _half(value: float) -> ctypes.c_double:
    return ctypes.c_double(struct.unpack("<e", struct.pack("<H", _f16_bits(value)))[0])


_TESTS = "KhronosGroup/Vulkan-ValidationLayers tests/unit/debug_printf.cpp @9fe6278b5, NegativeDebugPrintf"
_DOCS = "KhronosGroup/Vulkan-ValidationLayers docs/debug_printf.md @9fe6278b5"
_DECODER = "VVL's layers/gpuav/debug_printf/debug_printf.cpp"
_BIG = 0x2000000000000001
_PI = 3.1415
_BIG64 = f"i64 {_BIG}"
_DOUBLE_WARNING = (
    "VVL's pass warns about a double for %f (its check takes any 64-bit argument without 'l' for a "
    "mismatch) though its decoder prints it right, and prints nothing for %lf; no warning here"
)


def _test(name: str, fmt: str, arguments: str, output: str, oracle: Oracle, **more) -> VvlCall:
    """A case of VVL's test `name` (its GLSL written as IR), what VVL prints."""
    note = more.pop("note", "")
    return VvlCall(name, f"{_TESTS}.{name}{note}", fmt, arguments, output, oracle=oracle, **more)


_V12 = (_f32(1.2), _f32(2.2), _f32(3.2), _f32(4.2))
_C12 = tuple(_c(value) for value in (1.2, 2.2, 3.2, 4.2))
_INTS = _vector("i32 -4", "i32 32", "i32 64")
_FOO64 = _f64(1.23456789)
_BAR = _f32(1.23456789)
_C64, _C32 = ctypes.c_double(1.23456789), _c(1.23456789)
_H33 = _f16(3.3)
VVL_PRINTED = (
    _test("Float", "float == %f", _f32(_PI), "float == 3.141500", ("float == %f", (_c(_PI),))),
    _test(
        "IntUnsigned",
        "unsigned == %u",
        "i32 127",
        "unsigned == 127",
        ("unsigned == %u", (ctypes.c_uint(127),)),
    ),
    _test(
        "IntUnsignedUnderflow",
        "underflow == %u",
        "i32 -1",
        "underflow == 4294967295",
        ("underflow == %u", (ctypes.c_uint(0xFFFFFFFF),)),
        note=" (127 - 128 as a uint)",
    ),
    _test(
        "IntSignedOverflow",
        "overflow == %d",
        "i32 -2147483645",
        "overflow == -2147483645",
        ("overflow == %d", (ctypes.c_int(-2147483645),)),
        note=" (2147483647 + 4 as an int)",
    ),
    _test(
        "TwoFloats",
        "Here are two float values %f, %F",
        f"{_f32(1.0)}, {_f32(_PI)}",
        "Here are two float values 1.000000, 3.141500",
        ("Here are two float values %f, %F", (_c(1.0), _c(_PI))),
    ),
    _test(
        "FloatPrecision",
        "smaller float value %1.2f",
        _f32(_PI),
        "smaller float value 3.14",
        ("smaller float value %1.2f", (_c(_PI),)),
    ),
    _test(
        "TextBeforeAndAfter",
        "Here's an integer %i with text before and after it",
        "i32 -135",
        "Here's an integer -135 with text before and after it",
        ("Here's an integer %i with text before and after it", (ctypes.c_int(-135),)),
    ),
    _test(
        "IntOctal",
        "Here's an integer in octal %o and hex 0x%x",
        "i32 256, i32 256",
        "Here's an integer in octal 400 and hex 0x100",
        ("Here's an integer in octal %o and hex 0x%x", (ctypes.c_uint(256),) * 2),
    ),
    _test(
        "IntOctalNegative",
        "Here's an integer in octal %o and hex 0x%x",
        "i32 -4, i32 -4",
        "Here's an integer in octal 37777777774 and hex 0xfffffffc",
        ("Here's an integer in octal %o and hex 0x%x", (ctypes.c_uint(0xFFFFFFFC),) * 2),
    ),
    _test(
        "IntNegative",
        "%d is a negative integer",
        "i32 -135",
        "-135 is a negative integer",
        ("%d is a negative integer", (ctypes.c_int(-135),)),
    ),
    _test(
        "FloatVector2",
        "vector of floats %v2f",
        _vector(*_V12[:2]),
        "vector of floats 1.200000, 2.200000",
        ("vector of floats %f, %f", _C12[:2]),
    ),
    _test(
        "FloatVector3",
        "vector of floats %v3f",
        _vector(*_V12[:3]),
        "vector of floats 1.200000, 2.200000, 3.200000",
        ("vector of floats %f, %f, %f", _C12[:3]),
    ),
    _test(
        "FloatVector4",
        "vector of floats %v4f",
        _vector(*_V12),
        "vector of floats 1.200000, 2.200000, 3.200000, 4.200000",
        ("vector of floats %f, %f, %f, %f", _C12),
        expects="vector of floats 1.200000, 2.200000, 3.200000",
    ),
    _test(
        "FloatVectorPrecision",
        "vector of floats %1.2v4f",
        _vector(*_V12),
        "vector of floats 1.20, 2.20, 3.20, 4.20",
        ("vector of floats %1.2f, %1.2f, %1.2f, %1.2f", _C12),
    ),
    _test(
        "FloatVectorPrecisionZeroPad",
        "vector of floats %1.2v4f",
        _vector(*_V12[:2]),
        "vector of floats 1.20, 2.20, 0.00, 0.00",
        ("vector of floats %1.2f, %1.2f, %1.2f, %1.2f", (*_C12[:2], _c(0), _c(0))),
        vvl=WARNS,
        warnings=("has 2 component(s) for '%1.2v4f': padded with zeros",),
        note=": VVL's pass warns of the vector's width; its decoder reads the zeros after the record",
    ),
    _test(
        "FloatVectorZeroPad",
        "vector of floats %v4f",
        _vector(*_V12[:2]),
        "vector of floats 1.200000, 2.200000, 0.000000, 0.000000",
        ("vector of floats %f, %f, %f, %f", (*_C12[:2], _c(0), _c(0))),
        vvl=WARNS,
        warnings=("has 2 component(s) for '%v4f': padded with zeros",),
    ),
    _test(
        "FloatVectorScientificNotation",
        "vector of floats %v2e",
        _vector(*_V12[:2]),
        "vector of floats 1.200000e+00, 2.200000e+00",
        ("vector of floats %e, %e", _C12[:2]),
    ),
    _test(
        "IntVector",
        "vector of ints %v3d",
        _INTS,
        "vector of ints -4, 32, 64",
        ("vector of ints %d, %d, %d", (ctypes.c_int(-4), ctypes.c_int(32), ctypes.c_int(64))),
    ),
    _test(
        "IntVectorUnsigned",
        "vector of ints %v3u",
        _vector("i32 1", "i32 2", "i32 3"),
        "vector of ints 1, 2, 3",
        ("vector of ints %u, %u, %u", tuple(ctypes.c_uint(n) for n in (1, 2, 3))),
    ),
    _test(
        "IntVectorHex",
        "vector of ints %v3x",
        _INTS,
        "vector of ints fffffffc, 20, 40",
        ("vector of ints %x, %x, %x", tuple(ctypes.c_uint(n & 0xFFFFFFFF) for n in (-4, 32, 64))),
    ),
    _test(
        "IntVectorZeroPad",
        "vector of ints %v4d",
        _vector("i32 1", "i32 2", "i32 3"),
        "vector of ints 1, 2, 3, 0",
        ("vector of ints %d, %d, %d, %d", tuple(ctypes.c_int(n) for n in (1, 2, 3, 0))),
        vvl=WARNS,
        warnings=("has 3 component(s) for '%v4d': padded with zeros",),
    ),
    _test(
        "ScientificNotation",
        "float in sn %e and %E",
        f"{_f32(_PI)}, {_f32(_PI)}",
        "float in sn 3.141500e+00 and 3.141500E+00",
        ("float in sn %e and %E", (_c(_PI), _c(_PI))),
    ),
    _test(
        "ScientificNotationPrecision",
        "float in sn %1.2e and %1.2E",
        f"{_f32(_PI)}, {_f32(_PI)}",
        "float in sn 3.14e+00 and 3.14E+00",
        ("float in sn %1.2e and %1.2E", (_c(_PI), _c(_PI))),
    ),
    _test(
        "FloatShortest",
        "float in shortest %g and %G",
        f"{_f32(_PI)}, {_f32(_PI)}",
        "float in shortest 3.1415 and 3.1415",
        ("float in shortest %g and %G", (_c(_PI), _c(_PI))),
    ),
    _test(
        "FloatHexPrecision",
        "float in hex %1.3a and %1.9A",
        f"{_f32(_PI)}, {_f32(_PI)}",
        "float in hex 0x1.922p+1 and 0X1.921CAC000P+1",
        ("float in hex %1.3a and %1.9A", (_c(_PI), _c(_PI))),
    ),
    _test(
        "Int64",
        "Here's an unsigned long 0x%ul",
        _BIG64,
        "Here's an unsigned long 0x2000000000000001",
        ("Here's an unsigned long 0x%lx", (ctypes.c_ulonglong(_BIG),)),
    ),
    _test(
        "Int64Vector",
        "vector of ul %v4ul",
        _vector(*[_BIG64] * 4),
        "vector of ul 2000000000000001, 2000000000000001, 2000000000000001, 2000000000000001",
        ("vector of ul %lx, %lx, %lx, %lx", (ctypes.c_ulonglong(_BIG),) * 4),
    ),
    _test(
        "Int64Hex",
        "Unsigned long as decimal %lu and as hex 0x%lx",
        f"{_BIG64}, {_BIG64}",
        "Unsigned long as decimal 2305843009213693953 and as hex 0x2000000000000001",
        ("Unsigned long as decimal %lu and as hex 0x%lx", (ctypes.c_ulonglong(_BIG),) * 2),
    ),
    _test(
        "Int64VectorHex",
        "vector of lx 0x%v2lx",
        _vector(_BIG64, _BIG64),
        "vector of lx 0x2000000000000001, 2000000000000001",
        ("vector of lx 0x%lx, %lx", (ctypes.c_ulonglong(_BIG),) * 2),
    ),
    _test(
        "Int64VectorDecimal",
        "vector of lu %v2lu",
        _vector(_BIG64, _BIG64),
        "vector of lu 2305843009213693953, 2305843009213693953",
        ("vector of lu %lu, %lu", (ctypes.c_ulonglong(_BIG),) * 2),
    ),
    _test(
        "Float64",
        "floats and doubles %f %f %f %f %f",
        f"{_FOO64}, {_BAR}, {_FOO64}, {_BAR}, {_FOO64}",
        "floats and doubles 1.234568 1.234568 1.234568 1.234568 1.234568",
        ("floats and doubles %f %f %f %f %f", (_C64, _C32, _C64, _C32, _C64)),
        vvl=WARNS,
        differs=_DOUBLE_WARNING,
    ),
    _test(
        "Float64Vector",
        "vector of float64 %v3f",
        _vector(_FOO64, _FOO64, _FOO64),
        "vector of float64 1.234568, 1.234568, 1.234568",
        ("vector of float64 %f, %f, %f", (_C64,) * 3),
        vvl=WARNS,
        differs=_DOUBLE_WARNING,
    ),
    _test(
        "Float64VectorPrecision",
        "vector of float64 %1.2v2f",
        _vector(_FOO64, _FOO64),
        "vector of float64 1.23, 1.23",
        ("vector of float64 %1.2f, %1.2f", (_C64,) * 2),
        vvl=WARNS,
        differs=_DOUBLE_WARNING,
    ),
    _test(
        "FloatMix",
        "%f %f %f %f",
        f"{_f16(3.3333333333)}, {_f32(3.3333333333)}, {_f64(3.3333333333)}, {_f32(3.3333333333)}",
        "3.332031 3.333333 3.333333 3.333333",
        (
            "%f %f %f %f",
            (_half(3.3333333333), _c(3.3333333333), ctypes.c_double(3.3333333333), _c(3.3333333333)),
        ),
        vvl=WARNS,
        differs=_DOUBLE_WARNING,
    ),
    _test(
        "Float16",
        "32, 16, 32 | %f %f %f",
        f"{_f32(3.3)}, {_H33}, {_f32(3.3)}",
        "32, 16, 32 | 3.300000 3.298828 3.300000",
        ("32, 16, 32 | %f %f %f", (_c(3.3), _half(3.3), _c(3.3))),
    ),
    _test(
        "Float16Vector",
        "vector of float16 %v2f",
        _vector(_H33, _H33),
        "vector of float16 3.298828, 3.298828",
        ("vector of float16 %f, %f", (_half(3.3),) * 2),
    ),
    _test("Float16Precision", "float16 %1.3f", _H33, "float16 3.299", ("float16 %1.3f", (_half(3.3),))),
    _test(
        "Int16",
        "unsigned and signed %d %d",
        "i16 123, i16 -123",
        "unsigned and signed 123 -123",
        ("unsigned and signed %hd %hd", (ctypes.c_int(123), ctypes.c_int(-123))),
    ),
    _test(
        "Int16Vector",
        "unsigned and signed %v2d | %v2d",
        f"{_vector('i16 123', 'i16 123')}, {_vector('i16 -123', 'i16 -123')}",
        "unsigned and signed 123, 123 | -123, -123",
        ("unsigned and signed %hd, %hd | %hd, %hd", tuple(ctypes.c_int(n) for n in (123, 123, -123, -123))),
    ),
    _test(
        "Int16Hex",
        "unsigned and signed 0x%x 0x%x",
        "i16 123, i16 signext -123",
        "unsigned and signed 0x7b 0xff85",
        ("unsigned and signed 0x%hx 0x%hx", (ctypes.c_int(123), ctypes.c_int(-123))),
    ),
    _test(
        "Int8",
        "unsigned and signed %d %d",
        "i8 123, i8 signext -123",
        "unsigned and signed 123 -123",
        ("unsigned and signed %hhd %hhd", (ctypes.c_int(123), ctypes.c_int(-123))),
    ),
    _test(
        "Int8Vector",
        "unsigned and signed %v2d | %v2d",
        f"{_vector('i8 123', 'i8 123')}, {_vector('i8 -123', 'i8 -123')}",
        "unsigned and signed 123, 123 | -123, -123",
        (
            "unsigned and signed %hhd, %hhd | %hhd, %hhd",
            tuple(ctypes.c_int(n) for n in (123, 123, -123, -123)),
        ),
    ),
    _test(
        "Int8Hex",
        "unsigned and signed 0x%x 0x%x",
        "i8 123, i8 -123",
        "unsigned and signed 0x7b 0x85",
        ("unsigned and signed 0x%hhx 0x%hhx", (ctypes.c_int(123), ctypes.c_int(-123))),
    ),
    VvlCall(
        "int16_t %d and %u",
        f"{_DECODER} @9fe6278b5 (derived): an int16_t -123 is written zero-extended; %d reads it as an "
        "int16_t (the signed-16 mask), %u as the uint32_t it is",
        "%d %u",
        "i16 signext -123, i16 signext -123",
        "-123 65413",
        oracle=("%hd %hu", (ctypes.c_int(-123), ctypes.c_int(-123))),
    ),
    _test(
        "BoolAsHex",
        "bool fun 0x%x%x%x%x",
        "i1 true, i1 false, i1 true, i1 false",
        "bool fun 0x1010",
        ("bool fun 0x%x%x%x%x", tuple(ctypes.c_uint(n) for n in (1, 0, 1, 0))),
    ),
    _test(
        "BoolVector",
        "bvec2 %v2u",
        "<2 x i1> <i1 true, i1 false>",
        "bvec2 1, 0",
        ("bvec2 %u, %u", (ctypes.c_uint(1), ctypes.c_uint(0))),
    ),
    _test("BoolNonConstant", "bool %u", "i1 true", "bool 1", ("bool %u", (ctypes.c_uint(1),))),
    _test(
        "Int32Before",
        "Results: %8d %8x %8x %8x\n",
        "i32 42, i32 1, i32 2, i32 3",
        "Results:       42        1        2        3\n",
        ("Results: %8d %8x %8x %8x\n", tuple(ctypes.c_uint(n) for n in (42, 1, 2, 3))),
        expects="Results:       42        1        2        3",
    ),
    _test(
        "Int32After",
        "Results: %8x %8x %8x %8d\n",
        "i32 1, i32 2, i32 3, i32 42",
        "Results:        1        2        3       42\n",
        ("Results: %8x %8x %8x %8d\n", tuple(ctypes.c_uint(n) for n in (1, 2, 3, 42))),
        expects="Results:        1        2        3       42",
    ),
    _test(
        "Int64Before",
        "Results: %8lu %8x %8x %8x\n",
        "i64 42, i32 1, i32 2, i32 3",
        "Results:       42        1        2        3\n",
        ("Results: %8lu %8x %8x %8x\n", (ctypes.c_ulonglong(42), *(ctypes.c_uint(n) for n in (1, 2, 3)))),
        expects="Results:       42        1        2        3",
    ),
    _test(
        "Int64After",
        "Results: %8x %8x %8x %8lu\n",
        "i32 1, i32 2, i32 3, i64 42",
        "Results:        1        2        3       42\n",
        ("Results: %8x %8x %8x %8lu\n", (*(ctypes.c_uint(n) for n in (1, 2, 3)), ctypes.c_ulonglong(42))),
        expects="Results:        1        2        3       42",
    ),
    _test(
        "Int64Signed",
        "Results: %ld %ld %ld %ld\n",
        "i64 0, i64 -1, i64 -42, i64 -9223372036854775808",
        "Results: 0 -1 -42 -9223372036854775808\n",
        ("Results: %ld %ld %ld %ld\n", tuple(ctypes.c_longlong(n) for n in (0, -1, -42, -(1 << 63)))),
        expects="Results: 0 -1 -42 -9223372036854775808",
    ),
    _test(
        "Int64SignedMix",
        "Results: %d %ld %ld %d\n",
        "i32 1, i64 42, i64 -42, i32 2",
        "Results: 1 42 -42 2\n",
        (
            "Results: %d %ld %ld %d\n",
            (ctypes.c_int(1), ctypes.c_longlong(42), ctypes.c_longlong(-42), ctypes.c_int(2)),
        ),
        expects="Results: 1 42 -42 2",
    ),
    _test(
        "FunctionParam",
        "x = %d | y = %d",
        "i32 -125, i32 33",
        "x = -125 | y = 33",
        ("x = %d | y = %d", (ctypes.c_int(-125), ctypes.c_int(33))),
    ),
    _test(
        "Empty",
        "First printf with a %% and no value",
        "",
        "First printf with a % and no value",
        ("First printf with a %% and no value", ()),
        note=", its first call",
    ),
    VvlCall(
        "Empty, second call",
        f"{_TESTS}.Empty, its second call",
        "Second printf with a value %i",
        "i32 -135",
        "Second printf with a value -135",
        oracle=("Second printf with a value %i", (ctypes.c_int(-135),)),
    ),
    VvlCall(
        "a float to 2 decimals",
        f"{_DOCS}: 'Here's a float value to 2 decimals %1.2f' of 3.1415f",
        "Here's a float value to 2 decimals %1.2f",
        _f32(_PI),
        "Here's a float value to 2 decimals 3.14",
        oracle=("Here's a float value to 2 decimals %1.2f", (_c(_PI),)),
    ),
    VvlCall(
        "a vector of floats",
        f"{_DOCS}: '%1.2v4f' of vec4(1.2f, 2.2f, 3.2f, 4.2f), the components joined by ', '",
        "Here's a vector of floats %1.2v4f",
        _vector(*_V12),
        "Here's a vector of floats 1.20, 2.20, 3.20, 4.20",
        oracle=("Here's a vector of floats %1.2f, %1.2f, %1.2f, %1.2f", _C12),
    ),
    VvlCall(
        "padding",
        "VVL's debug_printf_pass.cpp @9fe6278b5 (derived): digits before a conversion are taken (its "
        "Int32Before test prints '%8d'), a '0' among them too, and formatted by snprintf",
        "Padded [%8u] and zero padded hex [%08x]",
        "i32 42, i32 42",
        "Padded [      42] and zero padded hex [0000002a]",
        oracle=("Padded [%8u] and zero padded hex [%08x]", (ctypes.c_uint(42), ctypes.c_uint(42))),
    ),
)

_BASIC = "'s BasicFormattingTest (pipeline creation): VVL"
_W, _E = f"{_BASIC} warns", f"{_BASIC} errs"
_V3_0 = _vector(*[_f32(0)] * 3)
_V3_1 = _vector(*[_f32(1)] * 3)
_V4_0 = _vector(*[_f32(0)] * 4)


def _warns(
    name: str, fmt: str, arguments: str, output: str, oracle: Oracle, *warnings: str, note: str = ""
) -> VvlCall:
    """VVL's misformatted-call test `name`, where VVL warns and instruments the call; what it prints
    then (its decoder reading the record, last in the buffer)."""
    origin = f"{_TESTS}.Misformatted{name}{_W}; it prints as {_DECODER} reads the dwords{note}"
    return VvlCall(f"Misformatted{name}", origin, fmt, arguments, output, WARNS, oracle, warnings)


def _errs(name: str, fmt: str, arguments: str, error: str) -> VvlCall:
    """VVL's misformatted-call test `name`, where VVL errs and does not instrument the call."""
    return VvlCall(
        f"Misformatted{name}", f"{_TESTS}.Misformatted{name}{_E}", fmt, arguments, None, REFUSES, error=error
    )


_INCOMPLETE, _UNKNOWN = "incomplete conversion", "unknown conversion"
_WIDTH = "is not one of 2, 3, 4"
VVL_MISFORMATTED = (
    _errs("NoVectorSize", "vector of %v", "", _UNKNOWN + " 'v'"),
    _errs("LargeVectorSize", "vector of %v5f", _V4_0, "vector width 5 " + _WIDTH),
    _errs("SmallVectorSize", "vector of %v1f", _V4_0, "vector width 1 " + _WIDTH),
    _errs("NoSpecifier1", "vector of %v3 f", _V3_0, _INCOMPLETE + " in '%v3'"),
    _errs("NoSpecifier2", "vector of %1.2l", "i32 0", _INCOMPLETE + " in '%1.2l'"),
    _errs("Unknown1", "vector of %q", "", _UNKNOWN + " 'q'"),
    _errs("Unknown2", "vector of %U", "i32 3", _UNKNOWN + " 'U'"),
    _errs("Unknown3", "vector of %1,2f", _f32(4.0), _INCOMPLETE + " in '%1'"),
    _warns(
        "ExtraArguments",
        "%d %d",
        "i32 0, i32 1, i32 2, i32 3",
        "0 1",
        ("%d %d", (ctypes.c_int(0), ctypes.c_int(1))),
        "2 argument(s) after the 2 conversion(s) of '%d %d' are not printed",
    ),
    _warns("NoModifiers", "test", "i32 3", "test", ("test", ()), "1 argument(s) after the 0 conversion(s)"),
    _errs("IsloatedPercent", "test % this", "", _UNKNOWN + " 't' in '% t'"),
    _errs("NotEnoughArguments", "test %d %d %d", "i32 3", "has 3 conversion(s) but 1 argument(s)"),
    _errs("NoArguments", "%d %d", "", "has 2 conversion(s) but 0 argument(s)"),
    _errs(
        "NotVectorArg",
        "%v3f %v3f %v3f",
        f"{_V3_0}, {_V3_1}, {_f32(1)}",
        "argument 3 is float for '%v3f', which takes a vector of 3: VVL refuses it",
    ),
    _errs(
        "NotVectorParam",
        "%v3f %v3f %f",
        f"{_V3_0}, {_V3_1}, {_V3_1}",
        "argument 3 is <3 x float> for '%f', which takes a scalar: VVL refuses it",
    ),
    _warns(
        "VectorSmall",
        "%v3f",
        _vector(_f32(0), _f32(0)),
        "0.000000, 0.000000, 0.000000",
        ("%f, %f, %f", (_c(0),) * 3),
        "has 2 component(s) for '%v3f': padded with zeros",
    ),
    _warns(
        "VectorLarge",
        "%v3f",
        _V4_0,
        "0.000000, 0.000000, 0.000000",
        ("%f, %f, %f", (_c(0),) * 3),
        "is <4 x float> for '%v3f': its first 3 components printed",
    ),
    _warns(
        "Float1",
        "%d",
        _f32(1.0),
        "1065353216",
        ("%d", (ctypes.c_int(_float_bits(1.0)),)),
        "is float for '%d', which takes an integer: its bits are printed",
    ),
    _warns(
        "Float2",
        "%f",
        "i32 4",
        "0.000000",
        ("%f", (ctypes.c_double(struct.unpack("<f", (4).to_bytes(4, "little"))[0]),)),
        "is i32 for '%f', which takes a floating-point value: its bits are printed",
    ),
    _warns(
        "FloatVector1",
        "%v3d",
        _V3_1,
        "1065353216, 1065353216, 1065353216",
        ("%d, %d, %d", (ctypes.c_int(_float_bits(1.0)),) * 3),
        "is <3 x float> for '%v3d', which takes an integer: its bits are printed",
    ),
    _warns(
        "FloatVector2",
        "%v3f",
        _vector("i32 1", "i32 1", "i32 1"),
        "0.000000, 0.000000, 0.000000",
        ("%f, %f, %f", (ctypes.c_double(struct.unpack("<f", (1).to_bytes(4, "little"))[0]),) * 3),
        "is <3 x i32> for '%v3f', which takes a floating-point value: its bits are printed",
    ),
    _warns(
        "64Int1",
        "%u",
        _BIG64,
        "1",
        ("%u", (ctypes.c_uint(1),)),
        "is i64 for '%u', which reads 32 bits a value: its low 32 bits are printed",
    ),
    _warns(
        "64Int2",
        "%lu",
        "i32 4",
        "4",
        ("%lu", (ctypes.c_ulonglong(4),)),
        "is i32 for '%lu', which takes a 64-bit integer: widened with zeros",
        note=" (the high dword the zero after the record)",
    ),
    _warns(
        "64IntVector1",
        "0x%v2x",
        _vector(_BIG64, _BIG64),
        "0x1, 20000000",
        ("0x%x, %x", (ctypes.c_uint(1), ctypes.c_uint(0x20000000))),
        "is <2 x i64> for '%v2x', which reads 32 bits a value: its dwords are printed in order",
        note=": 32 bits a component, the first component's low then high dword",
    ),
    _warns(
        "64IntVector2",
        "0x%v2lx",
        _vector("i32 1", "i32 1"),
        "0x100000001, 0",
        ("0x%lx, %lx", (ctypes.c_ulonglong(0x100000001), ctypes.c_ulonglong(0))),
        "is <2 x i32> for '%v2lx', which takes a 64-bit integer: its dwords are read in pairs",
        note=": 64 bits a component, both dwords in the first, zeros after the record in the second",
    ),
    _warns(
        "64Bool",
        "%lu",
        "i1 true",
        "1",
        ("%lu", (ctypes.c_ulonglong(1),)),
        "is i1 for '%lu', which takes a 64-bit integer: widened with zeros",
    ),
    _errs("EmptyString", "", "", "the format string is empty, which VVL refuses"),
    _errs(
        "NewLine",
        "\n\t%v3f\t\n",
        "i32 3",
        "argument 1 is i32 for '%v3f', which takes a vector of 3: VVL refuses it",
    ),
    _errs("VectorNewLine", "x = %v3\n", _V3_0, _INCOMPLETE + " in '%v3'"),
    _errs("Pointer", "address = 0x%lx", "ptr addrspace(1) null", "type ptr addrspace(1) is a pointer"),
    _errs("NotPointer", "address = %p", _BIG64, "'%p' takes a pointer, not i64"),
)

# Derived from VVL's pass and decoder, beyond its tests.
VVL_DERIVED = (
    VvlCall(
        "%ld with a negative int",
        f"{_DECODER} @9fe6278b5: '%ld' reads 64 bits, the int's dword then the zero after the record: "
        "the int is not sign-extended",
        "%ld",
        "i32 -7",
        "4294967289",
        WARNS,
        ("%ld", (ctypes.c_longlong(0xFFFFFFF9),)),
        ("is i32 for '%ld', which takes a 64-bit integer: widened with zeros",),
    ),
    VvlCall(
        "%d with a double",
        f"{_DECODER} @9fe6278b5: a double is written as two dwords; '%d' reads the low one",
        "%d",
        _f64(1.5),
        "0",
        WARNS,
        ("%d", (ctypes.c_int(0),)),
        ("is double for '%d', which reads 32 bits a value: its low 32 bits are printed",),
    ),
    VvlCall(
        "%f with a 64-bit integer",
        f"{_DECODER} @9fe6278b5: an integer sets no bit of the double mask, so '%f' reads the low dword as "
        "a float",
        "%f",
        f"i64 {_float_bits(0.75) | 7 << 32}",
        "0.750000",
        WARNS,
        ("%f", (ctypes.c_double(0.75),)),
        ("is i64 for '%f', which reads 32 bits a value: its low 32 bits are printed",),
    ),
    VvlCall(
        "a 64-bit value for %u, then another argument",
        f"{_DECODER} @9fe6278b5: VVL's reader takes the i64's high dword for the next conversion; this "
        "project reads each argument from its own dwords",
        "%u %u",
        f"{_BIG64}, i32 7",
        "1 536870912",
        WARNS,
        ("%u %u", (ctypes.c_uint(1), ctypes.c_uint(0x20000000))),
        ("is i64 for '%u', which reads 32 bits a value: its low 32 bits are printed",),
        ours="1 7",
        differs="an argument's dwords are read for its own conversion, not the next argument's",
    ),
    VvlCall(
        "an unsigned 16-bit value for %d",
        "VVL's debug_printf_pass.cpp @9fe6278b5: the signed-16 mask comes from the SPIR-V type's signedness "
        "(a uint16_t 0xff85 prints 65413 with %d); LLVM's i16 has none, so %d reads it signed",
        "%d",
        "i16 -123",
        "65413",
        ours="-123",
        differs="LLVM IR has no signedness: a signed conversion reads an i8/i16 as signed",
        oracle=("%d", (ctypes.c_int(65413),)),
    ),
)
VVL_CALLS = (*VVL_PRINTED, *VVL_MISFORMATTED, *VVL_DERIVED)

CASES: tuple = (*LLPC_LOWERINGS, *LLPC_MESSAGES, *XGL_DECODINGS, *VVL_CALLS)


def counts() -> dict[str, int]:
    """How many cases each source gives."""
    tally: dict[str, int] = {}
    for case in CASES:
        tally[case.source] = tally.get(case.source, 0) + 1
    return tally
