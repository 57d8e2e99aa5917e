"""The targets the pass lowers for, declared once as data (SPEC sections 4 and 6).

A target fixes the triple and data layout of the lowered module, the address space the buffer lives
in, whether the lowered code checks the capacity in `reserved0`, and where the format-string table goes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from metadata.errors import DprintfError


class Aggregation(enum.Enum):
    """Where a target aggregates printf reservations in the IR, a warp's lanes with one atomic add."""

    NEVER = "never"
    # Everywhere but a printf to an entry's own buffer parameter: the kernel inlines the entry, the
    # parameter becomes the kernel's, and ptxas aggregates that atomic itself, at less cost.
    OUTSIDE_ENTRIES = "outside entries"
    ALWAYS = "always"


class EntryStores(enum.Enum):
    """How printf helpers store their entries (`entry_stores`).

    `LANE`: each lane stores its own entry, a dword (or two) at a time: a warp's store instruction
    writes 32 dwords an entry apart. `VECTOR`: each lane stores its entry in 16-byte pieces where the
    entry's address allows. `SHUFFLE` and `SHARED`, for the printfs whose lanes reserve together
    (`Aggregation`): where the 32 lanes of a full warp reserved one region that fits, they exchange
    their dwords (through `shfl.sync`, or through the warp's slice of a shared-memory scratch) so that
    each store instruction of the warp writes consecutive dwords of the region (`entry_stores`);
    anywhere else (a partial warp, lanes of several buffers, a region that does not fit whole) each
    lane stores its own entry as `LANE` does.
    """

    LANE = "lane"
    VECTOR = "vector"
    SHUFFLE = "shuffle"
    SHARED = "shared"

    @property
    def cooperative(self) -> bool:
        return self in (EntryStores.SHUFFLE, EntryStores.SHARED)


class CounterPlacement(enum.Enum):
    """Where instrumentation puts its counters (SPEC 10): one a block, or on the edges off a spanning tree
    of each function's control flow, the blocks' counts derived by flow conservation (`edge_counters`)."""

    BLOCKS = "blocks"
    EDGES = "edges"


OUTLINED_CALLS_THRESHOLD = 32
NVPTX_BLOCK_THREADS = 256  # the nvptx device's thread blocks by default, which its worker launches
# An entry's workgroup function (SPEC 14), defined by a pass for a target whose device runs a
# workgroup's invocations on one thread (cpu): `@"<entry>.workgroup"` takes the entry's parameters, its
# invocation ID being the workgroup's first, then `i32 count` (the workgroup's invocations, fewer in a
# partial last one) and `i32 size` (the workgroup size), and runs those invocations as one workgroup.
WORKGROUP_FUNCTION_SUFFIX = ".workgroup"
WARP_LANES = 32


class CounterCopy(enum.Enum):
    """Which copy of the block counters code adds to, on a target of several (SPEC 10)."""

    MULTIPROCESSOR = "the multiprocessor's number and the warp's slot in it"  # nvptx: %smid, %warpid
    STACK = "a hash of the thread's stack address"  # cpu: threads have their own stacks, megabytes apart


INPUT_BUFFER_ADDRESS_SPACE = 7  # the AMDGPU buffer fat pointer: the buffers' address space in the input IR


