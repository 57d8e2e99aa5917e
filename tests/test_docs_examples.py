"""Every shell example of the README and `docs/` runs here and prints what its page shows, so that the
pages cannot drift from the commands.

An example is a fenced block whose first line is `$ COMMAND`. Each `$ ` line is a command; the lines
after it, up to the next `$ ` line, are what it prints, stdout and stderr together in the order a
terminal shows them; `$ echo $?` shows the exit status of the command before it (a command shown without
one must exit 0). The commands are `dprintf` (this checkout's `python -m lowering.cli`) and
`llvm-readelf-14`; a page's commands run in order, in one directory of its own that holds a copy of
`samples/`, so a page makes the files it uses itself (a `dprintf compile ... -o hello.elf` before a
`dprintf inspect hello.elf`), and a test run alone first runs the commands before it on its page.

The output is compared line by line, and only these few things are forgiven, each written in the page:
- a line `...` stands for any number of lines, none included;
- a line ending in ` ...` is cut short there: the command's line starts with what comes before;
- the output of `--device nvptx` is compared as a multiset of lines: all invocations run at once, so
  their order varies from run to run;
- trailing whitespace, tabs (expanded to 8 columns, as a terminal shows them) and blank lines at the end.

Examples that need what this machine may lack skip, naming it: an NVIDIA GPU (`--device nvptx`) and
`llvm-readelf-14` (Debian's `llvm-14` package).

Three more checks keep the pages honest where they show no session: every link between the pages lands
on a file and a heading that exist; each command's synopsis in docs/command-line.md names every option
its `--help` lists; and a command written inline that runs a sample (`dprintf run samples/abort.ll
--invocations 6` exits 3) exits with the status its sentence gives, 0 when it gives none.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
PROMPT = "$ "
STATUS = "echo $?"
ELIDED = "..."
CUT = " ..."
READELF = "llvm-readelf-14"
COMMANDS = {"dprintf": [sys.executable, "-m", "lowering.cli"], READELF: [READELF]}
SHELL_SYNTAX = re.compile(r"[|<>;&`]")
TIMEOUT = 120
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")
INLINE_SAMPLE = re.compile(r"`(?P<command>dprintf [a-z]+ samples/[^`]*)`(?:\s+exits\s+(?P<status>\d+))?")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-o)\b")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: where its first line is, its info string, its lines (less the
    fence's indentation)."""

    page: Path
    line: int
    info: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    """One command of a page, what the page shows it printing, and the exit status it shows."""

    page: Path
    line: int
    words: tuple[str, ...]
    expected: tuple[str, ...]
    status: int

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}: {shlex.join(self.words)}"

    @property
    def unordered(self) -> bool:
        return "nvptx" in self.words and "--device" in self.words


def fenced_blocks(page: Path) -> tuple[list[Block], list[tuple[int, str]]]:
    """The page's fenced blocks, and its lines outside them (number, text)."""
    blocks, outside = [], []
    lines = page.read_text(encoding="utf-8").splitlines()
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if opening is None:
            outside.append((number + 1, lines[number]))
            number += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body = []
        number += 1
        while number < len(lines) and not lines[number].strip().startswith(fence):
            text = lines[number]
            body.append(text[len(indent) :] if text.startswith(indent) else text.lstrip())
            number += 1
        start = number - len(body) + 1
        blocks.append(Block(page, start, opening["info"].strip(), tuple(body)))
        number += 1
    return blocks, outside


def session(block: Block, problems: list[str]) -> list[Example]:
    """The commands of an example block, each with its output and status; what cannot be read as one
    goes to `problems`."""
    found: list[Example] = []
    words: tuple[str, ...] | None = None
    start, output = 0, []

    def close() -> None:
        if words is not None:
            found.append(Example(block.page, start, words, tuple(output), 0))

    number = 0
    while number < len(block.lines):
        text = block.lines[number]
        if text.startswith(PROMPT) and text[len(PROMPT) :].strip() == STATUS:
            close()
            if not found or number + 1 >= len(block.lines) or not block.lines[number + 1].isdigit():
                problems.append(
                    f"{block.page.name}:{block.line + number}: `$ echo $?` without a command or a status"
                )
                break
            last = found.pop()
            found.append(
                Example(last.page, last.line, last.words, last.expected, int(block.lines[number + 1]))
            )
            words, output = None, []
            number += 2
            continue
        if text.startswith(PROMPT):
            close()
            command = text[len(PROMPT) :]
            if SHELL_SYNTAX.search(command):
                problems.append(f"{block.page.name}:{block.line + number}: not a plain command: {command}")
                break
            words, start, output = tuple(shlex.split(command)), block.line + number, []
        elif words is not None:
            output.append(text)
        else:
            problems.append(f"{block.page.name}:{block.line + number}: output after an exit status: {text}")
            break
        number += 1
    close()
    return found


