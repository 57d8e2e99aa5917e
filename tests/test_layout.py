"""The house rules of the code's layout (docs/architecture.md): each room of `lowering/` imports only
from its own room or the rooms below it, `metadata/` never imports `lowering/` or llvmlite, and no
function or class is longer than a reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Lowest first: a module may import from its own room and the rooms before it.
ROOMS = ("ir", "targets", "lowered_module", "passes", "pipeline", "codegen", "devices", "cli")
LONGEST = 165  # lines of a function or class: "about 150"


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import of `path`, relative ones resolved."""
    package = _dotted(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((node.lineno, module))
    return found


def _room(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "lowering" or len(parts) < 2:
        return None
    return ROOMS.index(parts[1])


@pytest.mark.parametrize("path", _modules("lowering"), ids=lambda path: str(path.relative_to(ROOT)))
def test_lowering_imports_only_its_room_or_lower(path: Path) -> None:
    here = _room(_dotted(path))
    upward = [
        f"line {line}: {module}"
        for line, module in _imports(path)
        if here is not None and (room := _room(module)) is not None and room > here
    ]
    assert not upward, f"{path.name} ({ROOMS[here]}) imports a higher room: {upward}"


@pytest.mark.parametrize("path", _modules("metadata"), ids=lambda path: str(path.relative_to(ROOT)))
def test_metadata_imports_neither_lowering_nor_llvmlite(path: Path) -> None:
    bad = [module for _, module in _imports(path) if module.split(".")[0] in ("lowering", "llvmlite")]
    assert not bad


@pytest.mark.parametrize(
    "path", _modules("lowering") + _modules("metadata"), ids=lambda path: str(path.relative_to(ROOT))
)
def test_no_function_or_class_is_longer_than_a_screenful_or_three(path: Path) -> None:
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > LONGEST
    ]
    assert not long


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """The checks above find an upward import and a long function when there is one."""
    assert _room("lowering.cli.main") > _room("lowering.devices.harness") > _room("lowering.ir.module")
    source = "def f():\n" + "    x = 1\n" * LONGEST
    node = ast.parse(source).body[0]
    assert node.end_lineno - node.lineno + 1 > LONGEST
