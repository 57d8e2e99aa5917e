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

import importlib as _importlib
import typing as _typing

from . import features as _features

# name -> the module that defines it. Imported on first use, so that a driver or a tool that needs
# one module (the errors, the wire format) does not pay for numpy, msgpack and pyelftools at start-up.
_EXPORTS = {
    "AbortDecoding": "decoding.abort_buffer",
    "AbortMessage": "decoding.abort_buffer",
    "decode_abort_buffer": "decoding.abort_buffer",
    "parse_message_data": "decoding.abort_buffer",
    "AbortMessageEntry": "abort_messages",
    "CallSite": "call_sites",
    "Issue": "decoding.buffer_region",
    "format_value": "cformat",
    "format_values": "cformat",
    "note_only_elf": "elf_notes",
    "read_table": "elf_notes",
    "with_table": "elf_notes",
    "BufferDecodeError": "errors",
    "DprintfError": "errors",
    "ElfError": "errors",
    "FormatStringError": "errors",
    "LinkError": "errors",
    "TableError": "errors",
    "Conversion": "formats",
    "FormatString": "formats",
    "parse_format": "formats",
    "format_string_id": "ids",
    "ArgType": "layout",
    "Layout": "layout",
    "FormatRegistry": "linking",
    "link_tables": "linking",
    "PrintfDecoding": "decoding.printf_buffer",
    "PrintfEntry": "decoding.printf_buffer",
    "decode_printf_buffer": "decoding.printf_buffer",
    "RenderPool": "decoding.render_pool",
    "abort_record": "decoding.buffer_builder",
    "build_abort_buffer": "decoding.buffer_builder",
    "build_buffer": "decoding.buffer_builder",
    "build_printf_buffer": "decoding.buffer_builder",
    "printf_entry": "decoding.buffer_builder",
    "FormatEntry": "table",
    "FormatTable": "table",
}
_EXPORTS |= {
    name: f"{table.package}.{module}"
    for table in _features.FEATURE_TABLES
    for name, module in table.exports.items()
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public API, `__all__`: not the names this module uses itself, nor its submodules."""
    return list(__all__)
