"""A printed module as a pass sees it: functions, blocks and instructions, globals, metadata; and the
edits a pass makes to it.

LLVM's printer puts one top-level entity or instruction on a line, so a module reads line by line; each
line is kept as its text and lexed only when something asks about it (most lines of a large module are
never looked at). Printing gives the module back with the edits made: a line nobody edited is printed as
it was read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import llvmlite.ir as ir

from .lexer import (
    OPENERS,
    Token,
    bare_name,
    closing,
    global_name,
    global_references,
    split_list,
    string_value,
    text_of,
    tokenize,
    with_list_items,
    without_word,
)
from .types import type_end
from .values import Operand

_CALL_PREFIXES = frozenset({"tail", "musttail", "notail"})
# Fast paths for the canonical forms of lines without strings or quoted names, read without the lexer
# (which reads them the same way; tests/test_ir.py checks that the two agree).
_FLAT_OPERAND_TEXT = r'(?:[^",()\[\]{}<>\n]++|\(\d+\)|<[^<>"()\[\]{}\n]*+>)'
_FLAT_CALL = re.compile(
    rf"(?:%[-\w$.]+ = )?(?:(?:tail|musttail|notail) )?call [^@%\n]*+([@%][-\w$.]+)"
    rf"\(((?:{_FLAT_OPERAND_TEXT}|,)*+)\)(.*)"
)
_FLAT_OPERAND = re.compile(rf"(?! ){_FLAT_OPERAND_TEXT}++")  # from its first character on
_ATTACHMENT = re.compile(r"(![-\w$.]+) (![-\w$.]+)")
_BYTES_GLOBAL = re.compile(
    r'@[-\w$.]+ = ((?:[\w(),]+ )*?)(global|constant) (\[\d+ x i8\])(?: (c"[^"]*"|zeroinitializer))?(?:, .*)?'
)
_EXTERNAL_LINKAGES = frozenset({"external", "extern_weak"})
_GLOBAL_KINDS = frozenset({"global", "constant", "alias", "ifunc"})
# Words between an opcode and its first operand: wrap and exactness flags, fast-math flags, atomics.
_OPCODE_WORDS = frozenset(
    "inbounds nuw nusw nsw exact disjoint volatile atomic weak fast nnan ninf nsz arcp contract afn reassoc "
    "xchg add sub and nand or xor max min umax umin fadd fsub fmax fmin uinc_wrap udec_wrap".split()
)


class Instruction:
    """One instruction: its text, and what the lexer reads from it on demand."""

    __slots__ = ("text", "_tokens")

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._tokens: list[Token] | None = None

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Instruction({self.text!r})"

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = tokenize(self.text)
        return self._tokens

    @property
    def result(self) -> str | None:
        """The value it defines (`%x`), or None."""
        tokens = self.tokens
        return tokens[0][1] if len(tokens) > 1 and tokens[1][1] == "=" else None

    @property
    def opcode(self) -> str:
        """`call`, `store`, `getelementptr`...: the word after the result and any `tail` marker."""
        if self.text.startswith('%"'):
            tokens = [token for _, token in self.tokens]
        else:
            tokens = self.text.split(" ", 4)
        index = 2 if len(tokens) > 1 and tokens[1] == "=" else 0
        if index < len(tokens) and tokens[index] in _CALL_PREFIXES:
            index += 1
        return tokens[index] if index < len(tokens) else ""

    @property
    def attachments(self) -> dict[str, str]:
        """Its metadata attachments: `{"!dbg": "!12"}` for a trailing `, !dbg !12`."""
        if '"' not in self.text:
            found: dict[str, str] = {}
            rest, separator, last = self.text.rpartition(", !")
            while separator and (attachment := _ATTACHMENT.fullmatch("!" + last)) is not None:
                found[attachment.group(1)] = attachment.group(2)
                rest, separator, last = rest.rpartition(", !")
            return found
        return self.lexed_attachments()

    def lexed_attachments(self) -> dict[str, str]:
        """`attachments` read with the lexer alone."""
        tokens = self.tokens
        found = {}
        end = len(tokens)
        while end >= 3 and tokens[end - 3][1] == "," and tokens[end - 2][1][:1] == "!":
            found[tokens[end - 2][1]] = tokens[end - 1][1]
            end -= 3
        return found

    @property
    def debug_node(self) -> int | None:
        """The number of its `!dbg` location node, or None."""
        node = self.attachments.get("!dbg")
        return int(node[1:]) if node is not None and node[1:].isdigit() else None

    def call(self) -> CallSite | None:
        """The call it makes (for `call`, `invoke`, `callbr`), or None."""
        if '"' not in self.text:
            flat = _FLAT_CALL.fullmatch(self.text)
            if flat is not None:
                callee, operands, tail = flat.groups()
                arguments = list(map(Operand.parse, _FLAT_OPERAND.findall(operands)))
                return CallSite("call", callee, arguments, tail.strip())
        return self.lexed_call()

    def lexed_call(self) -> CallSite | None:
        """`call` read with the lexer alone, whatever the line holds."""
        bounds = self._call_bounds()
        if bounds is None:
            return None
        tokens, (found, close) = self.tokens, bounds
        arguments = [
            Operand.from_tokens(tokens, start, end) for start, end in split_list(tokens, found + 2, close)
        ]
        return CallSite(self.opcode, tokens[found][1], arguments, text_of(tokens, close + 1))

    def _call_bounds(self) -> tuple[int, int] | None:
        """The token indices of a call's callee and of the `)` closing its arguments, or None."""
        if self.opcode not in ("call", "invoke", "callbr"):
            return None
        tokens = self.tokens
        depth = 0
        found = -1
        for index, (_, token) in enumerate(tokens[:-1]):
            if token in OPENERS:
                depth += 1
            elif token in (")", "]", "}", ">"):
                depth -= 1
            elif depth == 0 and token[:1] in "@%" and tokens[index + 1][1] == "(":
                found = index
        if found < 0:
            return None
        close = closing(tokens, found + 1)
        return (found, close) if close >= 0 else None

    @property
    def operands(self) -> list[Operand]:
        """The operands after the opcode and its flags, up to `align` and the attachments (a call's are
        its `call().arguments`). An item without a value (a load's or GEP's type) is an operand with an
        empty value; a cast's `to TYPE` and an atomic's ordering stay in the value's text."""
        tokens = self.tokens
        index = 2 if self.result is not None else 0
        index += 1
        while index < len(tokens) and tokens[index][1] in _OPCODE_WORDS:
            index += 1
        operands = []
        for start, end in split_list(tokens, index, len(tokens)):
            first = tokens[start][1] if start < end else ""
            if first == "align" or first[:1] == "!":
                break
            operands.append(Operand.from_tokens(tokens, start, end))
        return operands

    @property
    def alignment(self) -> int | None:
        """The `, align N` of a load, store or atomic (after its operands); None without one."""
        tokens = self.tokens
        for index in range(len(tokens) - 2):
            if tokens[index][1] == "," and tokens[index + 1][1] == "align" and tokens[index + 2][1].isdigit():
                return int(tokens[index + 2][1])
        return None

    def with_arguments(self, extra: str) -> Instruction:
        """This call with `extra` (typed operands, comma-separated) appended to its arguments."""
        bounds = self._call_bounds()
        if bounds is None:
            raise ValueError(f"{self.text!r} calls nothing")
        found, close = bounds
        return Instruction(with_list_items(self.tokens, found + 1, close, extra))

    def with_locals(self, renames: Mapping[str, str]) -> Instruction:
        """This instruction with each local name (a value or a block's label) that `renames` has, by
        bare name, replaced by its new bare name."""
        tokens = self.tokens
        if not any(token[:1] == "%" and bare_name(token) in renames for _, token in tokens):
            return self
        return Instruction(
            text_of(
                [
                    (space, local_name(renames[bare_name(token)]))
                    if token[:1] == "%" and bare_name(token) in renames
                    else (space, token)
                    for space, token in tokens
                ]
            )
        )

    def renamed(self, result: str) -> Instruction:
        """This instruction defining `result` instead of its own result."""
        own = self.result
        if own is None:
            raise ValueError(f"{self.text!r} defines no value")
        return Instruction(f"{result} = {self.text[len(own) + 3 :]}")


