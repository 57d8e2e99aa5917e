"""The driver side stands alone: `metadata` imports and decodes with llvmlite unavailable."""

import subprocess
import sys
import textwrap

DRIVER = textwrap.dedent(
    """
    import sys

    class NoLlvmlite:
        def find_spec(self, name, path=None, target=None):
            if name == "llvmlite" or name.startswith(("llvmlite.", "lowering")):
                raise ImportError(f"{name} is blocked in this test")

    sys.meta_path.insert(0, NoLlvmlite())
    import metadata
    from metadata.decoding.buffer_builder import build_printf_buffer
    from metadata.layout import parse_layout

    entry = metadata.FormatEntry.for_call("id %u: %v2f\\n", parse_layout("i32,v2f32"))
    registry = metadata.FormatRegistry()
    registry.load_elf(metadata.note_only_elf(metadata.FormatTable([entry]).encode()), "driver.elf")
    buffer = build_printf_buffer([(entry, [7, (0.5, -2.0)])], capacity=64)
    sys.stdout.write(metadata.decode_printf_buffer(buffer, registry).text())
    """
)


def test_metadata_decodes_without_llvmlite() -> None:
    result = subprocess.run([sys.executable, "-c", DRIVER], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "id 7: 0.500000, -2.000000\n"


def test_one_module_of_metadata_imports_alone() -> None:
    """`metadata` imports its modules on first use: the errors do not bring numpy, msgpack or pyelftools."""
    probe = "import sys, metadata.errors; print(sorted({'numpy', 'msgpack', 'elftools'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"
    names = "import metadata; print(metadata.FormatRegistry.__module__, 'FormatRegistry' in dir(metadata))"
    result = subprocess.run([sys.executable, "-c", names], capture_output=True, text=True, check=False)
    assert result.stdout == "metadata.linking True\n"


def test_dir_of_metadata_is_its_public_api() -> None:
    probe = (
        "import metadata, metadata.decoding.render_pool; metadata.FormatRegistry; "
        "print(dir(metadata) == metadata.__all__ == sorted(metadata.__all__), "
        "[name for name in ('importlib', 'Any') if hasattr(metadata, name)])"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert result.stdout == "True []\n", result.stderr


PROFILE_DRIVER = DRIVER.split("import metadata\n")[0] + textwrap.dedent(
    """
    import metadata
    from metadata.instrumentation.table import BlockInfo

    table = metadata.InstrumentationTable(
        (BlockInfo(0, "main", "entry", "a.c:1", 1, 1, (1, 3, 1, 0, 0, 0, 0, 1, 0)),)
    )
    profile = metadata.Profile.from_buffer(table, table.buffer([5]))
    page = metadata.html_page(profile, [profile.source_listing("a.c", "x = y;\\n")])
    values = metadata.arm_values(profile)
    print(profile.counts, len(values), "a.c" in page, "instructions" in profile.report())
    """
)


def test_profiles_read_without_llvmlite() -> None:
    """The instrumentation side of the driver (SPEC 10) needs no llvmlite either."""
    result = subprocess.run(
        [sys.executable, "-c", PROFILE_DRIVER], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"(5,) {16 + 8 * 9} True True\n"
