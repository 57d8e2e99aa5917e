"""What a workgroup function is built from as it is built (`workgroup_function`): its own names, and
the lines of its first block and of the block that starts each invocation."""

from __future__ import annotations

import itertools

from ...ir.functions import Block
from ...ir.instructions import Instruction
from ...ir.lexer import local_name


class Frame:
    """The names the function adds (`<prefix>name`), the lines of its first block before its branch
    (`setup`: shared memory, the kept values' arrays), those computed for each invocation before it
    resumes (`dispatch`), and the entry's name for the invocation ID (bare)."""

    def __init__(self, prefix: str, invocation: str) -> None:
        self.prefix = prefix
        self.invocation = invocation
        self.setup: list[str] = []
        self.dispatch: list[str] = []
        self.numbers = itertools.count()

    def local(self, name: str) -> str:
        """The printed name of the function's own `name`."""
        return local_name(f"{self.prefix}{name}")

    def fresh(self, name: str) -> str:
        """A new bare name `<prefix>name.N`."""
        return f"{self.prefix}{name}.{next(self.numbers)}"

    def block(self, name: str, lines: list[str]) -> Block:
        return Block(f"{self.prefix}{name}", [Instruction(line) for line in lines])
