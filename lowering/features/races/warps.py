"""A warp's record for `--races` on a target that records `races_per_warp` (nvptx; `metadata.races.table`
says why it reports as its lanes' records would): the helpers that find out whether the 32 lanes of a
full warp access the 32 words of one group in lane order with consecutive invocations (two shuffles of
lane 0's word and one of its key, one `vote.all`), and then merge lane 0's key into the group's slot
once for all of them; anywhere else each lane records its own word.

`lanes` records a data buffer's 4-byte access, `shared.lanes` a shared global's (its word in the
shadow: the workgroup's instance's first word plus the word's offset in it; an instance need not start
on a group, and a warp whose words straddle two groups records lane by lane). With barrier epochs,
`epoch.lanes` records a data buffer's access into copy 0 and its epoch's copy after one check (the
warp's lanes are of one epoch: they passed the same workgroup barriers).
"""

from __future__ import annotations

from metadata.races.table import WARP_WORDS, WORD_BYTES

from ...services.context import RUNTIME_BUFFER_TYPE
from ...services.warp_aggregation import SHUFFLE_WHOLE_WARP

WORD_SHIFT = WORD_BYTES.bit_length() - 1  # an offset's word: offset >> WORD_SHIFT
_GROUP_SHIFT = WARP_WORDS.bit_length() - 1
WARP_INTRINSICS = [
    "i32 @llvm.nvvm.activemask()",
    "i32 @llvm.nvvm.read.ptx.sreg.laneid()",
    "i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)",
    "i1 @llvm.nvvm.vote.all.sync(i32, i1)",
]
OFFSET = f"""  %address = ptrtoint {RUNTIME_BUFFER_TYPE} %pointer to i64
  %start = ptrtoint {RUNTIME_BUFFER_TYPE} %base to i64
  %offset = sub i64 %address, %start"""  # the helpers' access, as an offset into its buffer
# The words an access of `%bytes` at `%offset` touches: from `%low` (not below 0) to `%end.word`.
WORD_SPAN = f"""  %last = add i64 %offset, %bytes
  %last.byte = sub i64 %last, 1
  %first.word = ashr i64 %offset, {WORD_SHIFT}
  %last.word = ashr i64 %last.byte, {WORD_SHIFT}
  %end.word = add i64 %last.word, 1
  %low = call i64 @llvm.smax.i64(i64 %first.word, i64 0)"""


def word_loop(end: str, *body: str) -> str:
    """The blocks that end a range helper: the instructions of `body` for each `%word` from `%low` to
    `end` (an i64 value) when the access has bytes, then the return."""
    instructions = "\n".join(f"  {instruction}" for instruction in body)
    return f"""  %some = icmp ne i64 %bytes, 0
  %inside = icmp slt i64 %low, {end}
  %any = and i1 %some, %inside
  br i1 %any, label %loop, label %done
loop:
  %word = phi i64 [ %low, %entry ], [ %next, %loop ]
{instructions}
  %next = add i64 %word, 1
  %more = icmp slt i64 %next, {end}
  br i1 %more, label %loop, label %done
done:
  ret void"""


def _together(word: str, site_bits: int) -> str:
    """The blocks from the entry's end: to `warp.record` (with `%group`, lane 0) where the full warp's
    lanes access the group of `word` (an i64 value, `%inside` where it is recorded at all) together, to
    `done` for the other lanes of such a warp, else to `lane`."""
    whole = f"i32 {SHUFFLE_WHOLE_WARP}"
    shuffled = "\n".join(
        f"  %{name}.0 = call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %{name}, i32 0, {whole})\n"
        f"  %{name}.same = icmp eq i32 %{name}, %{name}.0"
        for name in ("first.low", "first.high", "first.who")
    )
    return f"""  %active = call i32 @llvm.nvvm.activemask()
  %full = icmp eq i32 %active, -1
  br i1 %full, label %warp, label %lane
warp:
  %lane.id = call i32 @llvm.nvvm.read.ptx.sreg.laneid()
  %lane.wide = zext i32 %lane.id to i64
  %first = sub i64 {word}, %lane.wide
  %first.low = trunc i64 %first to i32
  %first.high.wide = lshr i64 %first, 32
  %first.high = trunc i64 %first.high.wide to i32
  %lane.key = shl i32 %lane.id, {site_bits}
  %first.who = sub i32 %who, %lane.key
{shuffled}
  %lane.bits = and i32 %first.low.0, {WARP_WORDS - 1}
  %aligned = icmp eq i32 %lane.bits, 0
  %same.word = and i1 %first.low.same, %first.high.same
  %same = and i1 %same.word, %first.who.same
  %in.group = and i1 %same, %aligned
  %ours = and i1 %in.group, %inside
  %together = call i1 @llvm.nvvm.vote.all.sync(i32 -1, i1 %ours)
  br i1 %together, label %warp.lead, label %lane
warp.lead:
  %leads = icmp eq i32 %lane.id, 0
  br i1 %leads, label %warp.record, label %done
warp.record:
  %group = lshr i64 %first, {_GROUP_SHIFT}"""


