"""LLVM's lexical grammar, as far as a pass that reads printed modules needs it.

A token is a quoted string (`"..."`, `c"..."`, `!"..."`, quoted names `@"..."` and `%"..."`; LLVM's
lexer ends a string at the next `"`, escapes being `\\XX`), a name (`@g`, `%v`, `!dbg`, `!7`, `#0`, a
debug record's `#dbg_value`), a number, a word (keywords, types, attribute names; a trailing `:` makes a
label or a field name), a comment, or one punctuation character. Brackets are `()[]{}<>`: LLVM uses `<`
and `>` only for vectors and packed structures. Tokens are kept with the whitespace before them, so any
run of tokens gives back its exact text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

Token = tuple[str, str]  # (whitespace before it, its text)

_TOKEN = re.compile(
    r"""(\s*)(
        ;[^\n]*                                  # comment
      | [@%!]?"[^"]*":?                          # string, quoted name, metadata string
      | c"[^"]*"                                 # string constant
      | [@%][-\w$.]+                             # global and local names
      | ![-\w$.]+                                # metadata names and references
      | \#\w+                                    # attribute group, debug record (`#dbg_value`)
      | -?0x[KLMHR]?[0-9A-Fa-f]+                 # hexadecimal integers and floats
      | [-+]?\d+(?:\.\d*(?:[eE][-+]?\d+)?)?:?    # decimal numbers, numbered labels
      | \.\.\.                                   # varargs
      | [A-Za-z_$.][-\w$.]*:?                    # words, labels, metadata field names
      | \S                                       # punctuation
    )""",
    re.X,
)
# The global names a text refers to, strings and comments skipped (group 1 empty for those).
_GLOBAL_REFERENCE = re.compile(r'"[^"]*"|;[^\n]*|(@(?:"[^"]*"|[-\w$.]+))')
_ADDRESS_SPACE = re.compile(r'"[^"]*"|;[^\n]*|addrspace\((\d+)\)')

OPENERS = {"(": ")", "[": "]", "{": "}", "<": ">"}
CLOSERS = frozenset(OPENERS.values())


def tokenize(text: str) -> list[Token]:
    """The tokens of `text`, each with the whitespace before it."""
    return _TOKEN.findall(text)


def leading_tokens(text: str, count: int) -> list[str]:
    """The first `count` tokens of `text` (fewer when it has fewer), without lexing the rest: enough to
    read an instruction's result and opcode, whatever follows them."""
    tokens: list[str] = []
    position = 0
    while len(tokens) < count and (match := _TOKEN.match(text, position)) is not None:
        tokens.append(match.group(2))
        position = match.end()
    return tokens


def text_of(tokens: list[Token], start: int = 0, end: int | None = None) -> str:
    """The exact text of `tokens[start:end]`, without the whitespace before the first."""
    return "".join(map("".join, tokens[start:end])).strip()


def closing(tokens: list[Token], start: int) -> int:
    """The index of the bracket closing the one at `start`; -1 when it does not close."""
    depth = 0
    for index in range(start, len(tokens)):
        token = tokens[index][1]
        if token in OPENERS:
            depth += 1
        elif token in CLOSERS:
            depth -= 1
            if depth == 0:
                return index
    return -1


def split_list(tokens: list[Token], start: int, end: int) -> list[tuple[int, int]]:
    """The (start, end) token ranges of the comma-separated items of `tokens[start:end]`, split only
    outside brackets. An empty range gives no item."""
    items = []
    depth = 0
    first = start
    for index in range(start, end):
        token = tokens[index][1]
        if token in OPENERS:
            depth += 1
        elif token in CLOSERS:
            depth -= 1
        elif token == "," and depth == 0:
            items.append((first, index))
            first = index + 1
    if first < end or items:
        items.append((first, end))
    return items


def with_list_items(tokens: list[Token], opener: int, close: int, extra: str) -> str:
    """The text of `tokens` with `extra` (comma-separated items) appended to the list between the brackets
    at `opener` and `close`: a call's arguments, a function's parameters."""
    separator = ", " if close > opener + 1 else ""
    return f"{text_of(tokens, 0, close)}{separator}{extra}{text_of(tokens, close)}"


def split_items(text: str) -> list[str]:
    """The comma-separated items of `text` (a list without its brackets), split outside brackets."""
    tokens = tokenize(text)
    return [text_of(tokens, start, end) for start, end in split_list(tokens, 0, len(tokens))]


def decode_string(body: str) -> bytes:
    """The bytes of a string's body (between the quotes of `c"..."`, `!"..."` or a quoted name).

    LLVM prints printable ASCII other than `"` and `\\` as itself and every other byte as `\\XX`.
    """
    head, *escaped = body.split("\\")
    if not escaped:
        return body.encode("latin-1")
    return (head + "".join(chr(int(part[:2], 16)) + part[2:] for part in escaped)).encode("latin-1")


def string_value(token: str) -> bytes | None:
    """The bytes of a string token (`c"..."`, `!"..."` or `"..."`); None for any other token."""
    quote = token.find('"')
    if quote < 0 or quote > 1 or not token.endswith('"'):
        return None
    return decode_string(token[quote + 1 : -1])


def bare_name(name: str) -> str:
    """`@main` -> `main`, `@"a b"` -> `a b`, `%x` -> `x`: a name as written in source."""
    bare = name[1:]
    if bare.startswith('"'):
        return decode_string(bare[1:-1]).decode("utf-8", "replace")
    return bare


@functools.lru_cache(maxsize=1024)
def global_name(bare: str) -> str:
    """The printed form of the global named `bare`: `@name`, quoted when LLVM would quote it."""
    if bare and re.fullmatch(r"[-a-zA-Z$._][-\w$.]*", bare):
        return f"@{bare}"
    escaped = "".join(
        chr(byte) if 0x20 <= byte <= 0x7E and byte not in b'"\\' else f"\\{byte:02X}"
        for byte in bare.encode("utf-8")
    )
    return f'@"{escaped}"'


def local_name(bare: str) -> str:
    """The printed form of the local `bare` (`%x`, `%"a b"`, and `%0` for an unnamed one: LLVM numbers
    the values and blocks it prints without a name)."""
    return f"%{bare}" if bare.isdigit() else "%" + global_name(bare)[1:]


def global_references(text: str) -> Iterator[str]:
    """The global names (`@g`, `@"a b"`) `text` refers to, outside strings and comments, in order."""
    return (name for name in _GLOBAL_REFERENCE.findall(text) if name)


def without_word(text: str, word: str) -> str:
    """`text` without the token `word` (a keyword: never one inside a string or a name)."""
    return "".join(space + token for space, token in tokenize(text) if token != word).strip()


def rewrite_address_space(text: str, old: int, new: int) -> str:
    """`text` with every `addrspace(old)` outside strings and comments spelt `addrspace(new)`."""

    def replace(match: re.Match[str]) -> str:
        return f"addrspace({new})" if match.group(1) == str(old) else match.group(0)

    return _ADDRESS_SPACE.sub(replace, text)