class CallSite:
    """What a call instruction calls, with which arguments, and what follows its `)` (attributes,
    bundles, attachments)."""

    __slots__ = ("opcode", "callee", "arguments", "tail")

    def __init__(self, opcode: str, callee: str, arguments: list[Operand], tail: str) -> None:
        self.opcode = opcode
        self.callee = callee
        self.arguments = arguments
        self.tail = tail


def local_name(bare: str) -> str:
    """The printed form of the local `bare` (`%x`, `%"a b"`, and `%0` for an unnamed one: LLVM numbers
    the values and blocks it prints without a name)."""
    return f"%{bare}" if bare.isdigit() else "%" + global_name(bare)[1:]


class Block:
    """A basic block: its label (None for an entry block printed without one) and its instructions."""

    def __init__(
        self, label: str | None, instructions: list[Instruction], label_line: str | None = None
    ) -> None:
        self.label = label
        self.instructions = instructions
        self._label_line = label_line

    def __str__(self) -> str:
        lines = [f"  {instruction.text}" for instruction in self.instructions]
        if self.label is not None:
            lines.insert(0, self._label_line or f"{local_name(self.label)[1:]}:")
        return "\n".join(lines)

    def drop_label_comment(self) -> None:
        """Print the label alone, without the `; preds = ...` comment read with it."""
        self._label_line = None

    @property
    def terminator(self) -> Instruction | None:
        return self.instructions[-1] if self.instructions else None

    def successors(self) -> list[str]:
        """The labels its terminator branches to (bare names), in order."""
        terminator = self.terminator
        if terminator is None:
            return []
        tokens = terminator.tokens
        return [
            bare_name(tokens[index + 1][1])
            for index in range(len(tokens) - 1)
            if tokens[index][1] == "label" and tokens[index + 1][1][:1] == "%"
        ]

    def insert_before(self, anchor: Instruction, *new: Instruction) -> None:
        self.rewrite({anchor: [*new, anchor]})

    def insert_after(self, anchor: Instruction, *new: Instruction) -> None:
        self.rewrite({anchor: [anchor, *new]})

    def replace(self, old: Instruction, *new: Instruction) -> None:
        self.rewrite({old: list(new)})

    def remove(self, old: Instruction) -> None:
        self.rewrite({old: []})

    def rewrite(self, replacements: Mapping[Instruction, Sequence[Instruction]]) -> None:
        """Replace each instruction that `replacements` names by its sequence (which may hold it), all
        in one walk of the block: a pass that edits many instructions of a block edits them at once.
        KeyError when one of them is not in the block."""
        instructions: list[Instruction] = []
        found = 0
        for instruction in self.instructions:
            replacement = replacements.get(instruction)
            if replacement is None:
                instructions.append(instruction)
            else:
                instructions += replacement
                found += 1
        if found != len(replacements):
            raise KeyError("an instruction to edit is not in the block")
        self.instructions = instructions


