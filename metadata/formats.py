"""The format-string grammar of SPEC section 3, parsed once and shared by both sides.

A format string parses into pieces: literal text (with `%%` already turned into `%`) and
`Conversion`s. The compiler checks each conversion against its argument (`FormatString.check`);
the driver derives the argument layout from the conversions and the table's 64-bit mask
(`FormatString.layout_for`). Formatting the values lives in `cformat`.

Beyond SPEC 3, this project takes `%s` of a constant string (the device writes the string's index in
its entry's `.argument_strings`, which `with_strings` binds to the conversions for formatting) and
`%p` of a pointer; neither takes a length modifier or a vector.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .errors import FormatStringError
from .layout import FLOAT, INTEGER, POINTER, STRING, VECTOR_WIDTHS, ArgType, Layout

INTEGER_CONVERSIONS = "diouxXc"
FLOAT_CONVERSIONS = "fFeEgGaA"
STRING_CONVERSION = "s"
POINTER_CONVERSION = "p"
_KINDS = {
    **dict.fromkeys(INTEGER_CONVERSIONS, INTEGER),
    **dict.fromkeys(FLOAT_CONVERSIONS, FLOAT),
    STRING_CONVERSION: STRING,
    POINTER_CONVERSION: POINTER,
}
_BITS = {STRING: 32, POINTER: 64}  # the wire width of a string index and of a pointer
_WANTED = {
    INTEGER: "an integer",
    FLOAT: "a floating-point value",
    STRING: "a pointer to a constant string",
    POINTER: "a pointer",
}
SIGNED_CONVERSIONS = "di"
INTEGER_LENGTHS = {"hh": 8, "h": 16, "": 32, "l": 64, "ll": 64}
FLOAT_LENGTHS = ("", "l")
C_DIALECT = "c"
VVL_DIALECT = "vvl"  # VVL's habits (SPEC 9): `%ul` is a 64-bit integer in hex, as `%lx` is
DIALECTS = (C_DIALECT, VVL_DIALECT)
INT_MAX = (1 << 31) - 1  # C's printf fails with EOVERFLOW on a width or precision past an int
# Past this, a width or precision is refused even though C takes it: a decoder renders every entry of a
# buffer, and an untrusted table must not make it allocate gigabytes for one field.
MAX_FIELD_WIDTH = 4096

_NOT_VECTORS = (STRING_CONVERSION, POINTER_CONVERSION)
_NO_LENGTH = ("c", STRING_CONVERSION, POINTER_CONVERSION)

_CONVERSION = re.compile(
    r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<precision>\d*))?"
    r"(?:v(?P<vector>\d+))?(?P<length>hh|h|ll|l)?(?P<conversion>[a-zA-Z%*])?"
)
# The same pattern without its groups, so that `findall` returns whole conversions.
_CONVERSION_TEXT = re.compile(re.sub(r"\(\?P<\w+>", "(?:", _CONVERSION.pattern))


@dataclass(frozen=True, slots=True)
class Conversion:
    """One `%[flags][width][.precision][vN][length]conversion`, as written at `offset`; a `%s` bound to
    its entry's strings (`with_strings`) holds them, which its argument indexes."""

    text: str
    offset: int
    flags: str
    width: int | None
    precision: int | None
    vector: int
    length: str
    conversion: str
    strings: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return _KINDS[self.conversion]

    @property
    def is_signed(self) -> bool:
        return self.conversion in SIGNED_CONVERSIONS

    @property
    def value_bits(self) -> int:
        """Bits of the C type the conversion reads an integer as (8 for `hh`, 64 for `l`...); a string
        index's 32, a pointer's 64."""
        kind = self.kind
        return INTEGER_LENGTHS[self.length] if kind == INTEGER else _BITS.get(kind, 64)

    def argument_type(self, is_64bit: bool) -> ArgType:
        """The buffer type of the argument this conversion formats, given its 64-bit bit."""
        kind = self.kind
        return ArgType(kind, _BITS.get(kind, 64 if is_64bit else 32), self.vector)

    def mismatch(self, arg: ArgType) -> str | None:
        """Why `arg` cannot be formatted by this conversion, or None when it can."""
        if self.vector != arg.vector:
            wanted = f"a vector of {self.vector}" if self.vector else "a scalar"
            return f"'{self.text}' takes {wanted}, not {arg.token}"
        if self.kind != arg.kind:
            return f"'{self.text}' takes {_WANTED[self.kind]}, not {_described(arg)}"
        if self.kind == INTEGER and (self.value_bits == 64) != arg.is_64bit:
            wanted = "a 64-bit integer" if self.value_bits == 64 else "an integer of at most 32 bits"
            return f"'{self.text}' takes {wanted}, not {arg.token}"
        return None


@dataclass(frozen=True, slots=True)
class FormatString:
    """A parsed format string: literal pieces and conversions in order."""

    text: str
    pieces: tuple[str | Conversion, ...]

    @property
    def conversions(self) -> tuple[Conversion, ...]:
        return tuple(piece for piece in self.pieces if isinstance(piece, Conversion))

    def check(self, layout: Layout) -> None:
        """Raise FormatStringError unless the arguments of `layout` match the conversions."""
        conversions = self.conversions
        if len(conversions) != len(layout):
            raise FormatStringError(
                f"format string {self.text!r} has {len(conversions)} conversion(s) "
                f"but {len(layout)} argument(s) are passed"
            )
        for index, (conversion, arg) in enumerate(zip(conversions, layout, strict=True)):
            reason = conversion.mismatch(arg)
            if reason is not None:
                raise FormatStringError(f"argument {index + 1} of {self.text!r}: {reason}")

    def layout_for(self, sixty_four_bit: Sequence[int]) -> Layout:
        """The argument layout implied by the conversions and a `.64bit_arguments` mask."""
        return tuple(
            conversion.argument_type(_mask_bit(sixty_four_bit, index))
            for index, conversion in enumerate(self.conversions)
        )


