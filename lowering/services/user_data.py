"""LLPC's printf buffer on amdpal (SPEC section 9): its node in `!lgc.user.data.nodes`, and the code that
loads the buffer from user data.

The nodes, as LGC's `PipelineState::readUserDataNodes` reads them: one metadata tuple a node, in order,
`!{!"TYPE", i32 matchType, i32 visibility, i32 offsetInDwords, i32 sizeInDwords, ...}`. A
`DescriptorTableVaPtr` then gives the number of nodes in its table, which follow it; an
`IndirectUserDataVaPtr` or `StreamOutTableVaPtr` a size; any other node its set, binding and stride
(then immutable values). Earlier versions of LGC wrote no visibility operand: a module whose table or
descriptor nodes have exactly the operands of that form is read in it (`_form`). The printf buffer is the
node of LLPC's internal descriptor set (0xFFFFFFF0, written `i32 -16`; until December 2024 LLPC's set was
0xFFFFFFFF, `i32 -1`, read too), binding 6, found as LGC's `findResourceNode` finds it: a root node, or a
node of a root table (the "top" node). `.user_data_offset` in the table is the top node's offset, as LLPC
writes it.

Where the user data come from (the convention of this project; LLVM's AMDGPU backend gets no LGC pass to
say it): user data dword N is the function's `i32 inreg %userdataN` parameter, as LGC's
`MutateEntryPoint` names the user-data SGPR arguments of an entry and of an `amdgpu_gfx` library
function; one that is not there is loaded from the `i32 inreg %spillTable` parameter, LGC's spill table,
at byte 4N. A function with neither (LLPC's lit inputs `basic.lgc` and `CsLowerDebugPrintf.lgc`, written
before LGC gives a function its user data) takes the buffer from the runtime's global instead, as
`@lgc.abort.msg` takes its buffer (`runtime_buffers`); the table keeps the node's `.user_data_offset`.
The buffer is then, as in LGC's `createBufferDesc`:
- a node in a table: the table's address is the user data dword of the top node, extended to 64 bits
  with the high half of the program counter; the 128-bit buffer descriptor is at the node's offset in it;
- a root node: its 4 user data dwords are the descriptor.
The descriptor becomes the fat pointer as LLVM's buffer model has it: `<4 x i32>` to `i128`, `inttoptr`
to a buffer resource (`ptr addrspace(8)`), `addrspacecast` to `ptr addrspace(7)`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import llvmlite.ir as ir

from metadata.errors import DprintfError

from ..ir.building import I32, I64, constant, declared, internal_function
from ..ir.diagnostics import CallProblem
from ..ir.functions import Function
from ..ir.instructions import Instruction
from ..ir.lexer import global_name, string_value
from ..ir.module import Module
from ..ir.values import Operand

USER_DATA_NODES = "!lgc.user.data.nodes"
INTERNAL_DESCRIPTOR_SET = 0xFFFFFFF0  # LLPC's InternalDescriptorSetId
EARLIER_INTERNAL_DESCRIPTOR_SET = 0xFFFFFFFF  # LLPC's InternalDescriptorSetId until December 2024
PRINTF_BUFFER_BINDING = 6  # LLPC's PrintfBufferBindingId
DESCRIPTOR_DWORDS = 4
_TABLE = "DescriptorTableVaPtr"
_SIZED = frozenset({"IndirectUserDataVaPtr", "StreamOutTableVaPtr"})
_UNBOUND = _SIZED | {"PushConst"}  # node types without a binding, which LGC's search skips
# Nodes whose binding holds a 128-bit buffer descriptor (LLPC's front end writes DescriptorMutable).
_BUFFER_DESCRIPTORS = frozenset({"DescriptorBuffer", "DescriptorConstBuffer", "DescriptorMutable"})
_RESOURCE = ir.PointerType(addrspace=8)
_FAT_POINTER = ir.PointerType(addrspace=7)
_CONSTANT_POINTER = ir.PointerType(addrspace=4)
_HIGH_HALF = -(1 << 32)
_MAX_OFFSET = 1 << 29  # dwords: byte offsets stay within an i32
_USER_DATA_PARAMETER = re.compile(r"%userdata\d+")


class UserDataError(DprintfError):
    """`!lgc.user.data.nodes` that cannot be read, or a printf buffer node that cannot be used."""


@dataclass(frozen=True, slots=True)
class UserDataNode:
    """One node: its position in `!lgc.user.data.nodes` (from 1: metadata numbers change when modules
    are linked, positions do not), type, offset and size in dwords, set and binding (descriptor nodes),
    and its table's nodes (a `DescriptorTableVaPtr`)."""

    position: int
    type: str
    offset: int
    size: int
    set: int | None = None
    binding: int | None = None
    inner: tuple[UserDataNode, ...] = ()

    def describe(self) -> str:
        where = f"offset {self.offset}, {self.size} dword(s)"
        if self.set is not None:
            where += f", set {self.set:#x}, binding {self.binding}"
        return f"{USER_DATA_NODES[1:]} node {self.position} ({self.type}, {where})"