class Function:
    """A definition (`define ... { blocks }`) or a declaration (`declare ...`, no blocks)."""

    def __init__(self, header: str, blocks: list[Block] | None) -> None:
        self.header = header
        self.blocks = blocks
        self._tokens = tokenize(header)
        self._name_index = _name_index(self._tokens)

    def __str__(self) -> str:
        if self.blocks is None:
            return self.header
        return "\n".join([self.header, "\n\n".join(map(str, self.blocks)), "}"])

    @property
    def printed_name(self) -> str:
        return self._tokens[self._name_index][1]

    @property
    def name(self) -> str:
        return bare_name(self.printed_name)

    @property
    def is_declaration(self) -> bool:
        return self.blocks is None

    @property
    def parameters(self) -> list[Operand]:
        tokens = self._tokens
        close = closing(tokens, self._name_index + 1)
        return [
            Operand.from_tokens(tokens, start, end)
            for start, end in split_list(tokens, self._name_index + 2, close)
        ]

    @property
    def attributes(self) -> list[str]:
        """The words and `#N` groups after its parameter list, up to the body."""
        tokens = self._tokens
        close = closing(tokens, self._name_index + 1)
        return [token for _, token in tokens[close + 1 :] if token != "{"]

    def add_parameters(self, extra: str) -> None:
        """Give the function the parameters `extra` (typed, named, comma-separated) after its own."""
        tokens, opener = self._tokens, self._name_index + 1
        self.header = with_list_items(tokens, opener, closing(tokens, opener), extra)
        self._tokens = tokenize(self.header)

    def remove_word(self, word: str) -> None:
        """Drop the keyword `word` from the header (a calling convention, an attribute)."""
        self.header = without_word(self.header, word)
        self._tokens = tokenize(self.header)
        self._name_index = _name_index(self._tokens)

    def add_attribute(self, word: str) -> None:
        """Give the function the attribute `word` (`alwaysinline`): after its parameters and any
        `unnamed_addr` and address space, where function attributes go."""
        tokens = self._tokens
        index = closing(tokens, self._name_index + 1) + 1
        while index < len(tokens) and tokens[index][1] in ("unnamed_addr", "local_unnamed_addr", "addrspace"):
            index = closing(tokens, index + 1) + 1 if tokens[index][1] == "addrspace" else index + 1
        self.header = f"{text_of(tokens, 0, index)} {word} {text_of(tokens, index)}"
        self._tokens = tokenize(self.header)

    def instructions(self) -> Iterator[tuple[Block, Instruction]]:
        for block in self.blocks or ():
            for instruction in block.instructions:
                yield block, instruction

    def block(self, label: str) -> Block:
        """The block labelled `label` (bare); KeyError when there is none."""
        for block in self.blocks or ():
            if self.label_of(block) == label:
                return block
        raise KeyError(label)

    def label_of(self, block: Block) -> str:
        """The block's label (bare), the number LLVM gives it when it is printed without one."""
        return block.label if block.label is not None else self._entry_number()

    def _entry_number(self) -> str:
        """The number LLVM gives an entry block printed without a label: the next after the unnamed
        parameters."""
        return str(sum(1 for parameter in self.parameters if parameter.value[1:].isdigit()))

    def insert_block(self, before: Block, block: Block) -> None:
        """Add `block` before `before` (which must not be the entry block)."""
        assert self.blocks is not None
        self.blocks.insert(self.blocks.index(before), block)

    def split_block(self, block: Block, at: Instruction, label: str) -> Block:
        """Move `at` and what follows it into a new block `label` after `block`, which then branches to
        it; the phis of its successors then come from the new block."""
        assert self.blocks is not None
        index = next(n for n, instruction in enumerate(block.instructions) if instruction is at)
        old_label = self.label_of(block)
        new = Block(label, block.instructions[index:])
        block.instructions = [*block.instructions[:index], Instruction(f"br label {local_name(label)}")]
        self.blocks.insert(self.blocks.index(block) + 1, new)
        for successor in set(new.successors()):
            _rename_incoming(self.block(successor), old_label, label)
        return new


