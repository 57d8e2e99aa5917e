"""The pass (SPEC sections 1-6): every argument type and vector width, the table, the buffer protocol
(checked by JIT-running lowered code on numpy buffers), abort records, the accepted input forms, the
targets, and linking several modules into one table."""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import msgpack
import numpy
import pytest
from dprintf_ir import ABORT, DECLARATIONS, PRINTF, call, constant, string_global
from host_jit import host_function, pointers

from lowering.lowered_module import LoweredModule, Source
from lowering.pipeline import lower_sources
from lowering.targets.target import Aggregation, get_target
from metadata.elf_notes import pal_metadata_ir
from metadata.ids import format_string_id
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable, unpack_document
from metadata.wire import OFFSET_CLAMP_DWORDS

SCALARS = ("i1", "i8", "i16", "i32", "i64", "half", "float", "double")
WIDTHS = (0, 2, 3, 4, 8, 16)
# The conversion, buffer token, and one value per component index for each IR scalar. Integer values
# have their top bit set, so that sign extension instead of zero extension would show.
SCALAR_CASES = {
    "i1": ("u", "i32", lambda k: (k + 1) & 1),
    "i8": ("u", "i32", lambda k: 0x80 + k),
    "i16": ("u", "i32", lambda k: 0x8000 + k),
    "i32": ("u", "i32", lambda k: 0x80000000 + k),
    "i64": ("llu", "i64", lambda k: 0x8123456789ABCDEF + k),
    "half": ("f", "f32", lambda k: 1.5 + k),
    "float": ("f", "f32", lambda k: -2.25 - k),
    "double": ("f", "f64", lambda k: 1 / 3 + k),
}
HEADER_WORDS = 4


def ir_type(scalar: str, width: int) -> str:
    return f"<{width} x {scalar}>" if width else scalar


def type_case(scalar: str, width: int) -> tuple[str, str, object]:
    """(format string, layout token, IR constant value) for one argument of `scalar` x `width`."""
    conversion, token, value = SCALAR_CASES[scalar]
    prefix = f"v{width}" if width else ""
    values = [value(k) for k in range(width or 1)]
    return f"{scalar} {width}: %{prefix}{conversion}\n", prefix + token, values if width else values[0]


def payload_dwords(scalar: str, values) -> list[int]:
    """What SPEC section 4 says one value occupies in the buffer, computed with numpy."""
    dwords: list[int] = []
    for value in values if isinstance(values, list) else [values]:
        if scalar in ("i1", "i8", "i16", "i32"):
            dwords.append(value)
        elif scalar == "i64":
            dwords += [value & 0xFFFFFFFF, value >> 32]
        elif scalar == "double":
            bits = int(numpy.float64(value).view(numpy.uint64))
            dwords += [bits & 0xFFFFFFFF, bits >> 32]
        else:
            dwords.append(
                int(numpy.float32(numpy.float16(value) if scalar == "half" else value).view(numpy.uint32))
            )
    return dwords


def module(calls: list[tuple[str, str, list[tuple[str, str]]]], *, callee: str = PRINTF) -> str:
    """`@entry(ptr addrspace(7) %buf)` making `calls`: (global name, format string, typed arguments)."""
    strings = "".join(string_global(name, text) for name, text, _ in dict((c[0], c) for c in calls).values())
    body = "".join(call(callee, "%buf", name, arguments) for name, _, arguments in calls)
    return f"{strings}{DECLARATIONS}define void @entry(ptr addrspace(7) %buf) {{\n{body}  ret void\n}}\n"


def lower(text: str, target: str = "cpu") -> LoweredModule:
    return lower_sources([Source("test.ll", text)], target)


def assert_lowered(lowered: LoweredModule, calls: int) -> None:
    """No call of the original callees is left, the IR verifies, and each call made one atomic add."""
    assert "lgc.debug" not in lowered.ir
    llvm.parse_assembly(lowered.ir).verify()
    assert len(re.findall(r"\batomicrmw add\b", lowered.ir)) == calls