@dataclass(frozen=True, slots=True)
class Target:
    """One lowering target.

    `triple` None means the host's. `buffer_address_space`, when set, replaces address space 7 (the
    AMDGPU buffer fat pointer of the input convention) everywhere in the module. `checks_capacity`
    makes each entry conditional on `old + size <= reserved0`; without it the buffer descriptor's range
    bounds the stores. `pal_metadata` puts the table into `!amdgpu.pal.metadata.msgpack`.
    `aggregation` says where the lanes of a warp reserve their printf entries with one atomic add
    between them in the IR (`warp_aggregation`); aborts always reserve per invocation.
    `resource_globals` makes a buffer the runtime puts in a module global (SPEC 9) a buffer resource
    (`ptr addrspace(8)`, the 128-bit descriptor) in the constant address space (4), cast to a fat
    pointer where it is loaded: LLVM's AMDGPU backend keeps no fat pointer in memory.
    `outlines_calls_above`, when set, keeps the calls of a function with more printf and abort calls
    than that as calls to `noinline` helpers: LLVM's AMDGPU backend takes time quadratic in the size
    of one function (SI Fix SGPR copies, straight-line strength reduction, the load/store vectorizer,
    the scheduler; 500 inlined calls took 6.5 s, 1,000 over 20 s), while a call costs the device
    little next to a debug printf's stores. `sums_counts_per_warp`: instrumentation's block counts are
    summed over a warp's active lanes and added by one of them (SPEC 10), and `counter_slices` (a power of
    two) copies of the counters take the atomics, each to the copy `counter_copy` picks;
    `counter_placement` puts the counters on blocks or on edges. `entry_stores` says how an aggregated
    printf writes its entries (`EntryStores`); `cold_printf` makes every printf helper a `noinline`
    `cold` function, so that the code around a printf that is not taken holds only the call.
    `global_address_space`, when set, is where memory the runtime points to with a plain pointer (the
    shadows of SPEC 12) is accessed: the GPU's global memory rather than the generic address space.
    `races_per_warp`: where a full warp's lanes make one 4-byte access to 32 consecutive words, in lane
    order, one lane records it for all of them (`metadata.races.table`, a warp's record).
    `reserves_per_block`: a printf every invocation of an entry reaches once reserves its thread
    block's entries with one atomic add, its threads waiting at barriers for each other
    (`block_reservation`): only for a kernel that calls the entry once in each thread, or exits.
    `device_scope`: the `syncscope` of the whole device, None where the default (system) is it.
    `emits_objects`: `compile` writes an ELF object for it. `copies_returning_tails`: its assembly (PTX)
    gets short returning tails copied into the cold blocks that branch back to them (`ptx_tails`).
    `workgroup_intrinsics`: the family of intrinsics (`nvvm`, `amdgcn`) its barriers and workgroup
    indices lower to (SPEC 14); None where its device runs a workgroup's invocations on one thread,
    through the entry's workgroup function (`WORKGROUP_FUNCTION_SUFFIX`).
    """

    name: str
    triple: str | None
    default_cpu: str | None
    checks_capacity: bool
    pal_metadata: bool
    buffer_address_space: int | None = None
    aggregation: Aggregation = Aggregation.NEVER
    outlines_calls_above: int | None = None
    resource_globals: bool = False
    sums_counts_per_warp: bool = False
    counter_slices: int = 1
    counter_copy: CounterCopy | None = None
    global_address_space: int | None = None
    counter_placement: CounterPlacement = CounterPlacement.EDGES
    entry_stores: EntryStores = EntryStores.LANE
    cold_printf: bool = False
    races_per_warp: bool = False
    reserves_per_block: bool = False
    device_scope: str | None = None
    emits_objects: bool = False
    copies_returning_tails: bool = False
    workgroup_intrinsics: str | None = None

    @property
    def buffer_type(self) -> str:
        """The IR type of a buffer pointer in code lowered for this target."""
        return f"ptr addrspace({self.buffer_address_space or INPUT_BUFFER_ADDRESS_SPACE})"

    @property
    def global_pointer_type(self) -> str:
        """The IR type of a plain pointer to memory the runtime points to (`global_address_space`)."""
        space = self.global_address_space
        return f"ptr addrspace({space})" if space is not None else "ptr"


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            "cpu",
            triple=None,
            default_cpu=None,
            checks_capacity=True,
            pal_metadata=False,
            counter_slices=64,
            counter_copy=CounterCopy.STACK,
            emits_objects=True,
        ),
        Target(
            "amdpal",
            triple="amdgcn-amd-amdpal",
            default_cpu="gfx1100",
            checks_capacity=False,
            pal_metadata=True,
            outlines_calls_above=OUTLINED_CALLS_THRESHOLD,
            resource_globals=True,
            global_address_space=1,
            device_scope="agent",
            emits_objects=True,
            workgroup_intrinsics="amdgcn",
        ),
        Target(
            "nvptx",
            triple="nvptx64-nvidia-cuda",
            default_cpu="sm_90",
            checks_capacity=True,
            pal_metadata=False,
            buffer_address_space=1,
            # Issue #22's choice from bench_gpu.py on an H100 at 2^24: lanes reserve in the IR and a
            # full warp writes its region together through shuffles, 1.04 ms against 1.39 ms for a
            # dword a lane (shared memory: 1.01 ms, but 8 KiB taken from the kernel); a cold printf
            # call bought nothing on a never-taken printf (+1.83% against +1.75% at 256 instructions,
            # before codegen.ptx_tails brought the inlined one to +0.74%).
            aggregation=Aggregation.ALWAYS,
            entry_stores=EntryStores.SHUFFLE,
            cold_printf=False,
            sums_counts_per_warp=True,
            # An H100 has 132 multiprocessors; 4 copies each, the warp's slot picking one: the folded
            # kernel of bench_instrumentation.py at 2^24, 1.78x (2.35x with a copy a multiprocessor).
            counter_slices=512,
            counter_copy=CounterCopy.MULTIPROCESSOR,
            global_address_space=1,
            # Issue #20, bench_races.py on an H100 at 2^24, the memory-bound kernel with fresh shadows:
            # 1.62x with a warp's records, 2.27x with every lane's own.
            races_per_warp=True,
            device_scope="device",
            copies_returning_tails=True,
            workgroup_intrinsics="nvvm",
        ),
    )
}


class UnknownTargetError(DprintfError):
    """A target name that is not one of TARGETS."""


def get_target(name: str | Target) -> Target:
    """The target called `name` (a Target is its own answer: a variant a caller made)."""
    if isinstance(name, Target):
        return name
    try:
        return TARGETS[name]
    except KeyError:
        raise UnknownTargetError(f"unknown target {name!r} (expected one of: {', '.join(TARGETS)})") from None
