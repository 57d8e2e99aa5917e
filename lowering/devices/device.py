"""What a device is, as the harness and every device see it: the launch, the entry point, how the device
ended, the limits and defaults of a run.

The harness (`harness`) drives a device; each device (`cpu`, `nvptx`, through
`device_worker`) implements `Device`. Both import this module and neither imports the other's, so the
layers point one way: command line -> harness -> devices -> this module.
"""

from __future__ import annotations

import importlib
import mmap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from metadata.errors import DprintfError

from ..targets.target import NVPTX_BLOCK_THREADS, Target

MAX_INVOCATIONS = 1 << 32  # invocation IDs are 32-bit: 0 .. 2^32 - 1
DEFAULT_PRINTF_BUFFER_BYTES = 1 << 20
# The greatest buffer: its 16-byte header and the 2^29 dwords the 2 GiB offset clamp lets the code use
# (SPEC 4, `metadata.wire`, which imports numpy: the nvptx worker imports this module without it).
MAX_BUFFER_BYTES = 16 + 4 * (1 << 29)
AUTO: Final = "auto"  # a printf buffer of the default size, then once more of the size the output needed
BufferSize = int | Literal["auto"]
DEFAULT_ABORT_BUFFER_BYTES = 16 + (64 << 10)  # the proposal's minimum maxShaderAbortMessageSize
DEFAULT_RUN_TIMEOUT_SECONDS = 60.0
# Invocations k*N .. k*N+N-1 form workgroup k (SPEC 14): by default the nvptx device's thread block of
# before workgroups, so that a run that names no size launches as it did; at most the 1,024 threads of
# an NVIDIA thread block (and of an AMD workgroup).
DEFAULT_WORKGROUP_SIZE = NVPTX_BLOCK_THREADS
MAX_WORKGROUP_SIZE = 1024
PRINTF_IMAGE, ABORT_IMAGE = 0, 1  # a launch's first images: printf, abort (then `slots` names them all)

Image = bytes | bytearray | memoryview | mmap.mmap  # a buffer's bytes, as the harness gives them


class DeviceError(DprintfError):
    """A device that is not available, or that cannot run the code it was given."""


@dataclass(frozen=True, slots=True)
class EntryPoint:
    """The entry function: its name, whether it takes the abort buffer between printf's and the ID, and how
    many data buffers it takes after the ID (SPEC section 11)."""

    name: str
    takes_abort_buffer: bool
    data_buffers: int = 0

    @property
    def ir_name(self) -> str:
        """The function's name as IR spells it, quoted so that any name is valid."""
        escaped = "".join(f"\\{ord(char):02X}" if char in '"\\' else char for char in self.name)
        return f'@"{escaped}"'


@dataclass(frozen=True, slots=True)
class RuntimeGlobal:
    """A module global that the runtime sets before a launch (SPEC sections 9-12), when the module has it:
    to the device address of image `image` (a pointer), to the addresses of `images` (an array of
    pointers, null for None), or else to the bytes `value`. A global the module only declares is
    defined by the device, zero-initialised, before it is set."""

    name: str
    image: int | None = None
    value: bytes = b""
    images: tuple[int | None, ...] = ()
    ir_type: str | None = None  # the global's type as the runtime sets it, checked against the module


@dataclass(frozen=True, slots=True)
class LiveRangeImages:
    """A table of the live buffers (SPEC 13) that a device writes into image `image` once it knows where
    the images are: `builder` (`module:function`, a function of the driver side) makes its bytes from
    (begin, end, id) of each of `ranges` (image, bytes, id: the first `bytes` of that image) and from the
    addresses of the images in `shadows`."""

    image: int
    ranges: tuple[tuple[int, int, int], ...]
    builder: str
    shadows: tuple[int, ...] = ()

    def table(self, addresses: Sequence[int]) -> bytes:
        """The table, the images being at `addresses` on the device."""
        module, _, name = self.builder.partition(":")
        build = getattr(importlib.import_module(module), name)
        ranges = ((addresses[image], addresses[image] + size, found) for image, size, found in self.ranges)
        return bytes(build(ranges, [addresses[image] for image in self.shadows]))

    def to_job(self) -> dict:
        return {
            "image": self.image,
            "ranges": [list(item) for item in self.ranges],
            "builder": self.builder,
            "shadows": list(self.shadows),
        }

    @classmethod
    def from_job(cls, job: dict) -> LiveRangeImages:
        ranges = tuple((image, size, found) for image, size, found in job["ranges"])
        return cls(job["image"], ranges, job["builder"], tuple(job["shadows"]))


