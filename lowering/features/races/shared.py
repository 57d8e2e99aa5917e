"""Races in shared memory for `--races` (SPEC 14, `metadata.races.table`; `recording` places the
records): which shared globals get a shadow, and where, the lines that find an access's byte offset in
its instance and the workgroup's first word in the shadow, and the helpers that record it.

A shared global's shadow holds one instance a workgroup, workgroup w's from word w * I (I the global's
words), so the records of two workgroups never meet in a word. An access's offset is measured from the
global in the width of its pointer (32 bits for AMDGPU's and NVPTX's shared memory where the layout
says so), sign-extended: one below the global or past its I words is not recorded. The workgroup is
`@lgc.workgroup.index()`, which the workgroups pass (after this one) lowers on every target. Where
warps record (`races_per_warp`), a 4-byte access records by `shared.lanes` (`warps`): once for a full
warp whose words of the shadow are one group's in lane order, else lane by lane.
"""

from __future__ import annotations

from dataclasses import dataclass

from metadata.races.table import ATOMIC, CLASSES, WORD_BYTES, WRITE, ShadowBuffer, shared_instance_words

from ...services.buffer_accesses import Access, TypeSizes
from ...services.shared_memory import SHARED_POINTER_TYPE, SharedGlobal
from ..workgroups.constructs import WORKGROUP_INDEX
from .warps import WORD_SHIFT, WORD_SPAN, word_loop

# Why a shared access is not recorded (`.unrecorded`'s `.reason`).
SHARED_UNKNOWN = "through a shared-memory pointer that derives from no one shared global"
SHARED_NOT_IN_ENTRY = "a shared-memory access in a function not inlined into an entry"
ONE_WORD_BYTES = frozenset({1, 2, 4})  # sizes that stay inside one word when aligned to themselves


def shared_shadows(classes: dict[SharedGlobal, set[str]], first: int) -> dict[str, ShadowBuffer]:
    """The shadow of each shared global (its sites' classes in `classes`) that some site writes or
    accesses atomically, by reference, at positions from `first` (after the data buffers), in name
    order."""
    racing = sorted((shared for shared, found in classes.items() if found & {WRITE, ATOMIC}), key=_name)
    return {
        shared.reference: ShadowBuffer(
            first + number,
            shared.reference,
            tuple(name for name in CLASSES if name in classes[shared]),
            shared.bytes,
        )
        for number, shared in enumerate(racing)
    }


def _name(shared: SharedGlobal) -> str:
    return shared.name


@dataclass(frozen=True)
class SharedRecords:
    """The lines that record shared accesses in one module: `names` its names' start, `shadow` the
    shadows' pointer type, `sizes` its data layout's, `epochs` whether it records barrier epochs,
    `per_warp` whether a warp records its 4-byte accesses together (`warps.shared_lanes_helper`)."""

    names: str
    shadow: str
    sizes: TypeSizes
    epochs: bool
    per_warp: bool = False

    def workgroup(self) -> list[str]:
        """The workgroup's index, widened (`%<names>group`), once a function that records shared memory."""
        names = self.names
        return [
            f"%{names}group.index = call i32 @{WORKGROUP_INDEX}()",
            f"%{names}group = zext i32 %{names}group.index to i64",
        ]

    def first_word(self, k: int, shared: int) -> list[str]:
        """`%<names>first<k>`: the first word of the workgroup's instance in shadow `k` (`shared` bytes)."""
        return [f"%{self.names}first{k} = mul i64 %{self.names}group, {shared_instance_words(shared)}"]

    def record(
        self,
        number: int,
        buffer: ShadowBuffer,
        shared: SharedGlobal,
        access: Access,
        alignment: int,
        row: int,
        pieces: list[tuple[str, str]],
    ) -> SharedRecord:
        """The record of site `number`, an access of `shared` (its shadow `buffer`, its class's `row`):
        each piece (a masked access's lane: pointer, bytes) by `shared.lanes` where it is a word a full
        warp may access together, `shared.word` where it stays inside a word, else `shared.range`."""
        names, k = self.names, buffer.buffer
        who = f"i32 %{names}who, i32 {number}, i64 {row}"
        one_word = isinstance(access.bytes, int) and access.bytes in ONE_WORD_BYTES
        aligned = isinstance(access.bytes, int) and alignment >= access.bytes
        instance = f"i64 {shared_instance_words(buffer.shared or 0)}, i64 %{names}first{k}"
        rows = f"{self.shadow} %{names}rows{k}, i64 %{names}words{k}"
        warps = f"{self.shadow} %{names}warps{k}, i64 %{names}groups{k}"
        lanes = self.per_warp and access.bytes == WORD_BYTES and alignment >= WORD_BYTES
        lines, calls = [], []
        for piece, (pointer, bytes_) in enumerate(pieces):
            at = f"%{names}shared{number}.{piece}."
            lines += _offset_lines(at, access.pointer_type, pointer, shared, self.sizes)
            where = f"{rows}, i64 {at}offset"
            calls.append(
                f"shared.range({where}, i64 {bytes_}, {instance}, {who})"
                if not (one_word and aligned and access.lanes is None)
                else f"shared.lanes({where}, {instance}, {warps}, {who})"
                if lanes
                else f"shared.word({where}, {instance}, {who})"
            )
        return SharedRecord(self, k, lines, calls)