class Jitted:
    """A lowered module compiled by MCJIT for the host; `entry` called on numpy buffers."""

    def __init__(self, lowered: LoweredModule, entry: str = "entry", buffers: int = 1) -> None:
        self.function = host_function(lowered.ir, entry, pointers(buffers))

    def __call__(self, *buffers: numpy.ndarray) -> None:
        self.function(*(buffer.ctypes.data for buffer in buffers))


def buffer(capacity: int, offset: int = 0) -> numpy.ndarray:
    """A printf buffer as the driver sets it up: bufferOffset, reserved0 = capacity in dwords, reserved1."""
    words = numpy.zeros(HEADER_WORDS + capacity, numpy.uint32)
    words[0], words[1], words[2] = offset & 0xFFFFFFFF, offset >> 32, capacity
    return words


def entry_words(text: str, token: str, payload: list[int]) -> list[int]:
    """The entry a call writes (SPEC section 4): the 64-bit header with the SPEC section 2 ID, the payload."""
    size = 2 + len(payload)
    header = (format_string_id(text, parse_layout(token)) << 16) | size
    return [header & 0xFFFFFFFF, header >> 32, *payload]


ALL_TYPES = [(scalar, width) for scalar in SCALARS for width in WIDTHS]


@pytest.mark.parametrize(("scalar", "width"), ALL_TYPES, ids=[ir_type(s, w) for s, w in ALL_TYPES])
def test_each_argument_type_lowers_to_one_atomic_add_and_one_table_entry(scalar, width):
    text, token, value = type_case(scalar, width)
    typed = ir_type(scalar, width)
    lowered = lower(module([("fmt", text, [(typed, constant(typed, value))])]))
    assert_lowered(lowered, calls=1)
    layout = parse_layout(token)
    expected = FormatEntry(
        format_string_id(text, layout), text, 1, (1 if scalar in ("i64", "double") else 0,)
    )
    assert list(lowered.table) == [expected]


def all_types_calls(callee: str = PRINTF) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """One call per argument type and vector width, for `module`."""
    calls = []
    for index, (scalar, width) in enumerate(ALL_TYPES):
        text, _, value = type_case(scalar, width)
        typed = ir_type(scalar, width)
        calls.append((f"f{index}", text, [(typed, constant(typed, value))]))
    return calls


def test_every_argument_type_writes_exactly_the_dwords_of_spec_section_4():
    lowered = lower(module(all_types_calls()))
    assert_lowered(lowered, calls=len(ALL_TYPES))
    expected = []
    for scalar, width in ALL_TYPES:
        text, token, value = type_case(scalar, width)
        expected += entry_words(text, token, payload_dwords(scalar, value))
    words = buffer(capacity=len(expected) + 7)
    Jitted(lowered)(words)
    assert int(words[0]) == len(expected) and words[1] == 0
    assert words[HEADER_WORDS:].tolist() == expected + [0] * 7


def test_several_arguments_pack_back_to_back_without_padding():
    arguments = [
        ("i8", "255"),
        ("double", constant("double", 2.5)),
        ("<3 x half>", constant("<3 x half>", [1, 2, 3])),
    ]
    text = "%hhu %f %v3f"
    words = buffer(capacity=16)
    Jitted(lower(module([("fmt", text, arguments)])))(words)
    payload = [255, *payload_dwords("double", 2.5), *payload_dwords("half", [1.0, 2.0, 3.0])]
    assert words[HEADER_WORDS : HEADER_WORDS + 8].tolist() == entry_words(text, "i32,f64,v3f32", payload)


ONE_I32 = module([("fmt", "%d", [("i32", "7")])])  # an entry of 3 dwords


@pytest.mark.parametrize(("capacity", "written"), [(0, False), (2, False), (3, True), (4, True)])
def test_an_entry_is_written_only_where_it_fits_the_capacity_in_reserved0(capacity, written):
    words = buffer(capacity)
    Jitted(lower(ONE_I32))(words)
    assert int(words[0]) == 3, "bufferOffset counts every allocation, written or not"
    expected = entry_words("%d", "i32", [7]) if written else [0, 0, 0]
    assert words[HEADER_WORDS:][:3].tolist() == expected[:capacity]
    assert not words[HEADER_WORDS + (3 if written else 0) :].any()