@dataclass(frozen=True, slots=True)
class PrintfBufferNode:
    """The printf buffer's node and the root node holding it (itself, or the table it is in)."""

    node: UserDataNode
    top: UserDataNode

    @property
    def user_data_offset(self) -> int:
        """The `.user_data_offset` of the table: where the driver puts the buffer's top node."""
        return self.top.offset

    @property
    def in_table(self) -> bool:
        return self.top is not self.node

    @property
    def user_data_dwords(self) -> list[int]:
        """The user data dwords the code reads: the table's address, or the descriptor itself."""
        if self.in_table:
            return [self.top.offset]
        return list(range(self.node.offset, self.node.offset + DESCRIPTOR_DWORDS))


def find_printf_buffer_node(module: Module) -> PrintfBufferNode | None:
    """The printf buffer's node of `module`'s `!lgc.user.data.nodes`, or None when it has none;
    UserDataError naming the node when the nodes are malformed or the buffer's node cannot be used.
    The internal set is LLPC's of today, else its earlier one (`i32 -1`)."""
    roots = read_user_data_nodes(module)
    for internal in (INTERNAL_DESCRIPTOR_SET, EARLIER_INTERNAL_DESCRIPTOR_SET):
        for top in roots:
            if top.type in _UNBOUND:
                continue
            for node in top.inner if top.type == _TABLE else (top,):
                if node.set == internal and node.binding == PRINTF_BUFFER_BINDING:
                    return _usable(PrintfBufferNode(node, top))
    return None


def _usable(found: PrintfBufferNode) -> PrintfBufferNode:
    node = found.node
    if node.type not in _BUFFER_DESCRIPTORS:
        raise UserDataError(
            f"the printf buffer's node {node.describe()} holds no 128-bit buffer descriptor: it must be one "
            f"of {', '.join(sorted(_BUFFER_DESCRIPTORS))}"
        )
    for holder in (found.top, node):
        if holder.offset + DESCRIPTOR_DWORDS > _MAX_OFFSET:
            raise UserDataError(
                f"{holder.describe()} is past the first {_MAX_OFFSET} dwords, which the code addresses"
            )
    if not found.in_table and node.size < DESCRIPTOR_DWORDS:
        raise UserDataError(
            f"the printf buffer's node {node.describe()} is too small for a {DESCRIPTOR_DWORDS}-dword "
            "buffer descriptor"
        )
    return found


@dataclass(frozen=True, slots=True)
class _NodeForm:
    """How a version of LGC writes a node's integer operands: `header` before the operands of its kind
    (a table's count of nodes, a descriptor's set, binding and stride)."""

    name: str
    header: tuple[str, ...]

    def describe(self, kind: tuple[str, ...]) -> str:
        operands = ("type", *self.header, *kind)
        return f"the {len(operands)} of {self.name} ({', '.join(operands)})"


_FORM = _NodeForm("LGC's form", ("matchType", "visibility", "offset", "size"))
# Before LGC gave nodes their visibility (LLPC's `CsLowerDebugPrintf.lgc` of 2023 has its nodes so).
_EARLIER_FORM = _NodeForm("LGC's earlier form, without visibility", ("matchType", "offset", "size"))
_TABLE_FIELDS = ("count",)
_SIZED_FIELDS = ("data size",)
_DESCRIPTOR_FIELDS = ("set", "binding", "stride")


def read_user_data_nodes(module: Module) -> list[UserDataNode]:
    """The root nodes of `!lgc.user.data.nodes` (a table's nodes in its `inner`); [] when there is none.
    The nodes are in LGC's form, or all in its earlier one without visibility (`_form`)."""
    named = module.named_metadata.get(USER_DATA_NODES)
    if named is None:
        return []
    tuples = [_tuple(module, reference, position) for position, reference in enumerate(named.operands, 1)]
    form = _form(tuples)
    read = [_node(name, fields, position, form) for position, (name, fields) in enumerate(tuples, 1)]
    roots: list[UserDataNode] = []
    position = 0
    while position < len(read):
        node, count = read[position]
        position += 1
        if node.type == _TABLE:
            inner = read[position : position + count]
            if len(inner) < count or any(item.type == _TABLE for item, _ in inner):
                raise UserDataError(
                    f"{node.describe()}, a table of {count}, is not followed by {count} other nodes"
                )
            node = UserDataNode(
                node.position, node.type, node.offset, node.size, inner=tuple(i for i, _ in inner)
            )
            position += count
        roots.append(node)
    return roots


