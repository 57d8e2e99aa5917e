"""Formatting the values of a printf entry exactly as C's `snprintf` (glibc's) does (SPEC section 3).

Integers arrive as the raw unsigned bits the buffer holds and are read back as the C type the
conversion names (`%hhd` of 255 is -1); floats arrive as Python floats (a `float` argument as the
`double` it widens to); a `%s` argument as its string's index, a `%p` one as the pointer's bits.
`format_value` is the exact reference, written from the C standard and glibc's behaviour;
`column_render` renders many entries at once and falls back on it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy

from .formats import Conversion, FormatString

VECTOR_SEPARATOR = ", "
DEFAULT_FLOAT_PRECISION = 6
DOUBLE_FRACTION_DIGITS = 13  # hex digits of a double's 52-bit fraction
DOUBLE_FRACTION_BITS = 52
DOUBLE_EXPONENT_BIAS = 1023
DOUBLE_MIN_EXPONENT = -1022
MAX_DECIMAL_EXPONENT = 308  # 10.0**308 is the largest power of ten below the largest double
NULL_STRING = 0xFFFFFFFF  # the index a `%s` of a null pointer writes
UNKNOWN_STRING_INDEX = 0xFFFFFFFE  # the index a `%s` of a pointer equal to none of its strings writes
UNKNOWN_STRING = "(unknown string)"  # what an index past an entry's strings prints
_NULL_TEXT = b"(null)"


def format_value(conversion: Conversion, value: int | float | Sequence) -> str:
    """One conversion of `value` (a sequence of components for a vector conversion)."""
    if conversion.vector:
        components = cast(Sequence, value)
        return VECTOR_SEPARATOR.join(format_scalar(conversion, component) for component in components)
    return format_scalar(conversion, cast(int | float, value))


def format_values(fmt: FormatString, values: Sequence) -> str:
    """The text of one entry: the literal pieces and the conversions of `values`, in order."""
    arguments = iter(values)
    return "".join(
        piece if isinstance(piece, str) else format_value(piece, next(arguments)) for piece in fmt.pieces
    )


def format_scalar(conversion: Conversion, value: int | float) -> str:
    return _FORMATTERS[conversion.conversion](conversion, value)


def _pad(conversion: Conversion, prefix: str, body: str, zero_fill: bool) -> str:
    """`prefix + body` padded to the width: zeros between them when `zero_fill`, else spaces."""
    fill = (conversion.width or 0) - len(prefix) - len(body)
    if fill <= 0:
        return prefix + body
    if "-" in conversion.flags:
        return prefix + body + " " * fill
    if zero_fill and "0" in conversion.flags:
        return prefix + "0" * fill + body
    return " " * fill + prefix + body


def sign(conversion: Conversion, negative: bool) -> str:
    if negative:
        return "-"
    if "+" in conversion.flags:
        return "+"
    return " " if " " in conversion.flags else ""


def _c_integer(conversion: Conversion, value: int) -> int:
    """`value` read as the C type of the conversion: `value_bits` wide, signed for `%d`/`%i`."""
    bits = conversion.value_bits
    number = int(value) & ((1 << bits) - 1)
    if conversion.is_signed and number >> (bits - 1):
        number -= 1 << bits
    return number


def _integer_digits(conversion: Conversion, magnitude: int, base: str) -> str:
    """The digits of `magnitude`, at least `precision` of them (none for `%.0d` of 0)."""
    precision = conversion.precision
    if precision is None:
        return format(magnitude, base)
    if magnitude == 0 and precision == 0:
        return ""
    return format(magnitude, base).rjust(precision, "0")


def _format_signed(conversion: Conversion, value: int) -> str:
    number = _c_integer(conversion, value)
    digits = _integer_digits(conversion, abs(number), "d")
    return _pad(conversion, sign(conversion, number < 0), digits, conversion.precision is None)


def _format_unsigned(conversion: Conversion, value: int) -> str:
    digits = _integer_digits(conversion, _c_integer(conversion, value), "d")
    return _pad(conversion, "", digits, conversion.precision is None)


def _format_octal(conversion: Conversion, value: int) -> str:
    digits = _integer_digits(conversion, _c_integer(conversion, value), "o")
    if "#" in conversion.flags and not digits.startswith("0"):
        digits = "0" + digits
    return _pad(conversion, "", digits, conversion.precision is None)


def _format_hex(conversion: Conversion, value: int) -> str:
    number = _c_integer(conversion, value)
    digits = _integer_digits(conversion, number, conversion.conversion)
    prefix = "0" + conversion.conversion if "#" in conversion.flags and number else ""
    return _pad(conversion, prefix, digits, conversion.precision is None)


def _format_char(conversion: Conversion, value: int) -> str:
    """`%c`: the low byte; glibc pads it with spaces only.

    A byte of 0x80 or above is not UTF-8 on its own: it becomes the lone surrogate U+DC80..U+DCFF,
    so that text encoded with `surrogateescape` is the very byte C writes.
    """
    byte = int(value) & 0xFF
    return _pad(conversion, "", chr(byte) if byte < 0x80 else chr(0xDC00 | byte), False)


def _format_string(conversion: Conversion, value: int) -> str:
    """`%s` of the string at index `value` of the conversion's strings, as glibc prints it: flags but `-`
    ignored, the precision and the width counted in bytes of UTF-8 (a character cut by the precision
    leaves its bytes as lone surrogates, written back as themselves). NULL_STRING prints glibc's
    `(null)`, or nothing when the precision is below its length; another index past the strings
    prints UNKNOWN_STRING."""
    index = int(value) & 0xFFFFFFFF
    if index < len(conversion.strings):
        data = conversion.strings[index].encode("utf-8")
    elif index == NULL_STRING:
        precision = conversion.precision
        data = b"" if precision is not None and precision < len(_NULL_TEXT) else _NULL_TEXT
    else:
        data = UNKNOWN_STRING.encode("ascii")
    if conversion.precision is not None:
        data = data[: conversion.precision]
    fill = max(0, (conversion.width or 0) - len(data))
    text = data.decode("utf-8", "surrogateescape")
    return text + " " * fill if "-" in conversion.flags else " " * fill + text


def _format_pointer(conversion: Conversion, value: int) -> str:
    """`%p` as glibc prints it: `(nil)` for 0, padded with spaces only; else `0x` and lowercase hex digits
    (at least `precision` of them), after a `+` or space flag's sign, zero-filled by `0` without a
    precision, as `%#lx` would be but for the sign."""
    number = int(value) & 0xFFFFFFFFFFFFFFFF
    if not number:
        return _pad(conversion, "", "(nil)", False)
    digits = _integer_digits(conversion, number, "x")
    return _pad(conversion, sign(conversion, False) + "0x", digits, conversion.precision is None)


def _format_float(conversion: Conversion, value: float) -> str:
    """`%f %e %g` and upper-case forms: Python's `format` rounds exactly as glibc does."""
    number = float(value)
    if not math.isfinite(number):
        return _format_non_finite(conversion, number)
    alternate = "#" if "#" in conversion.flags else ""
    body = format(abs(number), f"{alternate}.{float_precision(conversion)}{conversion.conversion}")
    if alternate and conversion.conversion in "gG" and _rounds_up_a_decade(conversion, abs(number)):
        body = "1." + body[body.lower().index("e") :]
    return _pad(conversion, sign(conversion, math.copysign(1.0, number) < 0), body, True)