def test_entries_follow_each_other_and_stop_whole_at_the_capacity():
    lowered = lower(module([("fmt", "%d", [("i32", str(n))]) for n in range(4)]))
    words = buffer(capacity=10)  # room for three entries of 3 dwords, not four
    Jitted(lowered)(words)
    assert int(words[0]) == 12
    assert words[HEADER_WORDS:].tolist() == sum((entry_words("%d", "i32", [n]) for n in range(3)), []) + [0]


def test_the_write_offset_is_clamped_to_2_gib():
    offset = OFFSET_CLAMP_DWORDS + 100
    words = buffer(capacity=OFFSET_CLAMP_DWORDS + 16, offset=offset)  # 2 GiB of lazily zeroed pages
    words[2] = offset + 3
    Jitted(lower(ONE_I32))(words)
    assert int(words[0]) | int(words[1]) << 32 == offset + 3
    at = HEADER_WORDS + OFFSET_CLAMP_DWORDS
    assert words[at : at + 3].tolist() == entry_words("%d", "i32", [7])
    assert not words[at + 3 :].any()


def test_amdpal_lowering_has_no_capacity_check():
    lowered = lower(ONE_I32, "amdpal")
    assert_lowered(lowered, calls=1)
    assert "load" not in lowered.ir and "br " not in lowered.ir
    assert f"i64 {OFFSET_CLAMP_DWORDS}" in lowered.ir


def test_nvptx_lowering_moves_the_buffer_to_global_memory_and_aggregates_where_ptxas_cannot():
    aborting = module([("fmt", "%d", [("i32", "8")])], callee=ABORT).replace("@entry", "@fail")
    sources = [Source("a.ll", ONE_I32), Source("b.ll", aborting)]
    lowered = lower_sources(sources, "nvptx")
    assert_lowered(lowered, calls=2)
    assert "addrspace(7)" not in lowered.ir
    assert "define void @entry(ptr addrspace(1) %buf)" in lowered.ir
    assert 'target triple = "nvptx64-nvidia-cuda"' in lowered.ir
    # With Aggregation.ALWAYS: the printf's lanes reserve together in the IR; abort: per lane.
    lowered = lower_sources(sources, dataclasses.replace(get_target("nvptx"), aggregation=Aggregation.ALWAYS))
    assert "@llvm.nvvm.match.any.sync.i64" in lowered.ir
    assert re.search(r"atomicrmw add ptr addrspace\(1\) %buf, i64 6 monotonic", lowered.ir)
    # With Aggregation.OUTSIDE_ENTRIES (and printf inlined), an entry's printf to its own buffer
    # parameter: one atomic a lane in the IR, which ptxas aggregates once the kernel inlines the entry.
    target = dataclasses.replace(
        get_target("nvptx"), aggregation=Aggregation.OUTSIDE_ENTRIES, cold_printf=False
    )
    lowered = lower_sources(sources, target)
    assert "@llvm.nvvm.match.any.sync.i64" not in lowered.ir
    assert re.search(r"atomicrmw add ptr addrspace\(1\) %buf, i64 3 monotonic", lowered.ir)
    assert re.search(r"atomicrmw add ptr addrspace\(1\) %buf, i64 6 monotonic", lowered.ir)


CALL_BODY = "  call void @body(ptr addrspace(7) %buf)\n"
BUFFERS_PTXAS_CANNOT_SEE = {
    # case: (what the entry does, the function that prints, its buffer operand)
    "called": (CALL_BODY, "internal void @body(ptr addrspace(7) %b)", "%b"),
    "noinline": ("", "void @body(ptr addrspace(7) %b) noinline", "%b"),
    "chosen": ("", "void @body(ptr addrspace(7) %b, ptr addrspace(7) %c, i1 %s)", "%chosen"),
}


