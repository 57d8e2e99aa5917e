"""The driver side of the debug-printf contract (SPEC sections 2-6): what a driver imports alone.

Load the format-string tables of pipeline ELFs into a registry, decode a printf buffer into exactly
the text C's printf would print, and turn an abort buffer into the messages of the KHR shader-abort
proposal. Nothing here needs llvmlite.

    registry = FormatRegistry()
    registry.load_elf(elf_bytes, "pipeline.elf")
    output = decode_printf_buffer(buffer_bytes, registry)
    sys.stdout.write(output.text())

    with RenderPool(16) as pool:            # once, at start-up: 16 processes render large outputs
        for chunk in output.output_chunks(pool=pool):
            log.write(chunk)
"""

from .abort_buffer import AbortDecoding, AbortMessage, decode_abort_buffer, parse_message_data
from .buffer_region import Issue
from .cformat import format_value, format_values
from .elf_notes import note_only_elf, read_table, with_table
from .errors import BufferDecodeError, DprintfError, ElfError, FormatStringError, LinkError, TableError
from .formats import Conversion, FormatString, parse_format
from .ids import format_string_id
from .layout import ArgType, Layout
from .linking import FormatRegistry, link_tables
from .printf_buffer import PrintfDecoding, PrintfEntry, decode_printf_buffer
from .render_pool import RenderPool
from .table import FormatEntry, FormatTable

__all__ = [
    "AbortDecoding",
    "AbortMessage",
    "ArgType",
    "BufferDecodeError",
    "Conversion",
    "DprintfError",
    "ElfError",
    "FormatEntry",
    "FormatRegistry",
    "FormatString",
    "FormatStringError",
    "FormatTable",
    "Issue",
    "Layout",
    "LinkError",
    "PrintfDecoding",
    "PrintfEntry",
    "RenderPool",
    "TableError",
    "decode_abort_buffer",
    "decode_printf_buffer",
    "format_string_id",
    "format_value",
    "format_values",
    "link_tables",
    "note_only_elf",
    "parse_format",
    "parse_message_data",
    "read_table",
    "with_table",
]
