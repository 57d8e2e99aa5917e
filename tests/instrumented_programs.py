"""Random structured shaders and the block counts they must give (SPEC section 10), for the tests.

`generate(seed)` writes a module whose entry `@main(printf_buffer, id)` runs a random tree of
statements: loops whose trip counts depend on the invocation (nested too), if/else, switches, early
returns, calls of `noinline` functions, printf (inside loops too). `Program.expected(ids)` interprets
the same tree in Python and counts, for each block the module labels, the times the invocations `ids`
enter it, and the lines their printfs print: the oracle the device's counters are checked against.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

PRINTF_DECLARATION = "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)"
BUFFER = "ptr addrspace(7) %printf_buffer"


class _Return(Exception):
    """An early return, unwinding the interpreter to the function's exit."""


@dataclass
class _Function:
    name: str
    blocks: list[tuple[str, list[str]]] = field(default_factory=list)

    def block(self, label: str) -> list[str]:
        self.blocks.append((label, []))
        return self.blocks[-1][1]


class Program:
    """One generated module: its IR, and the statement trees of its functions."""

    def __init__(self, seed: int, depth: int = 3) -> None:
        self.random = random.Random(seed)
        self.depth = depth
        self.number = 0
        self.formats: list[str] = []
        self.trees: dict[str, list] = {}
        self.functions: list[_Function] = []
        for callee in ("helper0", "helper1"):
            self._define(callee, calls=False)
        self._define("main", calls=True)

    # Statements: ("loop", label, a, b, m, body), ("if", label, m, r, then, else), ("switch", label, m,
    # [bodies]), ("return", label, m, r), ("call", function), ("printf", format index).

    def _statements(self, depth: int, calls: bool) -> list:
        statements = []
        for _ in range(self.random.randint(1, 3)):
            kinds = ["printf", "loop", "if", "switch", "return"] + (["call"] if calls else [])
            kind = self.random.choice(kinds if depth else ["printf", "return"] + (["call"] if calls else []))
            self.number += 1
            label = f"{kind}{self.number}"
            if kind == "loop":
                statements.append(
                    (
                        kind,
                        label,
                        self.random.randint(1, 5),
                        self.random.randint(0, 3),
                        self.random.randint(1, 4),
                        self._statements(depth - 1, calls),
                    )
                )
            elif kind == "if":
                m = self.random.randint(2, 4)
                statements.append(
                    (
                        kind,
                        label,
                        m,
                        self.random.randrange(m),
                        self._statements(depth - 1, calls),
                        self._statements(depth - 1, calls),
                    )
                )
            elif kind == "switch":
                cases = self.random.randint(2, 4)
                statements.append(
                    (kind, label, cases + 1, [self._statements(depth - 1, calls) for _ in range(cases + 1)])
                )
            elif kind == "return":
                m = self.random.randint(3, 7)
                statements.append((kind, label, m, self.random.randrange(m)))
            elif kind == "call":
                statements.append((kind, self.random.choice(["helper0", "helper1"])))
            else:
                self.formats.append(f"{label} of %u\\0A")
                statements.append((kind, len(self.formats) - 1))
        return statements

    def _define(self, name: str, calls: bool) -> None:
        tree = self._statements(self.depth, calls)
        self.trees[name] = tree
        function = _Function(name)
        self.functions.append(function)
        current = function.block("entry")
        current = self._emit(function, current, "entry", tree)[0]
        current.append("ret void")

    def _emit(self, function: _Function, code: list[str], label: str, tree: list) -> tuple[list[str], str]:
        """Emit `tree` from the block `label` (whose lines are `code`); the block it ends in."""
        for statement in tree:
            kind = statement[0]
            if kind == "printf":
                index = statement[1]
                code.append(
                    f"call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf({BUFFER}, "
                    f"ptr addrspace(4) @fmt{index}, i32 %id)"
                )
            elif kind == "call":
                code.append(f"call void @{statement[1]}({BUFFER}, i32 %id)")
            elif kind == "return":
                _, name, m, r = statement
                code += [f"%{name}.r = urem i32 %id, {m}", f"%{name}.c = icmp eq i32 %{name}.r, {r}"]
                code.append(f"br i1 %{name}.c, label %{name}.ret, label %{name}.go")
                function.block(f"{name}.ret").append("ret void")
                code, label = function.block(f"{name}.go"), f"{name}.go"
            elif kind == "if":
                _, name, m, r, then, otherwise = statement
                code += [f"%{name}.r = urem i32 %id, {m}", f"%{name}.c = icmp eq i32 %{name}.r, {r}"]
                code.append(f"br i1 %{name}.c, label %{name}.then, label %{name}.else")
                for arm, body in (("then", then), ("else", otherwise)):
                    end, _ = self._emit(function, function.block(f"{name}.{arm}"), f"{name}.{arm}", body)
                    end.append(f"br label %{name}.join")
                code, label = function.block(f"{name}.join"), f"{name}.join"
            elif kind == "switch":
                _, name, m, bodies = statement
                code.append(f"%{name}.r = urem i32 %id, {m}")
                cases = " ".join(f"i32 {k}, label %{name}.case{k}" for k in range(1, len(bodies)))
                code.append(f"switch i32 %{name}.r, label %{name}.case0 [ {cases} ]")
                for k, body in enumerate(bodies):
                    end, _ = self._emit(function, function.block(f"{name}.case{k}"), f"{name}.case{k}", body)
                    end.append(f"br label %{name}.join")
                code, label = function.block(f"{name}.join"), f"{name}.join"
            else:
                _, name, a, b, m, body = statement
                code += [f"%{name}.p = mul i32 %id, {a}", f"%{name}.q = add i32 %{name}.p, {b}"]
                code += [f"%{name}.trips = urem i32 %{name}.q, {m + 1}", f"br label %{name}.head"]
                head = function.block(f"{name}.head")
                end, end_label = self._emit(function, function.block(f"{name}.body"), f"{name}.body", body)
                head += [
                    f"%{name}.i = phi i32 [ 0, %{label} ], [ %{name}.next, %{end_label} ]",
                    f"%{name}.more = icmp ult i32 %{name}.i, %{name}.trips",
                    f"br i1 %{name}.more, label %{name}.body, label %{name}.exit",
                ]
                end += [f"%{name}.next = add i32 %{name}.i, 1", f"br label %{name}.head"]
                code, label = function.block(f"{name}.exit"), f"{name}.exit"
        return code, label

    def ir(self) -> str:
        lines = [PRINTF_DECLARATION]
        for index, text in enumerate(self.formats):
            size = len(text.replace("\\0A", "\n")) + 1
            lines.append(
                f'@fmt{index} = private unnamed_addr addrspace(4) constant [{size} x i8] c"{text}\\00"'
            )
        for function in self.functions:
            linkage = "define void" if function.name == "main" else "define internal void"
            attributes = "" if function.name == "main" else " #0"
            lines.append(f"{linkage} @{function.name}({BUFFER}, i32 %id){attributes} {{")
            for label, code in function.blocks:
                lines.append(f"{label}:")
                lines += [f"  {line}" for line in code]
            lines.append("}")
        lines.append("attributes #0 = { noinline }")
        return "\n".join(lines) + "\n"

    def expected(self, ids: Iterable[int]) -> tuple[Counter, Counter]:
        """For invocations `ids`: the entries of each block the module labels, `(function, label)`, and
        the lines printed."""
        blocks: Counter = Counter()
        lines: Counter = Counter()
        for invocation in ids:
            self._call("main", invocation, blocks, lines)
        return blocks, lines

    def _call(self, name: str, invocation: int, blocks: Counter, lines: Counter) -> None:
        blocks[(name, "entry")] += 1
        try:
            self._run(name, self.trees[name], invocation, blocks, lines)
        except _Return:
            pass

    def _run(self, function: str, tree: list, invocation: int, blocks: Counter, lines: Counter) -> None:
        u32 = 0xFFFFFFFF
        for statement in tree:
            kind = statement[0]
            if kind == "printf":
                lines[self.formats[statement[1]].replace("\\0A", "\n").replace("%u", str(invocation))] += 1
            elif kind == "call":
                self._call(statement[1], invocation, blocks, lines)
            elif kind == "return":
                _, name, m, r = statement
                if invocation % m == r:
                    blocks[(function, f"{name}.ret")] += 1
                    raise _Return
                blocks[(function, f"{name}.go")] += 1
            elif kind == "if":
                _, name, m, r, then, otherwise = statement
                arm, body = ("then", then) if invocation % m == r else ("else", otherwise)
                blocks[(function, f"{name}.{arm}")] += 1
                self._run(function, body, invocation, blocks, lines)
                blocks[(function, f"{name}.join")] += 1
            elif kind == "switch":
                _, name, m, bodies = statement
                case = invocation % m
                blocks[(function, f"{name}.case{case}")] += 1
                self._run(function, bodies[case], invocation, blocks, lines)
                blocks[(function, f"{name}.join")] += 1
            else:
                _, name, a, b, m, body = statement
                trips = ((invocation * a) & u32) + b & u32
                trips %= m + 1
                for _ in range(trips):
                    blocks[(function, f"{name}.head")] += 1
                    blocks[(function, f"{name}.body")] += 1
                    self._run(function, body, invocation, blocks, lines)
                blocks[(function, f"{name}.head")] += 1
                blocks[(function, f"{name}.exit")] += 1

    def expected_at_scale(self, invocations: int) -> tuple[Counter, Counter]:
        """`expected(range(invocations))` computed with numpy, a mask of invocations a statement: for
        millions of invocations. The lines printed are counted by format (the label that prints)."""
        ids = np.arange(invocations, dtype=np.uint64)
        blocks: Counter = Counter()
        printed: Counter = Counter()
        self._call_masked("main", ids, np.ones(invocations, dtype=bool), blocks, printed)
        return blocks, printed

    def _call_masked(
        self, name: str, ids: np.ndarray, mask: np.ndarray, blocks: Counter, printed: Counter
    ) -> None:
        blocks[(name, "entry")] += int(mask.sum())
        self._run_masked(name, self.trees[name], ids, mask, blocks, printed)

    def _run_masked(
        self,
        function: str,
        tree: list,
        ids: np.ndarray,
        running: np.ndarray,
        blocks: Counter,
        printed: Counter,
    ) -> np.ndarray:
        """Run `tree` for the invocations in the mask `running`; the mask of those that did not return."""
        for statement in tree:
            kind = statement[0]
            if kind == "printf":
                printed[self.formats[statement[1]].split(" ")[0]] += int(running.sum())
            elif kind == "call":
                self._call_masked(statement[1], ids, running, blocks, printed)
            elif kind == "return":
                _, name, m, r = statement
                returns = running & (ids % m == r)
                blocks[(function, f"{name}.ret")] += int(returns.sum())
                running = running & ~returns
                blocks[(function, f"{name}.go")] += int(running.sum())
            elif kind in ("if", "switch"):
                name = statement[1]
                if kind == "if":
                    _, _, m, r, then, otherwise = statement
                    taken = ids % m == r
                    arms = [("then", then, taken), ("else", otherwise, ~taken)]
                else:
                    _, _, m, bodies = statement
                    cases = ids % m
                    arms = [(f"case{k}", body, cases == k) for k, body in enumerate(bodies)]
                after = np.zeros_like(running)
                for arm, body, where in arms:
                    inside = running & where
                    blocks[(function, f"{name}.{arm}")] += int(inside.sum())
                    after |= self._run_masked(function, body, ids, inside, blocks, printed)
                running = after
                blocks[(function, f"{name}.join")] += int(running.sum())
            else:
                _, name, a, b, m, body = statement
                trips = (((ids * a) & 0xFFFFFFFF) + b & 0xFFFFFFFF) % (m + 1)
                active, after = running, np.zeros_like(running)
                for step in range(m + 1):
                    blocks[(function, f"{name}.head")] += int(active.sum())
                    leaving = active & (trips <= step)
                    blocks[(function, f"{name}.exit")] += int(leaving.sum())
                    after |= leaving
                    inside = active & (trips > step)
                    blocks[(function, f"{name}.body")] += int(inside.sum())
                    active = self._run_masked(function, body, ids, inside, blocks, printed)
                running = after
        return running

    def labels(self) -> set[tuple[str, str]]:
        """Every block the module labels, `(function, label)`."""
        return {(function.name, label) for function in self.functions for label, _ in function.blocks}
