"""Reading IR safely with llvmlite: parse, verify and link, any failure a `LoweringError` naming the
input file, LLVM's message and the line it quotes.

The binding exposes neither address spaces nor initializers nor debug locations, and each of its
look-ups costs microseconds, so a pass prints the module once and reads it with `module.Module`.
"""

from __future__ import annotations

import re

import llvmlite.binding as llvm

from .diagnostics import Diagnostic, LoweringError
from .instructions import Instruction

# Without this, parsing a broken module that carries "Debug Info Version" aborts the process
# ("Broken module found") instead of leaving the error to verify().
llvm.set_option("", "-disable-auto-upgrade-debug-info")

_LLVM_MESSAGE = re.compile(r"^<string>:(\d+):(\d+): error: (.*)$", re.M)
_VOID_OPCODES = frozenset({"call", "store", "br", "ret", "switch", "fence", "unreachable", "resume"})
_ATTACHMENTS = re.compile(r"(?:, ![-\w.]+ !\d+)+$")
_NUL_MESSAGE = "invalid IR: a NUL byte, where LLVM would stop reading the module"


def parse_source(name: str, text: str) -> llvm.ModuleRef:
    """Parse and verify one input module; LoweringError naming `name` and LLVM's message, or the line
    and column of a NUL byte."""
    _refuse_nul(name, text)
    try:
        module = llvm.parse_assembly(text)
    except RuntimeError as failure:
        raise LoweringError([_parse_diagnostic(name, str(failure))]) from None
    verify(module, name, text)
    module.name = name
    return module


def verify(module: llvm.ModuleRef, name: str, text: str | None = None) -> None:
    """LoweringError when `module` fails LLVM's verifier, pointing at the line of `text` it quotes."""
    try:
        module.verify()
    except RuntimeError as failure:
        message = str(failure).strip()
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        raise LoweringError(
            [Diagnostic(f"invalid IR: {'; '.join(lines)}", name, line=_quoted_line(text, lines[1:]))]
        ) from None


def link(modules: list[llvm.ModuleRef]) -> llvm.ModuleRef:
    """Link `modules` into the first (the others are consumed); LoweringError naming the one that clashes."""
    first, *rest = modules
    for module in rest:
        name = module.name
        try:
            first.link_in(module)
        except RuntimeError as failure:
            raise LoweringError([Diagnostic(f"cannot link: {failure}", name)]) from None
    return first


def _refuse_nul(name: str, text: str) -> None:
    """LoweringError at the first NUL byte of `text`: LLVM reads the text as a C string, so the module
    would end there without a word (an empty module, when the byte comes early)."""
    nul = text.find("\0")
    if nul >= 0:
        line, column = text.count("\n", 0, nul) + 1, nul - text.rfind("\n", 0, nul)
        raise LoweringError([Diagnostic(_NUL_MESSAGE, name, line=line, column=column)])


def _parse_diagnostic(name: str, message: str) -> Diagnostic:
    match = _LLVM_MESSAGE.search(message)
    if match is None:
        return Diagnostic(f"invalid IR: {message.strip()}", name)
    line, column, text = match.groups()
    return Diagnostic(f"invalid IR: {text}", name, line=int(line), column=int(column))


def _quoted_line(text: str | None, quoted: list[str]) -> int | None:
    """The 1-based line of `text` holding the first instruction a verifier message quotes."""
    wanted = {
        _ATTACHMENTS.sub("", line)
        for line in quoted
        if line.startswith("%") or Instruction(line).opcode in _VOID_OPCODES
    }
    if not text or not wanted:
        return None
    for number, line in enumerate(text.splitlines(), start=1):
        if _ATTACHMENTS.sub("", line.strip()) in wanted:
            return number
    return None
