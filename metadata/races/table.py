"""Synchronization validation, the contract (SPEC section 12): the `amdpal.races` table of recorded
sites and the layout of the shadow memory the device records accesses into.

The agents are the invocations of one dispatch. Two accesses to the same word of a data buffer by
different invocations race when one of them is a plain (non-atomic) write (write-racing-write,
read-racing-write) or when one is atomic and the other plain (atomic-racing-plain).

The shadow of a data buffer of B bytes (W = ceil(B / 4) words), which the runtime allocates zeroed and
points `@lgc.races.shadow[k]` at, is

    struct { u64 bufferBytes; u32 buffer; u32 classes; } header;   // written by the runtime
    struct { u32 greatest[W]; u32 notLeast[W]; } rows[C];          // one row per class recorded
    struct { u32 greatest[G]; u32 notLeast[G]; } warps[C];         // G = ceil(W / 32) groups of words

with one row per access class the buffer records, in `CLASSES` order (`classes` is their bit mask).
An access of an invocation to a word has the key `packed + 1`, `packed = invocation << site_bits | site`,
and makes one 32-bit atomic max of `greatest`, which returns the value it replaced; only when that value
is another key (the word's second distinct access, or later) does it make a second atomic max, of
`notLeast` with `~min(replaced, key)` (`merge`). So `greatest` holds the greatest key and `notLeast`,
when the word saw two keys or more, the complement of the least (0 when it saw one): the least and the
greatest (invocation, site) of the class, whatever the order the accesses came in. The report depends
on the set of accesses only, never on the schedule, and a word accessed by one invocation costs one
atomic (or, once recorded, none: a load that finds its key skips it).

Why the least comes out whatever the order: take the least key L. If L's first access replaces another
key, it records L itself. Otherwise L was first, and the first other key's atomic replaces L and records
min(L, key) = L. A slot whose `greatest` is 0 saw no access (keys are at least 1 and `~key` is not 0:
`max_invocations` keeps `packed` at most PACKED_LIMIT).

A warp's record. Where the 32 lanes of a warp make one 4-byte access together, lane j of invocation
i + j to word 32g + j of group g, their 32 keys are the key of lane 0 plus j << site_bits: the warp
merges lane 0's key into group g's slot of `warps` instead (the nvptx target does;
`lowering.features.races.warps`). Adding j << site_bits to every key of a set keeps its order, so the
slot's least and greatest, each plus j << site_bits, are the least and greatest of the keys it stands
for at word 32g + j. A word's keys are those of its slot in `rows` with those of its group's slot
(`Shadow.row` of `metadata.races.shadow`), and the report reads the same whichever way each access was
recorded.

8 bytes of shadow a class and word, and 8 a class and group of 32 words: about 2 bytes per data byte
and class, of which a word touched by one invocation reads and writes only `greatest`'s 4, and a word a
warp records together an eighth of a byte. Only buffers with a site that writes or is atomic have a
shadow (a buffer only ever read cannot race); a buffer records only the classes its sites have.

Barrier epochs (SPEC 14). An invocation's epoch is the number of workgroup barriers it has passed; two
accesses of one workgroup's invocations race only in one epoch (a barrier orders the others), those of
invocations of different workgroups in any. A module whose recording entries meet at barriers says so
in its table (`.epochs`, `epochs` here: the most epochs an invocation can have where every barrier is
on no cycle, else 0), and each of its shadows is then

    struct { u64 bufferBytes; u32 buffer; u32 classes;                  // written by the runtime
             u32 epochs; u32 workgroupSize; u32 epochsReached; u32 pad; } header;
    struct { rows[C]; warps[C]; } copies[1 + epochs];                   // each as the one above

Copy 0 holds every access, whatever its epoch; copy 1 + e the accesses made in epoch e. An access of an
epoch past the copies (e >= `epochs`, which the runtime chose) is recorded in copy 0 only, and raises
`epochsReached` to at least e + 1 (one atomic max), so that the runtime can say so or launch again with
more copies. A word races if copy 0 says so where two accesses are of different workgroups (invocation
// workgroupSize; a workgroup's invocations are consecutive, so its least and greatest keys still find
such a pair whenever there is one), or if an epoch copy says so where two are of different
invocations. Without barriers the header and the one copy are those above, unchanged.

Shared memory (SPEC 14). A shared global (`addrspace(3)`) of S bytes that some site writes or accesses
atomically has a shadow too: a pseudo buffer of one instance a workgroup, I = ceil(S / 4) words each,
workgroup w's at word w * I (`bufferBytes` = 4 * I * workgroups, `shared_instance_words`), pointed at by
`@lgc.races.shadow[K + s]` (K the data buffers, s its place among the shadowed shared globals), its row
in `.buffers` with `.shared: S` and its IR name (`@tile`). A warp's record is a data buffer's: 32
consecutive words of the shadow, w * I plus the lanes' offsets, that are one group's (an instance
starts on a group only when I is a multiple of WARP_WORDS; the nvptx target records a warp whose
words straddle two groups lane by lane). No two workgroups share an instance, so any
two accesses of one word are of one workgroup: without barriers the one copy is read as a data buffer's
(by invocation), and with barriers only the epoch copies are recorded (copy 0 stays empty). A word
outside its instance (an access past the global) is never recorded. Older tables have no `.shared`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from ..errors import DprintfError
from ..table_rows import RowError, integer, is_text, list_of, rows, shown, usable_rows
from ..table_rows import field as row_field
from ..validation.table import Site, Unchecked

RACES_KEY = "amdpal.races"
VERSION = 1
WRITE, READ, ATOMIC = "write", "read", "atomic"
CLASSES = (WRITE, READ, ATOMIC)  # the access classes, in the order of a shadow's rows
SHADOW_HEADER = struct.Struct("<QII")  # bufferBytes, buffer (its position), classes (a mask of CLASSES)
# With barrier epochs: then epochs (copies after copy 0), workgroupSize, epochsReached, and 4 bytes of
# padding that keep the copies 8-byte aligned.
EPOCHS_HEADER = struct.Struct("<QIIIII4x")
EPOCHS_AT = SHADOW_HEADER.size  # the byte offset of `epochs` in the header, then workgroupSize's
REACHED_AT = EPOCHS_AT + 8  # the byte offset of `epochsReached`, which the device raises
SLOT_BYTES = 8  # a class and word: u32 greatest, u32 notLeast (in two arrays of the row)
WORD_BYTES = 4
WARP_WORDS = 32  # the words of a group: a warp's lanes, one word each
PACKED_LIMIT = (1 << 32) - 3  # the greatest packed (invocation, site): neither its key nor ~key is 0
MAX_SITE_BITS = 31  # a packed value keeps at least one bit for the invocation
_RANGE_KINDS = frozenset({"memcpy", "memmove"})  # a site reads or writes a range: its class says which

RACES_SHADOW_GLOBAL = "lgc.races.shadow"  # each data buffer's shadow, `[K x ptr]` (SPEC 12)


class ShadowError(DprintfError):
    """A shadow dump that does not have the layout the table gives it, or an `amdpal.races` table that
    cannot be used at all (a row that cannot be is a warning)."""


def merge(greatest: int, not_least: int, packed: int) -> tuple[int, int]:
    """A slot's (greatest, notLeast) after an access of `packed`, as the device makes it (see above)."""
    key = packed + 1
    if greatest in (0, key):
        return max(greatest, key), not_least
    return max(greatest, key), max(not_least, ~min(greatest, key) & 0xFFFFFFFF)


