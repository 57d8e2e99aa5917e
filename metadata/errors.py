"""The package's exceptions: one base class, one subclass per kind of bad input.

Every error raised for bad input is a `DprintfError`; its message names what is wrong and where.
"""


class DprintfError(Exception):
    """Base class of every error this project raises for bad input."""


class FormatStringError(DprintfError):
    """A format string that does not parse, or does not match its arguments."""


class TableError(DprintfError):
    """A malformed `amdpal.format_strings` table."""


class ElfError(DprintfError):
    """An ELF file that cannot be read or rewritten."""


class LinkError(DprintfError):
    """Two tables that cannot be merged: the same ID with different entries."""


class BufferDecodeError(DprintfError):
    """A buffer dump that cannot be decoded at all (for example, shorter than its header)."""
