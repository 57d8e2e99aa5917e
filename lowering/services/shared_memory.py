"""Shared memory (SPEC 14): a module's `addrspace(3)` globals, one instance a workgroup, and which
pointers of a function derive from one of them, at which constant offset where it is known: what the
passes that check or record accesses attribute an access to where no data buffer explains it.

A pointer derives from a shared global when it is the global, a constant expression of it (GEPs and
casts: `getelementptr ([256 x i32], ptr addrspace(3) @tile, i32 0, i32 5)`), or a GEP, phi, select or
cast of pointers that all derive from that one global (`buffer_accesses.derive`). A global is the
module's: a pointer derives from it in any function, not in an entry only. Its size is static, its
value type's in the data layout; None for an external one (dynamic shared memory, whose size is the
launch's) or a type not sized here (a named structure).

    shared = shared_globals(module, sizes)              # by reference: {"@tile": SharedGlobal}
    pointers = SharedPointers(function, shared, sizes)
    pointers.of("%slot")                                 # SharedPointer(@tile, offset 4 or None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..ir.functions import Function
from ..ir.lexer import global_name
from ..ir.module import GlobalVariable, Module
from .buffer_accesses import TypeSizes, constant_offset, derive, offsets_from, pointer_base

SHARED_ADDRESS_SPACE = 3
SHARED_WORD = f"addrspace({SHARED_ADDRESS_SPACE})"
SHARED_POINTER_TYPE = f"ptr {SHARED_WORD}"


@dataclass(frozen=True, slots=True)
class SharedGlobal:
    """An `addrspace(3)` global: its bare IR name, its value type and its size in bytes (None: not
    known before the launch, `unsized` says why)."""

    name: str
    value_type: str
    bytes: int | None
    unsized: str | None = None

    @property
    def reference(self) -> str:
        """The global as IR names it: `@tile`."""
        return global_name(self.name)

    @property
    def label(self) -> str:
        """How reports and tables name it where they name a buffer: `shared @tile`."""
        return f"shared {self.reference}"


@dataclass(frozen=True, slots=True)
class SharedPointer:
    """A pointer attributed to a shared global, at its constant byte offset from the global's start
    (None: known at run time only)."""

    shared: SharedGlobal
    offset: int | None


def shared_variables(module: Module) -> list[GlobalVariable]:
    """The module's shared-memory variables: its `addrspace(3)` globals."""
    return [
        variable
        for variable in module.globals.values()
        if variable.definition.is_variable and SHARED_WORD in variable.definition.words
    ]


def shared_globals(module: Module, sizes: TypeSizes) -> dict[str, SharedGlobal]:
    """The module's shared globals with their sizes in `sizes`' layout, by reference (`@tile`)."""
    found = {}
    for variable in shared_variables(module):
        definition = variable.definition
        size = None if definition.external else sizes.allocated(definition.value_type)
        unsized = None
        if definition.external:
            unsized = "external: dynamic shared memory, whose size is the launch's"
        elif size is None:
            unsized = f"its type {definition.value_type} is not sized here"
        shared = SharedGlobal(variable.name, definition.value_type, size, unsized)
        found[shared.reference] = shared
    return found


class SharedPointers:
    """The pointers of one function that derive from one shared global (of `shared`, by reference),
    with their constant offsets, as the function is when this is made."""

    def __init__(self, function: Function, shared: Mapping[str, SharedGlobal], sizes: TypeSizes) -> None:
        self.sizes = sizes
        self.roots = derive(function, shared) if shared else {}
        self.offsets = offsets_from(function, dict.fromkeys(shared, 0), sizes) if shared else {}

    def of(self, pointer: str) -> SharedPointer | None:
        """The shared global `pointer` (an IR value, a constant expression too) derives from, and its
        offset; None when it derives from none or from more than one."""
        shared = self.roots.get(pointer_base(pointer)) if self.roots else None
        if shared is None:
            return None
        return SharedPointer(shared, constant_offset(pointer, self.offsets, self.sizes))
