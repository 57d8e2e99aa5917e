"""`--json` written as a stream and `--json-lines` (#11): the streamed document parses to the document
built whole from the same decoding, on every sample and on damaged buffers, across chunk boundaries; the
lines round-trip to the same entries and summary."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest

from lowering.cli.commands.decode_command import summary
from lowering.cli.commands.run_command import feature_reports
from lowering.cli.main import main
from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.decoding import printf_buffer
from metadata.decoding.buffer_builder import build_printf_buffer
from metadata.decoding.json_entries import json_values
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.elf_notes import note_only_elf
from metadata.layout import parse_layout
from metadata.table import FormatEntry, FormatTable

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "samples").glob("*.ll"))
# The samples whose entry takes a data buffer, and those that show a class of checks (run with it: the
# undefined behaviour sample divides by zero, which traps on the cpu without its check).
TAKE_A_BUFFER = ("out_of_bounds.ll", "races.ll", "uninitialised_reads.ll")
VALIDATES = {"out_of_bounds.ll": True, "undefined_behaviour.ll": "ub", "uninitialised_reads.ll": "init"}
FORMATS = [
    FormatEntry.for_call("a %d\n", parse_layout("i32")),
    FormatEntry.for_call("b %f %v2x\n", parse_layout("f64,v2i32")),
    FormatEntry.for_call("c\n", ()),
]
VALUES = {0: lambda n: [n - 50], 1: lambda n: [n / 7, (n, n + 1)], 2: lambda n: []}


def whole(decoding, document: dict) -> dict:
    """`document` with its entries built whole, as `--json` built it before it streamed."""
    entries = [
        {
            "offset": entry.offset,
            "id": entry.id,
            "format": entry.format,
            "values": json_values(entry.values),
            "text": entry.text,
        }
        for entry in decoding.entries
    ]
    return {**document, "printf": {**document["printf"], "entries": entries}}


def damaged_buffer(seed: int) -> bytes:
    """A buffer of 300 entries with a few dwords overwritten and its tail cut short."""
    generator = random.Random(seed)
    calls = [(FORMATS[n % 3], VALUES[n % 3](n)) for n in range(300)]
    data = bytearray(build_printf_buffer(calls))
    for _ in range(4):
        at = 16 + 4 * generator.randrange((len(data) - 16) // 4)
        data[at : at + 4] = struct.pack("<I", generator.getrandbits(32))
    return bytes(data[: len(data) - 4 * generator.randrange(5)])


@pytest.mark.parametrize("chunk", [3, 1 << 16])
@pytest.mark.parametrize("seed", range(6))
def test_the_streamed_document_of_a_damaged_buffer_is_the_whole_one(
    capsysbinary, monkeypatch, tmp_path, seed, chunk
):
    monkeypatch.setattr(printf_buffer, "TEXT_CHUNK_ENTRIES", chunk)
    dump, elf = tmp_path / "dump.bin", tmp_path / "table.elf"
    dump.write_bytes(damaged_buffer(seed))
    elf.write_bytes(note_only_elf(FormatTable(FORMATS).encode()))
    status = main(["decode", str(dump), "--elf", str(elf), "--json"])
    streamed = json.loads(capsysbinary.readouterr().out)
    decoding = decode_printf_buffer(dump.read_bytes(), FormatTable(FORMATS))
    assert streamed["printf"]["issues"], "the damage is reported"
    assert streamed == whole(decoding, summary(decoding, None, [], status))


@pytest.mark.parametrize("sample", SAMPLES, ids=[path.name for path in SAMPLES])
def test_the_streamed_document_of_each_sample_is_the_whole_one(capsysbinary, sample):
    validates, races = VALIDATES.get(sample.name, False), sample.name == "races.ll"
    takes_buffer = sample.name in TAKE_A_BUFFER
    options = ["--buffer", "4096"] if takes_buffer else []
    if validates:
        options.append(f"--validate={validates}" if isinstance(validates, str) else "--validate")
    options += ["--races"] if races else []
    status = main(["run", str(sample), "--invocations", "4", "--json", *options])
    streamed = json.loads(capsysbinary.readouterr().out)
    result = run_sources(
        [Source(str(sample), sample.read_text())],
        invocations=4,
        data_buffers=[bytes(4096)] if takes_buffer else (),
        validate=validates,
        races=races,
        initialised=[0] if takes_buffer else None,  # `--buffer 4096`: zeros, never written
    )
    found = summary(result.printf, result.abort, result.guard_issues, status, feature_reports(result))
    expected = whole(result.printf, found)
    assert {key: streamed[key] for key in expected} == expected
    printed = streamed["printf"]["entries"] or streamed["abort"] and streamed["abort"]["messages"]
    assert printed or sample.name in ("abort.ll", "races.ll")


def test_json_lines_round_trip_to_the_document(capsysbinary, tmp_path):
    dump, elf = tmp_path / "dump.bin", tmp_path / "table.elf"
    dump.write_bytes(damaged_buffer(1))
    elf.write_bytes(note_only_elf(FormatTable(FORMATS).encode()))
    main(["decode", str(dump), "--elf", str(elf), "--json"])
    document = json.loads(capsysbinary.readouterr().out)
    main(["decode", str(dump), "--elf", str(elf), "--json-lines"])
    *entries, last = capsysbinary.readouterr().out.decode().splitlines()
    assert [json.loads(line) for line in entries] == document["printf"]["entries"]
    printf_figures = {key: value for key, value in document["printf"].items() if key != "entries"}
    assert json.loads(last) == {**document, "printf": printf_figures}


def test_json_and_json_lines_are_not_both_taken(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["decode", "x.bin", "--elf", "y.elf", "--json", "--json-lines"])
    assert ended.value.code == 2 and "not allowed with" in capsys.readouterr().err
