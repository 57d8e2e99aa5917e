"""A launch's buffers by name (issue 30): the harness and the features add and fetch them by name
(`printf`, `abort`, `data N`, a feature's own), never by position; a device still sees them as the list
`Slots.images`, in the order they were added.

Each image is the buffer followed by its guard (`images`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm

from .device import Image, LiveRangeImages, RuntimeGlobal
from .images import GUARD_BYTES

PRINTF, ABORT = "printf", "abort"
Bytes = bytes | bytearray | memoryview  # a slot's buffer or guard, as the harness reads it back


def data_slot(number: int) -> str:
    """The name of the entry's data buffer `number` (in parameter order)."""
    return f"data {number}"


class Slots:
    """Named images in the order a device receives them."""

    def __init__(
        self,
        names: Sequence[str] = (),
        images: Sequence[Image] = (),
        written: Mapping[int, Sequence[tuple[int, int]]] | None = None,
    ) -> None:
        self._numbers = {name: number for number, name in enumerate(names)}
        self.images: list[Image] = list(images)
        self._written = dict(written or {})
        if len(self._numbers) != len(self.images):
            raise ValueError("one name an image, each name once")

    def add(self, name: str, image: Image) -> int:
        """Add `image` as `name` (a name not yet taken); its number among the images."""
        if name in self._numbers:
            raise ValueError(f"slot {name!r} is taken")
        self._numbers[name] = len(self.images)
        self.images.append(image)
        return self._numbers[name]

    def number(self, name: str) -> int:
        return self._numbers[name]

    def __contains__(self, name: object) -> bool:
        return name in self._numbers

    def __getitem__(self, name: str) -> Bytes:
        """The slot's buffer, without its guard."""
        return self.images[self._numbers[name]][:-GUARD_BYTES]

    def guard(self, name: str) -> Bytes:
        return self.images[self._numbers[name]][-GUARD_BYTES:]

    def names(self) -> Iterator[str]:
        return iter(self._numbers)

    def written(self, name: str) -> list[tuple[int, int]] | None:
        """The byte ranges of the slot's buffer (its guard left out) that may be other than zero, as the
        device said of a sparse image (`Launch.sparse_images`); None where it did not say: anywhere."""
        number = self._numbers[name]
        found = self._written.get(number)
        if found is None:
            return None
        size = len(self.images[number]) - GUARD_BYTES
        return [(start, min(stop, size)) for start, stop in found if start < size]

    def with_images(
        self, images: Sequence[Image], written: Mapping[int, Sequence[tuple[int, int]]] | None = None
    ) -> Slots:
        """The same names over `images` (as a device returned them), with what it said it wrote of the
        sparse ones."""
        return Slots(list(self._numbers), images, written)


@dataclass
class LaunchPlan:
    """What the harness and the features prepare for one launch: the slots, the runtime globals, the
    images a device may keep in its own memory, the table of live ranges it fills in, whether the code
    may trap, and what the run was given (the data buffers' sizes, the bytes of each a file gave, the
    invocations, the entry, the workgroup size), what the features note of it, and, when the harness
    launches again because a feature asked (`Feature.relaunch`), what each asked, by its name."""

    module: llvm.ModuleRef
    buffer_type: str  # the target's type of a buffer pointer, as runtime globals hold one
    slots: Slots
    data_sizes: tuple[int, ...]
    initialised: tuple[int, ...] | None
    invocations: int
    globals: list[RuntimeGlobal] = field(default_factory=list)
    device_images: list[int] = field(default_factory=list)
    live_ranges: LiveRangeImages | None = None
    traps: bool = False
    notes: list[str] = field(default_factory=list)  # what a feature says of the launch, as warnings
    sparse_images: list[int] = field(default_factory=list)  # touched in few places (`Launch`)
    entry: str = "main"  # the entry function the launch runs
    workgroup_size: int = 1  # the launch's invocations a workgroup
    asked: Mapping[str, Any] = field(default_factory=dict)  # a relaunch: what each feature asked of it

    def has_global(self, name: str) -> bool:
        """Whether the lowered module has the global `name` (defined or declared)."""
        try:
            self.module.get_global_variable(name)
        except NameError:
            return False
        return True
