"""The entries' JSON rendered many at a time (`json_entries`, `PrintfDecoding.json_chunks`) is, byte for
byte, what `json.dumps` writes of each entry's map, built entry by entry (the way `--json` was written
before it was rendered by columns): on every sample, on random formats and values (floats non-finite
and of both zeros, integers of every width, vectors, `%c` of any byte, literals that JSON escapes), in
blocks and interleaved, here and in a pool."""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lowering.devices.harness import run_sources
from lowering.lowered_module import Source
from metadata.decoding import printf_buffer
from metadata.decoding.buffer_builder import build_printf_buffer
from metadata.decoding.column_render import CELLS_TIER, render_tier
from metadata.decoding.json_entries import DOCUMENT_TERMINATOR, LINE_TERMINATOR, json_plan, json_values
from metadata.decoding.printf_buffer import decode_printf_buffer
from metadata.decoding.render_pool import RenderPool
from metadata.format_catalog import FormatCatalog
from metadata.formats import FLOAT_CONVERSIONS
from metadata.layout import FLOAT, INTEGER, VECTOR_WIDTHS, ArgType
from metadata.table import FormatEntry, FormatTable

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "samples").glob("*.ll"))
# The samples whose entry takes a data buffer, and those that show a class of checks (run with it: the
# undefined behaviour sample divides by zero, which traps on the cpu without its check).
TAKE_A_BUFFER = ("out_of_bounds.ll", "races.ll", "uninitialised_reads.ll")
VALIDATES = {"out_of_bounds.ll": True, "undefined_behaviour.ll": "ub", "uninitialised_reads.ll": "init"}
TERMINATORS = [DOCUMENT_TERMINATOR, LINE_TERMINATOR]


def entry_by_entry(decoding, terminator: str) -> str:
    """Each entry's map as `json.dumps` writes it, then `terminator`: the reference."""
    return "".join(
        json.dumps(
            {
                "offset": entry.offset,
                "id": entry.id,
                "format": entry.format,
                "values": json_values(entry.values),
                "text": entry.text,
            },
            allow_nan=False,
        )
        + terminator
        for entry in decoding.entries
    )


def rendered(decoding, terminator: str, **options) -> str:
    return b"".join(decoding.json_chunks(terminator, **options)).decode("ascii")


@pytest.mark.parametrize("terminator", TERMINATORS)
@pytest.mark.parametrize("sample", SAMPLES, ids=[path.name for path in SAMPLES])
def test_each_samples_entries_render_as_json_dumps_writes_them(sample, terminator):
    validates = VALIDATES.get(sample.name, False)
    result = run_sources(
        [Source(str(sample), sample.read_text())],
        invocations=37,
        data_buffers=[bytes(4096)] if sample.name in TAKE_A_BUFFER else (),
        validate=validates,
    )
    assert rendered(result.printf, terminator) == entry_by_entry(result.printf, terminator)


# Random formats: conversions of every kind between literals that JSON escapes.

LITERALS = st.text(st.sampled_from('ab "\\/\n\t\x01\x7f%é€\U0001f600'), max_size=4).map(
    lambda text: text.replace("%", "%%")
)


@st.composite
def conversions(draw: st.DrawFn) -> tuple[str, ArgType]:
    """A conversion and the argument it takes."""
    letter = draw(st.sampled_from("diouxXcfFeEgGaA"))
    vector = 0 if letter == "c" else draw(st.sampled_from([0, 0, *VECTOR_WIDTHS]))
    if letter in FLOAT_CONVERSIONS:
        length, arg = "", ArgType(FLOAT, draw(st.sampled_from([32, 64])), vector)
    else:
        length = "" if letter == "c" else draw(st.sampled_from(["", "hh", "h", "ll"]))
        arg = ArgType(INTEGER, 64 if length == "ll" else 32, vector)
    flags = "".join(draw(st.lists(st.sampled_from("-+ #0"), max_size=3)))
    width = draw(st.sampled_from(["", "1", "7", "20"]))
    precision = draw(st.sampled_from(["", ".", ".0", ".3", ".17"]))
    lanes = f"v{vector}" if vector else ""
    return f"%{flags}{width}{precision}{lanes}{length}{letter}", arg


def component(arg: ArgType) -> st.SearchStrategy:
    if arg.kind == INTEGER:
        return st.integers(0, (1 << arg.bits) - 1)
    special = [
        0.0,
        -0.0,
        1.0,
        -2.5,
        float("nan"),
        float("inf"),
        float("-inf"),
        3e38 if arg.bits == 32 else 1e300,
    ]
    return st.one_of(st.floats(width=arg.bits), st.sampled_from(special))


