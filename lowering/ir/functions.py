"""Functions and their basic blocks: a definition's header and blocks (or a declaration's line), the
control-flow edits of a function (a block inserted or split), and the reading of a function body.

A block is a label and a list of `Instruction`s; a pass edits a block's list in one walk (`rewrite`), and a
split keeps the phis of the successors right.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from .instructions import Instruction
from .lexer import (
    Token,
    bare_name,
    closing,
    local_name,
    split_list,
    text_of,
    tokenize,
    with_list_items,
    without_word,
)
from .values import Operand

# How LLVM indents the further lines of an instruction it prints over several: an invoke's or a callbr's
# `to label ...`, each clause of a landing pad.
_CONTINUATION = " " * 10


class Block:
    """A basic block: its label (None for an entry block printed without one) and its instructions."""

    def __init__(
        self, label: str | None, instructions: list[Instruction], label_line: str | None = None
    ) -> None:
        self.label = label
        self.instructions = instructions
        self._label_line = label_line

    def __str__(self) -> str:
        lines = [f"  {instruction.text}" for instruction in self.instructions]
        if self.label is not None:
            lines.insert(0, self._label_line or f"{local_name(self.label)[1:]}:")
        return "\n".join(lines)

    def drop_label_comment(self) -> None:
        """Print the label alone, without the `; preds = ...` comment read with it."""
        self._label_line = None

    @property
    def terminator(self) -> Instruction | None:
        return self.instructions[-1] if self.instructions else None

    def successors(self) -> list[str]:
        """The labels its terminator branches to (bare names), in order."""
        terminator = self.terminator
        if terminator is None:
            return []
        tokens = terminator.tokens
        return [
            bare_name(tokens[index + 1][1])
            for index in range(len(tokens) - 1)
            if tokens[index][1] == "label" and tokens[index + 1][1][:1] == "%"
        ]

    def insert_before(self, anchor: Instruction, *new: Instruction) -> None:
        self.rewrite({anchor: [*new, anchor]})

    def insert_after(self, anchor: Instruction, *new: Instruction) -> None:
        self.rewrite({anchor: [anchor, *new]})

    def replace(self, old: Instruction, *new: Instruction) -> None:
        self.rewrite({old: list(new)})

    def remove(self, old: Instruction) -> None:
        self.rewrite({old: []})

    def rewrite(self, replacements: Mapping[Instruction, Sequence[Instruction]]) -> None:
        """Replace each instruction that `replacements` names by its sequence (which may hold it), all
        in one walk of the block: a pass that edits many instructions of a block edits them at once.
        KeyError when one of them is not in the block."""
        instructions: list[Instruction] = []
        found = 0
        for instruction in self.instructions:
            replacement = replacements.get(instruction)
            if replacement is None:
                instructions.append(instruction)
            else:
                instructions += replacement
                found += 1
        if found != len(replacements):
            raise KeyError("an instruction to edit is not in the block")
        self.instructions = instructions


class Function:
    """A definition (`define ... { blocks }`) or a declaration (`declare ...`, no blocks)."""

    def __init__(self, header: str, blocks: list[Block] | None) -> None:
        self.header = header
        self.blocks = blocks
        self._tokens = tokenize(header)
        self._name_index = _name_index(self._tokens)

    def __str__(self) -> str:
        if self.blocks is None:
            return self.header
        return "\n".join([self.header, "\n\n".join(map(str, self.blocks)), "}"])

    @property
    def printed_name(self) -> str:
        return self._tokens[self._name_index][1]

    @property
    def name(self) -> str:
        return bare_name(self.printed_name)

    @property
    def is_declaration(self) -> bool:
        return self.blocks is None

    @property
    def parameters(self) -> list[Operand]:
        tokens = self._tokens
        close = closing(tokens, self._name_index + 1)
        return [
            Operand.from_tokens(tokens, start, end)
            for start, end in split_list(tokens, self._name_index + 2, close)
        ]

    @property
    def attributes(self) -> list[str]:
        """The words and `#N` groups after its parameter list, up to the body."""
        tokens = self._tokens
        close = closing(tokens, self._name_index + 1)
        return [token for _, token in tokens[close + 1 :] if token != "{"]

    def add_parameters(self, extra: str) -> None:
        """Give the function the parameters `extra` (typed, named, comma-separated) after its own."""
        tokens, opener = self._tokens, self._name_index + 1
        self.header = with_list_items(tokens, opener, closing(tokens, opener), extra)
        self._tokens = tokenize(self.header)

    def remove_word(self, word: str) -> None:
        """Drop the keyword `word` from the header (a calling convention, an attribute)."""
        self.header = without_word(self.header, word)
        self._tokens = tokenize(self.header)
        self._name_index = _name_index(self._tokens)

    def remove_attachment(self, kind: str) -> None:
        """Drop the metadata attachment `kind` (`!dbg`) and its node from the header."""
        tokens = self._tokens
        kept = [
            token
            for index, token in enumerate(tokens)
            if token[1] != kind and not (index and tokens[index - 1][1] == kind)
        ]
        self.header = text_of(kept)
        self._tokens = tokenize(self.header)
        self._name_index = _name_index(self._tokens)

    def add_attribute(self, word: str) -> None:
        """Give the function the attribute `word` (`alwaysinline`): after its parameters and any
        `unnamed_addr` and address space, where function attributes go."""
        tokens = self._tokens
        index = closing(tokens, self._name_index + 1) + 1
        while index < len(tokens) and tokens[index][1] in ("unnamed_addr", "local_unnamed_addr", "addrspace"):
            index = closing(tokens, index + 1) + 1 if tokens[index][1] == "addrspace" else index + 1
        self.header = f"{text_of(tokens, 0, index)} {word} {text_of(tokens, index)}"
        self._tokens = tokenize(self.header)

    def rename_locals(self, renames: Mapping[str, str]) -> None:
        """Rename the parameters, values and block labels that `renames` has (bare names) everywhere in
        the function; an entry block printed without a label takes its new one."""
        entry = self._entry_number() if self.blocks and self.blocks[0].label is None else None
        self.header = Instruction(self.header).with_locals(renames).text
        self._tokens = tokenize(self.header)
        self._name_index = _name_index(self._tokens)
        for block in self.blocks or ():
            label = block.label if block.label is not None else entry
            if label is not None and label in renames:
                block.label = renames[label]
            block.drop_label_comment()
            block.instructions = [instruction.with_locals(renames) for instruction in block.instructions]

    def instructions(self) -> Iterator[tuple[Block, Instruction]]:
        for block in self.blocks or ():
            for instruction in block.instructions:
                yield block, instruction

    def block(self, label: str) -> Block:
        """The block labelled `label` (bare); KeyError when there is none."""
        for block in self.blocks or ():
            if self.label_of(block) == label:
                return block
        raise KeyError(label)

    def label_of(self, block: Block) -> str:
        """The block's label (bare), the number LLVM gives it when it is printed without one."""
        return block.label if block.label is not None else self._entry_number()

    def _entry_number(self) -> str:
        """The number LLVM gives an entry block printed without a label: the next after the unnamed
        parameters."""
        return str(sum(1 for parameter in self.parameters if parameter.value[1:].isdigit()))

    def insert_block(self, before: Block, block: Block) -> None:
        """Add `block` before `before` (which must not be the entry block)."""
        assert self.blocks is not None
        self.blocks.insert(self.blocks.index(before), block)

    def split_block(self, block: Block, at: Instruction, label: str) -> Block:
        """Move `at` and what follows it into a new block `label` after `block`, which then branches to
        it; the phis of its successors then come from the new block."""
        assert self.blocks is not None
        index = next(n for n, instruction in enumerate(block.instructions) if instruction is at)
        old_label = self.label_of(block)
        new = Block(label, block.instructions[index:])
        block.instructions = [*block.instructions[:index], Instruction(f"br label {local_name(label)}")]
        self.blocks.insert(self.blocks.index(block) + 1, new)
        for successor in set(new.successors()):
            _rename_incoming(self.block(successor), old_label, label)
        return new