def class_mask(classes: tuple[str, ...]) -> int:
    return sum(1 << CLASSES.index(name) for name in classes)


def shadow_words(buffer_bytes: int) -> int:
    return -(-buffer_bytes // WORD_BYTES)


def shared_instance_words(shared_bytes: int) -> int:
    """I, the words of one workgroup's instance of a shared global of `shared_bytes` in its shadow."""
    return shadow_words(shared_bytes)


def shadow_groups(buffer_bytes: int) -> int:
    """G, the groups of WARP_WORDS words a warp's record stands for."""
    return -(-shadow_words(buffer_bytes) // WARP_WORDS)


@dataclass(frozen=True, slots=True)
class RaceSite:
    """A recorded access: the site as validation's (SPEC 11; its `index` is the number packed into the
    shadow) and its access class (`write`, `read`, `atomic`)."""

    site: Site
    access: str
    described: bool = True  # False: a number the table has no usable row for (`unknown`)

    def to_map(self) -> dict[str, Any]:
        return {**self.site.to_map(), ".access": self.access}

    @classmethod
    def from_map(cls, found: Any) -> RaceSite:
        """The site a table's row describes; RowError saying which key is missing or wrong."""
        site = Site.from_map(found)
        return cls(site, row_field(found, ".access", CLASSES.__contains__, f"one of {', '.join(CLASSES)}"))

    @classmethod
    def unknown(cls, number: int) -> RaceSite:
        """A site number the shadow may hold but the table does not describe (its row was unusable)."""
        return cls(Site(number, "access", None, -1, "", "", None), "", described=False)

    def describe(self) -> str:
        """`store in @main at k.c:12:5`; a memcpy's read and write are told apart."""
        if not self.described:
            return f"site {self.site.index} (not described by the {RACES_KEY} table)"
        kind = self.site.kind
        what = f"{kind} {self.access}" if kind in _RANGE_KINDS else kind
        return f"{what} in {self.site.where()}"


@dataclass(frozen=True, slots=True)
class ShadowBuffer:
    """A data buffer with a shadow: its position among the entry's data buffers, its IR name and the
    classes of access its shadow records (its rows, in CLASSES order); or a shared global's pseudo
    buffer, its position after the data buffers, `shared` its bytes (one workgroup's instance)."""

    buffer: int
    name: str
    classes: tuple[str, ...]
    shared: int | None = None

    @property
    def mask(self) -> int:
        return class_mask(self.classes)

    def copy_bytes(self, buffer_bytes: int) -> int:
        """The bytes of one copy (its rows and warps) of the shadow of a `buffer_bytes`-byte buffer."""
        slots = shadow_words(buffer_bytes) + shadow_groups(buffer_bytes)
        return len(self.classes) * slots * SLOT_BYTES

    def shadow_bytes(self, buffer_bytes: int, epochs: int | None = None) -> int:
        """The bytes of the shadow of a `buffer_bytes`-byte data buffer, its header included: one copy,
        or with barrier epochs (`epochs` copies after copy 0) 1 + `epochs`."""
        if epochs is None:
            return SHADOW_HEADER.size + self.copy_bytes(buffer_bytes)
        return EPOCHS_HEADER.size + (1 + epochs) * self.copy_bytes(buffer_bytes)

    def header(self, buffer_bytes: int, epochs: int | None = None, workgroup_size: int = 1) -> bytes:
        """The header the runtime writes at the start of the shadow (with barrier epochs: its `epochs`
        copies after copy 0 and the workgroup size; `epochsReached` 0)."""
        if epochs is None:
            return SHADOW_HEADER.pack(buffer_bytes, self.buffer, self.mask)
        return EPOCHS_HEADER.pack(buffer_bytes, self.buffer, self.mask, epochs, workgroup_size, 0)

    def to_map(self) -> dict[str, Any]:
        found = {".buffer": self.buffer, ".name": self.name, ".classes": list(self.classes)}
        return found if self.shared is None else {**found, ".shared": self.shared}

    @classmethod
    def from_map(cls, found: Any) -> ShadowBuffer:
        """The buffer a table's row describes; RowError saying which key is missing or wrong."""
        if not isinstance(found, dict):
            raise RowError(f"it is {shown(found)}, not a map")
        position = row_field(found, ".buffer", integer(0, (1 << 32) - 1), "a buffer's position")
        name = row_field(found, ".name", is_text, "a string")
        classes = row_field(
            found, ".classes", list_of(CLASSES.__contains__), f"a list of {', '.join(CLASSES)}"
        )
        if not classes or classes != sorted(set(classes), key=CLASSES.index):
            raise RowError(
                f"its .classes {classes} are not some of {', '.join(CLASSES)}, once each, in this order"
            )
        shared = (
            row_field(found, ".shared", integer(1, (1 << 32) - 1), "a shared global's bytes")
            if ".shared" in found
            else None
        )
        return cls(position, name, tuple(classes), shared)


@dataclass(frozen=True)
class RaceTable:
    """The `amdpal.races` document: the recorded sites, the buffers with a shadow, the bits of a site
    number in a packed value, and the accesses that could not be attributed to a data buffer."""

    sites: tuple[RaceSite, ...] = ()
    buffers: tuple[ShadowBuffer, ...] = ()
    site_bits: int = 0
    unrecorded: tuple[Unchecked, ...] = ()
    warnings: tuple[str, ...] = field(default=(), compare=False)  # read from a document: rows not used
    # None: no barriers, one copy a shadow; else barrier epochs: the most an invocation can have where
    # every barrier is on no cycle, 0 where that is not known (a barrier in a loop)
    epochs: int | None = None

    @property
    def max_invocations(self) -> int:
        """The most invocations whose every packed (invocation, site) stays within PACKED_LIMIT."""
        greatest_site = max(len(self.sites) - 1, 0)
        return ((PACKED_LIMIT - greatest_site) >> self.site_bits) + 1

    def buffer(self, position: int) -> ShadowBuffer | None:
        return next((buffer for buffer in self.buffers if buffer.buffer == position), None)

    def to_document(self) -> dict[str, Any]:
        return {
            RACES_KEY: {
                ".version": VERSION,
                ".site_bits": self.site_bits,
                ".buffers": [buffer.to_map() for buffer in self.buffers],
                ".sites": [site.to_map() for site in self.sites],
                ".unrecorded": [item.to_map() for item in self.unrecorded],
                **({} if self.epochs is None else {".epochs": self.epochs}),
            }
        }

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RaceTable | None:
        """The table of a metadata document; None without one. A row that cannot be used is left out
        with a message in `warnings`: a site's number then stands for an `unknown` site, whose races
        are still reported. ShadowError when the table itself cannot be used."""
        found = document.get(RACES_KEY)
        if found is None:
            return None
        if not isinstance(found, dict) or not integer(VERSION, VERSION)(found.get(".version")):
            raise ShadowError(f"{RACES_KEY} is not a map of .version {VERSION}")
        try:
            site_bits = row_field(found, ".site_bits", integer(0, MAX_SITE_BITS), f"0 to {MAX_SITE_BITS}")
            site_rows, buffer_rows = rows(found, ".sites"), rows(found, ".buffers")
            unrecorded_rows = rows(found, ".unrecorded")
            epochs = (
                row_field(found, ".epochs", integer(0, (1 << 32) - 1), "a count of epochs")
                if ".epochs" in found
                else None
            )
        except RowError as failure:
            raise ShadowError(f"{RACES_KEY} cannot be used: {failure}") from None
        warnings: list[str] = []
        sites = _numbered_sites(site_rows, site_bits, warnings)
        buffers: dict[int, ShadowBuffer] = {}
        for number, row in enumerate(buffer_rows):
            try:
                buffer = ShadowBuffer.from_map(row)
            except RowError as failure:
                warnings.append(
                    f"{RACES_KEY} .buffers[{number}] is not used (no shadow of it can be read): {failure}"
                )
                continue
            if buffers.setdefault(buffer.buffer, buffer) != buffer:
                warnings.append(
                    f"{RACES_KEY} .buffers[{number}] is not used: buffer {buffer.buffer} is an earlier "
                    "row's, which is kept"
                )
        unrecorded = usable_rows(unrecorded_rows, Unchecked.from_map, f"{RACES_KEY} .unrecorded", warnings)
        return cls(sites, tuple(buffers.values()), site_bits, tuple(unrecorded), tuple(warnings), epochs)


def _numbered_sites(found: list[Any], site_bits: int, warnings: list[str]) -> tuple[RaceSite, ...]:
    """The sites of the rows `found`, each at its `.index` (the number the shadow holds), an `unknown`
    one where no usable row has the number; a message in `warnings` for each row not used. The numbers
    are those of the rows, 0 to len(found) - 1, and fit `site_bits`."""
    count = min(len(found), 1 << site_bits)
    sites: dict[int, RaceSite] = {}
    for number, row in enumerate(found):
        try:
            site = RaceSite.from_map(row)
        except RowError as failure:
            warnings.append(f"{RACES_KEY} .sites[{number}] is not used: {failure}")
            continue
        index = site.site.index
        if index >= count:
            limit = f"the table's {site_bits} .site_bits" if index >> site_bits else f"its {len(found)} rows"
            warnings.append(
                f"{RACES_KEY} .sites[{number}] is not used: its .index {index} does not fit {limit}"
            )
        elif sites.setdefault(index, site) != site:
            warnings.append(
                f"{RACES_KEY} .sites[{number}] is not used: site {index} is an earlier row's, which is kept"
            )
    return tuple(sites.get(index) or RaceSite.unknown(index) for index in range(count))