@st.composite
def formats_and_calls(draw: st.DrawFn) -> tuple[list[FormatEntry], list[tuple[FormatEntry, list]]]:
    """One to three formats and a buffer's worth of calls of them."""
    entries = []
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.lists(conversions(), max_size=3))
        text = draw(LITERALS) + "".join(spec + draw(LITERALS) for spec, _ in parts)
        entries.append(FormatEntry.for_call(text, tuple(arg for _, arg in parts)))
    calls = []
    for _ in range(draw(st.integers(0, 12))):
        entry = draw(st.sampled_from(entries))
        values = [
            tuple(draw(component(arg)) for _ in range(arg.vector)) if arg.vector else draw(component(arg))
            for arg in entry.layout
        ]
        calls.append((entry, values))
    return entries, calls


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(formats_and_calls(), st.sampled_from(TERMINATORS), st.sampled_from([1, 2, 1 << 10]))
def test_random_formats_and_values_render_as_json_dumps_writes_them(monkeypatch, case, terminator, block):
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", block)
    entries, calls = case
    table = FormatTable(list({entry.index: entry for entry in entries}.values()))
    decoding = decode_printf_buffer(build_printf_buffer(calls), table)
    assert rendered(decoding, terminator, chunk_entries=5) == entry_by_entry(decoding, terminator)


def test_json_rendered_by_a_pool_is_the_json_rendered_here(monkeypatch):
    """Blocks and interleaved pieces of several formats (floats, vectors, `%c`), through the shared file
    of columns in rendering processes started once."""
    monkeypatch.setattr(printf_buffer, "TEXT_BLOCK_ENTRIES", 8)
    monkeypatch.setattr(printf_buffer, "POOL_MIN_SECONDS", 0)  # even outputs this small
    plain = FormatEntry.for_call("a %u\n", (ArgType(INTEGER, 32),))
    floats = FormatEntry.for_call('b "%g" %v2f\n', (ArgType(FLOAT, 64), ArgType(FLOAT, 32, 2)))
    chars = FormatEntry.for_call("c %c %lld\n", (ArgType(INTEGER, 32), ArgType(INTEGER, 64)))
    calls = []
    for n in range(3000):
        calls.append((plain, [n]))
        if n % 3 == 0:
            calls += [(floats, [n / 7 if n % 5 else float("nan"), (n, -0.0)])] * (1 + n % 11)
        if n % 4 == 0:
            calls.append((chars, [n % 256, -n]))
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable([plain, floats, chars]))
    expected = entry_by_entry(decoding, LINE_TERMINATOR)
    with RenderPool(2) as pool:
        assert rendered(decoding, LINE_TERMINATOR, chunk_entries=500, pool=pool) == expected
        assert rendered(decoding, DOCUMENT_TERMINATOR, pool=pool) == entry_by_entry(decoding, ", ")


def test_an_entry_of_no_arguments_and_of_only_floats():
    bare = FormatEntry.for_call("\\done\n", ())
    floats = FormatEntry.for_call("%e", (ArgType(FLOAT, 32),))
    calls = [(bare, []), (floats, [float("-inf")]), (floats, [-0.0]), (bare, [])]
    decoding = decode_printf_buffer(build_printf_buffer(calls), FormatTable([bare, floats]))
    assert rendered(decoding, LINE_TERMINATOR).splitlines()[:3] == [
        f'{{"offset": 0, "id": {bare.index}, "format": "\\\\done\\n", "values": [], "text": "\\\\done\\n"}}',
        f'{{"offset": 2, "id": {floats.index}, "format": "%e", "values": ["-inf"], "text": "-inf"}}',
        f'{{"offset": 5, "id": {floats.index}, "format": "%e", "values": [-0.0], "text": "-0.000000e+00"}}',
    ]
    assert encode_basestring_ascii("\\done\n") == '"\\\\done\\n"'


def test_an_integer_formats_json_is_one_template_of_byte_cells():
    """What makes `--json` fast: the whole entry of `hello.ll`'s format is one format string of
    conversions the byte cells print, rendered a block of entries at a time."""
    hello = FormatEntry.for_call("Hello from invocation %u!\n", (ArgType(INTEGER, 32),))
    (found,) = FormatCatalog(FormatTable([hello])).formats
    (template,) = json_plan(found, LINE_TERMINATOR).parts
    assert render_tier(template.format) == CELLS_TIER
