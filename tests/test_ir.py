"""The IR layer (`lowering.ir`): a module read and printed back unchanged, each edit, the fast paths
agreeing with the lexer, and random edits leaving every module of a corpus valid."""

from __future__ import annotations

from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir
import pytest
from dprintf_ir import DECLARATIONS, PRINTF, call, string_global
from hypothesis import given, settings
from hypothesis import strategies as st

from lowering.ir.building import I32, internal_function
from lowering.ir.debug_info import call_lines, source_location
from lowering.ir.instructions import Instruction
from lowering.ir.lexer import (
    bare_name,
    global_name,
    global_references,
    rewrite_address_space,
    split_items,
    tokenize,
)
from lowering.ir.module import Module
from lowering.ir.types import parse_type
from lowering.ir.values import ConstantExpression, Operand
from lowering.lowered_module import Source
from lowering.pipeline import lower_sources

SAMPLES = Path(__file__).resolve().parents[1] / "samples"

# Quoted names, strings and metadata that mention the printf callee, comments, `!dbg` on every
# instruction, phis, a switch, numbered values and an entry block without a label.
TRICKY = r"""
; a comment that names @lgc.debug.printf
%struct.pair = type { i32, float }
@"a name; with \22 quotes" = private unnamed_addr addrspace(4) constant [30 x i8]
    c"@lgc.debug.printf(...) \22x\22 ;\00\00"
@note = private constant [6 x i8] c"a, b)\00"
@0 = private constant [3 x i8] c"%d\00"
@pairs = global [2 x %struct.pair] zeroinitializer, align 4

define i32 @"quoted function"(i32 %0, ptr addrspace(7) %"the buffer") !dbg !10 {
  %2 = add i32 %0, 1, !dbg !13
  %3 = icmp sgt i32 %2, 4, !dbg !13
  br i1 %3, label %"big one", label %small, !dbg !13

"big one":
  %4 = getelementptr inbounds [2 x %struct.pair], ptr @pairs, i64 0, i64 1, i32 1, !dbg !14
  store float 1.0, ptr %4, align 4, !dbg !14
  switch i32 %2, label %small [
    i32 7, label %join
    i32 9, label %join
  ], !dbg !14

small:
  %5 = phi i32 [ %0, %1 ], [ %2, %"big one" ], !dbg !15
  br label %join, !dbg !15

join:
  %6 = phi i32 [ %5, %small ], [ %2, %"big one" ], [ %2, %"big one" ], !dbg !15
  %7 = load i8, ptr addrspace(4) @"a name; with \22 quotes", align 1, !dbg !15
  %8 = zext i8 %7 to i32, !dbg !15
  %9 = add i32 %6, %8, !dbg !15
  ret i32 %9, !dbg !15
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}
!named.strings = !{!20}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "calls @lgc.debug.printf",
                             emissionKind: FullDebug)
!1 = !DIFile(filename: "tricky \22one\22.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "quoted function", scope: !1, file: !1, line: 3, type: !11, unit: !0)
!11 = !DISubroutineType(types: !12)
!12 = !{}
!13 = !DILocation(line: 4, column: 7, scope: !10)
!14 = !DILocation(line: 5, column: 9, scope: !10)
!15 = !DILocation(line: 6, column: 2, scope: !10)
!20 = !{!"@lgc.debug.printf(ptr %x)"}
"""


def printed(text: str) -> str:
    """`text` as LLVM prints it, verified."""
    module = llvm.parse_assembly(text)
    module.verify()
    return str(module)


def verified(text: str) -> llvm.ModuleRef:
    module = llvm.parse_assembly(text)
    module.verify()
    return module


def corpus() -> dict[str, str]:
    modules = {path.name: printed(path.read_text()) for path in sorted(SAMPLES.glob("*.ll"))}
    modules["tricky"] = printed(TRICKY)
    return modules


CORPUS = corpus()