def _name_index(tokens: list[Token]) -> int:
    """The index of a function header's name, its first `@` token (after the linkage, the calling
    convention and the return type)."""
    return next(index for index, token in enumerate(tokens) if token[1][:1] == "@")


def _rename_incoming(block: Block, old: str, new: str) -> None:
    """In `block`'s phis, make the edges from `old` come from `new` (and drop its label's `; preds`
    comment, which no longer holds). A block's label is no value's name, so every `%old` in a phi is
    the edge's."""
    block.drop_label_comment()
    for position, instruction in enumerate(block.instructions):
        if instruction.opcode != "phi":
            break
        block.instructions[position] = instruction.with_locals({old: new})


class Definition(NamedTuple):
    """What a global's line says: `global`, `constant`, `alias` or `ifunc`; its linkage and other words
    before that; its value type and initializer (None when external or absent)."""

    kind: str
    words: frozenset[str]
    value_type: str
    initializer: str | None

    @property
    def is_variable(self) -> bool:
        return self.kind in ("global", "constant")

    @property
    def constant(self) -> bool:
        return self.kind == "constant"

    @property
    def external(self) -> bool:
        return not _EXTERNAL_LINKAGES.isdisjoint(self.words)


class GlobalVariable:
    """`@name = [linkage...] global|constant TYPE [INITIALIZER][, section, align...]`; aliases and ifuncs
    read as globals whose definition's `kind` is `alias` or `ifunc`."""

    __slots__ = ("text", "printed_name", "_definition")

    def __init__(self, text: str, printed_name: str) -> None:
        self.text = text
        self.printed_name = printed_name
        self._definition: Definition | None = None

    def __str__(self) -> str:
        return self.text

    @property
    def name(self) -> str:
        return bare_name(self.printed_name)

    @property
    def definition(self) -> Definition:
        if self._definition is None:
            self._definition = self._parse()
        return self._definition

    def _parse(self) -> Definition:
        simple = _BYTES_GLOBAL.fullmatch(self.text)
        if simple is not None:
            words, kind, value_type, initializer = simple.groups()
            return Definition(kind, frozenset(words.split()), value_type, initializer)
        return self.lexed_definition()

    def lexed_definition(self) -> Definition:
        """`definition` read with the lexer alone."""
        tokens = tokenize(self.text)
        index = 2  # after `@name =`
        words = set()
        while index < len(tokens) and tokens[index][1] not in _GLOBAL_KINDS:
            follows = tokens[index + 1][1] if index + 1 < len(tokens) else ""
            end = closing(tokens, index + 1) + 1 if follows == "(" else index + 1
            words.add(text_of(tokens, index, end))
            index = end
        kind = tokens[index][1] if index < len(tokens) else ""
        type_start = index + 1
        type_stop = type_end(tokens, type_start) if type_start < len(tokens) else type_start
        initializer = None
        if type_stop < len(tokens) and tokens[type_stop][1] != "," and _EXTERNAL_LINKAGES.isdisjoint(words):
            initializer = text_of(tokens, *split_list(tokens, type_stop, len(tokens))[0])
        return Definition(kind, frozenset(words), text_of(tokens, type_start, type_stop), initializer)


