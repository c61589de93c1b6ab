"""Common-subexpression elimination over pure ops, scoped by the region tree.

An op is available to everything after it in its block and inside regions nested there; values defined inside a
region are forgotten when the region ends (the ``then`` branch does not dominate the ``else`` branch or the code
after the ``if``). Only pure ops (``OPS[op].pure``, thread indices included) take part: loads, ``get``, SIMD ops,
atomics, ``shared`` and ``var`` observe or create state and are never merged.

Commutative ops match with their operands swapped when that is exact: for every type on integers and bools, and
for ``eq``/``ne`` on floats. Float ``add``/``mul``/``min``/``max`` keep their operand order, because the result's
NaN payload (and ``min(-0.0, +0.0)``) can depend on it.
"""

from __future__ import annotations

from typing import Any

from ..ir import ops as O
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import ValueMap, inherit_name, rewrite_operands


def _attr_key(value: Any) -> Any:
    # type name + repr keeps 0.0 and -0.0 apart, and True apart from 1 (Python's == merges both pairs)
    if isinstance(value, dict):
        return tuple(sorted((k, _attr_key(v)) for k, v in value.items()))
    return (type(value).__name__, repr(value))


def op_key(op: Op) -> tuple | None:
    """What two ops must share to compute the same value; None for ops CSE must not touch."""
    info = O.OPS[op.opcode]
    if not info.pure or op.result is None or op.regions:
        return None
    operands = [v.uid for v in op.operands]
    if op.opcode in O.COMMUTATIVE and (not op.operands[0].type.is_float or op.opcode in ("eq", "ne")):
        operands.sort()
    return (op.opcode, tuple(operands), _attr_key(op.attrs), op.result.type)


class CSE:
    """Replace a pure op by an identical earlier one that dominates it."""

    name = "cse"

    def run(self, kernel: Kernel) -> bool:
        self.changed = False
        self.subst: ValueMap = {}
        self._block(kernel.body, {})
        return self.changed

    def _block(self, block: Block, available: dict[tuple, Value]) -> None:
        # `available` is shared by reference with the enclosing scope; entries added here are removed on exit
        added: list[tuple] = []
        out: list[Op] = []
        for op in block.ops:
            rewrite_operands(op, self.subst)
            for r in op.regions:
                self._block(r, available)
            key = op_key(op)
            if key is not None:
                earlier = available.get(key)
                if earlier is not None:
                    inherit_name(earlier, op.result)
                    self.subst[op.result] = earlier
                    op.parent = None
                    self.changed = True
                    continue
                available[key] = op.result
                added.append(key)
            out.append(op)
        block.ops = out
        for key in added:
            del available[key]
