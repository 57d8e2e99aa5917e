"""Textual LLVM IR read into `llvmlite.ir` functions, for running helpers the lowering writes as text
(the races helpers) in `warp_interpreter`. Only the subset those helpers use: integer and pointer
types, integer arithmetic and comparisons, casts, `getelementptr` of one index, loads (atomic too),
`atomicrmw`, calls, phis, branches and `ret void`; anything else raises ValueError naming the line.
"""

from __future__ import annotations

import re

import llvmlite.ir as ir

_TYPE = r"ptr(?: addrspace\(\d+\))?|i\d+|void"
_DEFINE = re.compile(rf"define internal (?:{_TYPE}) @([\w.]+)\((.*)\)[^{{]*\{{$")
_DECLARE = re.compile(rf"declare ({_TYPE}) @([\w.]+)\((.*)\)$")
_BINARY = {"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor"}
_PREDICATES = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}  # `u`/`s` taken off


def type_of(text: str) -> ir.Type:
    text = text.strip()
    if text == "void":
        return ir.VoidType()
    if text.startswith("ptr"):
        space = re.search(r"addrspace\((\d+)\)", text)
        return ir.PointerType(addrspace=int(space.group(1)) if space else 0)
    if re.fullmatch(r"i\d+", text):
        return ir.IntType(int(text[1:]))
    raise ValueError(f"not a type the reader knows: {text!r}")


def _typed(text: str) -> tuple[ir.Type, str]:
    """`ptr addrspace(1) %rows` -> (the type, `%rows`)."""
    found = re.fullmatch(rf"\s*({_TYPE})\s+(\S+)\s*", text)
    if found is None:
        raise ValueError(f"not a typed value: {text!r}")
    return type_of(found.group(1)), found.group(2)


def _split(text: str) -> list[str]:
    """Comma-separated parts, not splitting inside parentheses or brackets."""
    parts, depth, current = [], 0, ""
    for character in text:
        depth += character in "([" and 1 or character in ")]" and -1 or 0
        if character == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += character
    return [*parts, current] if current.strip() else parts


def read_module(text: str, declarations: list[str]) -> ir.Module:
    """A module of the `define internal` functions of `text` and the `declarations` (as
    `i32 @name(i32, ...)`)."""
    module = ir.Module()
    for declaration in declarations:
        found = _DECLARE.fullmatch(f"declare {declaration}")
        if found is None:
            raise ValueError(f"not a declaration: {declaration}")
        types = [type_of(part) for part in _split(found.group(3))]
        ir.Function(module, ir.FunctionType(type_of(found.group(1)), types), found.group(2))
    bodies = []
    lines = iter(text.splitlines())
    for line in lines:
        found = _DEFINE.fullmatch(line.strip())
        if found is None:
            continue
        parameters = [_typed(part) for part in _split(found.group(2))]
        function = ir.Function(
            module, ir.FunctionType(ir.VoidType(), [type_ for type_, _ in parameters]), found.group(1)
        )
        for argument, (_, name) in zip(function.args, parameters, strict=True):
            argument.name = name[1:]
        body = []
        for inner in lines:
            if inner.strip() == "}":
                break
            body.append(inner)
        bodies.append((function, body))
    for function, body in bodies:
        _Body(module, function).read(body)
    return module


