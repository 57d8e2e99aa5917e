"""Reading IR safely with llvmlite, and reading the printed module for what llvmlite cannot show.

`llvmlite.binding` parses, verifies and links modules; any failure becomes a `LoweringError` naming
the input file and LLVM's message. The binding exposes neither address spaces nor initializers nor
debug locations, and each of its look-ups costs microseconds, so the pass prints the module once and
reads calls, operands, global initializers and `!DILocation`s from that text with the scanners here.
LLVM's printer is canonical (one instruction per line, types spelt one way), which makes this safe.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import llvmlite.binding as llvm

from .diagnostics import Diagnostic, LoweringError, SourceLocation

# Without this, parsing a broken module that carries "Debug Info Version" aborts the process
# ("Broken module found") instead of leaving the error to verify().
llvm.set_option("", "-disable-auto-upgrade-debug-info")

_LLVM_MESSAGE = re.compile(r"^<string>:(\d+):(\d+): error: (.*)$", re.M)
_VOID_OPCODES = frozenset({"call", "store", "br", "ret", "switch", "fence", "unreachable", "resume"})
_ATTACHMENTS = re.compile(r"(?:, ![-\w.]+ !\d+)+$")
_OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
# Operand lists without nesting beyond `addrspace(N)` and flat `<...>` (the common case) split by regex:
# runs of plain characters, `(N)` and `<...>`, taken possessively (nothing to give back, so no backtracking).
_FLAT_OPERAND_TEXT = r'(?:[^",()\[\]{}<>\n]++|\(\d+\)|<[^<>"()\[\]{}\n]*+>)'
_FLAT_LIST = re.compile(rf"\(((?:{_FLAT_OPERAND_TEXT}|,)*+)\)")
_FLAT_OPERAND = re.compile(rf"{_FLAT_OPERAND_TEXT}++")
_SIMPLE_TYPE = re.compile(
    r"(i\d+|half|float|double|ptr(?: addrspace\(\d+\))?|<\d+ x (?:i\d+|half|float|double)>)(?: |\Z)"
)
_SPECIAL = re.compile(r'[",()\[\]{}<>]')
_NAME = r'(?:"[^"]*"|[-\w$.]+)'
# Found by the leading newline rather than `^`, so the regex engine skips from one newline to the next
# (a printed module starts with its `; ModuleID` line).
_GLOBAL_LINE = re.compile(rf"\n(@{_NAME}) = ([^\n]*)")
_GLOBAL_REFERENCE = re.compile(rf"@{_NAME}")
_DEFINE_LINE = re.compile(rf"^define [^@\n]*(@{_NAME})\(", re.M)
_ATTRIBUTE_GROUP = re.compile(r"^attributes (#\d+) = \{([^\n]*)\}$", re.M)
_GLOBAL_BODY = re.compile(r"^((?:[\w(),]+ )*?)(global|constant) (.*)$")
_BYTES_GLOBAL = re.compile(
    r'^((?:[\w(),]+ )*?)(global|constant) (\[\d+ x i8\])(?: (c"[^"]*"|zeroinitializer))?'
)
_METADATA_LINE = re.compile(r"^!(\d+) = (?:distinct )?!(\w*)\((.*)\)$", re.M)
_METADATA_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|!\d+|[^,]+)')
_QUOTED_OR_ADDRSPACE = re.compile(r'"[^"]*"|addrspace\((\d+)\)')


def parse_source(name: str, text: str) -> llvm.ModuleRef:
    """Parse and verify one input module; LoweringError naming `name` and LLVM's message."""
    try:
        module = llvm.parse_assembly(text)
    except RuntimeError as failure:
        raise LoweringError([_parse_diagnostic(name, str(failure))]) from None
    verify(module, name, text)
    module.name = name
    return module


def verify(module: llvm.ModuleRef, name: str, text: str | None = None) -> None:
    """LoweringError when `module` fails LLVM's verifier, pointing at the line of `text` it quotes."""
    try:
        module.verify()
    except RuntimeError as failure:
        message = str(failure).strip()
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        raise LoweringError(
            [Diagnostic(f"invalid IR: {'; '.join(lines)}", name, line=_quoted_line(text, lines[1:]))]
        ) from None


