"""The house rules of the code's layout (docs/architecture.md): each room of `lowering/` imports only
from its own room or the rooms below it (a feature's modules each in the room of its role), the
features' registrations import only their own folders, no pass imports another pass, `metadata/` never
imports `lowering/` or llvmlite, no function or class is longer than a reader can hold, and a feature
is named by at most 3 source files outside its folders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Lowest first: a module may import from its own room and the rooms before it.
ROOMS = (
    "ir",
    "targets",
    "lowered_module",
    "options",
    "services",
    "passes",
    "pipeline",
    "codegen",
    "devices",
    "cli",
)
LONGEST = 165  # lines of a function or class: "about 150"
# A feature's modules (lowering/features/<feature>/) by role: what the harness runs, what a command
# reports; the rest are its passes and the services they share.
FEATURE_ROLES = {"runtime": "devices", "report": "cli", "profile_command": "cli", "profile_output": "cli"}
# Each feature's folders, and the words that name it.
FEATURE_NAMES = {
    "races": r"\braces?\b",
    "validation": r"validat",
    "instrumentation": r"instrument",
    "printf_gates": r"--verbose|only.invocations|max.lines.per.site",
    # Its package and its target-neutral spellings: the launch in workgroups (`--workgroup-size`, a
    # device's workgroup function) is the core's, the barriers and shared memory the feature's.
    "workgroups": r"(?-i:\bWorkgroups\b)|[\"'.]workgroups\b|lgc\.workgroup\.|workgroup_intrinsics",
}
MOST_OUTSIDE = 3


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import of `path` that runs (not those for type checking alone),
    relative ones resolved."""
    package = _dotted(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.append((node.lineno, module))
    return found


def _is_registration(module: str) -> bool:
    """The registry and the contract (`lowering.features`, `.feature`) and each feature's registration."""
    parts = module.split(".")
    return parts[:2] == ["lowering", "features"] and (
        len(parts) == 2 or parts[2] == "feature" or len(parts) == 3
    )


def _room(module: str) -> int | None:
    """The room of a module of `lowering` (None: the registrations, which any room may import)."""
    parts = module.split(".")
    if parts[0] != "lowering" or len(parts) < 2 or _is_registration(module):
        return None
    if parts[1] == "features":
        return ROOMS.index(FEATURE_ROLES.get(parts[3], "passes"))
    return ROOMS.index(parts[1])


def _is_pass(path: Path) -> bool:
    """A pass: a module of `lowering` with a top-level `run(context)`."""
    return any(
        isinstance(node, ast.FunctionDef)
        and node.name == "run"
        and [a.arg for a in node.args.args] == ["context"]
        for node in ast.parse(path.read_text()).body
    )


@pytest.mark.parametrize("path", _modules("lowering"), ids=lambda path: str(path.relative_to(ROOT)))
def test_lowering_imports_only_its_room_or_lower(path: Path) -> None:
    here = _room(_dotted(path))
    upward = [
        f"line {line}: {module}"
        for line, module in _imports(path)
        if here is not None and (room := _room(module)) is not None and room > here
    ]
    assert not upward, f"{path.name} ({ROOMS[here]}) imports a higher room: {upward}"


def test_a_registration_imports_only_the_contract_and_its_own_folder() -> None:
    """At the top, a registration imports the contract and the other registrations; in its hooks,
    its own folder (and whatever `metadata` and the core below the passes offer)."""
    bad = []
    for path in _modules("lowering/features"):
        module = _dotted(path)
        if not _is_registration(module):
            continue
        folder = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for line, imported in _imports(path):
            room = _room(imported)
            if room is not None and room > ROOMS.index("services") and not imported.startswith(folder + "."):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {imported}")
    assert not bad


def test_no_pass_imports_another_pass() -> None:
    passes = {_dotted(path) for path in _modules("lowering") if _is_pass(path)}
    assert "lowering.passes.printf_abort" in passes and "lowering.features.races.recording" in passes
    bad = [
        f"{module}:{line}: {imported}"
        for module in sorted(passes)
        for line, imported in _imports(ROOT / (module.replace(".", "/") + ".py"))
        if imported in passes and imported != module
    ]
    assert not bad


@pytest.mark.parametrize("feature", FEATURE_NAMES)
def test_a_feature_is_named_by_few_files_outside_its_folders(feature: str) -> None:
    """The core's source files that name a feature (the registry among them): at most 3. A feature
    that builds on another (races' sites are validation's, SPEC 12) names it in its own folders."""
    pattern = re.compile(FEATURE_NAMES[feature], re.IGNORECASE)
    inside = [ROOT / "lowering" / "features" / name for name in FEATURE_NAMES]
    inside += [ROOT / "metadata" / name for name in FEATURE_NAMES]
    outside = [
        str(path.relative_to(ROOT))
        for path in _modules("lowering") + _modules("metadata")
        if not any(path.is_relative_to(folder) for folder in inside) and pattern.search(path.read_text())
    ]
    assert len(outside) <= MOST_OUTSIDE, outside


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
    assert _room("lowering.features.races.report") > _room("lowering.features.races.runtime")
    assert _room("lowering.features.races.runtime") > _room("lowering.features.races.recording")
    assert _room("lowering.features.races") is None and _room("lowering.features.feature") is None
    source = "def f():\n" + "    x = 1\n" * LONGEST
    node = ast.parse(source).body[0]
    assert node.end_lineno - node.lineno + 1 > LONGEST
