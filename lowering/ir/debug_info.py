"""Where IR came from: a `!DILocation` resolved to its file and line, and the lines of an input file
that hold a function's calls (for messages about IR without debug information)."""

from __future__ import annotations

from .diagnostics import SourceLocation
from .lexer import bare_name, string_value, tokenize
from .module import Module


def source_location(module: Module, node: int) -> SourceLocation | None:
    """`!DILocation(line:, column:, scope:)`, through the scope's `file:`, as a file and line."""
    location = module.metadata.get(node)
    if location is None or location.kind != "DILocation":
        return None
    fields = location.fields
    if "line" not in fields:
        return None
    filename = _scope_file(module, fields.get("scope"))
    return SourceLocation(filename or "<unknown>", int(fields["line"]), int(fields.get("column", 0)))


def _scope_file(module: Module, reference: str | None) -> str | None:
    seen: set[str] = set()
    while reference is not None and reference[1:].isdigit() and reference not in seen:
        seen.add(reference)
        scope = module.metadata.get(int(reference[1:]))
        if scope is None:
            return None
        fields = scope.fields
        if scope.kind == "DIFile":
            return _file_name(fields)
        file = fields.get("file")
        if file is not None and file[1:].isdigit():
            node = module.metadata.get(int(file[1:]))
            if node is not None and node.kind == "DIFile":
                return _file_name(node.fields)
        reference = fields.get("scope")
    return None


def _file_name(fields: dict[str, str]) -> str | None:
    """The file as the compiler was given it (`filename:`), as clang's own diagnostics name it."""
    value = string_value(fields.get("filename", ""))
    return value.decode("utf-8", "replace") if value is not None else None


def call_lines(text: str, function: str, callee: str) -> list[int] | None:
    """The 1-based lines of input `text` holding calls to `callee` in the definition of `function`
    (bare names); None when `text` does not define `function`. Line by line, as modules are written."""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if "define" in line and _names(line, "define", function):
            found = []
            for offset, body in enumerate(lines[number + 1 :], start=number + 2):
                if body.lstrip().startswith("}"):
                    break
                if callee in body and _names(body, "call", callee):
                    found.append(offset)
            return found
    return None


def _names(line: str, keyword: str, name: str) -> bool:
    """Whether `line` holds the word `keyword` and then the global `name` followed by `(`."""
    tokens = [token for _, token in tokenize(line)]
    if keyword not in tokens:
        return False
    after = tokens.index(keyword)
    return any(
        token[:1] == "@" and bare_name(token) == name and following == "("
        for token, following in zip(tokens[after:], tokens[after + 1 :], strict=False)
    )