def link(modules: list[llvm.ModuleRef]) -> llvm.ModuleRef:
    """Link `modules` into the first (the others are consumed); LoweringError naming the one that clashes."""
    first, *rest = modules
    for module in rest:
        name = module.name
        try:
            first.link_in(module)
        except RuntimeError as failure:
            raise LoweringError([Diagnostic(f"cannot link: {failure}", name)]) from None
    return first


def _parse_diagnostic(name: str, message: str) -> Diagnostic:
    match = _LLVM_MESSAGE.search(message)
    if match is None:
        return Diagnostic(f"invalid IR: {message.strip()}", name)
    line, column, text = match.groups()
    return Diagnostic(f"invalid IR: {text}", name, line=int(line), column=int(column))


def _quoted_line(text: str | None, quoted: list[str]) -> int | None:
    """The 1-based line of `text` holding the first instruction a verifier message quotes."""
    wanted = {
        _ATTACHMENTS.sub("", line)
        for line in quoted
        if line.startswith("%") or line.split(" ", 1)[0] in _VOID_OPCODES
    }
    if not text or not wanted:
        return None
    for number, line in enumerate(text.splitlines(), start=1):
        if _ATTACHMENTS.sub("", line.strip()) in wanted:
            return number
    return None


def operand_list(text: str, open_index: int) -> tuple[list[str], int]:
    """The operands of the bracketed list opening at `open_index` and the index of its closing bracket.

    Commas split operands only outside nested brackets and quoted strings. The index is -1 when the
    list does not close.
    """
    flat = _FLAT_LIST.match(text, open_index)
    if flat is not None:
        return [operand.strip() for operand in _FLAT_OPERAND.findall(flat.group(1))], flat.end() - 1
    parts: list[str] = []
    depth = 0
    start = open_index + 1
    position = open_index
    while (match := _SPECIAL.search(text, position)) is not None:
        char, index = match.group(), match.start()
        position = index + 1
        if char == '"':
            position = text.find('"', position) + 1
            if position == 0:
                break
        elif char in _OPENERS:
            depth += 1
        elif char == ",":
            if depth == 1:
                parts.append(text[start:index].strip())
                start = position
        else:
            depth -= 1
            if depth == 0:
                last = text[start:index].strip()
                if last or parts:
                    parts.append(last)
                return parts, index
    return parts, -1


def split_top_level(text: str) -> list[str]:
    """Split an operand list (without its brackets) at the commas outside brackets and quoted strings."""
    return operand_list(f"({text})", 0)[0]


def matching_close(text: str, start: int) -> int:
    """The index of the bracket closing the one at `start`; -1 when it does not close."""
    return operand_list(text, start)[1]


def split_type(operand: str) -> tuple[str, str]:
    """Split a printed operand `TYPE [attributes] VALUE` into its type and the rest."""
    simple = _SIMPLE_TYPE.match(operand)
    if simple is not None:
        return simple.group(1), operand[simple.end() :]
    if operand[:1] in _OPENERS:
        end = matching_close(operand, 0)
        if end < 0:
            return operand, ""
        return operand[: end + 1], operand[end + 1 :].strip()
    for prefix in ("ptr addrspace(", "target("):
        if operand.startswith(prefix):
            end = matching_close(operand, len(prefix) - 1)
            return operand[: end + 1], operand[end + 1 :].strip()
    if operand.startswith('%"'):
        end = operand.find('"', 2)
        return operand[: end + 1], operand[end + 1 :].strip()
    head, _, rest = operand.partition(" ")
    return head, rest.strip()


def decode_string(literal: str) -> bytes:
    """The bytes of a printed string body (between the quotes of `c"..."` or `!"..."`).

    LLVM prints printable ASCII other than `"` and `\\` as itself and every other byte as `\\XX`.
    """
    head, *escaped = literal.split("\\")
    if not escaped:
        return literal.encode("latin-1")
    return (head + "".join(chr(int(part[:2], 16)) + part[2:] for part in escaped)).encode("latin-1")


def unquote_name(name: str) -> str:
    """`@main` -> `main`, `@"a b"` -> `a b`: the name as written in source, for messages."""
    bare = name[1:]
    if bare.startswith('"'):
        return decode_string(bare[1:-1]).decode("utf-8", "replace")
    return bare


def rewrite_address_space(text: str, old: int, new: int) -> str:
    """`text` with every `addrspace(old)` outside quoted strings spelt `addrspace(new)`."""

    def replace(match: re.Match[str]) -> str:
        return f"addrspace({new})" if match.group(1) == str(old) else match.group(0)

    return _QUOTED_OR_ADDRSPACE.sub(replace, text)


