"""The pass's errors through the command line (SPEC sections 1 and 8): every class of bad input exits 1
with `error:` lines naming the file, line, function and call (and the source line of `!dbg`), prints
no traceback, writes no output file, and reports every problem of a module at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from dprintf_ir import DECLARATIONS, PRINTF, call, string_global

from lowering.cli.main import main
from lowering.ir.diagnostics import LoweringError
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

# The fully variadic form lets a call omit operands: LLVM itself rejects that under the other form.
VARIADIC_DECLARATIONS = "declare void @lgc.debug.printf(...)\ndeclare void @lgc.debug.abort(...)\n"
OK_CALL = call(PRINTF, "%buf", "ok", [("i32", "1")])


def bad_call(operands: str, callee: str = "printf") -> str:
    return f"  call void (...) @lgc.debug.{callee}({operands})\n"


def program(calls: list[str], globals_: str = "", parameters: str = "") -> str:
    """`@main` making a good printf call, then `calls`."""
    return (
        string_global("ok", "ok %d")
        + globals_
        + VARIADIC_DECLARATIONS
        + f"define void @main(ptr addrspace(7) %buf{parameters}) {{\n"
        + OK_CALL
        + "".join(calls)
        + "  ret void\n}\n"
    )


def line_of(text: str, line: str) -> int:
    return text.splitlines().index(line.rstrip("\n")) + 1


def lower_cli(capsys, tmp_path, *texts: str, target: str = "cpu") -> tuple[int, list[str]]:
    """Run `dprintf lower` on files holding `texts` with `-o`; exit status and stderr lines."""
    paths = []
    for index, text in enumerate(texts):
        path = tmp_path / ("test.ll" if index == 0 else f"test{index}.ll")
        path.write_text(text)
        paths.append(str(path))
    output = tmp_path / "out.ll"
    status = main(["lower", *paths, "-o", str(output), "--target", target])
    captured = capsys.readouterr()
    assert captured.out == ""
    assert not output.exists(), "no output file is written for bad input"
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), captured.err
    return status, lines


P = "ptr addrspace(7) %buf, ptr addrspace(4)"
CALL_CASES = {
    "non-constant string": (bad_call(f"{P} %fmt"), "", ", ptr addrspace(4) %fmt", "%fmt is not a constant"),
    "external string": (
        bad_call(f"{P} @e"),
        "@e = external addrspace(4) constant [4 x i8]\n",
        "",
        "@e is external",
    ),
    "mutable string": (  # a `global` of addrspace(4), LGC's constant address space, is read as constant
        bad_call(f"{P} addrspacecast (ptr addrspace(1) @m to ptr addrspace(4))"),
        '@m = private addrspace(1) global [3 x i8] c"hi\\00"\n',
        "",
        "@m is not constant",
    ),
    "string of i16": (
        bad_call(f"{P} @w"),
        "@w = private addrspace(4) constant [2 x i16] [i16 37, i16 0]\n",
        "",
        "@w has type [2 x i16], not [n x i8]",
    ),
    "not at byte 0": (
        bad_call(f"{P} getelementptr (i8, ptr addrspace(4) @ok, i64 1), i32 2"),
        "",
        "",
        "does not point at the start of its string",
    ),
    "not UTF-8": (
        bad_call(f"{P} @u, i32 2"),
        '@u = private addrspace(4) constant [4 x i8] c"\\FF%d\\00"\n',
        "",
        "not UTF-8",
    ),
    "pointer argument": (bad_call(f"{P} @ok, ptr null"), "", "", "argument 1: type ptr is a pointer"),
    "i128 argument": (
        bad_call(f"{P} @ok, i128 1"),
        "",
        "",
        "type i128 is an integer of an unsupported width",
    ),
    "struct argument": (
        bad_call(f"{P} @ok, {{ i32 }} zeroinitializer"),
        "",
        "",
        "type { i32 } is a structure",
    ),
    "array argument": (bad_call(f"{P} @ok, [2 x i32] zeroinitializer"), "", "", "type [2 x i32] is an array"),
    "scalable vector argument": (
        bad_call(f"{P} @ok, <vscale x 2 x i32> zeroinitializer"),
        "",
        "",
        "is a scalable vector",
    ),
    "bfloat argument": (bad_call(f"{P} @ok, bfloat 0xR0000"), "", "", "type bfloat is not supported"),
    "fp128 argument": (bad_call(f"{P} @ok, fp128 0xL0"), "", "", "type fp128 is not supported"),
    "vector of pointers": (bad_call(f"{P} @ok, <2 x ptr> zeroinitializer"), "", "", "is a vector of ptr"),
    "too few arguments": (bad_call(f"{P} @ok"), "", "", "has 1 conversion(s) but 0 argument(s)"),
    "float for %d": (bad_call(f"{P} @ok, float 1.0"), "", "", "'%d' takes an integer, not f32"),
    "i64 for %d": (bad_call(f"{P} @ok, i64 1"), "", "", "'%d' takes an integer of at most 32 bits, not i64"),
    "vector width": (
        bad_call(f"{P} @v, <2 x float> zeroinitializer"),
        string_global("v", "%v4f"),
        "",
        "'%v4f' takes a vector of 4, not v2f32",
    ),
    "%s": (
        bad_call(f"{P} @s, i32 1"),
        string_global("s", "%s"),
        "",
        "'%s' takes a pointer to a constant string, not i32",
    ),
    "%s of a parameter": (
        bad_call(f"{P} @s, ptr %text"),
        string_global("s", "%s"),
        ", ptr %text",
        "argument 1 for '%s': %text is a parameter of @main, not a constant string",
    ),
    "%p of an integer": (
        bad_call(f"{P} @p, i64 1"),
        string_global("p", "%p"),
        "",
        "'%p' takes a pointer, not i64",
    ),
    "%n": (bad_call(f"{P} @n, i32 1"), string_global("n", "%n"), "", "'%n' is not supported"),
    "entry over 65535 dwords": (
        bad_call(f"{P} @big" + ", <16 x double> zeroinitializer" * 2048),
        string_global("big", "%v16f" * 2048),
        "",
        "the entry takes 65538 dwords, more than the 65535",
    ),
    "no operands": (
        "  call void (...) @lgc.debug.printf()\n",
        "",
        "",
        "missing the buffer and format string operands",
    ),
    "no format string": (bad_call("ptr addrspace(7) %buf"), "", "", "missing the format string operand"),
    "buffer not a pointer": (
        bad_call("i32 0, ptr addrspace(4) @ok, i32 1"),
        "",
        "",
        "the buffer operand `i32 0` is not a pointer",
    ),
}


@pytest.mark.parametrize("case", CALL_CASES, ids=list(CALL_CASES))
def test_each_bad_call_is_an_error_naming_file_line_function_and_call(capsys, tmp_path, case):
    bad, globals_, parameters, message = CALL_CASES[case]
    text = program([bad], globals_, parameters)
    status, lines = lower_cli(capsys, tmp_path, text)
    assert status == 1
    (line,) = lines
    prefix = (
        f"error: {tmp_path / 'test.ll'}:{line_of(text, bad)}: call 2 to @lgc.debug.printf in function @main: "
    )
    assert line.startswith(prefix)
    assert message in line


def test_abort_calls_are_checked_the_same_way(capsys, tmp_path):
    bad = bad_call(f"{P} @ok, double 1.0", callee="abort")
    status, lines = lower_cli(capsys, tmp_path, program([bad]))
    assert status == 1
    where = f"{tmp_path / 'test.ll'}:{line_of(program([bad]), bad)}"
    assert lines == [
        f"error: {where}: call 1 to @lgc.debug.abort in function @main: "
        "argument 1 of 'ok %d': '%d' takes an integer, not f64"
    ]


def test_every_problem_of_a_module_is_reported_at_once(capsys, tmp_path):
    cases = ["pointer argument", "external string", "float for %d", "no format string", "%s"]
    calls = [CALL_CASES[case][0] for case in cases]
    text = program(calls, "".join(CALL_CASES[case][1] for case in cases))
    status, lines = lower_cli(capsys, tmp_path, text)
    assert status == 1
    assert len(lines) == len(cases)
    for number, (line, case, bad) in enumerate(zip(lines, cases, calls, strict=True), start=2):
        assert f"test.ll:{line_of(text, bad)}: call {number} to @lgc.debug.printf in function @main:" in line
        assert CALL_CASES[case][3] in line


DEBUG_PROGRAM = textwrap.dedent(
    """
    @s = private addrspace(4) constant [3 x i8] c"%d\\00"
    declare void @lgc.debug.printf(...)
    define void @kernel(ptr addrspace(7) %buf) !dbg !5 {
      call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @s), !dbg !10
      call void (...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @s, float 1.0), !dbg !11
      ret void
    }
    !llvm.dbg.cu = !{!0}
    !llvm.module.flags = !{!3}
    !0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, emissionKind: FullDebug)
    !1 = !DIFile(filename: "shader.c", directory: "/src")
    !3 = !{i32 2, !"Debug Info Version", i32 3}
    !5 = distinct !DISubprogram(name: "kernel", file: !1, line: 1, unit: !0, spFlags: DISPFlagDefinition)
    !7 = distinct !DILexicalBlock(scope: !5, file: !8, line: 3)
    !8 = !DIFile(filename: "include/util.h", directory: "/src")
    !10 = !DILocation(line: 12, column: 5, scope: !5)
    !11 = !DILocation(line: 40, column: 9, scope: !7)
    """
)


def test_calls_with_debug_locations_name_their_source_file_and_line(capsys, tmp_path):
    status, lines = lower_cli(capsys, tmp_path, DEBUG_PROGRAM)
    assert status == 1
    assert [line.split(": ", 2)[1] for line in lines] == [
        f"{tmp_path / 'test.ll'}:5",
        f"{tmp_path / 'test.ll'}:6",
    ]
    assert "call 1 to @lgc.debug.printf in function @kernel at shader.c:12:5: " in lines[0]
    assert "call 2 to @lgc.debug.printf in function @kernel at include/util.h:40:9: " in lines[1]


def test_errors_in_a_second_module_name_that_file(capsys, tmp_path):
    second = program([bad_call(f"{P} @ok, ptr null")]).replace("@main", "@other")
    status, lines = lower_cli(capsys, tmp_path, program([]), second)
    assert status == 1
    (line,) = lines
    assert line.startswith(f"error: {tmp_path / 'test1.ll'}:")
    assert "call 2 to @lgc.debug.printf in function @other: argument 1: type ptr is a pointer" in line


EXPECTED = (
    "; expected `declare void @lgc.debug.{0}(ptr addrspace(7), ptr addrspace(4), ...)` or "
    "`declare void @lgc.debug.{0}(...)`"
)
MODULE_CASES = {
    "declaration with fixed integer operand": (
        "declare void @lgc.debug.printf(i32, ...)\n",
        "@lgc.debug.printf is `void (i32, ...)`" + EXPECTED.format("printf"),
    ),
    "declaration that returns a value": (
        "declare i32 @lgc.debug.abort(...)\n",
        "@lgc.debug.abort is `i32 (...)`" + EXPECTED.format("abort"),
    ),
    "a definition": (
        "define void @lgc.debug.printf(...) {\n  ret void\n}\n",
        "@lgc.debug.printf is `void (...)` with a body" + EXPECTED.format("printf"),
    ),
    "address taken": (
        DECLARATIONS + "@table = global ptr @lgc.debug.printf\n",
        "@lgc.debug.printf is used other than by a call: `@table = global ptr @lgc.debug.printf`",
    ),
}


@pytest.mark.parametrize("case", MODULE_CASES, ids=list(MODULE_CASES))
def test_unsupported_declarations_and_uses_are_errors(capsys, tmp_path, case):
    text, message = MODULE_CASES[case]
    status, lines = lower_cli(capsys, tmp_path, text)
    assert status == 1
    assert lines == [f"error: {tmp_path / 'test.ll'}: {message}"]


DEBUG_INFO = textwrap.dedent(
    """
    !llvm.dbg.cu = !{!0}
    !llvm.module.flags = !{!2}
    !0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, emissionKind: FullDebug)
    !1 = !DIFile(filename: "v.c", directory: "/src")
    !2 = !{i32 2, !"Debug Info Version", i32 3}
    !10 = distinct !DISubprogram(name: "f", file: !1, line: 1, unit: !0, spFlags: DISPFlagDefinition)
    !11 = !DILocation(line: 2, column: 3, scope: !10)
    !12 = distinct !DISubprogram(name: "g", file: !1, line: 5, unit: !0, spFlags: DISPFlagDefinition)
    !13 = !DILocation(line: 6, column: 3, scope: !12)
    """
)
INVALID_IR = {
    "syntax": (
        "define void @f() {\n  ret i32 0\n}\n",
        ":2:7: invalid IR: value doesn't match function result type",
    ),
    "verifier": (
        "define i32 @f(i32 %x) {\n  %y = add i32 %z, 1\n  %z = add i32 %x, 1\n  ret i32 %y\n}\n",
        ":2: invalid IR: Instruction does not dominate all uses!",
    ),
    # The verifier quotes the instruction as LLVM prints it: found by its opcode, after a `tail` marker
    # or with attachments after no operands.
    "verifier, a tail call": (
        "define void @f() !dbg !10 {\n  ret void, !dbg !11\n}\n"
        "define void @g() !dbg !12 {\n  tail call void @f()\n  ret void, !dbg !13\n}\n" + DEBUG_INFO,
        ":5: invalid IR: inlinable function call in a function with debug info must have a !dbg location",
    ),
    "verifier, unreachable with attachments": (
        "define void @f() !dbg !10 {\n  unreachable, !dbg !1\n}\n" + DEBUG_INFO,
        ":2: invalid IR: invalid !dbg metadata attachment",
    ),
    "a NUL byte": (
        "define void @f() {\n  ret void\n}\n\0define void @g() {\n  ret void\n}\n",
        ":4:1: invalid IR: a NUL byte, where LLVM would stop reading the module",
    ),
}


@pytest.mark.parametrize("case", INVALID_IR, ids=list(INVALID_IR))
def test_invalid_ir_is_an_error_naming_the_file_and_llvms_message(capsys, tmp_path, case):
    text, message = INVALID_IR[case]
    status, lines = lower_cli(capsys, tmp_path, text)
    assert status == 1
    (line,) = lines
    assert line.startswith(f"error: {tmp_path / 'test.ll'}{message}")


def test_a_nul_byte_is_an_error_of_the_library_naming_its_line_and_column():
    """LLVM reads a C string: without the check, the module silently ended at the byte (here, in a
    comment, before a function that was then dropped)."""
    text = program([]) + "; the end?\0\ndefine void @after() {\n  ret void\n}\n"
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("a.ll", text)])
    (diagnostic,) = raised.value.diagnostics
    line = text.count("\n", 0, text.index("\0")) + 1
    assert (diagnostic.source, diagnostic.line, diagnostic.column) == ("a.ll", line, 11)
    assert (
        str(diagnostic) == f"a.ll:{line}:11: invalid IR: a NUL byte, where LLVM would stop reading the module"
    )


def test_modules_that_cannot_be_linked_are_an_error(capsys, tmp_path):
    status, lines = lower_cli(capsys, tmp_path, program([]), program([]))
    assert status == 1
    assert lines == [
        f"error: {tmp_path / 'test1.ll'}: cannot link: Linking globals named 'main': symbol multiply defined!"
    ]


def test_broken_debug_info_is_an_error_not_a_crash(tmp_path):
    """LLVM aborts the process on such a module unless debug-info auto-upgrade is off: run the real script."""
    broken = DEBUG_PROGRAM.replace("scope: !5)", "scope: !1)")
    path = tmp_path / "broken.ll"
    path.write_text(broken)
    output = tmp_path / "out.ll"
    script = "import sys; from lowering.cli.main import main; sys.exit(main(sys.argv[1:]))"
    process = subprocess.run(
        [sys.executable, "-c", script, "lower", str(path), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert process.returncode == 1
    assert process.stderr.startswith(f"error: {path}:") and "invalid IR: " in process.stderr
    assert "DILocation's scope must be a DILocalScope" in process.stderr
    assert "Traceback" not in process.stderr and not output.exists()


def test_lowering_error_carries_every_diagnostic():
    text = program([bad_call(f"{P} @ok, ptr null"), bad_call(f"{P} @ok")])
    with pytest.raises(LoweringError) as raised:
        lower_sources([Source("a.ll", text)])
    diagnostics = raised.value.diagnostics
    assert [(d.source, d.function, d.call) for d in diagnostics] == [
        ("a.ll", "main", "call 2 to @lgc.debug.printf"),
        ("a.ll", "main", "call 3 to @lgc.debug.printf"),
    ]
    assert str(raised.value).splitlines() == [str(d) for d in diagnostics]