@pytest.mark.parametrize("case", BUFFERS_PTXAS_CANNOT_SEE)
def test_nvptx_printf_lanes_reserve_together_in_the_ir_where_ptxas_cannot_see_one_buffer(case):
    """A function called in the module, a `noinline` one, a buffer chosen at run time: ptxas cannot tell
    that the warp's lanes share a buffer, so they reserve together in the IR, the leader adding for all."""
    entry_body, printing, buffer = BUFFERS_PTXAS_CANNOT_SEE[case]
    choose = "  %chosen = select i1 %s, ptr addrspace(7) %b, ptr addrspace(7) %c\n"
    text = (
        string_global("fmt", "%d")
        + DECLARATIONS
        + f"define void @entry(ptr addrspace(7) %buf) {{\n{entry_body}  ret void\n}}\n"
        + f"define {printing} {{\n"
        + (choose if buffer == "%chosen" else "")
        + call(PRINTF, buffer, "fmt", [("i32", "7")])
        + "  ret void\n}\n"
    )
    lowered = lower_sources([Source("a.ll", text)], "nvptx")
    assert "@llvm.nvvm.match.any.sync.i64" in lowered.ir
    assert re.search(r"atomicrmw add ptr addrspace\(1\) %\S+, i64 %total\S* monotonic", lowered.ir)


ABORT_PROGRAM = (
    string_global("step", "step %d\n")
    + string_global("fail", "check failed at %d")
    + DECLARATIONS
    + textwrap.dedent(
        """
        define void @check(ptr addrspace(7) %abort, i32 %i) noinline {
        entry:
          %bad = icmp eq i32 %i, 3
          br i1 %bad, label %fail, label %ok
        fail:
        """
    )
    + call(ABORT, "%abort", "fail", [("i32", "%i")])
    + textwrap.dedent(
        """\
          br label %ok
        ok:
          ret void
        }

        define void @entry(ptr addrspace(7) %buf, ptr addrspace(7) %abort) {
        entry:
          br label %loop
        loop:
          %i = phi i32 [ 0, %entry ], [ %next, %loop ]
        """
    )
    + call(PRINTF, "%buf", "step", [("i32", "%i")])
    + textwrap.dedent(
        """\
          call void @check(ptr addrspace(7) %abort, i32 %i)
          %next = add i32 %i, 1
          %more = icmp ult i32 %next, 10
          br i1 %more, label %loop, label %done
        done:
          ret void
        }
        """
    )
)

_ABORT_RUNNER = """
import sys, numpy, llvmlite.binding as llvm, ctypes
from lowering.targets.machines import host_target_machine
ir, printf_path, abort_path = sys.argv[1:]
buffers = [numpy.memmap(path, numpy.uint32, "r+") for path in (printf_path, abort_path)]
engine = llvm.create_mcjit_compiler(llvm.parse_assembly(open(ir).read()), host_target_machine())
engine.finalize_object()
entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("entry"))
entry(*(buffer.ctypes.data for buffer in buffers))
"""


def test_abort_writes_its_record_then_stops_the_invocation(tmp_path):
    lowered = lower(ABORT_PROGRAM)
    assert_lowered(lowered, calls=2)
    assert re.search(r"fence seq_cst\n\s+call void @llvm\.trap\(\)\n\s+unreachable", lowered.ir)
    (tmp_path / "lowered.ll").write_text(lowered.ir)
    buffer(64).tofile(tmp_path / "printf")
    buffer(64).tofile(tmp_path / "abort")
    paths = [str(tmp_path / name) for name in ("lowered.ll", "printf", "abort")]
    process = subprocess.run([sys.executable, "-c", _ABORT_RUNNER, *paths], capture_output=True, timeout=60)
    assert process.returncode == -signal.SIGILL, process.stderr.decode()
    printed = numpy.fromfile(tmp_path / "printf", numpy.uint32)
    steps = sum((entry_words("step %d\n", "i32", [i]) for i in range(4)), [])
    assert int(printed[0]) == len(steps), "nothing runs after the abort of step 3"
    assert printed[HEADER_WORDS:].tolist() == steps + [0] * (64 - len(steps))
    aborted = numpy.fromfile(tmp_path / "abort", numpy.uint32)
    entry = entry_words("check failed at %d", "i32", [3])
    record = [len(entry) * 4, 0, *entry, 0]  # payloadBytes (u64), the entry, padding to 8 bytes
    assert int(aborted[0]) == len(record) == 6
    assert aborted[HEADER_WORDS:].tolist() == record + [0] * (64 - len(record))


