"""Code generation for lowered modules: target machines, LLVM's -O2 pipeline, ELF objects and PTX.

`amdpal` objects come straight from LLVM's AMDGPU backend, which writes the table it finds in
`!amdgpu.pal.metadata.msgpack` into its own `NT_AMDGPU_METADATA` note. `cpu` objects get the note of
SPEC section 6 added afterwards. `nvptx` modules become PTX text for the CUDA driver to load.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

import llvmlite.binding as llvm

from metadata.elf_notes import with_table
from metadata.errors import DprintfError

from .ir.reading import parse_source
from .isolation import isolated
from .lowered_module import LoweredModule
from .targets import Target, get_target

OPT_LEVEL = 2


class UnknownProcessorError(DprintfError):
    """A `--mcpu` that LLVM does not know for the target."""


llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()


def host_target_machine(*, jit: bool = True) -> llvm.TargetMachine:
    """A new target machine for the host triple with the host CPU's name and features.

    The features matter: with the generic CPU, `half` conversions become calls to compiler-rt
    helpers that a JIT cannot resolve; with the host's (F16C) they are instructions. MCJIT owns the
    target machine it is given, so each engine needs its own: this makes a new one per call.
    """
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=_host_features(),
        opt=OPT_LEVEL,
        reloc="default" if jit else "pic",
        codemodel="jitdefault" if jit else "default",
    )


def target_machine(target: Target, cpu: str | None = None) -> llvm.TargetMachine:
    """A new target machine for `target`: `cpu`, or the target's default processor (the host's for cpu).

    UnknownProcessorError when LLVM does not know `cpu` for the target (it would warn and go generic).
    """
    if cpu is None:
        if target.triple is None:
            return host_target_machine(jit=False)
        cpu = target.default_cpu or ""
    elif _unknown_processor(target, cpu):
        raise UnknownProcessorError(f"unknown processor {cpu!r} for target {target.name} ({_triple(target)})")
    return _machine(_triple(target), cpu)


@functools.cache
def module_layout(target_name: str) -> tuple[str, str]:
    """The triple and data layout a module lowered for `target_name` carries."""
    machine = target_machine(get_target(target_name))
    return machine.triple, str(machine.target_data)


def optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine, speed_level: int = OPT_LEVEL) -> None:
    """Run LLVM's default module pipeline at `speed_level` (the -O2 of `opt`) on `module` in place."""
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=speed_level))
    builder.getModulePassManager().run(module, builder)


def compile_object(lowered: LoweredModule, cpu: str | None = None, *, source: str = "<lowered>") -> bytes:
    """An ELF relocatable object of a lowered module, optimised at -O2, with its table in a metadata note.

    LLVM runs in a child process (`isolation`): a fatal error of its own is a CodegenError."""
    return isolated(f"compiling for {lowered.target.name}", _object, lowered, cpu, source)


def compile_ptx(lowered: LoweredModule, cpu: str | None = None, *, source: str = "<lowered>") -> str:
    """PTX assembly of a module lowered for nvptx, optimised at -O2 (in a child process, as above)."""
    return isolated(f"compiling for {lowered.target.name}", _ptx, lowered, cpu, source)


def _object(lowered: LoweredModule, cpu: str | None, source: str) -> bytes:
    machine = target_machine(lowered.target, cpu)
    module = parse_source(source, lowered.ir)
    optimize(module, machine)
    elf = machine.emit_object(module)
    if lowered.target.pal_metadata:
        return elf
    return with_table(elf, lowered.table, source=source, document=lowered.document())


def _ptx(lowered: LoweredModule, cpu: str | None, source: str) -> str:
    machine = target_machine(lowered.target, cpu)
    module = parse_source(source, lowered.ir)
    optimize(module, machine)
    return machine.emit_assembly(module)


def _machine(triple: str, cpu: str) -> llvm.TargetMachine:
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, opt=OPT_LEVEL, reloc="pic", codemodel="default"
    )


def _triple(target: Target) -> str:
    return target.triple or llvm.get_process_triple()


def _unknown_processor(target: Target, cpu: str) -> bool:
    """Whether LLVM rejects `cpu` for `target`: it says so only on stderr, so listen there while it looks."""
    with tempfile.TemporaryFile() as capture:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            _machine(_triple(target), cpu)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        return b"is not a recognized processor" in capture.read()


def _host_features() -> str:
    try:
        return llvm.get_host_cpu_features().flatten()
    except RuntimeError:
        return ""
