"""`dprintf link` and the check tables (issue 33, item 11): validation sites linked as their IDs are
(nothing renumbered), the races and instrumentation tables of the one input that has each, and an
error naming both inputs where two have different ones; `decode --races-shadow` given one shadow twice
reads it once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.elf_notes import read_document, read_table, with_table
from metadata.instrumentation.table import INSTRUMENTATION_KEY
from metadata.races.table import RACES_KEY
from metadata.validation.table import VALIDATION_KEY

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
BOUNDS = (SAMPLES / "out_of_bounds.ll").read_text()
OTHER_BOUNDS = BOUNDS.replace("%out", "%dst")  # other sites (their buffer's name): other IDs


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def compiled(directory: Path, name: str, text: str, *options: str) -> Path:
    source, elf = directory / f"{name}.ll", directory / f"{name}.o"
    source.write_text(text)
    assert main(["compile", str(source), "--target", "cpu", *options, "-o", str(elf)]) == 0
    return elf


@pytest.fixture(scope="module")
def shaders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ELFs: two validated shaders (`a`, `b`, with the printf dump of b's run), the races sample
    (`races`, with its shadow) and its fixed entry's, instrumented ones."""
    directory = tmp_path_factory.mktemp("shaders")
    races = (SAMPLES / "races.ll").read_text()
    found = {
        "a": compiled(directory, "a", BOUNDS, "--validate"),
        "b": compiled(directory, "b", OTHER_BOUNDS, "--validate"),
        "races": compiled(directory, "races", races, "--races"),
        "other_races": compiled(directory, "other_races", races.replace("%partial", "%sums"), "--races"),
        "counted": compiled(directory, "counted", BOUNDS, "--instrument"),
        "other_counted": compiled(directory, "other_counted", races, "--instrument"),
    }
    run = run_sources(
        [Source("b.ll", OTHER_BOUNDS)], invocations=32, data_buffers=[bytes(4096)], validate=True
    )
    found["b_dump"] = directory / "b.printf.bin"
    found["b_dump"].write_bytes(bytes(run.printf_buffer))
    run = run_sources([Source("races.ll", races)], invocations=256, data_buffers=[bytes(256)], races=True)
    found["shadow"] = directory / "races0.bin"
    found["shadow"].write_bytes(bytes(run.parts["races"].shadows[0]))
    return found


def test_linked_validation_sites_report_the_second_inputs_dump(shaders, tmp_path, capsys):
    linked = tmp_path / "linked.o"
    status, _, err = cli(capsys, "link", str(shaders["a"]), str(shaders["b"]), "-o", str(linked))
    assert status == 0
    assert err == (
        f"warning: {shaders['a']} and {shaders['b']} name their data buffers differently (%out and %dst): "
        "the linked table names them by position from the first difference on\n"
    )
    sites = read_document(linked.read_bytes())[VALIDATION_KEY][".sites"]
    assert [(site[".kind"], site[".buffer"][1]) for site in sites] == [
        ("store", "%out"),
        ("load", "%out"),
        ("store", "%dst"),
        ("load", "%dst"),
    ]
    status, out, err = cli(capsys, "decode", str(shaders["b_dump"]), "--elf", str(linked))
    assert status == 4 and "invocation 31 read 0\n" in out
    assert [line.split(" at offsets")[0] for line in err.splitlines()] == [
        "error: out-of-bounds store of 4 bytes to buffer 0 (%dst, 4096 bytes)",
        "error: out-of-bounds load of 4 bytes from buffer 0 (%dst, 4096 bytes)",
    ]


def test_two_validation_sites_with_one_id_are_an_error_naming_both_inputs(shaders, tmp_path, capsys):
    image = shaders["a"].read_bytes()
    table = read_document(image)[VALIDATION_KEY]
    table[".sites"][0][".kind"] = "atomic"
    clash = tmp_path / "clash.o"
    clash.write_bytes(with_table(image, read_table(image), document={VALIDATION_KEY: table}))
    linked = tmp_path / "linked.o"
    status, _, err = cli(capsys, "link", str(shaders["a"]), str(clash), "-o", str(linked))
    assert status == 1 and not linked.exists()
    assert err == (
        f"error: validation site ID {table['.sites'][0]['.index']:#014x} is the store in @main at "
        f"bounds.c:4:18 of {shaders['a']} and the atomic in @main at bounds.c:4:18 of {clash}\n"
    )