def test_abort_record_is_even_sized_and_padded_only_when_needed():
    lowered = lower(module([("fmt", "%lld", [("i64", "-1")])], callee=ABORT), "amdpal")
    assert_lowered(lowered, calls=1)
    assert "atomicrmw add ptr addrspace(7) %buf, i64 6 monotonic" in lowered.ir  # 2 + (2 + 2): no padding
    assert "store i32 0" not in lowered.ir
    padded = lower(module([("fmt", "%d", [("i32", "5")])], callee=ABORT), "amdpal")
    assert "atomicrmw add ptr addrspace(7) %buf, i64 6 monotonic" in padded.ir  # 2 + (2 + 1) + 1
    assert "store i32 0" in padded.ir


@pytest.mark.parametrize("target", ["cpu", "amdpal", "nvptx"])
def test_abort_stores_payload_bytes_last_with_release_ordering_then_fences_and_traps(target):
    lowered = lower(module([("fmt", "%d %lld", [("i32", "5"), ("i64", "-1")])], callee=ABORT), target)
    body = lowered.ir[lowered.ir.index("define void @entry") :]
    stores = [line.strip() for line in body.splitlines() if line.strip().startswith("store")]
    assert len(stores) == 5  # entry header, two arguments, padding, payloadBytes
    assert re.fullmatch(r"store atomic i64 20, ptr addrspace\(\d\) %rec\S* release, align 8", stores[-1])
    assert not any("atomic" in store for store in stores[:-1])
    tail = body[body.index(stores[-1]) :]
    assert tail.index("fence seq_cst") < tail.index("call void @llvm.trap()")


def test_printf_and_abort_share_one_table():
    text = (
        string_global("fmt", "value %d")
        + DECLARATIONS
        + "define void @entry(ptr addrspace(7) %buf) {\n"
        + call(PRINTF, "%buf", "fmt", [("i32", "1")])
        + call(ABORT, "%buf", "fmt", [("i8", "2")])
        + "  unreachable\n}\n"
    )
    lowered = lower(text)
    assert_lowered(lowered, calls=2)
    assert list(lowered.table) == [FormatEntry.for_call("value %d", parse_layout("i32"))]


def test_both_declaration_forms_and_constant_expression_operands_are_accepted():
    variadic = "call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4)"
    fixed = "call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.abort"
    fixed += "(ptr addrspace(7) %buf, ptr addrspace(4)"
    text = textwrap.dedent(
        f"""
        @a = private addrspace(4) constant [3 x i8] c"%d\\00"
        @b = private constant [4 x i8] c"b %d"
        @"quoted name" = internal addrspace(4) constant [8 x i8] c"%u\\00after"
        @0 = private addrspace(4) constant [4 x i8] zeroinitializer
        @c = private addrspace(4) constant [6 x i8] c"\\E2\\82\\AC %x"
        declare void @lgc.debug.printf(...)
        declare void @lgc.debug.abort(ptr addrspace(7), ptr addrspace(4), ...)
        define void @entry(ptr addrspace(7) %buf) {{
          tail {variadic} @a, i32 1)
          {variadic} addrspacecast (ptr @b to ptr addrspace(4)), i32 2)
          {variadic} getelementptr inbounds ([8 x i8], ptr addrspace(4) @"quoted name", i64 0, i64 0), i32 3)
          {variadic} noundef @0)
          {variadic} @c, i16 4)
          {fixed} @0)
          unreachable
        }}
        """
    )
    lowered = lower(text)
    assert_lowered(lowered, calls=6)
    assert {entry.string for entry in lowered.table} == {"%d", "b %d", "%u", "", "€ %x"}
    assert "@0" not in lowered.ir and "@b" not in lowered.ir, "format strings that became dead are dropped"


def test_the_table_mask_has_one_bit_per_64_bit_argument_over_several_words():
    arguments = [("i64" if n % 3 == 0 else "float", "0" if n % 3 == 0 else "0.0") for n in range(70)]
    text = " ".join("%lld" if ty == "i64" else "%f" for ty, _ in arguments)
    lowered = lower(module([("fmt", text, arguments)]))
    (entry,) = lowered.table
    mask = sum(1 << n for n in range(70) if n % 3 == 0)
    assert entry.argument_count == 70
    assert entry.sixty_four_bit == (mask & (1 << 64) - 1, mask >> 64)


