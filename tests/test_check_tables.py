"""The check tables of another writer or a damaged file (`amdpal.validation`, `amdpal.races`): `decode`
warns for each row it cannot use and reports with the rest, or says why the table cannot be used at
all; never a traceback. Each case is a crash `tests/benchmarks/fuzz_cli.py` found in the tables of a
real ELF (`compile --validate=all`, `compile --races`), decoded with the dumps of the sample's run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.elf_notes import read_document, read_table, with_table
from metadata.races.table import RACES_KEY, RaceTable
from metadata.validation.table import VALIDATION_KEY

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
Mutation = Callable[[dict[str, Any]], None]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def validation_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The ELF of samples/out_of_bounds.ll with `--validate=all` and the printf dump of its run."""
    directory = tmp_path_factory.mktemp("validation")
    sample = SAMPLES / "out_of_bounds.ll"
    elf, dump = directory / "shader.o", directory / "printf.bin"
    assert main(["compile", str(sample), "--target", "cpu", "--validate=all", "-o", str(elf)]) == 0
    result = run_sources(
        [Source(sample.name, sample.read_text())], invocations=32, data_buffers=[bytes(4096)], validate="all"
    )
    dump.write_bytes(bytes(result.printf_buffer))
    return elf, dump


@pytest.fixture(scope="module")
def races_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The ELF of samples/races.ll with `--races` and the shadow of its run."""
    directory = tmp_path_factory.mktemp("races")
    sample = SAMPLES / "races.ll"
    elf, shadow = directory / "shader.o", directory / "races0.bin"
    assert main(["compile", str(sample), "--target", "cpu", "--races", "-o", str(elf)]) == 0
    result = run_sources(
        [Source(sample.name, sample.read_text())], invocations=256, data_buffers=[bytes(256)], races=True
    )
    shadow.write_bytes(bytes(result.parts["races"].shadows[0]))
    return elf, shadow


def mutated(elf: Path, key: str, mutation: Mutation, name: str = "mutated.o") -> Path:
    """A copy of `elf` beside it whose `key` table `mutation` changed."""
    image = elf.read_bytes()
    table = read_document(image)[key]
    mutation(table)
    path = elf.with_name(name)
    path.write_bytes(with_table(image, read_table(image), document={key: table}))
    return path


def _site(number: int, key: str, value: Any = None, *, drop: bool = False) -> Mutation:
    def change(table: dict[str, Any]) -> None:
        if drop:
            del table[".sites"][number][key]
        else:
            table[".sites"][number][key] = value

    return change


def _set(key: str, value: Any) -> Mutation:
    def change(table: dict[str, Any]) -> None:
        table[key] = value

    return change


UNUSABLE_SITES = {  # a mutation of the store's site (the first), and what the warning says of it
    "no .kind": (_site(0, ".kind", drop=True), "it has no .kind"),
    "no .index": (_site(0, ".index", drop=True), "it has no .index"),
    "no .bytes": (_site(0, ".bytes", drop=True), "it has no .bytes"),
    "no .function": (_site(0, ".function", drop=True), "it has no .function"),
    "no .buffer": (_site(0, ".buffer", drop=True), "it has no .buffer"),
    ".buffer of one item": (_site(0, ".buffer", [0]), "its .buffer is [0], not [position, IR name]"),
    ".buffer of three": (
        _site(0, ".buffer", [0, "%out", 1]),
        "its .buffer is [0, '%out', 1], not [position, IR name]",
    ),
    ".buffer a number": (_site(0, ".buffer", 0), "its .buffer is 0, not [position, IR name]"),
    ".check unknown": (
        _site(0, ".check", "%out"),
        "its .check is '%out', not one of bounds, range, ub, init",
    ),
    ".check a list": (
        _site(0, ".check", ["bounds"]),
        "its .check is ['bounds'], not one of bounds, range, ub, init",
    ),
    ".index text": (_site(0, ".index", "1"), "its .index is '1', not a 48-bit ID"),
    ".index past 48 bits": (_site(0, ".index", 1 << 48), "its .index is 281474976710656, not a 48-bit ID"),
    ".index below 0": (_site(0, ".index", -(1 << 63)), "its .index is -9223372036854775808, not a 48-bit ID"),
    ".index a list": (_site(0, ".index", [1]), "its .index is [1], not a 48-bit ID"),
    ".kind a map": (_site(0, ".kind", {"x": 1}), "its .kind is {'x': 1}, not a string"),
    ".source a map": (_site(0, ".source", {"x": 1}), "its .source is {'x': 1}, not a string"),
    ".function bytes": (_site(0, ".function", b"\xff\x00"), "its .function is b'\\xff\\x00', not a string"),
    ".bytes a float": (_site(0, ".bytes", 1.5), "its .bytes is 1.5, not a size in bytes or nil"),
    "a row not a map": (lambda table: table[".sites"].__setitem__(0, 7), "it is 7, not a map"),
}


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", UNUSABLE_SITES)
def test_a_validation_site_that_cannot_be_used_is_a_warning_and_the_rest_report(
    validation_run, capsys, case, json_output
):
    elf, dump = validation_run
    mutation, reason = UNUSABLE_SITES[case]
    broken = mutated(elf, VALIDATION_KEY, mutation)
    status, out, err = cli(capsys, "decode", str(dump), "--elf", str(broken), *(["--json"] * json_output))
    assert status == 4 and "Traceback" not in err
    warning = f"{broken}: {VALIDATION_KEY} .sites[0] is not used: "
    if json_output:
        document = json.loads(out)
        assert [message for message in document["warnings"] if message.startswith(warning)] == [
            warning + reason
        ]
        assert [site["kind"] for site in document["validation"]] == ["load"]
        return
    assert f"warning: {warning}{reason}\n" in err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: out-of-bounds load of 4 bytes from buffer 0")
    assert "invocation 0 read 0\n" in out


def test_a_site_without_kind_in_an_elf_given_no_other_flag_is_a_warning(validation_run, capsys):
    elf, dump = validation_run
    broken = mutated(elf, VALIDATION_KEY, _site(1, ".kind", drop=True))
    status, _, err = cli(capsys, "decode", str(dump), "--elf", str(broken))
    assert status == 4
    assert f"warning: {broken}: {VALIDATION_KEY} .sites[1] is not used: it has no .kind\n" in err
    assert "error: out-of-bounds store of 4 bytes to buffer 0" in err


def test_a_second_site_with_an_earlier_ones_id_is_a_warning(validation_run, capsys):
    elf, dump = validation_run
    table = read_document(elf.read_bytes())[VALIDATION_KEY]
    broken = mutated(elf, VALIDATION_KEY, _site(1, ".index", table[".sites"][0][".index"]))
    status, _, err = cli(capsys, "decode", str(dump), "--elf", str(broken))
    assert status == 4
    assert (
        f"warning: {broken}: {VALIDATION_KEY} .sites[1] is not used: "
        f"its ID {table['.sites'][0]['.index']:#014x} is an earlier site's, which is kept\n"
    ) in err
    assert "error: out-of-bounds store of 4 bytes to buffer 0" in err


def test_an_unchecked_row_that_cannot_be_used_is_a_warning(validation_run, capsys):
    elf, dump = validation_run
    broken = mutated(elf, VALIDATION_KEY, _set(".unchecked", [{".function": "f"}, 3]))
    status, _, err = cli(capsys, "decode", str(dump), "--elf", str(broken))
    assert status == 4
    assert f"warning: {broken}: {VALIDATION_KEY} .unchecked[0] is not used: it has no .count\n" in err
    assert f"warning: {broken}: {VALIDATION_KEY} .unchecked[1] is not used: it is 3, not a map\n" in err


@pytest.mark.parametrize(
    ("mutation", "reason"),
    [
        (_set(".sites", 3), "cannot be used: its .sites is 3, not a list"),
        (_set(".sites", None), "cannot be used: its .sites is None, not a list"),
        (_set(".unchecked", 3), "cannot be used: its .unchecked is 3, not a list"),
        (_set(".checks", [["bounds"]]), "cannot be used: its .checks is [['bounds']], not a list of strings"),
        (_set(".checks", 3), "cannot be used: its .checks is 3, not a list of strings"),
        (_set(".buffers", [b"\xff"]), "cannot be used: its .buffers is [b'\\xff'], not a list of strings"),
        (_set(".removed", -1), "cannot be used: its .removed is -1, not a count"),
        (_set(".version", 2), "is not a map of .version 1"),
        (_set(".version", True), "is not a map of .version 1"),
    ],
)
def test_a_validation_table_that_cannot_be_used_is_an_error_naming_the_file(
    validation_run, capsys, mutation, reason
):
    elf, dump = validation_run
    broken = mutated(elf, VALIDATION_KEY, mutation)
    status, out, err = cli(capsys, "decode", str(dump), "--elf", str(broken))
    assert (status, out) == (1, "")
    assert err == f"error: {broken}: {VALIDATION_KEY} {reason}\n"


RACE_SITES = {  # a mutation of the store's site (number 1), and what the warning says of it
    ".kind a list": (_site(1, ".kind", ["store"]), "its .kind is ['store'], not a string"),
    "no .kind": (_site(1, ".kind", drop=True), "it has no .kind"),
    "no .access": (_site(1, ".access", drop=True), "it has no .access"),
    ".access unknown": (_site(1, ".access", "x"), "its .access is 'x', not one of write, read, atomic"),
    ".bytes not a number": (
        _site(1, ".bytes", float("nan")),
        "its .bytes is nan, not a size in bytes or nil",
    ),
    ".index past the site bits": (
        _site(1, ".index", 9),
        "its .index 9 does not fit the table's 2 .site_bits",
    ),
}


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", RACE_SITES)
def test_a_race_site_that_cannot_be_used_is_a_warning_and_its_races_are_reported(
    races_run, capsys, case, json_output
):
    elf, shadow = races_run
    mutation, reason = RACE_SITES[case]
    broken = mutated(elf, RACES_KEY, mutation)
    status, out, err = cli(
        capsys, "decode", "--races-shadow", str(shadow), "--elf", str(broken), *(["--json"] * json_output)
    )
    assert status == 4 and "Traceback" not in err
    warning = f"{broken}: {RACES_KEY} .sites[1] is not used: {reason}"
    unknown = f"site 1 (not described by the {RACES_KEY} table)"
    if json_output:
        document = json.loads(out)
        assert warning in document["warnings"]
        race = document["races"][0]
        assert race["second"] == {**race["second"], "site": 1, "kind": None, "function": None}
        assert unknown in race["message"] and race["buffer_name"] == "%partial"
        return
    assert f"warning: {warning}\n" in err
    assert (
        "error: read-racing-write on buffer 0 (%partial, 256 bytes) at offsets 0..252: load in @main at "
        f"races.c:5:20 (invocation 0) and {unknown} (invocation 192): 64 words\n"
    ) in err


@pytest.mark.parametrize(
    ("mutation", "reason"),
    [
        (_set(".site_bits", 1 << 40), "cannot be used: its .site_bits is 1099511627776, not 0 to 31"),
        (_set(".site_bits", "2"), "cannot be used: its .site_bits is '2', not 0 to 31"),
        (_set(".sites", {}), "cannot be used: its .sites is {}, not a list"),
        (_set(".version", None), "is not a map of .version 1"),
    ],
)
def test_a_races_table_that_cannot_be_used_is_an_error_naming_the_file(races_run, capsys, mutation, reason):
    elf, shadow = races_run
    broken = mutated(elf, RACES_KEY, mutation)
    status, out, err = cli(capsys, "decode", "--races-shadow", str(shadow), "--elf", str(broken))
    assert (status, out) == (1, "")
    assert err == f"error: {broken}: {RACES_KEY} {reason}\n"


def test_a_race_buffer_that_cannot_be_used_is_a_warning(races_run, capsys):
    elf, shadow = races_run
    broken = mutated(elf, RACES_KEY, lambda table: table[".buffers"].append({".buffer": 1, ".classes": []}))
    status, _, err = cli(capsys, "decode", "--races-shadow", str(shadow), "--elf", str(broken))
    assert status == 4
    assert (
        f"warning: {broken}: {RACES_KEY} .buffers[1] is not used (no shadow of it can be read): "
        "it has no .name\n"
    ) in err


def test_the_warnings_come_before_the_error_of_a_shadow_the_table_left_out(races_run, capsys):
    elf, shadow = races_run
    broken = mutated(elf, RACES_KEY, lambda table: table[".buffers"][0].pop(".name"))
    status, _, err = cli(capsys, "decode", "--races-shadow", str(shadow), "--elf", str(broken))
    assert status == 1
    assert err == (
        f"warning: {broken}: {RACES_KEY} .buffers[0] is not used (no shadow of it can be read): "
        "it has no .name\n"
        f"error: {shadow}: a shadow of buffer 0, which the table records no shadow of\n"
    )


def test_a_race_site_numbered_past_the_rows_is_not_used_nor_the_numbers_between(races_run):
    document = read_document(races_run[0].read_bytes())
    table = document[RACES_KEY]
    table[".site_bits"] = 31
    table[".sites"][1][".index"] = (1 << 31) - 1  # 2^31 sites would be numbered, were the rows not the limit
    read = RaceTable.from_document(document)
    assert read is not None and len(read.sites) == 3 and not read.sites[1].described
    assert read.warnings == (
        f"{RACES_KEY} .sites[1] is not used: its .index 2147483647 does not fit its 3 rows",
    )