@pytest.mark.parametrize("name", list(CORPUS))
def test_a_printed_module_reads_and_prints_back_unchanged_and_verifies(name):
    text = CORPUS[name]
    module = Module.parse(text)
    assert str(module) == text
    verified(str(module))
    instructions = [
        instruction for function in module.definitions() for _, instruction in function.instructions()
    ]
    assert instructions and all(instruction.opcode for instruction in instructions)


def test_the_model_reads_functions_blocks_instructions_globals_and_metadata():
    module = Module.parse(CORPUS["tricky"])
    function = module.functions["quoted function"]
    assert [block.label for block in function.blocks] == [None, "big one", "small", "join"]
    assert [parameter.value for parameter in function.parameters] == ["%0", '%"the buffer"']
    assert function.block("1") is function.blocks[0]
    assert function.blocks[1].successors() == ["small", "join", "join"]
    first = function.blocks[0].instructions[0]
    node = first.debug_node
    assert (first.result, first.opcode, first.attachments) == ("%2", "add", {"!dbg": f"!{node}"})
    string = module.globals['a name; with " quotes']
    assert string.definition.constant and string.definition.value_type == "[30 x i8]"
    assert string.definition.initializer.startswith('c"@lgc.debug.printf(...)')
    assert module.metadata[node].kind == "DILocation" and module.metadata[node].fields["line"] == "4"
    (strings,) = module.named_metadata["!named.strings"].operands
    assert module.string_at(strings) == b"@lgc.debug.printf(ptr %x)"
    location = source_location(module, function.block("big one").instructions[0].debug_node)
    assert (location.filename, location.line, location.column) == ('tricky "one".c', 5, 9)


def test_the_lexer_keeps_strings_names_and_comments_whole():
    tokens = [token for _, token in tokenize('@"a b" = constant [2 x i8] c"; )", align 1 ; @c')]
    assert tokens == [
        '@"a b"',
        "=",
        "constant",
        "[",
        "2",
        "x",
        "i8",
        "]",
        'c"; )"',
        ",",
        "align",
        "1",
        "; @c",
    ]
    assert split_items('i32 1, { i32, i8 } { i32 2, i8 3 }, ptr @"x, y"') == [
        "i32 1",
        "{ i32, i8 } { i32 2, i8 3 }",
        'ptr @"x, y"',
    ]
    text = '@a = global ptr @b ; @c\n@d = constant [4 x i8] c"@e\\00", !m !{!"@f"}'
    assert list(global_references(text)) == ["@a", "@b", "@d"]
    assert (
        bare_name('@"a\\22b"') == 'a"b' and global_name('a"b') == '@"a\\22b"' and global_name("a.b") == "@a.b"
    )
    assert (
        rewrite_address_space('ptr addrspace(7) @"addrspace(7)"', 7, 1) == 'ptr addrspace(1) @"addrspace(7)"'
    )


def test_operands_types_and_constant_expressions():
    operand = Operand.parse("ptr addrspace(7) noundef align 4 dereferenceable(8) %buf")
    assert (operand.type, operand.attributes, operand.value) == (
        "ptr addrspace(7)",
        ("noundef", "align 4", "dereferenceable(8)"),
        "%buf",
    )
    assert Operand.parse("ptr nonnull null").attributes == ("nonnull",)
    gep = ConstantExpression.parse("getelementptr inbounds ([4 x i8], ptr addrspace(4) @s, i64 0, i64 0)")
    assert (
        gep.opcode == "getelementptr"
        and gep.flags == ("inbounds",)
        and gep.operands[1] == "ptr addrspace(4) @s"
    )
    cast = ConstantExpression.parse("addrspacecast (ptr addrspace(4) @s to ptr)")
    assert cast.operands == ("ptr addrspace(4) @s",) and cast.result_type == "ptr"
    assert parse_type("<3 x half>") == ir.VectorType(ir.HalfType(), 3)
    assert parse_type("ptr addrspace(7)") == ir.PointerType(addrspace=7)
    assert parse_type("{ i32, [2 x float] }") == ir.LiteralStructType([I32, ir.ArrayType(ir.FloatType(), 2)])
    assert parse_type("<vscale x 4 x i32>") is None and parse_type('target("x")') is None


