"""The pass's errors: one `Diagnostic` per problem, all of a module's problems in one `LoweringError`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from metadata.errors import DprintfError


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A `!DILocation` resolved to its file: what the user's source says about a call."""

    filename: str
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}" + (f":{self.column}" if self.column else "")


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem: the input file (and its line), the call and function when known, and the message."""

    message: str
    source: str
    line: int | None = None
    column: int | None = None
    call: str | None = None
    function: str | None = None
    location: SourceLocation | None = None

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        subject = ""
        if self.call is not None:
            subject = f" {self.call}" + (
                f" in function @{self.function}" if self.function is not None else ""
            )
            if self.location is not None:
                subject += f" at {self.location}"
            subject += ":"
        return f"{where}:{subject} {self.message}"


class LoweringError(DprintfError):
    """Every problem found in the input, one diagnostic per line."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(diagnostic) for diagnostic in self.diagnostics))


class CallProblem(DprintfError):
    """What is wrong with the call being lowered, raised where it is found (one message or several:
    none when the call's problems are already recorded). A pass lowers each call inside
    `services.context.PassContext.checking`, which records them as the call's and goes on to the next
    call: the one way problems travel inside the passes, to the `LoweringError` that names them all."""

    def __init__(self, *messages: str) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages
