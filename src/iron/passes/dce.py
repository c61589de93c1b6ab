"""Dead-code elimination, iterated to a fixpoint.

Removes: ops whose result nobody reads when they are pure or only read state (loads, ``get``, ``shared``, SIMD
reductions and exchanges); ``var`` slots that are never read, with every ``set`` to them; ``if``s with two empty
branches; ``for`` loops with an empty body; and code after a jump, or after an ``if`` whose two branches both end
in a jump. Stores, atomics, barriers, ``while`` loops and non-empty ``for`` loops stay.

Removing an unused load also removes the out-of-bounds fault it could have raised in the interpreter; every GPU
compiler does the same, and the language does not promise to fault.
"""

from __future__ import annotations

from collections import Counter

from ..ir import ops as O
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import forget_uses, is_jump, is_while_condition, use_counts

# impure ops that only read state: dropping an unused one changes nothing observable
REMOVABLE_WHEN_UNUSED = {"load", "get", "shared", "local"} | O.SIMD_OPS


class DCE:
    """Delete code that cannot affect any store, atomic, barrier or control decision that matters."""

    name = "dce"

    def run(self, kernel: Kernel) -> bool:
        changed = False
        while True:
            self.counts: Counter[Value] = use_counts(kernel)
            self.reads: Counter[Value] = Counter(op.operands[0] for op in kernel.walk() if op.opcode == "get")
            if not self._block(kernel.body):
                return changed
            changed = True

    def _block(self, block: Block) -> bool:
        changed = self._drop_unreachable(block)
        keep: list[Op] = []
        # walk backwards so a use is gone before its definition is looked at
        for op in reversed(block.ops):
            for r in reversed(op.regions):
                changed |= self._block(r)
            if self._dead(op):
                forget_uses(op, self.counts)
                if op.opcode == "get":
                    self.reads[op.operands[0]] -= 1
                op.parent = None
                changed = True
            else:
                keep.append(op)
        keep.reverse()
        block.ops = keep
        return changed

    def _drop_unreachable(self, block: Block) -> bool:
        for i, op in enumerate(block.ops):
            ends = is_jump(op) or (op.opcode == "if" and all(r.ops and is_jump(r.ops[-1]) for r in op.regions))
            if ends and i + 1 < len(block.ops) and not is_while_condition(block):
                for dead in block.ops[i + 1 :]:
                    forget_uses(dead, self.counts)
                    for o in dead.walk():
                        if o.opcode == "get":
                            self.reads[o.operands[0]] -= 1
                    dead.parent = None
                del block.ops[i + 1 :]
                return True
        return False

    def _dead(self, op: Op) -> bool:
        code = op.opcode
        if code == "if":
            return not op.regions[0].ops and not op.regions[1].ops
        if code == "for":
            return not op.regions[0].ops
        if code == "var":  # its sets must be gone too (one may sit before a read removed later in this sweep)
            return self.reads[op.result] <= 0 and self.counts[op.result] <= 0
        if code == "set":
            return self.reads[op.operands[0]] <= 0
        if op.result is None or self.counts[op.result] > 0:
            return False
        return O.OPS[code].pure or code in REMOVABLE_WHEN_UNUSED
