"""Running the planted programs of the validation tests (SPEC 13) on every device they are checked on:
the cpu device on 1 and 2 threads, and an NVIDIA GPU where one is present (marked `gpu`)."""

from __future__ import annotations

import pytest
from run_parts import validation_reports

from lowering.devices.cuda_driver import gpu_count
from lowering.devices.harness import GUARD_FILL, RunResult, run_sources
from lowering.devices.images import GUARD_BYTES
from lowering.lowered_module import Source

GPUS, NO_GPU = gpu_count()
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(not GPUS, reason=f"needs an NVIDIA GPU: {NO_GPU}")]
# (device, threads) of every run whose counts do not depend on the order invocations run in.
PLACES = [
    pytest.param(("cpu", 1), id="cpu-1"),
    pytest.param(("cpu", 2), id="cpu-2"),
    pytest.param(("nvptx", 1), id="nvptx", marks=ON_GPU),
]
UNKNOWN = 0xFFFFFFFF  # the first invocation of a site in a function whose callers cannot pass it


def entry(body: str, buffers: str | list[str] = "a", head: str = "") -> str:
    """`@main(printf, id, %<name>...)` (a data buffer for each name of `buffers`, or each letter) with
    `body` after `entry:`, where `%wide` is the ID as i64; `head` comes before it (globals, functions)."""
    names = "".join(f", ptr addrspace(7) %{name}" for name in buffers)
    return (
        head
        + "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        + f"define void @main(ptr addrspace(7) %printf, i32 %id{names}) {{\n"
        + "entry:\n  %wide = zext i32 %id to i64\n"
        + body
        + "  ret void\n}\n"
    )


def run(
    text: str,
    buffers: list[bytes | int],
    invocations: int,
    place: tuple[str, int] = ("cpu", 1),
    validate: str | bool = True,
    initialised: list[int] | None = None,
) -> RunResult:
    """Run `text` with data buffers of those sizes (zeros) or bytes, on `place` (device, threads)."""
    device, threads = place
    data = [bytes(item) if isinstance(item, int) else item for item in buffers]
    return run_sources(
        [Source("test.ll", text)],
        invocations=invocations,
        threads=threads,
        device=device,
        data_buffers=data,
        validate=validate,
        initialised=initialised,
    )


def reports(result: RunResult) -> list[tuple[str, str, str, int, int]]:
    """Each report as (check, kind, function, count, first invocation)."""
    return [
        (report.site.check, report.site.kind, report.site.function, report.count, report.first_invocation)
        for report in validation_reports(result) or ()
    ]


def words(image, count: int) -> list[int]:
    return list(memoryview(bytes(image)).cast("i")[:count])


def guards_intact(result: RunResult) -> bool:
    return all(
        guard == bytes([GUARD_FILL]) * GUARD_BYTES
        for name, guard in result.guards
        if name.startswith("data ")
    )