class MetadataNode:
    """`!N = [distinct] !KIND(field: value, ...)`, `!N = !{...}` or another node, by its number."""

    __slots__ = ("number", "text", "_tokens")

    def __init__(self, number: int, text: str) -> None:
        self.number = number
        self.text = text
        self._tokens: list[Token] | None = None

    def __str__(self) -> str:
        return self.text

    def _body(self) -> tuple[list[Token], int]:
        if self._tokens is None:
            self._tokens = tokenize(self.text)
        start = 3 if self._tokens[2][1] == "distinct" else 2
        return self._tokens, start

    @property
    def kind(self) -> str:
        """`DILocation`, `DIFile`...; empty for a tuple `!{...}`."""
        tokens, start = self._body()
        return tokens[start][1][1:] if start < len(tokens) and tokens[start][1] != "!" else ""

    @property
    def fields(self) -> dict[str, str]:
        """A specialised node's fields: `{"line": "3", "scope": "!7"}`."""
        tokens, start = self._body()
        if start + 1 >= len(tokens) or tokens[start + 1][1] != "(":
            return {}
        close = closing(tokens, start + 1)
        fields = {}
        for first, end in split_list(tokens, start + 2, close):
            field = tokens[first][1]
            if field.endswith(":"):
                fields[field[:-1]] = text_of(tokens, first + 1, end)
        return fields

    @property
    def operands(self) -> list[str]:
        """A tuple's operands: `!{!"x", i32 1}` gives `['!"x"', 'i32 1']`."""
        tokens, start = self._body()
        if start + 1 >= len(tokens) or tokens[start][1] != "!" or tokens[start + 1][1] != "{":
            return []
        close = closing(tokens, start + 1)
        return [text_of(tokens, first, end) for first, end in split_list(tokens, start + 2, close)]


class NamedMetadata:
    """`!name = !{!0, !1}`."""

    def __init__(self, name: str, operands: list[str]) -> None:
        self.name = name
        self.operands = operands

    @classmethod
    def parse(cls, text: str) -> NamedMetadata:
        tokens = tokenize(text)
        close = closing(tokens, 3)
        return cls(tokens[0][1], [text_of(tokens, start, end) for start, end in split_list(tokens, 4, close)])

    def __str__(self) -> str:
        return f"{self.name} = !{{{', '.join(self.operands)}}}"