def float_precision(conversion: Conversion) -> int:
    return DEFAULT_FLOAT_PRECISION if conversion.precision is None else conversion.precision


def _rounds_up_a_decade(conversion: Conversion, magnitude: float) -> bool:
    """Whether `%g`'s P significant digits of a value below 10**P round up to 10**P.

    glibc then prints `%#g` as `1.e+P`, dropping the zeros C asks for (`%#.3g` of 999.5 is `1.e+03`,
    not `1.00e+03`): its choice of style is made before rounding. The tests hold us to glibc.
    """
    significant = max(float_precision(conversion), 1)
    rounded = format(magnitude, f".{significant - 1}e")
    return magnitude < 10**significant and int(rounded.partition("e")[2]) == significant


def _format_non_finite(conversion: Conversion, number: float) -> str:
    """`inf`/`nan` (upper case for `%F %E %G %A`), signed as glibc does (`-nan`), never zero-filled."""
    body = "inf" if math.isinf(number) else "nan"
    if conversion.conversion.isupper():
        body = body.upper()
    return _pad(conversion, sign(conversion, math.copysign(1.0, number) < 0), body, False)


def _format_hex_float(conversion: Conversion, value: float) -> str:
    """`%a`/`%A` as glibc prints a double: `0x1.<hex>p<exp>`, subnormals as `0x0.<hex>p-1022`."""
    number = float(value)
    if not math.isfinite(number):
        return _format_non_finite(conversion, number)
    bits = struct.unpack("<Q", struct.pack("<d", number))[0]
    biased = bits >> DOUBLE_FRACTION_BITS & 0x7FF
    fraction = bits & ((1 << DOUBLE_FRACTION_BITS) - 1)
    mantissa = (1 << DOUBLE_FRACTION_BITS if biased else 0) | fraction
    exponent = biased - DOUBLE_EXPONENT_BIAS if biased else (DOUBLE_MIN_EXPONENT if fraction else 0)
    digits = DOUBLE_FRACTION_DIGITS
    precision = conversion.precision
    if precision is None:
        while digits and not mantissa & 0xF:
            mantissa >>= 4
            digits -= 1
    elif precision < digits:
        mantissa = _round_half_even(mantissa, 4 * (digits - precision))
        digits = precision
    else:
        mantissa <<= 4 * (precision - digits)
        digits = precision
    leading, fraction_digits = divmod(mantissa, 1 << 4 * digits)
    body = format(leading, "x")
    if digits or "#" in conversion.flags:
        body += "." + (format(fraction_digits, f"0{digits}x") if digits else "")
    body += f"p{exponent:+d}"
    prefix = sign(conversion, bits >> 63 == 1) + "0x"
    if conversion.conversion == "A":
        body, prefix = body.upper(), prefix.upper()
    return _pad(conversion, prefix, body, True)


