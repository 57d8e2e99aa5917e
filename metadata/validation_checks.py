"""The names GPU-assisted validation's table, reports and lowering share (SPEC sections 11 and 13): the
classes of checks, each site's check, and the opcodes whose undefined behaviour `ub` tests.

Here rather than in `validation`, which needs `validation_reports`, which needs these names.
"""

# The classes of checks `--validate` takes (`--validate=bounds,ub,init`); plain `--validate` is bounds.
BOUNDS, UB, INIT = "bounds", "ub", "init"
RANGE = "range"  # a site's check: an access through a pointer no data buffer explains (class bounds)
UNREACHABLE = "unreachable"  # a `ub` site's kind: an `unreachable` reached

# The opcodes `ub` tests (a site's kind): integer division and remainder, shifts, float-to-int conversions.
DIVISIONS = frozenset({"sdiv", "udiv", "srem", "urem"})
SHIFTS = frozenset({"shl", "lshr", "ashr"})
FP_CONVERSIONS = frozenset({"fptosi", "fptoui"})