class AttributeGroup:
    """`attributes #0 = { nounwind "key"="value" }`."""

    def __init__(self, text: str) -> None:
        self.text = text
        tokens = tokenize(text)
        self.group = tokens[1][1]
        self.words = frozenset(token for _, token in tokens[4:-1])

    def __str__(self) -> str:
        return self.text


class Line:
    """A top-level line the model keeps as it is: the header, comments, type and comdat definitions."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


Item = Function | GlobalVariable | MetadataNode | NamedMetadata | AttributeGroup | Line


class Module:
    """A printed module: its top-level items in order, with indexes by name."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.functions: dict[str, Function] = {}
        self.globals: dict[str, GlobalVariable] = {}
        self.metadata: dict[int, MetadataNode] = {}
        self.named_metadata: dict[str, NamedMetadata] = {}
        self.attribute_groups: dict[str, AttributeGroup] = {}

    @classmethod
    def parse(cls, text: str) -> Module:
        """Read a module as LLVM prints it (one entity or instruction a line)."""
        module = cls()
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        index = 0
        while index < len(lines):
            line = lines[index]
            index += 1
            if line.startswith("define ") and line.endswith("{"):
                blocks, index = _read_blocks(lines, index)
                module.append(Function(line, blocks))
            else:
                module.append(_top_level_item(line))
        return module

    def __str__(self) -> str:
        return "\n".join(map(str, self.items)) + "\n"

    def append(self, item: Item) -> None:
        """Add `item` at the end, indexed."""
        self.items.append(item)
        self._index(item)

    def insert(self, position: int, item: Item) -> None:
        self.items.insert(position, item)
        self._index(item)

    def remove(self, item: Item) -> None:
        self.items.remove(item)
        if isinstance(item, Function):
            del self.functions[item.name]
        elif isinstance(item, GlobalVariable):
            del self.globals[item.name]
        elif isinstance(item, MetadataNode):
            del self.metadata[item.number]
        elif isinstance(item, NamedMetadata):
            del self.named_metadata[item.name]

    def _index(self, item: Item) -> None:
        if isinstance(item, Function):
            self.functions[item.name] = item
        elif isinstance(item, GlobalVariable):
            self.globals[item.name] = item
        elif isinstance(item, MetadataNode):
            self.metadata[item.number] = item
        elif isinstance(item, NamedMetadata):
            self.named_metadata[item.name] = item
        elif isinstance(item, AttributeGroup):
            self.attribute_groups[item.group] = item

    def definitions(self) -> Iterator[Function]:
        """The functions with bodies, in order."""
        return (item for item in self.items if isinstance(item, Function) and not item.is_declaration)

    def function_attributes(self, function: Function) -> frozenset[str]:
        """A function's attributes, its groups' (`#0`) spelt out."""
        words: set[str] = set()
        for attribute in function.attributes:
            group = self.attribute_groups.get(attribute)
            words |= group.words if group is not None else {attribute}
        return frozenset(words)

    def first_definition_index(self) -> int:
        """Where a function goes to come before every definition: before the first one and the comment
        lines printed above it; the end when there is none."""
        for position, item in enumerate(self.items):
            if isinstance(item, Function) and not item.is_declaration:
                while position > 0 and _is_comment(self.items[position - 1]):
                    position -= 1
                return position
        return len(self.items)

    def add_global(self, text: str) -> GlobalVariable:
        """Add a global given as its line, before the functions."""
        item = _top_level_item(text)
        if not isinstance(item, GlobalVariable):
            raise ValueError(f"not a global: {text}")
        position = next(
            (n for n, other in enumerate(self.items) if isinstance(other, Function)), len(self.items)
        )
        self.insert(position, item)
        return item

    def add_declaration(self, text: str) -> Function:
        """Add `declare ...` unless the module has a function of that name, which it returns then."""
        declaration = Function(text, None)
        existing = self.functions.get(declaration.name)
        if existing is not None:
            return existing
        self.append(declaration)
        return declaration

    def add_function(self, text: str) -> Function:
        """Add a definition given as text (any layout LLVM reads), before the module's first definition.

        LLVM's always-inliner takes a function's callers in use-list order, which is the last parsed first
        when the callee is defined before its callers: helpers to be inlined go here.
        """
        function = _definition(text)
        self.insert(self.first_definition_index(), function)
        return function

    def add_ir(self, module: ir.Module) -> list[Function]:
        """Add what an `llvmlite.ir` module defines: its function definitions before the module's first
        definition (in order), its declarations and global variables that the module lacks at the end."""
        added = []
        for value in module.global_values:
            if isinstance(value, ir.Function):
                if value.is_declaration:
                    self.add_declaration(str(value).strip())
                else:
                    added.append(_definition(str(value)))
            elif value.name not in self.globals:
                self.append(_top_level_item(str(value).strip()))
        position = self.first_definition_index()
        for function in added:
            self.insert(position, function)
            position += 1
        return added

    def add_lines(self, text: str) -> None:
        """Add top-level entities given as printed lines (globals, declarations, metadata) at the end."""
        for line in text.splitlines():
            self.append(_top_level_item(line))

    def add_metadata(self, body: str) -> MetadataNode:
        """Add `!N = body` with the first free N."""
        number = max(self.metadata, default=-1) + 1
        node = MetadataNode(number, f"!{number} = {body}")
        self.append(node)
        return node

    def string_at(self, operand: str) -> bytes | None:
        """The bytes of a metadata string operand (`!"..."`), inline or through a node `!{!"..."}`."""
        value = string_value(operand)
        if value is not None:
            return value
        if operand[1:].isdigit() and int(operand[1:]) in self.metadata:
            operands = self.metadata[int(operand[1:])].operands
            if len(operands) == 1:
                return string_value(operands[0])
        return None

    def reference_counts(self) -> Counter[str]:
        """How many times each global (bare name) is named in the module, definitions included."""
        return Counter(bare_name(name) for name in global_references(str(self)))


