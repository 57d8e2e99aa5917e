"""The package's exceptions: one base class, one subclass per kind of bad input or lost work.

Every error raised for bad input is a `DprintfError`, and so is work lost to something outside the
program (a rendering process killed); its message names what is wrong and where.
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


class RenderError(DprintfError):
    """Output that could not be rendered: a rendering process died (killed, out of memory)."""