def _round_half_even(number: int, shift: int) -> int:
    """`number / 2**shift` rounded to nearest, ties to even (glibc's rounding of `%a` digits)."""
    quotient, remainder = divmod(number, 1 << shift)
    half = 1 << (shift - 1)
    if remainder > half or (remainder == half and quotient & 1):
        quotient += 1
    return quotient


_FORMATTERS: dict[str, Callable[[Conversion, Any], str]] = {
    "d": _format_signed,
    "i": _format_signed,
    "u": _format_unsigned,
    "o": _format_octal,
    "x": _format_hex,
    "X": _format_hex,
    "c": _format_char,
    "s": _format_string,
    "p": _format_pointer,
    **{conversion: _format_float for conversion in "fFeEgG"},
    "a": _format_hex_float,
    "A": _format_hex_float,
}


def c_integers(conversion: Conversion, array: numpy.ndarray) -> numpy.ndarray:
    """Raw bits read as the C type of `conversion` (vectorised `_c_integer`); `%c` keeps the low byte,
    as `_format_char` maps it."""
    if conversion.conversion == "c":
        byte = array.astype(numpy.uint8).astype(numpy.uint32)
        return numpy.where(byte < 0x80, byte, byte | 0xDC00)
    bits = conversion.value_bits
    narrowed = array.astype(f"uint{bits}", copy=False)
    return narrowed.view(f"int{bits}") if conversion.is_signed else narrowed