FAST_PATH_LINES = [
    "call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, "
    "ptr addrspace(4) @s, <4 x float> %v, i16 signext %h, i64 -5), !dbg !12",
    "%r = tail call i32 @f(i32 noundef 1, ptr nonnull align 8 %p) #3, !dbg !4, !tbaa !9",
    "call void @g()",
    "call void (ptr, ...) @lgc.debug.abort(ptr %b, "
    "ptr getelementptr inbounds ([3 x i8], ptr @s, i64 0, i64 0))",
    "store i32 1, ptr %p, align 4, !dbg !3",
]


@pytest.mark.parametrize("line", FAST_PATH_LINES)
def test_the_fast_paths_read_lines_as_the_lexer_does(line):
    fast, lexed = Instruction(line), Instruction(line)
    assert fast.attachments == lexed.lexed_attachments()
    site, lexed_site = fast.call(), lexed.lexed_call()
    if lexed_site is None:
        assert site is None
        return
    assert (site.opcode, site.callee, site.tail) == (lexed_site.opcode, lexed_site.callee, lexed_site.tail)
    assert site.arguments == lexed_site.arguments


@pytest.mark.parametrize(
    "line",
    [
        '@s = private unnamed_addr addrspace(4) constant [4 x i8] c"ab\\0A\\00", align 1',
        "@z = internal constant [8 x i8] zeroinitializer",
        "@e = external addrspace(4) constant [4 x i8]",
        '@g = global i32 7, section "data"',
        "@a = alias i32, ptr @g",
    ],
)
def test_the_global_fast_path_reads_as_the_lexer_does(line):
    module = Module.parse(line + "\n")
    variable = next(iter(module.globals.values()))
    assert variable.definition == variable.lexed_definition()


# What an instruction's opcode is, whatever follows it: attachments after the operands, or after none
# (`unreachable, !dbg !7` was once read as `unreachable,`, so validation put no check there).
OPCODES = [
    pytest.param("unreachable, !dbg !7", "unreachable", id="unreachable-dbg"),
    pytest.param("unreachable, !dbg !7, !annotation !9", "unreachable", id="unreachable-two-attachments"),
    pytest.param("unreachable", "unreachable", id="unreachable"),
    pytest.param("ret void, !dbg !7", "ret", id="ret-dbg"),
    pytest.param("br label %next, !dbg !7", "br", id="br-dbg"),
    pytest.param("resume { ptr, i32 } %pad, !dbg !7", "resume", id="resume-dbg"),
    pytest.param("switch i32 %x, label %d [\n    i32 0, label %a\n  ], !prof !9", "switch", id="switch-prof"),
    pytest.param("fence seq_cst, !dbg !7", "fence", id="fence-dbg"),
    pytest.param('%"a b" = add i32 1, 2, !dbg !7', "add", id="quoted-result"),
    pytest.param("%r = tail call i32 @f(), !dbg !7", "call", id="tail-call"),
    pytest.param("#dbg_value(i32 %x, !6, !DIExpression(), !8)", "#dbg_value", id="debug-record"),
]


@pytest.mark.parametrize(("line", "opcode"), OPCODES)
def test_the_opcode_is_the_token_after_the_result_whatever_follows_it(line, opcode):
    assert Instruction(line).opcode == opcode


def test_an_instruction_without_operands_has_none_whatever_its_attachments():
    bare, located = Instruction("unreachable"), Instruction("unreachable, !dbg !7, !annotation !9")
    assert bare.operands == located.operands == []
    assert located.attachments == {"!dbg": "!7", "!annotation": "!9"} and located.debug_node == 7
    assert Instruction("%r = musttail call i32 @f(), !dbg !7").call_marker == "musttail"
    assert Instruction("%r = call i32 @f()").call_marker is None