def _is_comment(item: Item) -> bool:
    return isinstance(item, Line) and item.text.startswith(";")


def _read_blocks(lines: list[str], index: int) -> tuple[list[Block], int]:
    """The blocks of a function body starting at `lines[index]`, and the index after its `}`."""
    blocks: list[Block] = []
    instructions: list[Instruction] = []
    label: str | None = None
    label_line: str | None = None
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("  "):
            if line.endswith("["):  # a switch: one case a line, then `]`
                start = index - 1
                while index < len(lines) and not lines[index].startswith("  ]"):
                    index += 1
                index += 1
                line = "\n".join(lines[start:index])
            instructions.append(Instruction(line))
        elif line == "}":
            break
        elif line and not line.startswith(";"):
            if instructions or label is not None:
                blocks.append(Block(label, instructions, label_line))
            first = tokenize(line)[0][1]
            label, label_line, instructions = bare_name("%" + first[:-1]), line, []
    if instructions or label is not None:
        blocks.append(Block(label, instructions, label_line))
    return blocks, index


def _definition(text: str) -> Function:
    """A definition written in any layout (llvmlite puts `{` on a line of its own): read by tokens."""
    tokens = tokenize(text)
    brace = next(n for n, token in enumerate(tokens) if token[1] == "{")
    header = text_of(tokens, 0, brace) + " {"
    body = text_of(tokens, brace + 1, len(tokens) - 1)
    lines = []
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped:
            is_label = stripped.endswith(":") and not stripped.startswith("%")
            lines.append(stripped if is_label else f"  {stripped}")
    blocks, _ = _read_blocks([*lines, "}"], 0)
    return Function(header, blocks)


def _top_level_item(line: str) -> Item:
    first = line[:1]
    if first == "@":
        end = line.find('"', 2) + 1 if line.startswith('@"') else line.find(" ")
        return GlobalVariable(line, line[:end] if end > 0 else line)
    if line.startswith("declare "):
        return Function(line, None)
    if first == "!":
        head = line[1 : line.find(" ")]
        if head.isdigit():
            return MetadataNode(int(head), line)
        return NamedMetadata.parse(line)
    if line.startswith("attributes #"):
        return AttributeGroup(line)
    return Line(line)