def test_the_races_table_of_the_one_input_that_has_it_is_linked(shaders, tmp_path, capsys):
    linked = tmp_path / "linked.o"
    assert cli(capsys, "link", str(shaders["a"]), str(shaders["races"]), "-o", str(linked)) == (0, "", "")
    document = read_document(linked.read_bytes())
    assert document[RACES_KEY] == read_document(shaders["races"].read_bytes())[RACES_KEY]
    assert VALIDATION_KEY in document
    status, _, err = cli(capsys, "decode", "--races-shadow", str(shaders["shadow"]), "--elf", str(linked))
    assert status == 4 and err.startswith("error: write-racing-write on buffer 0 (%partial, 256 bytes)")


def test_one_races_table_given_twice_is_linked_once(shaders, tmp_path, capsys):
    linked = tmp_path / "linked.o"
    assert cli(capsys, "link", str(shaders["races"]), str(shaders["races"]), "-o", str(linked))[0] == 0
    assert (
        read_document(linked.read_bytes())[RACES_KEY]
        == read_document(shaders["races"].read_bytes())[RACES_KEY]
    )


@pytest.mark.parametrize(
    ("first", "second", "key"),
    [("races", "other_races", RACES_KEY), ("counted", "other_counted", INSTRUMENTATION_KEY)],
)
def test_two_tables_one_elf_holds_one_of_are_an_error_naming_both(
    shaders, tmp_path, capsys, first, second, key
):
    linked = tmp_path / "linked.o"
    status, out, err = cli(capsys, "link", str(shaders[first]), str(shaders[second]), "-o", str(linked))
    assert (status, out) == (1, "") and not linked.exists()
    assert err.startswith(
        f"error: {shaders[first]} and {shaders[second]} have different {key} tables, and one ELF holds one: "
    )
    assert err.endswith("decode each shader's dumps with its own ELF\n")


@pytest.mark.parametrize("again", ["same path", "other path", "directory", "copy"])
def test_a_shadow_given_twice_is_read_once(shaders, tmp_path, capsys, again):
    shadow = shaders["shadow"]
    other = {
        "same path": str(shadow),
        "other path": f"{shadow.parent}/./{shadow.name}",
        "directory": str(shadow.parent),
        "copy": str(shutil.copy(shadow, tmp_path / "copy.bin")),
    }[again]
    status, out, err = cli(
        capsys,
        "decode",
        "--races-shadow",
        str(shadow),
        "--races-shadow",
        other,
        "--elf",
        str(shaders["races"]),
    )
    assert status == 4 and out == ""
    lines = err.splitlines()
    same = "a copy of" if again == "copy" else "the same file as"
    repeated = str(shadow) if again == "directory" else other
    assert lines[0] == f"warning: --races-shadow {repeated} is {same} {shadow}: read once"
    assert [line.split(" at offsets")[0] for line in lines[1:]] == [
        "error: write-racing-write on buffer 0 (%partial, 256 bytes)",
        "error: read-racing-write on buffer 0 (%partial, 256 bytes)",
    ]
    status, out, _ = cli(
        capsys,
        "decode",
        "--races-shadow",
        str(shadow),
        "--races-shadow",
        other,
        "--elf",
        str(shaders["races"]),
        "--json",
    )
    assert len(json.loads(out)["races"]) == 2


def test_decode_warns_of_two_sites_with_one_id_in_two_elves(shaders, tmp_path, capsys):
    image = shaders["b"].read_bytes()
    table = read_document(image)[VALIDATION_KEY]
    table[".sites"][0][".kind"] = "atomic"
    clash = tmp_path / "clash.o"
    clash.write_bytes(with_table(image, read_table(image), document={VALIDATION_KEY: table}))
    status, _, err = cli(
        capsys, "decode", str(shaders["b_dump"]), "--elf", str(shaders["b"]), "--elf", str(clash)
    )
    assert status == 4
    assert err.startswith(
        f"warning: validation site ID {table['.sites'][0]['.index']:#014x} is the store in @main at "
        f"bounds.c:4:18 of {shaders['b']} and the atomic in @main at bounds.c:4:18 of {clash}: "
        "keeping the first\n"
    )
    assert "error: out-of-bounds store of 4 bytes to buffer 0 (%dst, 4096 bytes)" in err
