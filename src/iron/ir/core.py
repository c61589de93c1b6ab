"""The IR's data structures: values, operations, blocks and kernels.

The IR is typed SSA with structured control flow. Every ``Value`` is defined exactly once, by an ``Op`` (its
``result``) or as an argument of a ``Block`` (kernel parameters, a loop's induction variable). Control flow is
nested: ``if``/``for``/``while`` ops own regions (``Block``s) instead of jumping between basic blocks, which maps
one-to-one onto C-family ``if``/``for``/``while`` and onto SPIR-V's structured selection and loop constructs.
Python locals that are assigned more than once live in ``var`` slots (read with ``get``, written with ``set``),
as Clang does before mem2reg; values assigned once are plain SSA values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .types import Type


@dataclass(frozen=True)
class Loc:
    """A source location: file, 1-based line, 0-based column, and the text of that line (for carets)."""

    file: str
    line: int
    col: int
    text: str = ""
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


class Value:
    """An SSA value. ``owner`` is the defining Op, or the Block whose argument it is."""

    __slots__ = ("type", "name", "owner", "uid")
    _counter = 0

    def __init__(self, type: Type, name: str | None = None, owner: Any = None):
        self.type = type
        self.name = name
        self.owner = owner
        Value._counter += 1
        self.uid = Value._counter

    def __repr__(self) -> str:
        return f"Value({self.name or self.uid}: {self.type})"


class Op:
    """One operation: ``opcode`` (see ``iron.ir.ops.OPS``), operands, at most one result, attributes, regions."""

    __slots__ = ("opcode", "operands", "result", "attrs", "regions", "loc", "parent")

    def __init__(
        self,
        opcode: str,
        operands: list[Value] | None = None,
        result_type: Type | None = None,
        attrs: dict[str, Any] | None = None,
        regions: list[Block] | None = None,
        loc: Loc | None = None,
        name: str | None = None,
    ):
        self.opcode = opcode
        self.operands = list(operands or [])
        self.result = Value(result_type, name, self) if result_type is not None else None
        self.attrs = dict(attrs or {})
        self.regions = list(regions or [])
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

    def __repr__(self) -> str:
        return f"Op({self.opcode})"

    def walk(self) -> Iterator[Op]:
        """This op, then every op nested in its regions, in program order."""
        yield self
        for r in self.regions:
            yield from r.walk()


class Block:
    """A straight-line list of ops; ``args`` are values the owner defines for it (parameters, loop index)."""

    __slots__ = ("ops", "args", "parent")

    def __init__(self, args: list[Value] | None = None):
        self.ops: list[Op] = []
        self.args: list[Value] = list(args or [])
        for a in self.args:
            a.owner = self
        self.parent: Op | None = None

    def append(self, op: Op) -> Op:
        op.parent = self
        self.ops.append(op)
        return op

    def walk(self) -> Iterator[Op]:
        for op in list(self.ops):
            yield from op.walk()


@dataclass
class Param:
    """A kernel parameter: a buffer (``kind="buffer"``), a runtime scalar (``"scalar"``).

    Constexpr parameters do not appear: they are folded into the body as constants.
    """

    name: str
    kind: str
    value: Value
    readonly: bool = False  # buffers only: never stored to or updated atomically

    @property
    def type(self) -> Type:
        return self.value.type


@dataclass
class Kernel:
    """A kernel after the front-end: one variant (one dtype for ``T``, one set of constexpr values)."""

    name: str
    params: list[Param]
    body: Block
    loc: Loc | None = None
    attrs: dict[str, Any] = field(default_factory=dict)  # dtype, constexprs, uses_barrier, ...

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
