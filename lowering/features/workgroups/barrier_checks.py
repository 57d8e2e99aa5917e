"""Barrier divergence on the nvptx target (SPEC 14): each barrier of the whole workgroup becomes a call
of one checking barrier, `@"<prefix>wg.barrier"(i32 k)` for barrier k, which waits as the unaligned
`barrier.sync 0` does (for every thread of the block that has not exited, so that it never hangs) and
finds out, with the waiting, whether the workgroup's invocations all met at barrier k:

    met    = barrier.red.popc 0, true           the threads that met at this instance of barrier 0
    bit_b  = barrier.red.popc 0, (k >> b) & 1   for each bit b of the barrier numbers
    diverged = met != the workgroup's invocations, or some bit_b neither 0 nor met

Every barrier of the module makes the same reductions in the same order, so threads waiting at two
different barriers meet at the same instance of barrier 0 and see the same counts: a thread that
returned before it is missing from `met` (CUDA releases the others, Vulkan's rule calls it divergence)
and threads waiting at two barriers differ in some bit. Where it diverged, the first thread of each
barrier k to set the workgroup's flag for k counts the workgroup in k's record
(`metadata.workgroups.table`), as the cpu's workgroup functions do: the same records on both devices.

The cost where nothing diverges: 1 + ceil(log2(B)) reductions a barrier for B barriers (one for one
barrier), each the price of a `barrier.sync`, and a compare.
"""

from __future__ import annotations

from metadata.workgroups.table import DIVERGENCE_GLOBAL, FLAG, INVOCATIONS_GLOBAL, RECORD

from ...ir.lexer import global_name
from ...ir.module import Module

_POPC = (
    'asm sideeffect "{ .reg .pred %wgp; setp.ne.u32 %wgp, $1, 0; barrier.red.popc.u32 $0, 0, %wgp; }", '
    '"=r,r"'
)  # the unaligned reduction of barrier 0 (PTX ISA 6.0, sm_70): the threads whose operand is not 0
DECLARATIONS = (
    "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()",
    "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()",
    "declare i32 @llvm.umin.i32(i32, i32)",
)


def checking_barrier(prefix: str) -> str:
    """The name of the module's checking barrier."""
    return global_name(f"{prefix}wg.barrier")


def call_checking_barrier(prefix: str, barrier: int) -> str:
    """The call that replaces barrier number `barrier` of the module."""
    return f"call void {checking_barrier(prefix)}(i32 {barrier}) convergent"


def add_checking_barrier(module: Module, prefix: str, barriers: int) -> None:
    """Define the checking barrier of a module of `barriers` barriers, and the globals it reads."""
    bits = (barriers - 1).bit_length()
    module.add_global(f"{global_name(DIVERGENCE_GLOBAL)} = global ptr null, align 8")
    module.add_global(f"{global_name(INVOCATIONS_GLOBAL)} = global i32 0, align 4")
    for declaration in DECLARATIONS:
        module.add_declaration(declaration)
    module.add_function(_definition(checking_barrier(prefix), barriers, bits))


def _definition(name: str, barriers: int, bits: int) -> str:
    mixed = []
    for bit in range(bits):
        mixed += [
            f"  %bit{bit} = lshr i32 %k, {bit}",
            f"  %bit{bit}.set = and i32 %bit{bit}, 1",
            f"  %bit{bit}.met = call i32 {_POPC}(i32 %bit{bit}.set) convergent",
            f"  %bit{bit}.some = icmp ne i32 %bit{bit}.met, 0",
            f"  %bit{bit}.not.all = icmp ne i32 %bit{bit}.met, %met",
            f"  %bit{bit}.mixed = and i1 %bit{bit}.some, %bit{bit}.not.all",
            f"  %diverged{bit + 1} = or i1 %diverged{bit}, %bit{bit}.mixed",
        ]
    body = "\n".join(mixed)
    return f"""define internal void {name}(i32 %k) convergent {{
entry:
  %met = call i32 {_POPC}(i32 1) convergent
  %invocations = load i32, ptr {global_name(INVOCATIONS_GLOBAL)}, align 4
  %group = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %size = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %first = mul i32 %group, %size
  %left = sub i32 %invocations, %first
  %expected = call i32 @llvm.umin.i32(i32 %left, i32 %size)
  %known = icmp ne i32 %invocations, 0
  %missing = icmp ne i32 %met, %expected
  %diverged0 = and i1 %known, %missing
{body}
  br i1 %diverged{bits}, label %diverged, label %done
diverged:
  %records = load ptr, ptr {global_name(DIVERGENCE_GLOBAL)}, align 8
  %recording = icmp ne ptr %records, null
  br i1 %recording, label %flag, label %done
flag:
  %row = mul i32 %group, {barriers}
  %flag.index = add i32 %row, %k
  %flag.index.wide = zext i32 %flag.index to i64
  %flag.offset = mul i64 %flag.index.wide, {FLAG.size}
  %flag.at.offset = add i64 %flag.offset, {RECORD.size * barriers}
  %flag.at = getelementptr i8, ptr %records, i64 %flag.at.offset
  %was = atomicrmw xchg ptr %flag.at, i32 1 monotonic, align 4
  %first.of.group = icmp eq i32 %was, 0
  br i1 %first.of.group, label %count, label %done
count:
  %record.at = getelementptr [2 x i32], ptr %records, i32 %k
  %counted = atomicrmw add ptr %record.at, i32 1 monotonic, align 4
  %least.at = getelementptr i32, ptr %record.at, i32 1
  %least = atomicrmw umin ptr %least.at, i32 %group monotonic, align 4
  br label %done
done:
  ret void
}}
"""