@dataclass(slots=True)
class GlobalDefinition:
    """A global variable as printed: `@name = [linkage...] global|constant TYPE [INITIALIZER][, ...]`."""

    name: str
    external: bool
    constant: bool
    value_type: str
    initializer: str | None

    @classmethod
    def parse(cls, name: str, body: str) -> GlobalDefinition | None:
        """Read the text after `@name = `; None when it is not a global variable (an alias, an ifunc)."""
        match = _BYTES_GLOBAL.match(body)
        if match is not None:
            prefix, kind, value_type, initializer = match.groups()
        else:
            match = _GLOBAL_BODY.match(body)
            if match is None:
                return None
            prefix, kind, rest = match.groups()
            value_type, rest = split_type(rest)
            initializer = split_top_level(rest)[0] if rest and not rest.startswith(",") else None
        external = not {"external", "extern_weak"}.isdisjoint(prefix.split())
        return cls(name, external, kind == "constant", value_type, initializer)


class ModuleText:
    """The printed module, with lazy indexes of its global definitions and its metadata nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._globals: dict[str, str] | None = None
        self._metadata: dict[int, tuple[str, str]] | None = None

    def global_definition(self, name: str) -> GlobalDefinition | None:
        """The global variable printed as `name` (`@s`, `@"a b"`, `@0`); None for functions and unknowns."""
        if self._globals is None:
            self._globals = {match.group(1): match.group(2) for match in _GLOBAL_LINE.finditer(self.text)}
        body = self._globals.get(name)
        return GlobalDefinition.parse(name, body) if body is not None else None

    def entry_parameters(self) -> dict[str, frozenset[str]]:
        """The parameter names of each function that nothing in the module refers to and that may be
        inlined (no `noinline`): the entries, which a caller outside the module calls."""
        references = Counter(_GLOBAL_REFERENCE.findall(self.text))
        groups = {group: set(words.split()) for group, words in _ATTRIBUTE_GROUP.findall(self.text)}
        entries = {}
        for match in _DEFINE_LINE.finditer(self.text):
            name = match.group(1)
            parameters, close = operand_list(self.text, match.end() - 1)
            attributes = self.text[close + 1 : self.text.find("\n", close)].split()
            words = {word for attribute in attributes for word in groups.get(attribute, {attribute})}
            if references[name] == 1 and "noinline" not in words:
                entries[name] = frozenset(parameter.split()[-1] for parameter in parameters if parameter)
        return entries

    def source_location(self, node: int) -> SourceLocation | None:
        """Resolve `!DILocation(line:, column:, scope:)` through the scope's `file:` to a file and line."""
        fields = self._node(node, "DILocation")
        if fields is None or "line" not in fields:
            return None
        filename = self._scope_file(fields.get("scope"))
        return SourceLocation(filename or "<unknown>", int(fields["line"]), int(fields.get("column", 0)))

    def _scope_file(self, reference: str | None) -> str | None:
        seen: set[str] = set()
        while reference is not None and reference.startswith("!") and reference not in seen:
            seen.add(reference)
            kind, fields = self._metadata_node(int(reference[1:]))
            if kind == "DIFile":
                return _file_name(fields)
            if "file" in fields:
                file_fields = self._node(int(fields["file"][1:]), "DIFile")
                if file_fields is not None:
                    return _file_name(file_fields)
            reference = fields.get("scope")
        return None

    def _node(self, node: int, kind: str) -> dict[str, str] | None:
        found, fields = self._metadata_node(node)
        return fields if found == kind else None

    def _metadata_node(self, node: int) -> tuple[str, dict[str, str]]:
        if self._metadata is None:
            self._metadata = {
                int(match.group(1)): (match.group(2), match.group(3))
                for match in _METADATA_LINE.finditer(self.text)
            }
        kind, body = self._metadata.get(node, ("", ""))
        return kind, {match.group(1): match.group(2).strip() for match in _METADATA_FIELD.finditer(body)}


def _file_name(fields: dict[str, str]) -> str | None:
    """The file as the compiler was given it (`filename:`), as clang's own diagnostics name it."""
    return _string_field(fields.get("filename"))


def _string_field(value: str | None) -> str | None:
    if value is None or not value.startswith('"'):
        return None
    return decode_string(value[1:-1]).decode("utf-8", "replace")