@dataclass(frozen=True)
class SharedRecord:
    """One shared access's record: the lines that find its offsets and its helpers' calls."""

    records: SharedRecords
    k: int
    lines: list[str]
    helpers: list[str]

    def calls(self, epoch: str) -> list[str]:
        """Its lines, each call without its `!dbg`; with barrier epochs into the copy of `epoch` (an
        i32 value) only: copy 0 stays empty, as no other workgroup shares the instance."""
        names, k = self.records.names, self.k
        calls = self.helpers
        if self.records.epochs:
            copies = f"{self.records.shadow} %{names}shadow{k}, i64 %{names}copy{k}"
            calls = [
                f"epoch.{helper}({copies}, i32 %{names}epochs{k}, i32 {epoch}, {arguments}"
                for helper, arguments in (call.split("(", 1) for call in calls)
            ]
        return self.lines + [f"call void @{names}{call}" for call in calls]


def _offset_lines(
    at: str, pointer_type: str, pointer: str, shared: SharedGlobal, sizes: TypeSizes
) -> list[str]:
    """`<at>offset`: the i64 byte offset of `pointer` from the start of `shared`, computed in the
    pointer's width and sign-extended; through a generic pointer, from the global cast to its space."""
    space = pointer_type.removeprefix("ptr addrspace(").removesuffix(")")
    bits = sizes.pointer_bits(int(space) if space.isdigit() else 0)
    base = shared.reference
    lines = []
    if pointer_type != SHARED_POINTER_TYPE:
        lines.append(f"{at}global = addrspacecast {SHARED_POINTER_TYPE} {base} to {pointer_type}")
        base = f"{at}global"
    difference = f"{at}offset" if bits == 64 else f"{at}difference"
    lines += [
        f"{at}address = ptrtoint {pointer_type} {pointer} to i{bits}",
        f"{at}base = ptrtoint {pointer_type} {base} to i{bits}",
        f"{difference} = sub i{bits} {at}address, {at}base",
        *([f"{at}offset = sext i{bits} {difference} to i64"] if bits < 64 else []),
    ]
    return lines


def shared_parameters(shadow: str, per_warp: bool = False) -> dict[str, str]:
    """The parameters of `shared.word`, `shared.range` (and `shared.lanes` where warps record), by name
    (as `epochs.epoch_helpers` takes them): the rows, the shadow's words, the offset in the instance,
    (the bytes,) the instance's words and its first word, (the warps and the groups,) and who
    accesses."""
    where = f"{shadow} %rows, i64 %words, i64 %offset"
    instance, who = "i64 %instance, i64 %first", "i32 %who, i32 %site, i64 %row"
    found = {
        "shared.word": f"{where}, {instance}, {who}",
        "shared.range": f"{where}, i64 %bytes, {instance}, {who}",
    }
    if per_warp:
        lanes = f"i64 %instance, i64 %instance.first, {shadow} %warps, i64 %groups"  # `%first`: the warp's
        found["shared.lanes"] = f"{where}, {lanes}, {who}"
    return found


def shared_helpers(names: str, shadow: str) -> list[str]:
    """The `alwaysinline` helpers that record a shared access (`shared_parameters`): the words of its
    instance it touches, each merged by `mark` at its word of the workgroup's instance."""
    parameters = shared_parameters(shadow)
    mark = f"call void @{names}mark({shadow} %rows, i64 %words, i64 %at, i32 %who, i32 %site, i64 %row)"
    return [
        f"""define internal void @{names}shared.word({parameters["shared.word"]}) alwaysinline {{
entry:
  %word = lshr i64 %offset, {WORD_SHIFT}
  %inside = icmp ult i64 %word, %instance
  %at = add i64 %first, %word
  %allocated = icmp ult i64 %at, %words
  %ours = and i1 %inside, %allocated
  br i1 %ours, label %record, label %done
record:
  {mark}
  br label %done
done:
  ret void
}}""",
        f"""define internal void @{names}shared.range({parameters["shared.range"]}) alwaysinline {{
entry:
{WORD_SPAN}
  %high = call i64 @llvm.smin.i64(i64 %end.word, i64 %instance)
  %room = sub i64 %words, %first
  %end = call i64 @llvm.smin.i64(i64 %high, i64 %room)
{word_loop("%end", "%at = add i64 %first, %word", mark)}
}}""",
    ]
