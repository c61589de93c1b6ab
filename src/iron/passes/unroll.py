"""Unroll ``static_range`` loops: ``for`` ops with ``attrs['unroll']`` and constant bounds.

Each iteration becomes a copy of the body, inlined where the loop was, with the induction variable replaced by a
fresh ``i32`` const (named like the induction variable). Inner static loops are unrolled first, so an outer copy
clones an already flat body. The front-end never lets ``break``/``continue`` target a static loop; a ``return`` may
appear, and when a copy's top level ends with one, later iterations and the rest of the enclosing block are dead
and are not emitted (a jump must end its block).
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.core import Block, Kernel, Op
from ..ir.rewrite import ValueMap, clone_ops_into, const_value, is_jump, make_const

MAX_UNROLL = 4096  # iterations per loop; beyond this, code size explodes for no gain


class Unroll:
    """Fully unroll every ``for`` marked ``unroll``."""

    name = "unroll"

    def __init__(self, max_iterations: int = MAX_UNROLL):
        self.max_iterations = max_iterations

    def run(self, kernel: Kernel) -> bool:
        return self._block(kernel.body)

    def _block(self, block: Block) -> bool:
        changed = False
        out: list[Op] = []
        for op in block.ops:
            for r in op.regions:
                changed |= self._block(r)
            if op.opcode == "for" and op.attrs.get("unroll"):
                self._expand(op, block, out)
                changed = True
            else:
                out.append(op)
            if out and is_jump(out[-1]):
                break  # the copy ended with `return`: nothing after it in this block can run
        kept = {id(op) for op in out}
        for op in block.ops:
            if id(op) not in kept:
                op.parent = None
        block.ops = out
        return changed

    def _expand(self, loop: Op, parent: Block, out: list[Op]) -> None:
        lo, hi, step = (const_value(v) for v in loop.operands)
        if not all(isinstance(b, int) for b in (lo, hi, step)):
            raise ValueError(f"static_range needs constant integer bounds{_where(loop)}")
        if step == 0:
            raise ValueError(f"static_range step must not be zero{_where(loop)}")
        trips = range(lo, hi, step)
        if len(trips) > self.max_iterations:
            raise ValueError(
                f"static_range of {len(trips)} iterations exceeds the unroll limit of {self.max_iterations}"
                f"{_where(loop)}; use range() for long loops"
            )
        body = loop.regions[0]
        _reject_loop_jumps(body, loop)
        iv = body.args[0]
        for i in trips:
            iv_const = make_const(i, t.i32, loop.loc, iv.name)
            iv_const.parent = parent
            out.append(iv_const)
            mapping: ValueMap = {iv: iv_const.result}
            clone_ops_into(body.ops, out, parent, mapping)
            if out and is_jump(out[-1]):
                return


def _reject_loop_jumps(block: Block, loop: Op) -> None:
    """A ``break``/``continue`` aimed at the static loop itself would have nowhere to go once it is unrolled."""
    for op in block.ops:
        if op.opcode in ("break", "continue"):
            raise ValueError(f"cannot unroll a static_range containing `{op.opcode}`{_where(op)}")
        if op.opcode == "if":
            for r in op.regions:
                _reject_loop_jumps(r, loop)
        # jumps inside nested for/while bodies target those loops, which stay loops


def _where(op: Op) -> str:
    return f" (line {op.loc.line})" if op.loc is not None else ""