def _tuple(module: Module, reference: str, position: int) -> tuple[str, list[int]]:
    """The type name and the integer operands of the node at `position`."""
    number = reference[1:]
    item = module.metadata.get(int(number)) if number.isdigit() else None
    operands = item.operands if item is not None else []
    fail = f"{USER_DATA_NODES[1:]} node {position}"
    kind = string_value(operands[0]) if operands else None
    least = len(_EARLIER_FORM.header)
    if kind is None or len(operands) <= least:
        raise UserDataError(f"{fail} is not a tuple of a type name and at least {least} integers")
    name = kind.decode("utf-8", "replace")
    return name, [
        _integer(operand, f"{fail} ({name}) operand {n}") for n, operand in enumerate(operands[1:], 1)
    ]


def _fields(name: str) -> tuple[str, ...]:
    """The operands a node of type `name` has after the header."""
    if name == _TABLE:
        return _TABLE_FIELDS
    if name in _SIZED:
        return _SIZED_FIELDS
    return () if name == "PushConst" else _DESCRIPTOR_FIELDS


def _form(tuples: list[tuple[str, list[int]]]) -> _NodeForm:
    """The earlier form when a table or descriptor node has exactly its operands (fewer than LGC's
    form takes), else LGC's form."""
    earlier = len(_EARLIER_FORM.header)
    exact = any(len(fields) == earlier + len(_fields(name)) for name, fields in tuples if _fields(name))
    return _EARLIER_FORM if exact else _FORM


def _node(name: str, fields: list[int], position: int, form: _NodeForm) -> tuple[UserDataNode, int]:
    """The node at `position`, and the number of nodes of its table (0 for other nodes)."""
    header, kind = len(form.header), _fields(name)
    if len(fields) < header + len(kind):
        expected = form.describe(kind)
        if form is _FORM:
            expected += f" nor {_EARLIER_FORM.describe(kind)}"
        raise UserDataError(
            f"{USER_DATA_NODES[1:]} node {position} ({name}) has {len(fields) + 1} operand(s), not {expected}"
        )
    offset, size = fields[header - 2], fields[header - 1]
    if kind is _DESCRIPTOR_FIELDS:
        return UserDataNode(position, name, offset, size, set=fields[header], binding=fields[header + 1]), 0
    return UserDataNode(position, name, offset, size), fields[header] if name == _TABLE else 0


def _integer(operand: str, where: str) -> int:
    """An `i32`/`i64` operand's value as LGC reads it, zero-extended from its width (`i32 -16` is
    0xFFFFFFF0)."""
    parsed = Operand.parse(operand)
    width = parsed.type[1:]
    if not parsed.type.startswith("i") or not width.isdigit() or not parsed.value.removeprefix("-").isdigit():
        raise UserDataError(f"{where} is `{operand}`, not an integer constant")
    return int(parsed.value) & ((1 << int(width)) - 1)


