"""A printed module as a pass sees it: its top-level items in order (functions, globals, metadata nodes,
named metadata, attribute groups, the lines kept as they are), indexed by name, and the additions a pass
makes to it.

LLVM's printer puts one top-level entity or instruction on a line, so a module reads line by line; each
line is kept as its text and lexed only when something asks about it (most lines of a large module are
never looked at). Printing gives the module back with the edits made: a line nobody edited is printed as
it was read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

import llvmlite.ir as ir

from .functions import Function, parse_definition, read_blocks
from .lexer import Token, bare_name, closing, global_references, split_list, string_value, text_of, tokenize
from .types import type_end

_BYTES_GLOBAL = re.compile(
    r'@[-\w$.]+ = ((?:[\w(),]+ )*?)(global|constant) (\[\d+ x i8\])(?: (c"[^"]*"|zeroinitializer))?(?:, .*)?'
)
_EXTERNAL_LINKAGES = frozenset({"external", "extern_weak"})
_GLOBAL_KINDS = frozenset({"global", "constant", "alias", "ifunc"})


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
    """A top-level line the module keeps as it is: the header, comments, type and comdat definitions."""

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
                blocks, index = read_blocks(lines, index)
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
        function = parse_definition(text)
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
                    added.append(parse_definition(str(value)))
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
