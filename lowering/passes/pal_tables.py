"""The tables into an amdpal module's PAL metadata (SPEC 6): the format strings and the other passes'
tables in `!amdgpu.pal.metadata.msgpack`, merged with what the module has, from which LLVM's AMDGPU
backend writes the ELF note itself. Other targets get their note when code generation writes the ELF."""

from __future__ import annotations

from metadata.errors import DprintfError
from metadata.table import FormatTable, unpack_document

from ..ir.module import Module
from ..lowered_module import tables_document
from ..services.context import PassContext

PAL_METADATA = "!amdgpu.pal.metadata.msgpack"
USER_DATA_OFFSET_KEY = ".user_data_offset"


def run(context: PassContext) -> None:
    """amdpal: the format-string table and the others the run has, in the module's PAL metadata."""
    if not context.target.pal_metadata:
        return
    if context.user_data_offset is not None:
        context.table.other_keys[USER_DATA_OFFSET_KEY] = context.user_data_offset
    extra = tables_document(context.ordered_parts().values())
    with context.checking(None):  # a table that does not link is the module's problem
        _add_pal_table(context.module, context.table, extra)


def _add_pal_table(module: Module, table: FormatTable, extra: dict) -> None:
    """Put `table` and the keys of `extra` in the module's `!amdgpu.pal.metadata.msgpack`, merged with the
    documents already there (their tables linked with it: one ID or table key with two values is an
    error). The note's writer and the linker are imported here: a module for another target needs none."""
    from metadata.elf_notes import pal_metadata_ir
    from metadata.linking import link_tables

    tables = [table]
    document: dict = {}
    named = module.named_metadata.get(PAL_METADATA)
    if named is not None:
        for reference in named.operands:
            blob = module.string_at(reference)
            if blob is None:
                raise DprintfError(f"{PAL_METADATA[1:]} operand {reference} is not a metadata string")
            existing = unpack_document(blob)
            tables.append(FormatTable.from_document(existing))
            document = {**existing, **document}
        module.remove(named)
    node = max(module.metadata, default=-1) + 1
    module.add_lines(pal_metadata_ir(link_tables(tables).encode({**document, **extra}), node=node))
