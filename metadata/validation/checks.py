"""The names GPU-assisted validation's table, reports and lowering share (SPEC sections 11 and 13): the
classes of checks, each site's check, and the opcodes whose undefined behaviour `ub` tests.

Here rather than in `validation`, which needs `validation_reports`, which needs these names.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import DprintfError

# The classes of checks `--validate` takes (`--validate=bounds,ub,init`); plain `--validate` is bounds.
BOUNDS, UB, INIT = "bounds", "ub", "init"
CLASSES = (BOUNDS, UB, INIT)  # the classes `--validate` takes, by name
ALL = "all"  # `--validate=all`: every class
RANGE = "range"  # a site's check: an access through a pointer no data buffer explains (class bounds)
UNREACHABLE = "unreachable"  # a `ub` site's kind: an `unreachable` reached

# The opcodes `ub` tests (a site's kind): integer division and remainder, shifts, float-to-int conversions.
DIVISIONS = frozenset({"sdiv", "udiv", "srem", "urem"})
SHIFTS = frozenset({"shl", "lshr", "ashr"})
FP_CONVERSIONS = frozenset({"fptosi", "fptoui"})


class ValidationOptionError(DprintfError):
    """A `--validate` class that is not one of CLASSES."""


def checks_of(validate: bool | str | Iterable[str]) -> frozenset[str]:
    """The classes of checks `validate` asks for: False none, True bounds, a name or a comma-separated
    list of CLASSES (or `all`). `init` needs each access inside its buffer first: it brings `bounds`."""
    if isinstance(validate, bool):
        return frozenset({BOUNDS}) if validate else frozenset()
    names = validate.split(",") if isinstance(validate, str) else list(validate)
    found: set[str] = set()
    for name in (name.strip() for name in names):
        if name == ALL:
            found.update(CLASSES)
        elif name in CLASSES:
            found.add(name)
        else:
            raise ValidationOptionError(
                f"unknown validation class {name!r} (expected {', '.join(CLASSES)} or {ALL}, comma-separated)"
            )
    if INIT in found:
        found.add(BOUNDS)
    return frozenset(found)
