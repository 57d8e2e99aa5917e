"""`dprintf --help`, `--version` and usage errors (issue 34, item 5): a flag whose value follows `=` only
reads so in every help, a value given after a space is a usage error that says where it goes, and every
argument has a help text."""

from __future__ import annotations

import argparse
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from dprintf_cli import dprintf

from lowering.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = str(ROOT / "samples" / "out_of_bounds.ll")
LOWERING = ["lower", "compile", "run"]


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (commands,) = (action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return dict(commands.choices)


@pytest.mark.parametrize("command", LOWERING)
def test_a_flag_whose_value_follows_an_equals_sign_shows_it_so(command):
    shown = dprintf(command, "--help").stdout
    usage, _, options = shown.partition("\n\n")
    assert "[--validate[=CLASSES]]" in " ".join(usage.split())
    assert "\n  --validate[=CLASSES]" in options
    assert "--validate [" not in shown


@pytest.mark.parametrize("value", ["ub", "bounds,init", "all"])
@pytest.mark.parametrize("command", LOWERING)
def test_a_class_after_a_space_is_a_usage_error_that_says_where_it_goes(command, value):
    output = ["-o", "/dev/null"] if command == "compile" else []
    done = dprintf(command, "--validate", value, SAMPLE, *output)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"usage: dprintf {command} ")
    assert done.stderr.endswith(
        f"dprintf {command}: error: --validate takes its classes after '=': --validate={value}\n"
    )


def test_a_word_after_the_flag_that_is_no_class_is_the_argument_it_is(tmp_path):
    done = dprintf("lower", "--validate", SAMPLE, "-o", str(tmp_path / "out.ll"))
    assert (done.returncode, done.stderr) == (0, "")


def test_version_is_the_package_s():
    done = dprintf("--version")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"dprintf {importlib.metadata.version('dprintf')}\n"


def test_version_without_the_package_installed_is_the_checkout_s(monkeypatch, capsys):
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (exit_.value.code, capsys.readouterr().out) == (0, f"dprintf {version} (not installed)\n")


def test_version_with_neither_says_it_is_unknown(monkeypatch, tmp_path):
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.setattr(cli, "CHECKOUT_PROJECT", tmp_path / "pyproject.toml")
    assert cli.version() == "version unknown (not installed)"


@pytest.mark.parametrize("command", ["lower", "compile", "inspect", "run", "profile", "decode", "link"])
def test_every_argument_has_a_help_text(command):
    parser = command_parsers()[command]
    unexplained = [action.dest for action in parser._actions if not action.help]
    assert unexplained == []


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        ("lower", "--target"),
        ("lower", "-o"),
        ("compile", "--target"),
        ("run", "--device"),
        ("profile", "--device"),
        ("decode", "BUFFER"),
    ],
)
def test_an_optional_argument_names_its_default(command, flag):
    parser = command_parsers()[command]
    (action,) = (a for a in parser._actions if flag in a.option_strings or a.metavar == flag)
    assert "default" in (action.help or "")