class _Body:
    """One function's blocks read from its lines."""

    def __init__(self, module: ir.Module, function: ir.Function) -> None:
        self.module, self.function = module, function
        self.values: dict[str, ir.Value] = {f"%{argument.name}": argument for argument in function.args}
        self.blocks: dict[str, ir.Block] = {}
        self.phis: list[tuple[ir.PhiInstr, list[tuple[str, str]]]] = []

    def read(self, lines: list[str]) -> None:
        labels = [line.strip()[:-1] for line in lines if line.strip().endswith(":")]
        self.blocks = {label: self.function.append_basic_block(label) for label in labels}
        builder = ir.IRBuilder()
        for line in lines:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.endswith(":"):
                builder.position_at_end(self.blocks[stripped[:-1]])
                continue
            try:
                self._instruction(builder, stripped)
            except (KeyError, ValueError) as failure:
                raise ValueError(f"@{self.function.name}: {stripped}: {failure}") from None
        for phi, incomings in self.phis:
            for value, block in incomings:
                phi.add_incoming(self._value(value, phi.type), self.blocks[block[1:]])

    def _value(self, text: str, type_: ir.Type) -> ir.Value:
        if text.startswith("%"):
            return self.values[text]
        if text.startswith("@"):
            return self.module.get_global(text[1:])
        return ir.Constant(type_, int(text))

    def _instruction(self, builder: ir.IRBuilder, line: str) -> None:
        name, _, right = line.partition(" = ") if " = " in line else ("", "", line)
        opcode, _, rest = right.partition(" ")
        made = self._made(builder, opcode, rest, name[1:])
        if name:
            self.values[name] = made

    def _made(self, builder: ir.IRBuilder, opcode: str, rest: str, name: str) -> ir.Value:
        if opcode in _BINARY:
            type_, left = _typed(rest.split(",")[0])
            right = rest.split(",")[1].strip()
            method = {"and": "and_", "or": "or_", "lshr": "lshr", "ashr": "ashr"}.get(opcode, opcode)
            return getattr(builder, method)(self._value(left, type_), self._value(right, type_), name=name)
        if opcode == "icmp":
            predicate, _, operands = rest.partition(" ")
            type_, left = _typed(operands.split(",")[0])
            right = self._value(operands.split(",")[1].strip(), type_)
            signed = predicate.startswith("s")
            compare = builder.icmp_signed if signed else builder.icmp_unsigned
            symbol = _PREDICATES[predicate.lstrip("us")]
            return compare(symbol, self._value(left, type_), right, name=name)
        if opcode in ("zext", "trunc", "sext", "ptrtoint"):
            value, _, target = rest.rpartition(" to ")
            type_, text = _typed(value)
            return getattr(builder, opcode)(self._value(text, type_), type_of(target), name=name)
        if opcode == "getelementptr":
            element, pointer, index = _split(rest)
            pointer_type, pointer_text = _typed(pointer)
            index_type, index_text = _typed(index)
            return builder.gep(
                self._value(pointer_text, pointer_type),
                [self._value(index_text, index_type)],
                name=name,
                source_etype=type_of(element),
            )
        if opcode == "load":
            atomic = rest.startswith("atomic ")
            loaded, pointer, *_ = _split(rest.removeprefix("atomic "))
            pointer_type, pointer_text = _typed(pointer.replace(" monotonic", ""))
            address = self._value(pointer_text, pointer_type)
            if atomic:
                return builder.load_atomic(address, "monotonic", 4, name=name, typ=type_of(loaded))
            return builder.load(address, name=name, typ=type_of(loaded))
        if opcode == "atomicrmw":
            operation, _, operands = rest.partition(" ")
            pointer, value, *_ = _split(operands)
            pointer_type, pointer_text = _typed(pointer)
            value_type, value_text = _typed(value.replace(" monotonic", ""))
            return builder.atomic_rmw(
                operation,
                self._value(pointer_text, pointer_type),
                self._value(value_text, value_type),
                "monotonic",
                name=name,
            )
        if opcode == "call":
            found = re.fullmatch(rf"({_TYPE}) @([\w.]+)\((.*)\)", rest)
            if found is None:
                raise ValueError("not a call the reader knows")
            arguments = [_typed(part) for part in _split(found.group(3))]
            callee = self.module.get_global(found.group(2))
            values = [self._value(text, type_) for type_, text in arguments]
            return builder.call(callee, values, name=name)
        if opcode == "phi":
            type_text, _, incomings = rest.partition(" [")
            phi = builder.phi(type_of(type_text), name=name)
            pairs = re.findall(r"\[?\s*(\S+),\s*(%[\w.]+)\s*\]", "[" + incomings)
            self.phis.append((phi, pairs))
            return phi
        if opcode == "br":
            parts = _split(rest)
            if len(parts) == 1:
                return builder.branch(self.blocks[parts[0].split("%")[1]])
            condition = self._value(_typed(parts[0])[1], ir.IntType(1))
            true, false = (self.blocks[part.split("%")[1]] for part in parts[1:])
            return builder.cbranch(condition, true, false)
        if opcode == "ret" and rest == "void":
            return builder.ret_void()
        raise ValueError(f"the reader has no {opcode}")