def page_examples(page: Path, problems: list[str] | None = None) -> list[Example]:
    """The examples of a page, in order; what cannot be read as one goes to `problems`."""
    blocks, _ = fenced_blocks(page)
    problems = [] if problems is None else problems
    return [example for block in blocks if starts_example(block) for example in session(block, problems)]


def starts_example(block: Block) -> bool:
    return bool(block.lines) and block.lines[0].startswith(PROMPT)


PROBLEMS: list[str] = []
EXAMPLES = [example for page in PAGES for example in page_examples(page, PROBLEMS)]


def normalised(lines: list[str] | tuple[str, ...]) -> list[str]:
    """Lines as compared: tabs expanded, trailing whitespace and blank lines at the end dropped."""
    result = [line.expandtabs(8).rstrip() for line in lines]
    while result and not result[-1]:
        result.pop()
    return result


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether `actual` is `expected`, a line `...` standing for any lines and a line ending in ` ...`
    for any line that starts with what comes before it."""

    @functools.cache
    def at(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i] == ELIDED:
            return at(i + 1, j) or (j < len(actual) and at(i, j + 1))
        if j == len(actual):
            return False
        pattern = expected[i]
        same = actual[j].startswith(pattern[: -len(CUT)]) if pattern.endswith(CUT) else actual[j] == pattern
        return same and at(i + 1, j + 1)

    return at(0, 0)


@functools.cache
def gpu_missing() -> str:
    """Why no nvptx device can run here, or '' when one can."""
    from lowering.devices.cuda_driver import gpu_count

    count, reason = gpu_count()
    return "" if count else reason


def skip_reason(example: Example) -> str:
    if example.words[0] == READELF and shutil.which(READELF) is None:
        return f"needs {READELF} (Debian's llvm-14 package)"
    if example.unordered and gpu_missing():
        return f"needs an NVIDIA GPU: {gpu_missing()}"
    return ""


def environment() -> dict[str, str]:
    """The environment a command runs in: this checkout's packages first, from any directory."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path)


class PageRun:
    """A page's commands run in order in a directory of their own, each once."""

    def __init__(self, page: Path, directory: Path) -> None:
        self.examples = page_examples(page)
        self.directory = directory
        shutil.copytree(ROOT / "samples", directory / "samples")
        self.results: dict[int, subprocess.CompletedProcess] = {}

    def result(self, example: Example) -> subprocess.CompletedProcess:
        """What `example` printed, once each command before it on its page has run (but skipped ones)."""
        for earlier in self.examples[: self.examples.index(example) + 1]:
            if earlier.line not in self.results and not skip_reason(earlier):
                self.results[earlier.line] = self._run(earlier)
        return self.results[example.line]

    def _run(self, example: Example) -> subprocess.CompletedProcess:
        argv = [*COMMANDS[example.words[0]], *example.words[1:]]
        return subprocess.run(
            argv,
            cwd=self.directory,
            env=environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=TIMEOUT,
            check=False,
        )


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, PageRun]:
    return {}