class UserDataBuffers:
    """Loading the printf buffer from user data, as the module's `node` says, in the functions of a module:
    the instructions before each call, and the internal `alwaysinline` helpers they call (`define`)."""

    def __init__(self, found: PrintfBufferNode, prefix: str) -> None:
        self.found = found
        self.prefix = prefix
        self.spills = False

    @property
    def _buffer_helper(self) -> str:
        return f"{self.prefix}printf.buffer.from.{'table' if self.found.in_table else 'user.data'}"

    @property
    def _spill_helper(self) -> str:
        return f"{self.prefix}spilled.user.data"

    @staticmethod
    def reaches(function: Function) -> bool:
        """Whether `function` takes user data the convention's way: any `%userdataN` or `%spillTable`
        parameter. One that takes none (LLPC's lit inputs before `MutateEntryPoint`) gets the buffer from
        the runtime's global instead."""
        return any(
            parameter.value == "%spillTable" or _USER_DATA_PARAMETER.fullmatch(parameter.value) is not None
            for parameter in function.parameters
        )

    def load(self, function: Function, result: str, suffix: str, debug: str) -> list[Instruction]:
        """The instructions defining `result` (`%name`) as the printf buffer in `function`, their other
        values named with `suffix`; CallProblem saying why `function` cannot reach the user data it
        needs."""
        parameters = {parameter.value: parameter for parameter in function.parameters}
        instructions: list[Instruction] = []
        dwords = []
        for dword in self.found.user_data_dwords:
            own = parameters.get(f"%userdata{dword}")
            if own is not None:
                if own.type != "i32" or "inreg" not in own.attributes:
                    raise CallProblem(
                        f"parameter {own.value} of @{function.name} is `{own.text}`, not `i32 inreg`"
                    )
                dwords.append(f"i32 {own.value}")
                continue
            spill = parameters.get("%spillTable")
            if spill is None or spill.type != "i32" or "inreg" not in spill.attributes:
                raise CallProblem(
                    f"the printf buffer's node {self.found.node.describe()} needs user data dword "
                    f"{dword}, and @{function.name} has no `i32 inreg %userdata{dword}` parameter (nor an "
                    "`i32 inreg %spillTable` to load it from)"
                )
            self.spills = True
            value = f"%{self.prefix}userdata{dword}.{suffix}"
            call = f"call i32 {global_name(self._spill_helper)}(i32 {spill.value}, i32 {4 * dword})"
            instructions.append(Instruction(f"{value} = {call}{debug}"))
            dwords.append(f"i32 {value}")
        call = f"call ptr addrspace(7) {global_name(self._buffer_helper)}({', '.join(dwords)})"
        instructions.append(Instruction(f"{result} = {call}{debug}"))
        return instructions

    def declarations(self) -> list[str]:
        """The declarations of the helpers `load`'s instructions call, for a module parsed before `define`."""
        parameters = ", ".join(["i32"] * len(self.found.user_data_dwords))
        declared = [f"declare ptr addrspace(7) {global_name(self._buffer_helper)}({parameters})"]
        return declared + (
            [f"declare i32 {global_name(self._spill_helper)}(i32, i32)"] if self.spills else []
        )

    def define(self, module: ir.Module) -> None:
        """Define the helpers `load`'s instructions call."""
        if self.found.in_table:
            function = internal_function(
                module, self._buffer_helper, _FAT_POINTER, [(I32, "table")], ["alwaysinline", "nounwind"]
            )
            builder = ir.IRBuilder(function.append_basic_block("load"))
            table = _extend_with_pc(module, builder, function.args[0], "table.address")
            at = builder.gep(
                table,
                [constant(4 * self.found.node.offset, I32)],
                source_etype=ir.IntType(8),
                name="desc.ptr",
            )
            descriptor = builder.load(at, typ=ir.VectorType(I32, DESCRIPTOR_DWORDS), align=4, name="desc")
        else:
            parameters = [(I32, f"desc{n}") for n in range(DESCRIPTOR_DWORDS)]
            function = internal_function(
                module, self._buffer_helper, _FAT_POINTER, parameters, ["alwaysinline", "nounwind"]
            )
            builder = ir.IRBuilder(function.append_basic_block("build"))
            descriptor = ir.Constant(ir.VectorType(I32, DESCRIPTOR_DWORDS), None)
            for lane, dword in enumerate(function.args):
                descriptor = builder.insert_element(
                    descriptor, dword, constant(lane, I32), name=f"desc.{lane}"
                )
        bits = builder.bitcast(descriptor, ir.IntType(32 * DESCRIPTOR_DWORDS), name="desc.bits")
        resource = builder.inttoptr(bits, _RESOURCE, name="resource")
        builder.ret(builder.addrspacecast(resource, _FAT_POINTER, name="buffer"))
        if self.spills:
            self._define_spill(module)

    def _define_spill(self, module: ir.Module) -> None:
        function = internal_function(
            module,
            self._spill_helper,
            I32,
            [(I32, "spill.table"), (I32, "byte")],
            ["alwaysinline", "nounwind"],
        )
        builder = ir.IRBuilder(function.append_basic_block("load"))
        table = _extend_with_pc(module, builder, function.args[0], "spill.address")
        at = builder.gep(table, [function.args[1]], source_etype=ir.IntType(8), name="dword.ptr")
        builder.ret(builder.load(at, typ=I32, align=4, name="dword"))


def _extend_with_pc(module: ir.Module, builder: ir.IRBuilder, low: ir.Value, name: str) -> ir.Value:
    """A 32-bit address in the constant address space made whole with the program counter's high half,
    as LGC's `AddressExtender::extendWithPc` does."""
    pc = builder.call(declared(module, "llvm.amdgcn.s.getpc", I64, []), [], name="pc")
    high = builder.and_(pc, constant(_HIGH_HALF), name="pc.high")
    address = builder.or_(high, builder.zext(low, I64, name=f"{name}.low"), name=name)
    return builder.inttoptr(address, _CONSTANT_POINTER, name=f"{name}.ptr")