# Every terminator with an attachment, and the instructions LLVM prints over several lines: an invoke's
# destinations, a landing pad's clauses, a switch's cases.
TERMINATORS = r"""
declare i32 @f()
declare i32 @personality(...)

define i32 @main(i32 %x) personality ptr @personality !dbg !10 {
entry:
  %r = invoke i32 @f() to label %ok unwind label %bad, !dbg !11
ok:
  switch i32 %r, label %done [ i32 0, label %done
                               i32 1, label %never ], !prof !30
done:
  ret i32 %r, !dbg !11
never:
  unreachable, !dbg !11
bad:
  %pad = landingpad { ptr, i32 } cleanup catch ptr null, !dbg !11
  resume { ptr, i32 } %pad, !dbg !11
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}
!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, emissionKind: FullDebug)
!1 = !DIFile(filename: "t.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "main", file: !1, line: 1, unit: !0, spFlags: DISPFlagDefinition)
!11 = !DILocation(line: 2, column: 3, scope: !10)
!30 = !{!"branch_weights", i32 1, i32 2, i32 3}
"""


def test_each_block_ends_in_its_terminator_read_whole_with_its_attachments():
    text = printed(TERMINATORS)
    module = Module.parse(text)
    assert str(module) == text
    function = module.functions["main"]
    blocks = function.blocks
    terminators = [block.terminator for block in blocks]
    assert [terminator.opcode for terminator in terminators] == [
        "invoke",
        "switch",
        "ret",
        "unreachable",
        "resume",
    ]
    location = terminators[0].attachments["!dbg"]
    assert [terminator.attachments for terminator in terminators] == [
        {"!dbg": location},
        {"!prof": terminators[1].attachments["!prof"]},
        {"!dbg": location},
        {"!dbg": location},
        {"!dbg": location},
    ]
    assert [block.successors() for block in blocks] == [["ok", "bad"], ["done", "done", "never"], [], [], []]
    assert terminators[0].call().callee == "@f" and terminators[0].result == "%r"
    (pad, _) = function.block("bad").instructions
    assert (
        pad.opcode == "landingpad" and "catch ptr null" in pad.text and pad.attachments == {"!dbg": location}
    )


def tricky_function() -> tuple[Module, object]:
    module = Module.parse(CORPUS["tricky"])
    return module, module.functions["quoted function"]


def test_insert_before_and_after_and_replace_and_remove():
    module, function = tricky_function()
    entry = function.blocks[0]
    first, second = entry.instructions[:2]
    entry.insert_before(first, Instruction("%before = add i32 %0, 10"))
    entry.insert_after(first, Instruction("%after = mul i32 %2, 3"))
    entry.replace(second, Instruction("%3 = icmp sgt i32 %after, 4"))
    big = function.block("big one")
    big.remove(big.instructions[1])
    join = function.block("join")
    join.replace(join.instructions[1], Instruction("%7 = add i8 0, 5"))
    text = str(module)
    verified(text)
    assert f"%before = add i32 %0, 10\n  {first.text}\n  %after = mul i32 %2, 3\n" in text
    assert "%3 = icmp sgt i32 %after, 4" in text and "load i8" not in text and "store float" not in text


def test_edits_of_an_instruction_not_in_the_block_are_refused():
    module, function = tricky_function()
    with pytest.raises(KeyError):
        function.blocks[0].remove(Instruction("ret void"))


def test_split_block_moves_the_rest_and_makes_the_phis_come_from_the_new_block():
    module, function = tricky_function()
    big = function.block("big one")
    new = function.split_block(big, big.instructions[1], "big.tail")
    text = str(module)
    verified(text)
    assert big.instructions[-1].text == "br label %big.tail"
    assert new.instructions[-1].opcode == "switch"
    assert "[ %2, %big.tail ], [ %2, %big.tail ]" in text and '%"big one"' not in text.split("join:")[1]
    entry = function.blocks[0]
    function.split_block(entry, entry.instructions[1], "entry.tail")
    verified(str(module))
    assert "[ %0, %entry.tail ]" in str(module)