def _name_index(tokens: list[Token]) -> int:
    """The index of a function header's name, its first `@` token (after the linkage, the calling
    convention and the return type)."""
    return next(index for index, token in enumerate(tokens) if token[1][:1] == "@")


def _rename_incoming(block: Block, old: str, new: str) -> None:
    """In `block`'s phis, make the edges from `old` come from `new` (and drop its label's `; preds`
    comment, which no longer holds). A block's label is no value's name, so every `%old` in a phi is
    the edge's."""
    block.drop_label_comment()
    for position, instruction in enumerate(block.instructions):
        if instruction.opcode != "phi":
            break
        block.instructions[position] = instruction.with_locals({old: new})


def read_blocks(lines: list[str], index: int) -> tuple[list[Block], int]:
    """The blocks of a function body starting at `lines[index]`, and the index after its `}`."""
    blocks: list[Block] = []
    instructions: list[Instruction] = []
    label: str | None = None
    label_line: str | None = None
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("  "):
            start = index - 1
            if line.endswith("["):  # a switch: one case a line, then `]`
                while index < len(lines) and not lines[index].startswith("  ]"):
                    index += 1
                index += 1
            while index < len(lines) and lines[index].startswith(_CONTINUATION):
                index += 1
            if index > start + 1:
                line = "\n".join(lines[start:index])
            instructions.append(Instruction(line))
        elif line == "}":
            break
        elif line and not line.startswith(";"):
            if instructions or label is not None:
                blocks.append(Block(label, instructions, label_line))
            first = tokenize(line)[0][1]
            label, label_line, instructions = bare_name("%" + first[:-1]), line, []
    if instructions or label is not None:
        blocks.append(Block(label, instructions, label_line))
    return blocks, index


def parse_definition(text: str) -> Function:
    """A definition written in any layout (llvmlite puts `{` on a line of its own): read by tokens."""
    tokens = tokenize(text)
    brace = next(n for n, token in enumerate(tokens) if token[1] == "{")
    header = text_of(tokens, 0, brace) + " {"
    body = text_of(tokens, brace + 1, len(tokens) - 1)
    lines = []
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped:
            is_label = stripped.endswith(":") and not stripped.startswith("%")
            lines.append(stripped if is_label else f"  {stripped}")
    blocks, _ = read_blocks([*lines, "}"], 0)
    return Function(header, blocks)
