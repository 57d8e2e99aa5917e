"""One atomic add per warp instead of one per invocation: the printf reservation on `nvptx`.

Every lowered printf call reserves its entry with an atomic add on the buffer's `bufferOffset`. ptxas
aggregates same-address atomics of a warp by itself, but only where it can prove the address uniform
across the warp: in a kernel whose buffer pointer is a parameter, yes; in a device function that is
called rather than inlined, or with a pointer loaded from memory, no, and then a warp issues 32
atomics on one address, which the memory system serialises. This helper aggregates in the IR, so the
count is one per warp (one per distinct buffer among the active lanes) whatever ptxas can prove.

The pass uses it for every printf but those of an entry to its own buffer parameter (an entry: a
function nothing in the module refers to, and that may be inlined). The kernel calls and inlines the
entry, so such a buffer is the kernel's parameter and ptxas aggregates by itself; leaving it the plain
atomic also keeps the way around a printf that is not taken short: the aggregated region, with its
warp-synchronous instructions, makes ptxas schedule the code after it later: a never-taken printf in
a kernel of 256 arithmetic instructions measured +2.09% aggregated, +1.45% left to ptxas (`bench_gpu.py`).
The helper:

    active = activemask(); group = match.any(active, address)   # lanes at this call, same buffer
    leader = lowest lane of group; rank = popc(group & lanemask_lt)
    leader: first = atomicrmw add(address, popc(group) * size)
    old = shfl.idx(active, first, leader) + rank * size          # two 32-bit halves

Each lane then clamps and checks the capacity for its own `old`, as without aggregation. The size is
the call's constant, so every lane of a group reserves the same amount; lanes run in rank order, as if
each had issued its own monotonic add.
"""

from __future__ import annotations

import re

_INTRINSICS = {
    "llvm.nvvm.activemask": "declare i32 @llvm.nvvm.activemask()",
    "llvm.nvvm.match.any.sync.i64": "declare i32 @llvm.nvvm.match.any.sync.i64(i32, i64)",
    "llvm.nvvm.read.ptx.sreg.laneid": "declare i32 @llvm.nvvm.read.ptx.sreg.laneid()",
    "llvm.nvvm.read.ptx.sreg.lanemask.lt": "declare i32 @llvm.nvvm.read.ptx.sreg.lanemask.lt()",
    "llvm.nvvm.shfl.sync.idx.i32": "declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)",
    "llvm.cttz.i32": "declare i32 @llvm.cttz.i32(i32, i1 immarg)",
    "llvm.ctpop.i32": "declare i32 @llvm.ctpop.i32(i32)",
}
_SHUFFLE_WHOLE_WARP = 31  # shfl.sync's `c` operand for an index shuffle over all 32 lanes


def intrinsic_declarations(module_text: str) -> str:
    """Declarations of the intrinsics `warp_aggregated_reserve_ir` calls that `module_text` lacks."""
    return "".join(
        f"{declaration}\n"
        for intrinsic, declaration in _INTRINSICS.items()
        if not re.search(rf"^declare [^@\n]*@{re.escape(intrinsic)}\(", module_text, re.M)
    )


def warp_aggregated_reserve_ir(name: str, buffer_type: str) -> str:
    """IR defining `@name(buffer_type %counter, i64 %size) -> i64`, the warp-aggregated atomic add.

    Returns what the calling lane's own `atomicrmw add %counter, %size monotonic` would have returned.
    The module needs `intrinsic_declarations` too.
    """
    return "\n".join(
        [
            "",
            f"define internal i64 @{name}({buffer_type} %counter, i64 %size) alwaysinline nounwind {{",
            "entry:",
            "  %active = call i32 @llvm.nvvm.activemask()",
            f"  %address = ptrtoint {buffer_type} %counter to i64",
            "  %group = call i32 @llvm.nvvm.match.any.sync.i64(i32 %active, i64 %address)",
            "  %lane = call i32 @llvm.nvvm.read.ptx.sreg.laneid()",
            "  %lower = call i32 @llvm.nvvm.read.ptx.sreg.lanemask.lt()",
            "  %leader = call i32 @llvm.cttz.i32(i32 %group, i1 true)",
            "  %ahead = and i32 %group, %lower",
            "  %rank = call i32 @llvm.ctpop.i32(i32 %ahead)",
            "  %leads = icmp eq i32 %lane, %leader",
            "  br i1 %leads, label %reserve, label %share",
            "reserve:",
            "  %lanes = call i32 @llvm.ctpop.i32(i32 %group)",
            "  %lanes.wide = zext i32 %lanes to i64",
            "  %total = mul i64 %lanes.wide, %size",
            f"  %first = atomicrmw add {buffer_type} %counter, i64 %total monotonic, align 8",
            "  br label %share",
            "share:",
            "  %reserved = phi i64 [ %first, %reserve ], [ 0, %entry ]",
            "  %reserved.low = trunc i64 %reserved to i32",
            "  %reserved.high.wide = lshr i64 %reserved, 32",
            "  %reserved.high = trunc i64 %reserved.high.wide to i32",
            "  %base.low = call i32 @llvm.nvvm.shfl.sync.idx.i32("
            f"i32 %active, i32 %reserved.low, i32 %leader, i32 {_SHUFFLE_WHOLE_WARP})",
            "  %base.high = call i32 @llvm.nvvm.shfl.sync.idx.i32("
            f"i32 %active, i32 %reserved.high, i32 %leader, i32 {_SHUFFLE_WHOLE_WARP})",
            "  %base.low.wide = zext i32 %base.low to i64",
            "  %base.high.wide = zext i32 %base.high to i64",
            "  %base.high.shifted = shl i64 %base.high.wide, 32",
            "  %base = or i64 %base.high.shifted, %base.low.wide",
            "  %rank.wide = zext i32 %rank to i64",
            "  %skipped = mul i64 %rank.wide, %size",
            "  %old = add i64 %base, %skipped",
            "  ret i64 %old",
            "}",
            "",
        ]
    )
