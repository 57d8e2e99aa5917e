"""Short returning tails copied into the cold blocks that branch back to them, in PTX.

LLVM's NVPTX backend leaves a branch that is rarely taken (a printf under a test that never holds, a
failed check's record) as

    @%p bra $J;   bra.uni $C;   $J: <tail>; ret;   ...   $C: <cold code>; bra.uni $J;

and ptxas, to bring the warp back together at `$J`, opens a `BSSY` before the branch and closes it
with a `BSYNC`: four issue slots on the path every invocation takes, which cost a never-taken printf
in a kernel of 256 arithmetic instructions +2.0% on an H100 (a never-taken branch around one store,
+0.7%). Where the tail is a few instructions that end the function, the cold block gets its own copy
of it and returns by itself, and the branch goes to the cold block only:

    @!%p bra $C;   $J: <tail>; ret;   ...   $C: <cold code>; bra.uni $J_tail;   $J_tail: <tail>; ret;

The paths then never meet, ptxas needs no reconvergence, and the never-taken printf measured +0.74%
(`bench_gpu.py` (d), 2^24 invocations; LLVM merges such copies back when they are made in the IR, so it
is done here). PTX registers are virtual and the tail runs after the values it reads were set on
either path, so the copy computes what the tail did. A tail with a branch, a call, or an instruction
that waits on other threads (`bar`, `.sync`) is left alone.
"""

from __future__ import annotations

import re

MAX_TAIL_INSTRUCTIONS = 8
# `@%p bra $J;` then `bra.uni $C;` then `$J:`: the branch to the hot join and the jump to the cold block.
_SPLIT = re.compile(r"\t@(!?)(%p\d+) bra \t(\$\w+);\n\tbra\.uni \t(\$\w+);\n\3:\n")
_WAITS = re.compile(r"\bbar\b|\bbarrier\b|\.sync\b|\bcall\b|\bbra\b|[{}]")


def copy_returning_tails(ptx: str) -> str:
    """`ptx` with every short returning tail copied into the cold block that branches back to it."""
    start = 0
    while (split := _SPLIT.search(ptx, start)) is not None:
        start = split.end()
        negated, predicate, join, cold = split.groups()
        tail = _returning_tail(ptx, split.end())
        end = ptx.find("\n}\n", split.end())
        if tail is None or end < 0 or f"\n{cold}:\n" not in ptx[split.end() : end]:
            continue
        copy = f"{join}_tail"  # PTX labels take no dots
        body = ptx[split.end() : end].replace(f"bra.uni \t{join};", f"bra.uni \t{copy};")
        body = body.replace(f" bra \t{join};", f" bra \t{copy};")
        branch = f"\t@{'' if negated else '!'}{predicate} bra \t{cold};\n{join}:\n"
        ptx = ptx[: split.start()] + branch + body + f"\n{copy}:\n{tail}" + ptx[end:]
        start = split.start() + len(branch)
    return ptx


def _returning_tail(ptx: str, at: int) -> str | None:
    """The instructions from `at` to the first `ret;` (labels left out), when they are few and none
    branches, calls or waits on other threads; else None."""
    end = ptx.find("\tret;\n", at)
    if end < 0:
        return None
    lines = [line for line in ptx[at:end].splitlines() if line and not line.startswith("$")]
    if len(lines) > MAX_TAIL_INSTRUCTIONS or any(_WAITS.search(line) for line in lines):
        return None
    return "".join(f"{line}\n" for line in lines) + "\tret;"
