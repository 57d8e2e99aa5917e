"""`dprintf run` on the samples and on broken or misbehaving programs: stdout, stderr lines, exit status."""

from __future__ import annotations

import importlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dprintf_ir import DECLARATIONS, PRINTF, c_format, call, string_global

from lowering.cli import main as cli
from lowering.devices import harness
from lowering.lowered_module import Source

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
ABORT_MESSAGE = "invocation 3: value -20 is negative (limit 0.0)"


def dprintf(capsys, *argv: str) -> tuple[int, str, str]:
    """Run `dprintf` in this process: (exit status, stdout, stderr)."""
    try:
        status = cli.main(list(argv))
    except SystemExit as exit_:
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def sample(name: str) -> str:
    return str(SAMPLES / name)


def test_the_readme_command_greets_from_each_invocation():
    done = subprocess.run(
        [sys.executable, "-m", "lowering.cli", "run", sample("hello.ll"), "--invocations", "4"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "".join(f"Hello from invocation {n}!\n" for n in range(4))


def test_all_types_prints_the_decoded_text(capsys):
    status, out, err = dprintf(capsys, "run", sample("all_types.ll"), "--invocations", "3")
    assert (status, err) == (0, "")
    expected = harness.run_sources(
        [Source("all_types.ll", Path(sample("all_types.ll")).read_text())], invocations=3
    )
    assert out == expected.text()
    assert len(out.splitlines()) == 3 * 13 and out.startswith("i1: 0 1\ni8: ")


def test_printf_in_called_functions(capsys):
    status, out, err = dprintf(capsys, "run", sample("functions_dbg.ll"), "--invocations", "3")
    assert (status, err) == (0, "")
    shade = [c_format("%.2f", "float", n * 0.5 + 1.0) for n in range(3)]
    assert out == (
        f"invocation 0: shade(0) = {shade[0]}\n"
        "invocation 0 takes the even path, step 0 of 2\ninvocation 0 takes the even path, step 1 of 2\n"
        f"invocation 1: shade(1) = {shade[1]}\n"
        f"invocation 2: shade(2) = {shade[2]}\n"
        "invocation 2 takes the even path, step 0 of 2\ninvocation 2 takes the even path, step 1 of 2\n"
    )


def test_a_broken_call_is_reported_at_its_source_line(capsys, tmp_path):
    text = Path(sample("functions_dbg.ll")).read_text()
    good = "@fmt_report, i32 %id, i32 %id, float %value)"
    assert good in text
    broken = tmp_path / "broken.ll"
    broken.write_text(text.replace(good, "@fmt_report, i32 %id, float %value, float %value)"))
    status, out, err = dprintf(capsys, "run", str(broken))
    assert (status, out) == (1, "")
    assert err.startswith("error: ") and "shading.c:7:3" in err and "@report" in err
    assert "Traceback" not in err


def test_an_overflowing_buffer_prints_what_fit_and_warns(capsys):
    status, out, err = dprintf(capsys, "run", sample("overflow.ll"), "--buffer-size", "256")
    assert status == 0
    assert out == "".join(f"overflow line {n} of 32\n" for n in range(1, 21))
    assert (
        err
        == "warning: printf buffer: 36 dword(s) of output did not fit (bufferOffset 96, capacity 60 dwords)\n"
    )


def test_an_abort_loses_the_device_with_its_message(capsys):
    status, out, err = dprintf(capsys, "run", sample("abort.ll"), "--invocations", "8")
    assert status == 3
    lines = [f"invocation {n}: checking its value {100 - 40 * n}\n" for n in range(4)]
    fine = [f"invocation {n}: value {100 - 40 * n} is fine\n" for n in range(3)]
    assert out == "".join(line for pair in zip(lines, fine + [""], strict=True) for line in pair)
    assert err == f"error: device lost: shader abort: {ABORT_MESSAGE}\n"


def test_json_describes_the_run(capsys):
    status, out, err = dprintf(capsys, "run", sample("abort.ll"), "--invocations", "8", "--json")
    assert (status, err) == (3, "")
    report = json.loads(out)
    assert report["exit_status"] == 3 and report["warnings"] == []
    assert report["device"] == {
        "name": "cpu",
        "outcome": "aborted",
        "loss": "shader abort",
        "signal": "SIGILL",
        "exit_status": None,
        "seconds": None,
        "output": "",
    }
    assert [entry["text"] for entry in report["printf"]["entries"]][
        -1
    ] == "invocation 3: checking its value -20\n"
    (message,) = report["abort"]["messages"]
    assert message["text"] == ABORT_MESSAGE
    form = b"invocation %u: value %d is negative (limit %.1f)\x00"
    assert bytes.fromhex(message["payload"]) == form + bytes(-len(form) % 4) + bytes.fromhex(
        "03000000ecffffff00000000"
    )

    status, out, err = dprintf(capsys, "run", sample("hello.ll"), "--invocations", "2", "--json")
    report = json.loads(out)
    assert (status, err, report["exit_status"], report["device"]["outcome"]) == (0, "", 0, "completed")
    assert report["device"]["seconds"] > 0 and report["abort"]["device_lost"] is False
    assert [entry["values"] for entry in report["printf"]["entries"]] == [[0], [1]]


def program_file(tmp_path: Path, body: str) -> str:
    """A program printing its invocation ID; invocation 1 then runs `body`, which branches to %done."""
    path = tmp_path / "program.ll"
    path.write_text(
        string_global("fmt", "%u\n")
        + DECLARATIONS
        + "define void @main(ptr addrspace(7) %buf, i32 %id) {\nentry:\n"
        + call(PRINTF, "%buf", "fmt", [("i32", "%id")])
        + "  %last = icmp eq i32 %id, 1\n  br i1 %last, label %bad, label %done\n"
        + f"bad:\n{body}done:\n  ret void\n}}\n"
    )
    return str(path)


def test_a_crash_of_the_lowered_code_loses_the_device(capsys, tmp_path):
    program = program_file(tmp_path, "  store volatile i32 0, ptr null\n  br label %done\n")
    status, out, err = dprintf(capsys, "run", program, "--invocations", "3")
    assert (status, out) == (1, "0\n1\n")
    assert err == "error: device lost: the cpu device's worker crashed with SIGSEGV\n"


@pytest.mark.parametrize(
    ("lines", "warning"),
    [(["last!"], ""), (["first!", "last!"], "warning: the cpu device printed: first!\nlast!\n")],
)
def test_a_lost_worker_s_last_printed_line_ends_the_loss(capsys, tmp_path, lines, warning):
    """A single line the loss message already carries is not repeated as a warning."""
    said = "".join(f"  %said.{n} = call i32 @puts(ptr @line.{n})\n" for n in range(len(lines)))
    program = program_file(tmp_path, said + "  call void @exit(i32 7)\n  br label %done\n")
    with open(program, "a", encoding="utf-8") as module:
        for n, line in enumerate(lines):
            module.write(f'@line.{n} = private constant [{len(line) + 1} x i8] c"{line}\\00"\n')
        module.write("declare i32 @puts(ptr)\ndeclare void @exit(i32)\n")
    status, out, err = dprintf(capsys, "run", program, "--invocations", "3")
    assert (status, out) == (1, "0\n1\n")
    assert err == warning + "error: device lost: the cpu device's worker ended with exit status 7: last!\n"


def test_a_hung_device_is_stopped_at_the_timeout(capsys, tmp_path):
    program = program_file(tmp_path, "  br label %bad\n")
    status, out, err = dprintf(capsys, "run", program, "--invocations", "3", "--timeout", "1.5")
    assert (status, out) == (1, "0\n1\n")
    assert err == "error: device lost: timed out after 1.5 s; the cpu device was stopped\n"


@pytest.mark.parametrize(
    ("argv", "status", "message"),
    [
        (["--entry", "nope"], 1, "error: the module has no entry function @nope\n"),
        (["--buffer-size", "8"], 2, "argument --buffer-size: '8' is not from 16 to 2147483664"),
        (["--buffer-size", "3GiB"], 2, "argument --buffer-size: '3GiB' is not from 16 to 2147483664"),
        (["--buffer-size", "1GB"], 2, "argument --buffer-size: '1GB' is not an integer"),
        (["--abort-buffer-size", str(1 << 40)], 2, f"'{1 << 40}' is not from 16 to 2147483664"),
        (
            ["--timeout", "0"],
            2,
            "argument --timeout: '0' is not a number of seconds above 0 and at most 1e+06",
        ),
        (["--timeout", "nan"], 2, "argument --timeout: 'nan' is not a number of seconds above 0"),
        (["--timeout", "1e300"], 2, "argument --timeout: '1e300' is not a number of seconds above 0"),
        (["--timeout", "2147484"], 2, "argument --timeout: '2147484' is not a number of seconds above 0"),
        (["--threads", "0"], 2, "argument --threads: '0' is not from 1 to 1024"),
        (["--invocations", str((1 << 32) + 1)], 2, f"'{(1 << 32) + 1}' is not from 1 to 4294967296"),
    ],
)
def test_bad_options(capsys, argv, status, message):
    got_status, out, err = dprintf(capsys, "run", sample("hello.ll"), *argv)
    assert (got_status, out) == (status, "")
    assert message in err and "Traceback" not in err


def test_a_device_that_is_not_available_is_an_error(capsys, monkeypatch):
    monkeypatch.setitem(
        harness.DEVICES, "nvptx", lambda: importlib.import_module("lowering.no_such_device_module")
    )
    status, out, err = dprintf(capsys, "run", sample("hello.ll"), "--device", "nvptx")
    assert (status, out) == (1, "")
    assert err == "error: no nvptx device is available: this installation has no support for it\n"


def test_the_program_can_come_from_stdin(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(Path(sample("hello.ll")).read_bytes())))
    status, out, err = dprintf(capsys, "run", "-", "--invocations", "2")
    assert (status, out, err) == (0, "Hello from invocation 0!\nHello from invocation 1!\n", "")


def test_a_missing_file_is_an_error(capsys, tmp_path):
    status, out, err = dprintf(capsys, "run", str(tmp_path / "absent.ll"))
    assert (status, out) == (1, "")
    assert err.startswith(f"error: cannot read {tmp_path / 'absent.ll'}: ")


@pytest.mark.parametrize("command", ["run", "profile"])
def test_a_nul_byte_in_the_program_is_an_error_naming_its_line(capsys, tmp_path, command):
    """LLVM reads the text up to the byte: the entry after it was silently gone."""
    text = Path(sample("hello.ll")).read_text().replace("define", "\0define", 1)
    path = tmp_path / "nul.ll"
    path.write_text(text)
    status, out, err = dprintf(capsys, command, str(path))
    line = text.count("\n", 0, text.index("\0")) + 1
    assert (status, out) == (1, "")
    assert (
        err == f"error: {path}:{line}:1: invalid IR: a NUL byte, where LLVM would stop reading the module\n"
    )


def test_what_the_device_itself_prints_is_a_warning(capsys, tmp_path):
    program = program_file(tmp_path, "  %said = call i32 @puts(ptr @note)\n  br label %done\n")
    with open(program, "a", encoding="utf-8") as module:
        module.write('@note = private constant [6 x i8] c"hello\\00"\ndeclare i32 @puts(ptr)\n')
    status, out, err = dprintf(capsys, "run", program, "--invocations", "2")
    assert (status, out, err) == (0, "0\n1\n", "warning: the cpu device printed: hello\n")


def test_code_using_a_symbol_defined_nowhere_cannot_run_and_the_error_names_it(capsys, tmp_path):
    program = program_file(
        tmp_path, "  %got = call i32 @dprintf_defined_nowhere(i32 %id)\n  br label %done\n"
    )
    with open(program, "a", encoding="utf-8") as module:
        module.write("declare i32 @dprintf_defined_nowhere(i32)\n")
    status, out, err = dprintf(capsys, "run", program)
    assert (status, out) == (1, "")
    assert err == (
        "error: the cpu device cannot run the lowered code: it uses dprintf_defined_nowhere, defined "
        "neither in the module nor in the process\n"
    )


def test_the_undefined_symbols_read_by_struct_are_those_pyelftools_reads():
    """The worker reads a compiled object's undefined symbols itself (issue 35); pyelftools is the oracle."""
    import llvmlite.binding as llvm

    from lowering.devices import cpu

    module = llvm.parse_assembly(
        'declare i32 @puts(ptr)\ndeclare double @cos(double)\n@text = constant [3 x i8] c"hi\\00"\n'
        "define double @f(double %x) {\n  %said = call i32 @puts(ptr @text)\n"
        "  %y = call double @cos(double %x)\n  ret double %y\n}\n"
    )
    machine = cpu.host_target_machine()
    module.triple = machine.triple
    image = machine.emit_object(module)
    assert (
        cpu._undefined_symbols(image) == cpu._undefined_symbols_read_by_pyelftools(image) >= {"puts", "cos"}
    )


def test_run_starts_its_worker_before_lowering_and_the_device_takes_it(tmp_path):
    """`dprintf run` starts the device's worker as soon as the arguments are read (start-up, #11), forked
    from the command, which has one thread then (#35)."""
    from lowering.devices import worker as device_worker

    hello = Path(__file__).resolve().parents[1] / "samples" / "hello.ll"
    probe = (
        "import sys, lowering.devices.worker as w\n"
        "import lowering.cli.main as cli\n"
        "started = []\n"
        "original = w.Worker.__init__\n"
        "def counting(self, module, fork=False):\n"
        "    started.append((module, fork))\n"
        "    original(self, module, fork)\n"
        "w.Worker.__init__ = counting\n"
        f"status = cli.main(['run', {str(hello)!r}])\n"
        "print(status, started, sorted(w._PRESTARTED))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines()[-1] == "0 [('lowering.devices.cpu', True)] []"  # one, forked, taken
    assert device_worker.take_prestarted("lowering.devices.cpu") is None


def test_a_worker_forked_from_a_process_that_imported_its_module_says_nothing_of_it(capsys):
    """A forked worker runs its module as `__main__` afresh, without runpy's warning of a module found
    imported (which the run would report as the device's output)."""
    importlib.import_module("lowering.devices.cpu")
    status, out, err = dprintf(capsys, "run", str(SAMPLES / "hello.ll"))
    assert (status, out, err) == (0, "Hello from invocation 0!\n", "")


def test_a_worker_no_run_takes_ends_with_the_command(tmp_path):
    probe = (
        "import lowering.devices.worker as w\n"
        "import lowering.cli.main as cli\n"
        f"status = cli.main(['run', {str(tmp_path / 'missing.ll')!r}])\n"
        "print(status, w._PRESTARTED['lowering.devices.cpu'].process.pid)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    status, pid = done.stdout.split()
    assert status == "1"
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid), 0)
