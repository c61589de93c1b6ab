"""Algebraic simplification with identities that are exact in IEEE-754 and in wrapping two's complement.

Every rewrite gives the same bits for every input, NaNs, infinities and signed zeros included, so no fast-math
flag is needed. That rules out, for floats: ``x + 0.0`` (it turns ``-0.0`` into ``+0.0``; only ``x + -0.0`` and
``x - 0.0`` are identities), ``x * 0``, ``x - x`` and ``x == x`` (NaN), and all re-association.

Strength reduction is applied to ``u32`` only: ``x * 2^k -> x << k``, ``x / 2^k -> x >> k``, ``x % 2^k -> x & (2^k -
1)``. For ``i32`` the multiply would also be exact under wrapping, but C makes left shifts of negative numbers
undefined (before C++20), and signed division rounds toward zero where a shift rounds down, so the GPU compilers are
left to do it there.

An unsigned value compared with zero (``x >= 0``, ``x < 0``) is a constant.

Ops made dead by a rewrite are left for ``dce``.
"""

from __future__ import annotations

import math
from typing import Any

from ..ir import types as t
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import ValueMap, become_const, const_value, defining_op, inherit_name, make_const, rewrite_operands

_MISSING = object()
_INVERSE = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
_ALL_ONES = {"i8": -1, "u8": 2**8 - 1, "i32": -1, "u32": 2**32 - 1, "i64": -1, "u64": 2**64 - 1}


def _is(v: Value, target: Any) -> bool:
    """``v`` is a const equal to ``target``; for floats the sign of zero must match too."""
    c = const_value(v, _MISSING)
    if c is _MISSING or isinstance(c, bool) != isinstance(target, bool):
        return False
    if isinstance(c, float):
        return c == target and math.copysign(1.0, c) == math.copysign(1.0, target)
    return c == target


def _zero(ty: t.ScalarType) -> bool | int | float:
    return False if ty.is_bool else 0


def _pow2_exponent(v: Value) -> int | None:
    c = const_value(v)
    if isinstance(c, int) and not isinstance(c, bool) and c > 1 and c & (c - 1) == 0:
        return c.bit_length() - 1
    return None


class _Const:
    """A rule's answer: the op computes this constant."""

    def __init__(self, value: bool | float):
        self.value = value


