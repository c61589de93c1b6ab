"""A small builder that appends ops at an insertion point, tagging each with the current source location."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import types as t
from .core import Block, Loc, Op, Value
from .ops import OPS


class Builder:
    """Appends ops to ``block``. ``loc`` is attached to every op created until it is changed."""

    def __init__(self, block: Block, loc: Loc | None = None):
        self.block = block
        self.loc = loc

    @contextmanager
    def at(self, block: Block) -> Iterator[Builder]:
        """Temporarily append to ``block`` (e.g. the body of an ``if``)."""
        saved = self.block
        self.block = block
        try:
            yield self
        finally:
            self.block = saved

    def op(
        self,
        opcode: str,
        operands: list[Value] | None = None,
        result_type: t.Type | None = None,
        attrs: dict[str, Any] | None = None,
        regions: list[Block] | None = None,
        name: str | None = None,
    ) -> Op:
        if opcode not in OPS:
            raise ValueError(f"unknown opcode {opcode!r}")
        op = Op(opcode, operands, result_type, attrs, regions, self.loc, name)
        self.block.append(op)
        return op

    # -- conveniences returning the result value --------------------------------------------------------------

    def const(self, value: bool | int | float, type: t.ScalarType) -> Value:
        if type.is_bool:
            value = bool(value)
        elif type.is_int:
            value = int(value)
        else:
            # hold exactly the value the type can represent (f16/bf16/f32 rounding to nearest even)
            value = float(type.np_dtype.type(value))
        return self.op("const", [], type, {"value": value}).result

    def binary(self, opcode: str, a: Value, b: Value) -> Value:
        rtype = t.bool_ if opcode in ("lt", "le", "gt", "ge", "eq", "ne") else a.type
        return self.op(opcode, [a, b], rtype).result

    def unary(self, opcode: str, a: Value) -> Value:
        return self.op(opcode, [a], a.type).result

    def cast(self, a: Value, to: t.ScalarType) -> Value:
        if a.type == to:
            return a
        return self.op("cast", [a], to).result

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return self.op("select", [cond, a, b], a.type).result

    def thread(self, opcode: str, axis: int | None = None) -> Value:
        attrs = {"axis": axis} if axis is not None else {}
        return self.op(opcode, [], t.i32, attrs).result

    def load(self, buf: Value, index: Value, name: str | None = None) -> Value:
        return self.op("load", [buf, index], buf.type.elem, name=name).result

    def store(self, buf: Value, index: Value, value: Value) -> Op:
        return self.op("store", [buf, index, value])

    def var(self, elem: t.ScalarType, name: str | None = None) -> Value:
        return self.op("var", [], t.VarType(elem), name=name).result

    def get(self, var: Value, name: str | None = None) -> Value:
        return self.op("get", [var], var.type.elem, name=name).result

    def set(self, var: Value, value: Value) -> Op:
        return self.op("set", [var, value])

    def if_(self, cond: Value) -> tuple[Op, Block, Block]:
        then, else_ = Block(), Block()
        op = self.op("if", [cond], regions=[then, else_])
        return op, then, else_

    def for_(self, lo: Value, hi: Value, step: Value, iv_name: str | None = None, unroll: bool = False):
        body = Block([Value(t.i32, iv_name)])
        op = self.op("for", [lo, hi, step], attrs={"unroll": unroll} if unroll else {}, regions=[body])
        return op, body

    def while_(self) -> tuple[Op, Block, Block]:
        cond, body = Block(), Block()
        op = self.op("while", [], regions=[cond, body])
        return op, cond, body