def lanes_helper(names: str, shadow: str, site_bits: int) -> str:
    """`lanes`: a data buffer's 4-byte access, recorded once for a full warp that accesses one group of
    words in lane order with consecutive invocations (the group's slot in `warps`), else by `word`."""
    buffer = RUNTIME_BUFFER_TYPE
    return f"""define internal void @{names}lanes({shadow} %rows, i64 %words, {buffer} %base, \
{buffer} %pointer, {shadow} %warps, i64 %groups, i32 %who, i32 %site, i64 %row) alwaysinline {{
entry:
{OFFSET}
  %word = lshr i64 %offset, {WORD_SHIFT}
  %inside = icmp ult i64 %word, %words
{_together("%word", site_bits)}
  call void @{names}mark({shadow} %warps, i64 %groups, i64 %group, i32 %who, i32 %site, i64 %row)
  br label %done
lane:
  call void @{names}word({shadow} %rows, i64 %words, {buffer} %base, {buffer} %pointer, \
i32 %who, i32 %site, i64 %row)
  br label %done
done:
  ret void
}}"""


def epoch_lanes_helper(names: str, shadow: str, site_bits: int) -> str:
    """`epoch.lanes` (the parameters of `epochs.epoch_helpers`'): `lanes` into copy 0 and, after the
    same check, into the copy of the epoch, or past the copies `epochsReached` raised, by `epoch.mark`
    (lane 0, for its warp) or `epoch.word` (each lane)."""
    buffer = RUNTIME_BUFFER_TYPE
    copies = f"{shadow} %shadow, i64 %copy, i32 %epochs, i32 %epoch"
    who = "i32 %who, i32 %site, i64 %row"
    return f"""define internal void @{names}epoch.lanes({copies}, {shadow} %rows, i64 %words, \
{buffer} %base, {buffer} %pointer, {shadow} %warps, i64 %groups, {who}) alwaysinline {{
entry:
{OFFSET}
  %word = lshr i64 %offset, {WORD_SHIFT}
  %inside = icmp ult i64 %word, %words
{_together("%word", site_bits)}
  call void @{names}mark({shadow} %warps, i64 %groups, i64 %group, {who})
  call void @{names}epoch.mark({copies}, {shadow} %warps, i64 %groups, i64 %group, {who})
  br label %done
lane:
  call void @{names}word({shadow} %rows, i64 %words, {buffer} %base, {buffer} %pointer, {who})
  call void @{names}epoch.word({copies}, {shadow} %rows, i64 %words, {buffer} %base, \
{buffer} %pointer, {who})
  br label %done
done:
  ret void
}}"""


def shared_lanes_helper(names: str, shadow: str, site_bits: int, parameters: str) -> str:
    """`shared.lanes` (`parameters`: `shared.shared_parameters`'): a shared global's 4-byte access at
    `%offset` of the workgroup's instance, recorded once for a full warp whose words of the shadow
    (`%instance.first` plus the offset's word) are one group's in lane order, else by `shared.word`."""
    return f"""define internal void @{names}shared.lanes({parameters}) alwaysinline {{
entry:
  %word = lshr i64 %offset, {WORD_SHIFT}
  %in.instance = icmp ult i64 %word, %instance
  %at = add i64 %instance.first, %word
  %allocated = icmp ult i64 %at, %words
  %inside = and i1 %in.instance, %allocated
{_together("%at", site_bits)}
  call void @{names}mark({shadow} %warps, i64 %groups, i64 %group, i32 %who, i32 %site, i64 %row)
  br label %done
lane:
  call void @{names}shared.word({shadow} %rows, i64 %words, i64 %offset, i64 %instance, \
i64 %instance.first, i32 %who, i32 %site, i64 %row)
  br label %done
done:
  ret void
}}"""


def warp_helpers(
    names: str, shadow: str, site_bits: int, shared: dict[str, str] | None, epochs: bool
) -> list[str]:
    """The helpers of a module whose warps record: `lanes`, `shared.lanes` where it records shared
    memory (`shared`: `shared.shared_parameters`'), `epoch.lanes` with barrier epochs."""
    found = [lanes_helper(names, shadow, site_bits)]
    if shared is not None:
        found.append(shared_lanes_helper(names, shadow, site_bits, shared["shared.lanes"]))
    if epochs:
        found.append(epoch_lanes_helper(names, shadow, site_bits))
    return found