class Simplify:
    """Rewrite ops by exact algebraic identities (see the module docstring for the list)."""

    name = "simplify"

    def run(self, kernel: Kernel) -> bool:
        self.changed = False
        self.subst: ValueMap = {}
        self._block(kernel.body)
        return self.changed

    def _block(self, block: Block) -> None:
        out: list[Op] = []
        for op in block.ops:
            rewrite_operands(op, self.subst)
            for r in op.regions:
                self._block(r)
            rule = _RULES.get(op.opcode)
            answer = rule(self, op, out) if rule is not None else None
            if isinstance(answer, Value):
                inherit_name(answer, op.result)
                self.subst[op.result] = answer
                op.parent = None
                self.changed = True
                continue
            if isinstance(answer, _Const):
                become_const(op, answer.value)
                self.changed = True
            elif answer is True:
                self.changed = True  # the rule rewrote the op in place
            out.append(op)
        block.ops = out

    def _new_const(self, value: int, ty: t.ScalarType, at: Op, out: list[Op]) -> Value:
        c = make_const(value, ty, at.loc)
        c.parent = at.parent
        out.append(c)
        return c.result

    # -- rules: each returns None (no change), a Value (the op's result equals it), a _Const, or True (mutated)

    def add(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        zero = -0.0 if x.type.is_float else 0  # x + -0.0 == x for every x; x + 0.0 is not (-0.0 + 0.0 == 0.0)
        if _is(y, zero):
            return x
        if _is(x, zero):
            return y
        return None

    def sub(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if _is(y, 0.0 if x.type.is_float else 0):  # x - (+0.0) == x + (-0.0)
            return x
        if x.type.is_int and x is y:
            return _Const(0)
        if x.type.is_int and _is(x, 0):
            op.opcode, op.operands = "neg", [y]
            return True
        return None

    def mul(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        one = 1.0 if x.type.is_float else 1
        if _is(y, one):
            return x
        if _is(x, one):
            return y
        if x.type.is_int and (_is(x, 0) or _is(y, 0)):
            return _Const(0)
        if x.type == t.u32:
            for a, b in ((x, y), (y, x)):
                k = _pow2_exponent(b)
                if k is not None:
                    op.opcode, op.operands = "shl", [a, self._new_const(k, t.u32, op, out)]
                    return True
        return None

    def div(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if _is(y, 1.0 if x.type.is_float else 1):
            return x
        k = _pow2_exponent(y) if x.type == t.u32 else None
        if k is not None:
            op.opcode, op.operands = "shr", [x, self._new_const(k, t.u32, op, out)]
            return True
        return None

    def rem(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if x.type.is_int and _is(y, 1):
            return _Const(0)
        k = _pow2_exponent(y) if x.type == t.u32 else None
        if k is not None:
            op.opcode, op.operands = "and", [x, self._new_const((1 << k) - 1, t.u32, op, out)]
            return True
        return None

    def min_max(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        return x if x is y else None

    def and_(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if x is y:
            return x
        ty = x.type
        ones = True if ty.is_bool else _ALL_ONES[ty.name]
        for a, b in ((x, y), (y, x)):
            if _is(b, ones):
                return a
            if _is(b, _zero(ty)):
                return _Const(_zero(ty))
        return None

    def or_(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if x is y:
            return x
        ty = x.type
        ones = True if ty.is_bool else _ALL_ONES[ty.name]
        for a, b in ((x, y), (y, x)):
            if _is(b, _zero(ty)):
                return a
            if _is(b, ones):
                return _Const(ones)
        return None

    def xor(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if x is y:
            return _Const(_zero(x.type))
        for a, b in ((x, y), (y, x)):
            if _is(b, _zero(x.type)):
                return a
            if x.type.is_bool and _is(b, True):
                op.opcode, op.operands = "not", [a]
                return True
        return None

    def shift(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        return x if _is(y, 0) else None

    def neg(self, op: Op, out: list[Op]) -> Any:
        inner = defining_op(op.operands[0], "neg")
        return inner.operands[0] if inner is not None else None

    def not_(self, op: Op, out: list[Op]) -> Any:
        inner = defining_op(op.operands[0])
        if inner is None:
            return None
        if inner.opcode == "not":
            return inner.operands[0]
        if inner.opcode in _INVERSE and not inner.operands[0].type.is_float:  # !(a < b) is a >= b unless NaN
            op.opcode, op.operands = _INVERSE[inner.opcode], list(inner.operands)
            return True
        return None

    def compare(self, op: Op, out: list[Op]) -> Any:
        x, y = op.operands
        if x is y and not x.type.is_float:
            return _Const(op.opcode in ("eq", "le", "ge"))
        if x.type.is_bool:
            for a, b in ((x, y), (y, x)):
                if (op.opcode == "eq" and _is(b, True)) or (op.opcode == "ne" and _is(b, False)):
                    return a
        if x.type.is_int and not x.type.is_signed:  # an unsigned value is never below zero
            if _is(y, 0) and op.opcode in ("ge", "lt"):
                return _Const(op.opcode == "ge")
            if _is(x, 0) and op.opcode in ("le", "gt"):
                return _Const(op.opcode == "le")
        return None

    def abs_(self, op: Op, out: list[Op]) -> Any:
        inner = defining_op(op.operands[0])
        if inner is None:
            return None
        if inner.opcode == "abs":
            return inner.result
        if inner.opcode == "neg":  # |-x| == |x|, also for INT_MIN under wrapping
            op.operands = [inner.operands[0]]
            return True
        return None

    def cast(self, op: Op, out: list[Op]) -> Any:
        x = op.operands[0]
        return x if x.type == op.result.type else None

    def select(self, op: Op, out: list[Op]) -> Any:
        c, a, b = op.operands
        if a is b:
            return a
        if op.result.type.is_bool:
            if _is(a, True) and _is(b, False):
                return c
            if _is(a, False) and _is(b, True):
                op.opcode, op.operands = "not", [c]
                return True
        inner = defining_op(c, "not")
        if inner is not None:
            op.operands = [inner.operands[0], b, a]
            return True
        return None

    def if_(self, op: Op, out: list[Op]) -> Any:
        inner = defining_op(op.operands[0], "not")
        if inner is None:
            return None
        op.operands = [inner.operands[0]]
        op.regions.reverse()
        return True


_RULES = {
    "add": Simplify.add,
    "sub": Simplify.sub,
    "mul": Simplify.mul,
    "div": Simplify.div,
    "rem": Simplify.rem,
    "min": Simplify.min_max,
    "max": Simplify.min_max,
    "and": Simplify.and_,
    "or": Simplify.or_,
    "xor": Simplify.xor,
    "shl": Simplify.shift,
    "shr": Simplify.shift,
    "neg": Simplify.neg,
    "not": Simplify.not_,
    **{c: Simplify.compare for c in _INVERSE},
    "abs": Simplify.abs_,
    "cast": Simplify.cast,
    "select": Simplify.select,
    "if": Simplify.if_,
}
