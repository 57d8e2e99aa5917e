"""Code generation for lowered modules: ELF objects and PTX.

`amdpal` objects come straight from LLVM's AMDGPU backend, which writes the table it finds in
`!amdgpu.pal.metadata.msgpack` into its own `NT_AMDGPU_METADATA` note. `cpu` objects get the note of
SPEC section 6 added afterwards. `nvptx` modules become PTX text for the CUDA driver to load.
"""

from __future__ import annotations

from metadata.elf_notes import with_table

from ..ir.reading import parse_source
from ..lowered_module import LoweredModule
from ..targets.machines import (
    optimize,
    target_machine,
)
from .isolation import isolated
from .ptx_tails import copy_returning_tails


def compile_object(lowered: LoweredModule, cpu: str | None = None, *, source: str = "<lowered>") -> bytes:
    """An ELF relocatable object of a lowered module, optimised at -O2, with its table in a metadata note.

    LLVM runs in a child process (`isolation`): a fatal error of its own is a CodegenError."""
    return isolated(f"compiling for {lowered.target.name}", _object, lowered, cpu, source)


def compile_ptx(lowered: LoweredModule, cpu: str | None = None, *, source: str = "<lowered>") -> str:
    """PTX assembly of a module lowered for nvptx, optimised at -O2 (in a child process, as above)."""
    return compile_assembly(lowered, cpu, source=source)


def compile_assembly(lowered: LoweredModule, cpu: str | None = None, *, source: str = "<lowered>") -> str:
    """The assembly of a lowered module, optimised at -O2 (PTX for nvptx; the ISA of `cpu` for amdpal,
    which Debian's llvm-objdump-14 cannot disassemble for gfx11), in a child process as above."""
    return isolated(f"compiling for {lowered.target.name}", _assembly, lowered, cpu, source)


def _object(lowered: LoweredModule, cpu: str | None, source: str) -> bytes:
    machine = target_machine(lowered.target, cpu)
    module = parse_source(source, lowered.ir)
    optimize(module, machine)
    elf = machine.emit_object(module)
    if lowered.target.pal_metadata:
        return elf
    return with_table(elf, lowered.table, source=source, document=lowered.document())


def _assembly(lowered: LoweredModule, cpu: str | None, source: str) -> str:
    machine = target_machine(lowered.target, cpu)
    module = parse_source(source, lowered.ir)
    optimize(module, machine)
    assembly = machine.emit_assembly(module)
    return copy_returning_tails(assembly) if lowered.target.copies_returning_tails else assembly