def test_the_pages_have_examples():
    """The parser finds the examples (an empty list would pass everything below), and reads every
    example block whole."""
    assert not PROBLEMS, "example blocks that are not sessions of commands:\n" + "\n".join(PROBLEMS)
    pages = {example.page.name for example in EXAMPLES}
    assert len(EXAMPLES) >= 20 and {"README.md", "command-line.md", "validation.md"} <= pages


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_shell_example_is_a_block_the_tests_run(page):
    """A `$ ` line outside a fenced block, or inside one that does not start with it, is not run here; nor
    is a `dprintf` command in a shell block without its `$ `: write each as an example."""
    blocks, outside = fenced_blocks(page)
    stray = [f"{page.name}:{number}: {text}" for number, text in outside if text.lstrip().startswith(PROMPT)]
    for block in blocks:
        starts = starts_example(block)
        for offset, text in enumerate(block.lines):
            bare = block.info in ("sh", "shell", "console", "bash") and text.startswith("dprintf ")
            if (text.startswith(PROMPT) and not starts) or bare:
                stray.append(f"{page.name}:{block.line + offset}: {text}")
    assert not stray, "shell examples the tests do not run:\n" + "\n".join(stray)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_the_example_prints_what_its_page_shows(example, page_runs, tmp_path_factory):
    if example.words[0] not in COMMANDS:
        pytest.fail(f"{example.name}: an example runs `dprintf` or `{READELF}`, not `{example.words[0]}`")
    reason = skip_reason(example)
    if reason:
        pytest.skip(reason)
    run = page_runs.get(example.page)
    if run is None:
        run = page_runs[example.page] = PageRun(example.page, tmp_path_factory.mktemp(example.page.stem))
    result = run.result(example)
    actual = normalised(result.stdout.decode("utf-8", errors="backslashreplace").splitlines())
    expected = normalised(example.expected)
    if example.unordered:
        same = sorted(actual) == sorted(expected)
    else:
        same = matches(expected, actual)
    diff = "\n".join(difflib.unified_diff(expected, actual, "the page", "the command", lineterm=""))
    assert same, f"{example.name} prints another output than its page shows:\n{diff}"
    assert result.returncode == example.status, (
        f"{example.name} exits with status {result.returncode}, its page shows {example.status}"
    )


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as GitHub makes them: lowercase, punctuation but `-` and `_`
    dropped, spaces made `-`, a second heading of the same text `-1`, a third `-2`..."""
    _, outside = fenced_blocks(page)
    found: set[str] = set()
    for _, text in outside:
        heading = HEADING.match(text)
        if heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading["title"].lower()).replace(" ", "-")
        anchor, number = slug, 0
        while anchor in found:
            number += 1
            anchor = f"{slug}-{number}"
        found.add(anchor)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_between_the_pages_lands(page):
    """Each relative link names a file that exists and, after a `#`, one of its headings."""
    _, outside = fenced_blocks(page)
    broken = []
    for number, text in outside:
        for link in LINK.finditer(text):
            target = link["target"]
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(f"{page.name}:{number}: {target}: no such file")
            elif anchor and (destination.suffix != ".md" or anchor not in anchors(destination)):
                broken.append(f"{page.name}:{number}: {target}: no such heading")
    assert not broken, "links that land nowhere:\n" + "\n".join(broken)


def synopsis(command: str) -> str:
    """The indented synopsis under `## `dprintf COMMAND`` in docs/command-line.md."""
    lines = (ROOT / "docs" / "command-line.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"## `dprintf {command}`")
    block = []
    for text in lines[start + 1 :]:
        if text.startswith("    "):
            block.append(text)
        elif block:
            break
    return "\n".join(block)


@pytest.mark.parametrize("command", ["lower", "compile", "inspect", "run", "profile", "decode", "link"])
def test_each_synopsis_names_every_option_of_the_command(command):
    """docs/command-line.md lists in each command's synopsis the options its `--help` lists, no more."""
    shown = subprocess.run(
        [*COMMANDS["dprintf"], command, "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    usage = shown.split("\n\n", 1)[0]
    helped = set(OPTION.findall(usage)) - {"-h", "--help"}
    documented = set(OPTION.findall(synopsis(command)))
    assert documented == helped, (
        f"`dprintf {command}`: --help has {sorted(helped - documented)} that the page lacks, "
        f"the page {sorted(documented - helped)} that --help lacks"
    )


INLINE = list(
    dict.fromkeys(
        (page, match["command"], int(match["status"] or 0))
        for page in PAGES
        for _, text in fenced_blocks(page)[1]
        for match in INLINE_SAMPLE.finditer(text)
    )
)


@pytest.mark.parametrize("page, command, status", INLINE, ids=[f"{p.name}: {c}" for p, c, _ in INLINE])
def test_an_inline_command_of_a_sample_exits_as_its_sentence_says(page, command, status, tmp_path):
    words = shlex.split(command)
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    result = subprocess.run(
        [*COMMANDS["dprintf"], *words[1:]],
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == status, f"`{command}` exits {result.returncode}: {result.stderr}"