def test_debug_locations_and_phis_around_lowered_calls_survive():
    text = textwrap.dedent(
        """
        @s = private addrspace(4) constant [3 x i8] c"%d\\00"
        declare void @lgc.debug.printf(...)
        define i32 @entry(ptr addrspace(7) %buf, i1 %c) !dbg !5 {
        first:
          br i1 %c, label %left, label %join
        left:
          call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @s, i32 1), !dbg !9
          br label %join
        join:
          %v = phi i32 [ 1, %left ], [ 2, %first ]
          ret i32 %v
        }
        !llvm.dbg.cu = !{!0}
        !llvm.module.flags = !{!3}
        !0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, emissionKind: FullDebug)
        !1 = !DIFile(filename: "shader.c", directory: "/src")
        !3 = !{i32 2, !"Debug Info Version", i32 3}
        !5 = distinct !DISubprogram(name: "entry", file: !1, line: 1, unit: !0, spFlags: DISPFlagDefinition)
        !9 = !DILocation(line: 7, column: 3, scope: !5)
        """
    )
    lowered = lower(text)
    assert_lowered(lowered, calls=1)
    atomic = next(line for line in lowered.ir.splitlines() if "atomicrmw" in line)
    assert re.search(r"!dbg !\d+$", atomic)
    assert "DILocation(line: 7, column: 3" in lowered.ir


def test_existing_names_are_left_alone():
    text = module([("fmt", "%d", [("i32", "1")])], callee=ABORT) + textwrap.dedent(
        """
        declare void @llvm.trap()
        define internal void @dprintf.printf.0() {
          ret void
        }
        define void @keep() {
          call void @dprintf.printf.0()
          ret void
        }
        """
    )
    lowered = lower(text)
    assert_lowered(lowered, calls=1)
    assert "define internal void @dprintf.printf.0()" in lowered.ir


def test_a_module_without_calls_lowers_to_itself():
    text = "define i32 @f(i32 %x) {\n  %y = add i32 %x, 1\n  ret i32 %y\n}\n"
    lowered = lower(text)
    assert len(lowered.table) == 0
    assert "%y = add i32 %x, 1" in lowered.ir


def test_several_modules_link_into_one_table():
    first = module([("fmt", "first %d", [("i32", "1")]), ("shared", "both %f", [("float", "1.0")])])
    second = (
        string_global("other", "second %lld")
        + string_global("shared2", "both %f")
        + DECLARATIONS
        + "define void @more(ptr addrspace(7) %buf) {\n"
        + call(PRINTF, "%buf", "other", [("i64", "2")])
        + call(ABORT, "%buf", "shared2", [("half", constant("half", 1))])
        + "  unreachable\n}\n"
    )
    lowered = lower_sources([Source("a.ll", first), Source("b.ll", second)])
    assert_lowered(lowered, calls=4)
    assert "define void @entry" in lowered.ir and "define void @more" in lowered.ir
    expected = FormatTable(
        FormatEntry.for_call(string, parse_layout(token))
        for string, token in (("first %d", "i32"), ("both %f", "f32"), ("second %lld", "i64"))
    )
    assert lowered.table == expected


def test_amdpal_puts_the_table_into_pal_metadata_merged_with_the_existing_document():
    existing = FormatTable([FormatEntry.for_call("old %u", parse_layout("i32"))])
    document = existing.encode({"amdpal.version": [3, 0]})
    text = ONE_I32 + '!llvm.ident = !{!1}\n!1 = !{!"test"}\n' + pal_metadata_ir(document, node=0)
    lowered = lower(text, "amdpal")
    assert_lowered(lowered, calls=1)
    (node,) = re.findall(r"^!amdgpu\.pal\.metadata\.msgpack = !\{(!\d+)\}$", lowered.ir, re.M)
    (escaped,) = re.findall(rf'^{node} = !{{!"(.*)"}}$', lowered.ir, re.M)
    raw = re.sub(r"\\([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), escaped).encode("latin-1")
    merged = unpack_document(raw)
    assert merged["amdpal.version"] == [3, 0]
    assert FormatTable.from_document(merged) == FormatTable([*existing, *lowered.table])
    assert msgpack.unpackb(raw)["amdpal.format_strings"][".version"] == 1
