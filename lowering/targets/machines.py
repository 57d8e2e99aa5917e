"""Target machines and LLVM's -O2 pipeline, for the pass, the devices and code generation.

Its own module so that a device's worker, which only JIT-compiles, imports llvmlite and nothing of
what writing ELF objects needs (the table, msgpack, pyelftools).
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

import llvmlite.binding as llvm

from metadata.errors import DprintfError

from .target import Target, get_target

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


def alloca_address_space(target_name: str) -> int:
    """The address space of a stack slot (`alloca`) in a module lowered for `target_name`: the data
    layout's `A<n>`, 0 without one."""
    for item in module_layout(target_name)[1].split("-"):
        if item[:1] == "A" and item[1:].isdigit():
            return int(item[1:])
    return 0


def optimize(module: llvm.ModuleRef, machine: llvm.TargetMachine, speed_level: int = OPT_LEVEL) -> None:
    """Run LLVM's default module pipeline at `speed_level` (the -O2 of `opt`) on `module` in place."""
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=speed_level))
    builder.getModulePassManager().run(module, builder)


def inline_always(module: llvm.ModuleRef, target: Target) -> None:
    """LLVM's always-inliner on `module`, then what became dead dropped."""
    manager = llvm.create_new_module_pass_manager()
    manager.add_always_inliner_pass()
    manager.add_global_dead_code_eliminate_pass()
    manager.run(
        module, llvm.create_pass_builder(target_machine(target), llvm.create_pipeline_tuning_options())
    )


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