@dataclass(frozen=True, slots=True)
class Launch:
    """What a device runs: lowered IR, its entry, invocations `0 .. invocations-1` on `threads` threads
    in workgroups of `workgroup_size` (the last one partial when the size does not divide the
    invocations; SPEC 14), and the globals to set first. The images it is given are the printf and
    abort buffers, the entry's data buffers in parameter order, then the images only runtime globals
    point at (the features' counters and shadows, and the table of live ranges with its shadows,
    which the device fills in from `live_ranges`). `device_images` are those a device may keep in its
    own memory even when the code can abort (what they hold is lost with the device). `traps`: the code
    may end an invocation with a trap other than an abort's (`unreachable` reached under a check), so
    what it printed must survive the device's loss. `sparse_images` are those the code touches in few
    places, however large (a feature's shadows): a device allocates their pages only as the code touches
    them, and says which it wrote (`DeviceRun.written`)."""

    ir: str
    entry: EntryPoint
    invocations: int
    threads: int
    timeout: float
    runtime_globals: tuple[RuntimeGlobal, ...] = ()
    device_images: tuple[int, ...] = ()
    live_ranges: LiveRangeImages | None = None
    traps: bool = False
    sparse_images: tuple[int, ...] = ()
    workgroup_size: int = DEFAULT_WORKGROUP_SIZE


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    """How the device stopped: every invocation returned (in `seconds`, when the device measures it), or it
    was lost (a signal, an exit status, the timeout). `detail` is what the device printed, if anything."""

    finished: bool
    timed_out: bool = False
    signal: int | None = None
    exit_status: int | None = None
    timeout: float | None = None
    seconds: float | None = None
    detail: str = ""
    interruption: KeyboardInterrupt | None = None

    @classmethod
    def completed(cls, detail: str = "", seconds: float | None = None) -> DeviceStatus:
        return cls(finished=True, seconds=seconds, detail=detail)

    @classmethod
    def lost(
        cls, signal: int | None = None, exit_status: int | None = None, detail: str = ""
    ) -> DeviceStatus:
        return cls(finished=False, signal=signal, exit_status=exit_status, detail=detail)

    @classmethod
    def interrupted_by(cls, interruption: KeyboardInterrupt, detail: str = "") -> DeviceStatus:
        """Stopped because the harness itself was interrupted (SIGINT, SIGTERM) while the device ran."""
        return cls(finished=False, interruption=interruption, detail=detail)

    @classmethod
    def timed_out_after(cls, timeout: float, detail: str = "") -> DeviceStatus:
        return cls(finished=False, timed_out=True, timeout=timeout, detail=detail)


@dataclass(frozen=True, slots=True)
class DeviceRun:
    """The images (printf, abort) as the device left them, guards included, and how it stopped; for each
    of the launch's `sparse_images`, the byte ranges of it that may be other than zero (`written`, by
    image number; an image not there may be anywhere), so that a reader leaves the rest untouched."""

    images: tuple[Image, ...]
    status: DeviceStatus
    written: Mapping[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)


# `--device` name -> the module that opens the device.
DEVICE_MODULES = {"cpu": "lowering.devices.cpu", "nvptx": "lowering.devices.nvptx"}
# `--device` name -> its worker's module, which `worker.prestart` starts ahead of the device.
WORKER_MODULES = {"cpu": "lowering.devices.cpu", "nvptx": "lowering.devices.nvptx_worker"}
# Workers that import only the standard library and this package: their interpreter starts without the
# `site` module (`python -S`), which on a host whose site-packages hold much takes a tenth of a second.
SITE_FREE_WORKERS = frozenset({"lowering.devices.nvptx_worker"})


class Device(Protocol):
    """A place to run lowered code. `name` is how `--device` spells it; `target` is the lowering target of
    the code it runs: a name of TARGETS, or a variant of one where the device's own kernel allows more.
    `run` runs `launch` with the buffers initialised from `images` (printf, abort; the entry receives
    their addresses), and returns the images as the code left them. It raises DeviceError when it
    cannot run the code at all; a device lost while running is a `DeviceStatus`, not an error. It
    never waits longer than `launch.timeout` seconds for the code."""

    name: str
    target: str | Target

    def run(self, launch: Launch, images: Sequence[Image]) -> DeviceRun: ...

    def prepare(self) -> None:
        """Start what the next `run` needs (its worker) ahead of it, while the caller lowers the code."""
        ...

    def release(self) -> None:
        """Undo a `prepare` that no `run` followed."""
        ...
