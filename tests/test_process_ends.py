"""Every way out of the `dprintf` process is clean (issue 14): signals, full and closed stdout, LLVM's
own fatal errors, absurd options and sizes, output files; each through the command as a user runs it."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from elf_oracles import each_reader

from metadata.elf_notes import note_only_elf
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable
from metadata.wire import entry_header

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
DPRINTF = [sys.executable, "-m", "lowering.cli"]
LINE = FormatEntry.for_call("line %u of the output\n", parse_layout("i32"))
# A format of the `%` template tier, which a pool renders faster than one process on any number of CPUs
# (byte cells need three: `printf_buffer.BYTE_CELLS_MIN_PROCESSES`).
PARALLEL_LINE = FormatEntry.for_call("line %c of the output\n", parse_layout("i32"))
SHM = Path("/dev/shm")


def dprintf(*argv: str, **options) -> subprocess.CompletedProcess:
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run([*DPRINTF, *argv], check=False, timeout=120, **streams)


def write_module(tmp_path: Path, body: str, name: str = "module.ll") -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def many_entries(path: Path, count: int, entry: FormatEntry = LINE) -> None:
    """A printf dump of `count` entries of `entry` (one i32 argument), built at numpy speed."""
    words = np.empty((count, 3), dtype="<u4")
    header = entry_header(entry.index, 3)
    words[:, 0], words[:, 1], words[:, 2] = header & 0xFFFFFFFF, header >> 32, np.arange(count)
    head = np.array([3 * count, 0, 3 * count, 0], dtype="<u4")
    path.write_bytes(head.tobytes() + words.tobytes())


@pytest.fixture
def large_dump(tmp_path):
    """A dump of 2^21 entries, rendered in parallel, and the ELF of its table."""
    dump, elf = tmp_path / "large.bin", tmp_path / "table.elf"
    many_entries(dump, 1 << 21, PARALLEL_LINE)
    elf.write_bytes(note_only_elf(FormatTable([PARALLEL_LINE]).encode()))
    return str(dump), str(elf)


def render_directories() -> set[str]:
    return {path.name for path in SHM.glob("dprintf-render-*")} if SHM.is_dir() else set()


def group_members(group: int) -> list[int]:
    """The processes of process group `group` that are still alive (zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def wait_gone(group: int, seconds: float = 2.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (members := group_members(group)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return members


def start_decode_into_a_stalled_pipe(large_dump) -> subprocess.Popen:
    """`dprintf decode` of the large dump in its own process group, writing to a pipe nobody reads, once
    its renderers run and it is blocked writing."""
    dump, elf = large_dump
    process = subprocess.Popen(
        [*DPRINTF, "decode", dump, "--elf", elf],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(group_members(process.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
    return process


@pytest.mark.parametrize(
    ("sent", "to_group", "status", "message"),
    [
        (signal.SIGTERM, False, 128 + signal.SIGTERM, b"error: terminated\n"),
        (signal.SIGINT, True, 128 + signal.SIGINT, b"error: interrupted\n"),
    ],
)
def test_a_signal_ends_a_parallel_decode_and_its_renderers(large_dump, sent, to_group, status, message):
    """SIGTERM to the command, or a terminal's Ctrl-C to its process group, while it is blocked on a
    reader that stopped reading: it ends within a second, with one line and no traceback from any
    process, its renderers are gone and shared memory is as before."""
    before = render_directories()
    process = start_decode_into_a_stalled_pipe(large_dump)
    if to_group:
        os.killpg(process.pid, sent)
    else:
        process.send_signal(sent)
    try:
        process.wait(timeout=2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    stderr = process.stderr.read()
    assert process.returncode == status
    assert stderr == message
    assert wait_gone(process.pid) == []
    assert render_directories() == before


def test_renderers_of_a_killed_decode_exit_and_its_leftovers_are_removed_by_the_next(large_dump):
    """SIGKILL leaves no time to clean up: the renderers notice their parent is gone and exit, so the
    reader of the output sees its end; the next decode removes the directory the killed one left."""
    before = render_directories()
    process = start_decode_into_a_stalled_pipe(large_dump)
    process.kill()
    process.wait(timeout=2)
    assert wait_gone(process.pid) == []
    assert process.stdout.read(1 << 16) is not None  # end of file comes: no helper holds the pipe open
    left = render_directories() - before
    dump, elf = large_dump
    done = dprintf("decode", dump, "--elf", elf, stdout=subprocess.DEVNULL)
    assert done.returncode == 0
    assert not (left & render_directories())


def test_ctrl_c_on_a_hanging_shader_keeps_what_it_wrote(tmp_path):
    program = write_module(
        tmp_path,
        '@s = private unnamed_addr addrspace(4) constant [11 x i8] c"before %u\\0A\\00"\n'
        "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        "define void @main(ptr addrspace(7) %b, i32 %id) {\n"
        "entry:\n"
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
        "ptr addrspace(7) %b, ptr addrspace(4) @s, i32 %id)\n"
        "  br label %loop\n"
        "loop:\n"
        "  %v = load volatile i32, ptr addrspace(7) %b\n"
        "  br label %loop\n"
        "}\n",
    )
    process = subprocess.Popen(
        [*DPRINTF, "run", program, "--invocations", "2", "--threads", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(4)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=5)
    assert process.returncode == 130
    assert sorted(out.decode().splitlines()) == ["before 0", "before 1"]
    assert err == b"error: interrupted\n"
    assert wait_gone(process.pid) == []


@pytest.mark.parametrize("command", ["inspect", "lower", "run"])
def test_stdout_that_cannot_be_written_is_an_error(tmp_path, command):
    elf = tmp_path / "hello.o"
    assert dprintf("compile", "--target", "cpu", str(SAMPLES / "hello.ll"), "-o", str(elf)).returncode == 0
    argv = [command, str(elf)] if command == "inspect" else [command, str(SAMPLES / "hello.ll")]
    with open("/dev/full", "wb") as full:
        done = dprintf(*argv, stdout=full)
    assert (done.returncode, done.stderr) == (1, b"error: cannot write to stdout: No space left on device\n")
    closed = subprocess.run(
        " ".join([*DPRINTF, *argv]) + " >&-", shell=True, capture_output=True, check=False, timeout=60
    )
    assert (closed.returncode, closed.stderr) == (1, b"error: cannot write to stdout: it is closed\n")


@pytest.mark.parametrize("closed", ["<&-", "2>&-", "<&- 2>&-"])
def test_a_run_with_stdin_or_stderr_closed_prints_its_output(closed):
    """Its worker's pipes and shared file, made before the command holds the standard descriptors, once
    took descriptor 0 and the worker lost them (a traceback, or a hang when forked: #35)."""
    command = " ".join([*DPRINTF, "run", str(SAMPLES / "hello.ll"), "--invocations", "2", closed])
    done = subprocess.run(command, shell=True, capture_output=True, check=False, timeout=60)
    assert (done.returncode, done.stdout) == (0, b"Hello from invocation 0!\nHello from invocation 1!\n")


def test_a_closed_pipe_is_quiet():
    done = subprocess.run(
        " ".join([*DPRINTF, "run", str(SAMPLES / "hello.ll"), "--invocations", "200000"]) + " | head -1",
        shell=True,
        capture_output=True,
        check=False,
        timeout=120,
        executable="/bin/bash",
    )
    assert done.stdout == b"Hello from invocation 0!\n" and b"Traceback" not in done.stderr


@each_reader
def test_a_module_without_printf_or_entry_compiles_for_amdpal_with_an_empty_table(tmp_path, reader):
    module = write_module(tmp_path, "define void @f() {\n  ret void\n}\n")
    elf = tmp_path / "empty.o"
    done = dprintf("compile", module, "-o", str(elf))
    assert (done.returncode, done.stderr) == (0, b"")
    assert reader.notes(elf).document == {"amdpal.format_strings": {".version": 1, ".strings": []}}
    assert dprintf("inspect", str(elf)).stdout == b"amdpal.format_strings:\n  .version: 1\n  .strings: []\n"


def test_a_fatal_error_inside_llvm_is_an_error_line_and_no_file(tmp_path):
    module = write_module(tmp_path, "define x86_fastcallcc void @f() {\n  ret void\n}\n")
    elf = tmp_path / "out.o"
    done = dprintf("compile", module, "-o", str(elf))
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "error: LLVM failed while compiling for amdpal: the code generator exited with status 1: "
        "LLVM ERROR: unsupported calling convention"
    ]
    assert not elf.exists()


def test_many_printfs_in_one_amdpal_function_stay_calls_to_one_helper(tmp_path):
    calls = 40
    strings = "".join(
        f'@s{n} = private unnamed_addr addrspace(4) constant [6 x i8] c"{n:02d} %u\\00"\n'
        for n in range(calls)
    )
    body = "".join(
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
        f"ptr addrspace(7) %b, ptr addrspace(4) @s{n}, i32 %id)\n"
        for n in range(calls)
    )
    module = write_module(
        tmp_path,
        strings
        + "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        + "define amdgpu_cs void @main(ptr addrspace(7) %b, i32 %id) {\nentry:\n"
        + body
        + "  ret void\n}\n",
    )
    lowered = dprintf("lower", "--target", "amdpal", module)
    assert lowered.returncode == 0
    text = lowered.stdout.decode()
    assert text.count("call void @dprintf.printf.") == calls and text.count("noinline") >= 1
    elf = tmp_path / "many.o"
    assert dprintf("compile", module, "-o", str(elf)).returncode == 0
    assert dprintf("inspect", str(elf)).stdout.count(b".string:") == calls


def test_a_width_past_an_int_is_an_error_naming_the_call(tmp_path):
    module = write_module(
        tmp_path,
        '@s = private unnamed_addr addrspace(4) constant [16 x i8] c"%999999999999d\\0A\\00"\n'
        "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)\n"
        "define void @main(ptr addrspace(7) %b, i32 %id) {\nentry:\n"
        "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
        "ptr addrspace(7) %b, ptr addrspace(4) @s, i32 %id)\n  ret void\n}\n",
    )
    done = dprintf("lower", module)
    assert done.returncode == 1
    assert done.stderr.decode() == (
        f"error: {module}:5: call 1 to @lgc.debug.printf in function @main: width 999999999999 does not fit "
        "an int (C's printf fails with EOVERFLOW) in '%999999999999d' at offset 0 of format string "
        "'%999999999999d\\n'\n"
    )


def test_a_foreign_table_with_a_huge_width_is_a_warning_not_an_allocation(tmp_path):
    """Another writer's entry for the ID of LINE says `%999999999d`: the entries are skipped, once."""
    import msgpack

    document = msgpack.unpackb(FormatTable([LINE]).encode(), strict_map_key=False)
    document["amdpal.format_strings"][".strings"][0][".string"] = "%999999999d\n"
    elf, dump = tmp_path / "foreign.elf", tmp_path / "dump.bin"
    elf.write_bytes(note_only_elf(msgpack.packb(document)))
    many_entries(dump, 1000)
    done = dprintf("decode", str(dump), "--elf", str(elf))
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.decode().splitlines() == [
        f"warning: printf buffer: dword 0 (byte 16): the table's entry for ID {LINE.index:#014x} cannot be "
        "decoded: width 999999999 is more than the 4096 this toolchain renders in '%999999999d' at offset 0 "
        "of format string '%999999999d\\n': skipped 1000 entries (3000 dwords), the first here"
    ]


def test_the_wrong_elf_is_one_warning_with_a_count(tmp_path):
    other = FormatEntry.for_call("other %u\n", parse_layout("i32"))
    elf, dump = tmp_path / "other.elf", tmp_path / "dump.bin"
    elf.write_bytes(note_only_elf(FormatTable([other]).encode()))
    many_entries(dump, 100_000)
    done = dprintf("decode", str(dump), "--elf", str(elf))
    assert (done.returncode, done.stdout) == (0, b"")
    assert done.stderr.decode() == (
        f"warning: printf buffer: dword 0 (byte 16): unknown format string ID {LINE.index:#014x}: "
        "skipped 100000 entries (300000 dwords), the first here\n"
    )


@pytest.mark.parametrize(
    ("option", "value"), [("--timeout", "1e300"), ("--timeout", "2147484"), ("--threads", "1025")]
)
def test_absurd_numbers_are_usage_errors_naming_the_limit(option, value):
    done = dprintf("run", str(SAMPLES / "hello.ll"), option, value)
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert (
        f"argument {option}: '{value}' is not".encode() in done.stderr
        and b"at most" in done.stderr
        or (b"from 1 to 1024" in done.stderr)
    )


def test_the_largest_accepted_timeout_works():
    done = dprintf("run", str(SAMPLES / "hello.ll"), "--timeout", "1000000")
    assert (done.returncode, done.stdout) == (0, b"Hello from invocation 0!\n")


def test_a_buffer_that_does_not_fit_memory_is_an_error():
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    done = dprintf("run", str(SAMPLES / "hello.ll"), "--buffer-size", "1GiB", preexec_fn=limit_memory)
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.startswith(b"error: out of memory: ") and done.stderr.count(b"\n") == 1


def test_a_large_buffer_is_in_memory_about_once(tmp_path):
    """Peak memory of `run --buffer-size 256MiB`, less that of a 1 MiB run, is near one buffer."""

    def peak(size: str) -> int:
        script = (
            "import resource, subprocess, sys;"
            f"subprocess.run({[*DPRINTF, 'run', str(SAMPLES / 'hello.ll'), '--buffer-size', size]!r},"
            " stdout=subprocess.DEVNULL, check=True);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        return (
            int(subprocess.run([sys.executable, "-c", script], capture_output=True, check=True).stdout) * 1024
        )

    extra = peak("256MiB") - peak("1MiB")
    assert extra < 1.25 * (256 << 20)


def test_output_files_are_written_as_cp_writes_them(tmp_path):
    hello = str(SAMPLES / "hello.ll")
    new = tmp_path / "new.ll"
    done = dprintf("lower", hello, "-o", str(new), preexec_fn=lambda: os.umask(0o027))
    assert done.returncode == 0 and stat.S_IMODE(new.stat().st_mode) == 0o640
    new.chmod(0o604)
    assert dprintf("lower", hello, "-o", str(new)).returncode == 0
    assert stat.S_IMODE(new.stat().st_mode) == 0o604
    target, link = tmp_path / "target.ll", tmp_path / "link.ll"
    link.symlink_to(target.name)
    assert dprintf("lower", hello, "-o", str(link)).returncode == 0
    assert link.is_symlink() and target.read_text() == new.read_text()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    assert dprintf("lower", hello, "-o", str(fifo)).returncode == 0
    assert reader.communicate(timeout=30)[0].decode() == new.read_text()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