def _described(arg: ArgType) -> str:
    """An argument in a message: its token, or what a string's or pointer's stands for."""
    return {STRING: "a string", POINTER: "a pointer"}.get(arg.kind, arg.token)


def with_strings(fmt: FormatString, strings: Sequence[str]) -> FormatString:
    """`fmt` with each `%s` bound to `strings`, the entry's `.argument_strings` its arguments index."""
    if not strings:
        return fmt
    bound = tuple(strings)
    return FormatString(
        fmt.text,
        tuple(
            dataclasses.replace(piece, strings=bound)
            if isinstance(piece, Conversion) and piece.conversion == STRING_CONVERSION
            else piece
            for piece in fmt.pieces
        ),
    )


def _mask_bit(words: Sequence[int], index: int) -> bool:
    word = index // 64
    return word < len(words) and bool(words[word] >> (index % 64) & 1)


@functools.lru_cache(maxsize=4096)
def parse_format(text: str, dialect: str = C_DIALECT) -> FormatString:
    """Parse `text` by SPEC section 3 (in `dialect`, section 9); raise FormatStringError naming the
    offending conversion."""
    pieces: list[str | Conversion] = []
    literal: list[str] = []
    position = 0
    while True:
        percent = text.find("%", position)
        if percent < 0:
            literal.append(text[position:])
            break
        literal.append(text[position:percent])
        match = _CONVERSION.match(text, percent)
        assert match is not None  # the pattern matches any text after a `%`: every part is optional
        piece = _conversion(text, percent, match)
        position = match.end()
        if dialect == VVL_DIALECT and piece is not None and _is_vvl_hex(piece, text, position):
            piece = _vvl_hex(piece)
            position += 1
        if piece is None:
            literal.append("%")
            continue
        pieces.append("".join(literal))
        literal = []
        pieces.append(piece)
    pieces.append("".join(literal))
    return FormatString(text, tuple(piece for piece in pieces if piece != ""))


def _is_vvl_hex(piece: Conversion, text: str, end: int) -> bool:
    """Whether a `%u` is VVL's `%ul` (the `l` follows it)."""
    return piece.conversion == "u" and not piece.length and text.startswith("l", end)


def _vvl_hex(piece: Conversion) -> Conversion:
    """VVL's `%ul`: a 64-bit integer printed as `%lx` prints it."""
    return dataclasses.replace(piece, text=piece.text + "l", length="l", conversion="x")


def conversion_specs(text: str) -> tuple[str, ...]:
    """The conversions of `text` as written (`%08.3v3f`, `%%`, `%s`...), valid or not, in order.

    Whether `text` parses, and which layouts it matches, depends on these alone (literal text never
    fails), so a caller checking many strings can check each sequence of conversions once.
    """
    return tuple(_CONVERSION_TEXT.findall(text))


def _field(digits: str | None, name: str, fail: Callable[[str], FormatStringError]) -> int | None:
    """A width or precision: None when absent, 0 for a lone `.`; within MAX_FIELD_WIDTH."""
    if digits is None:
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(INT_MAX)) or int(significant) > INT_MAX:
        raise fail(f"{name} {digits} does not fit an int (C's printf fails with EOVERFLOW)")
    value = int(significant)
    if value > MAX_FIELD_WIDTH:
        raise fail(f"{name} {value} is more than the {MAX_FIELD_WIDTH} this toolchain renders")
    return value


def _conversion(text: str, offset: int, match: re.Match[str]) -> Conversion | None:
    spec = match.group(0)
    conversion = match["conversion"]

    def fail(reason: str) -> FormatStringError:
        return FormatStringError(f"{reason} in {spec!r} at offset {offset} of format string {text!r}")

    if conversion == "%":
        if spec != "%%":
            raise fail("'%%' takes no flags, width, precision or length")
        return None
    if conversion is None:
        raise fail("incomplete conversion")
    if conversion == "*":
        raise fail("'*' width or precision is not supported")
    if conversion == "n":
        raise fail("'%n' is not supported: a shader cannot write through the arguments of its printf")
    if conversion not in _KINDS:
        raise fail(f"unknown conversion '{conversion}'")
    vector = int(match["vector"]) if match["vector"] is not None else 0
    if match["vector"] is not None and vector not in VECTOR_WIDTHS:
        raise fail(f"vector width {vector} is not one of {', '.join(map(str, VECTOR_WIDTHS))}")
    if match["vector"] is not None and conversion in _NOT_VECTORS:
        raise fail(f"'%{conversion}' takes no vector")
    length = match["length"] or ""
    if conversion in FLOAT_CONVERSIONS and length not in FLOAT_LENGTHS:
        raise fail(f"length '{length}' does not apply to '%{conversion}'")
    if conversion in _NO_LENGTH and length:
        raise fail(f"'%{conversion}' takes no length modifier")
    width = _field(match["width"], "width", fail)
    precision = _field(match["precision"], "precision", fail)
    return Conversion(
        text=spec,
        offset=offset,
        flags=match["flags"],
        width=width,
        precision=precision,
        vector=vector,
        length=length,
        conversion=conversion,
    )
