"""Constant folding: evaluate pure ops on constants, and resolve ``if``/``select`` on constant conditions.

Values are computed by ``iron.interp.semantics.eval_pure``, the executable definition of the ops that the interpreter
runs too, so a folded kernel and an unfolded one agree bit for bit; that module also pins down the cases C leaves
undefined (shift amounts are masked, ``INT_MIN / -1`` wraps, float->int casts saturate), so those fold like any
other. Two cases stay run-time ops: integer division or remainder by zero, which must fault where it runs, and
results that are NaN or infinite, because a ``const`` holds a finite number that every emitter can spell.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..interp.semantics import const_array, eval_pure
from ..ir import ops as O
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import (
    ValueMap,
    become_const,
    const_value,
    inherit_name,
    is_const,
    is_jump,
    is_while_condition,
    rewrite_operands,
)


class Fold:
    """Fold constant expressions, constant ``if``s and ``select``s, and zero-trip constant ``for`` loops."""

    name = "fold"

    def run(self, kernel: Kernel) -> bool:
        self.changed = False
        self.subst: ValueMap = {}
        self._block(kernel.body)
        return self.changed

    def _block(self, block: Block) -> None:
        pending = deque(block.ops)
        out: list[Op] = []
        while pending:
            op = pending.popleft()
            rewrite_operands(op, self.subst)
            taken = self._taken_region(op, block)
            if taken is not None:
                # the taken region's ops now run unconditionally, in place of the `if`
                pending.extendleft(reversed(taken.ops))
                op.parent = None
                self.changed = True
                continue
            if _zero_trip_loop(op):
                op.parent = None
                self.changed = True
                continue
            for r in op.regions:
                self._block(r)
            if op.opcode == "select" and is_const(op.operands[0]):
                self._replace(op.result, op.operands[1] if const_value(op.operands[0]) else op.operands[2])
                op.parent = None
                continue
            if _foldable(op):
                value = evaluate(op)
                if value is not None:
                    become_const(op, value)
                    self.changed = True
            op.parent = block
            out.append(op)
            if is_jump(op):
                break  # what follows a jump in the same block never runs
        for op in pending:
            op.parent = None
        block.ops = out

    def _taken_region(self, op: Op, block: Block) -> Block | None:
        if op.opcode != "if" or not is_const(op.operands[0]):
            return None
        taken = op.regions[0] if const_value(op.operands[0]) else op.regions[1]
        if taken.ops and is_jump(taken.ops[-1]) and is_while_condition(block):
            return None  # a while condition must end with `condition`, so a jump may not be hoisted into it
        return taken

    def _replace(self, old: Value, new: Value) -> None:
        inherit_name(new, old)
        self.subst[old] = new
        self.changed = True


def _foldable(op: Op) -> bool:
    info = O.OPS[op.opcode]
    return info.pure and bool(op.operands) and op.result is not None and all(is_const(v) for v in op.operands)


def _zero_trip_loop(op: Op) -> bool:
    if op.opcode != "for" or not all(is_const(v) for v in op.operands):
        return False
    lo, hi, step = (const_value(v) for v in op.operands)
    return step != 0 and len(range(lo, hi, step)) == 0


def evaluate(op: Op) -> bool | int | float | None:
    """The constant ``op`` computes from its const operands, or None when it must be left to run time."""
    args = [const_value(v) for v in op.operands]
    rtype = op.result.type
    if not _defined(op, args):
        return None
    arrays = [const_array(a, v.type) for a, v in zip(args, op.operands)]
    try:
        with np.errstate(all="ignore"):
            result = np.asarray(eval_pure(op.opcode, arrays, rtype, dict(op.attrs)), dtype=rtype.np_dtype)
    except (ArithmeticError, ValueError, TypeError, NotImplementedError):
        return None  # not evaluable at compile time: leave it to the run-time semantics
    result = result.reshape(())
    if rtype.is_bool:
        return bool(result)
    if rtype.is_int:
        return int(result)
    value = float(result)  # exact: every f16/bf16/f32 value is a Python float
    return value if math.isfinite(value) else None


def _defined(op: Op, args: list) -> bool:
    """False for integer division by zero, which must stay a run-time op so it faults where it runs."""
    return not (op.opcode in ("div", "rem") and op.operands[0].type.is_int and args[1] == 0)