def test_globals_declarations_functions_and_metadata_are_added_once():
    module = Module.parse(CORPUS["hello.ll"])
    module.add_global('@added = private constant [3 x i8] c"hi\\00"')
    before = len(module.functions)
    module.add_declaration("declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)")
    assert len(module.functions) == before
    module.add_declaration("declare i32 @llvm.ctpop.i32(i32)")
    built = ir.Module()
    helper = internal_function(built, "helper.twice", I32, [(I32, "x")], ["alwaysinline"])
    builder = ir.IRBuilder(helper.append_basic_block("entry"))
    builder.ret(builder.add(helper.args[0], helper.args[0], name="twice"))
    ir.Function(built, ir.FunctionType(I32, [I32]), "llvm.ctpop.i32")
    module.add_ir(built)
    node = module.add_metadata('!{!"note"}')
    module.add_lines(f"!notes = !{{!{node.number}}}")
    module.add_function("define internal void @later() {\nentry:\n  ret void\n}")
    text = str(module)
    verified(text)
    assert (
        text.count("declare i32 @llvm.ctpop.i32") == 1
        and '@added = private constant [3 x i8] c"hi\\00"' in text
    )
    definitions = [function.name for function in module.definitions()]
    assert definitions[:2] == ["later", "helper.twice"] and module.string_at(f"!{node.number}") == b"note"


def test_the_lines_of_calls_in_the_input_are_found_by_tokens():
    source = (
        'define void @"m"(ptr %b) {\n  ; call void @lgc.debug.printf(\n'
        "  call void @lgc.debug.printf(ptr %b)\n}\n"
    )
    assert call_lines(source, "m", "lgc.debug.printf") == [3]
    assert call_lines(source, "other", "lgc.debug.printf") is None


def test_mentions_of_the_callee_in_strings_and_metadata_are_not_uses():
    """The pass once rejected such a module: "used other than by a call"."""
    body = call(PRINTF, "%buf", "fmt", [("i32", "%id")])
    text = (
        string_global("fmt", "id %u\n")
        + '@mention = private constant [19 x i8] c"@lgc.debug.printf(\\00"\n'
        + DECLARATIONS
        + f"define void @main(ptr addrspace(7) %buf, i32 %id) {{\nentry:\n{body}  ret void\n}}\n"
        + '!named = !{!0}\n!0 = !{!"@lgc.debug.printf"}\n'
    )
    lowered = lower_sources([Source("m.ll", text)])
    assert "@lgc.debug.printf(" not in lowered.ir.replace('c"@lgc.debug.printf(', "")
    assert len(lowered.table) == 1


def insertable(function) -> list[tuple[object, Instruction]]:
    """(block, instruction) pairs a new instruction may go before: not before a phi."""
    return [
        (block, instruction) for block, instruction in function.instructions() if instruction.opcode != "phi"
    ]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(CORPUS)), st.lists(st.tuples(st.integers(0, 10**6), st.booleans()), max_size=8))
def test_random_insertions_and_splits_leave_every_module_valid(name, edits):
    module = Module.parse(CORPUS[name])
    module.add_declaration("declare void @dprintf.probe(i32)")
    definitions = list(module.definitions())
    for number, (choice, split) in enumerate(edits):
        function = definitions[choice % len(definitions)]
        places = insertable(function)
        block, anchor = places[(choice // 7) % len(places)]
        probe = Instruction(f"call void @dprintf.probe(i32 {number})")
        block.insert_before(anchor, probe)
        if split:
            function.split_block(block, probe, f"dprintf.split.{number}")
    verified(str(module))
