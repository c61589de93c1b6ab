"""Which IR values the C printer writes inline, inside the one expression that uses them.

The printer gives every IR value its own ``const`` local, except values this plan marks *inline*. A value is inlined
only when that cannot change what the program computes and keeps the code readable:

- it has exactly one use, in the same block (never pulled into a loop or branch it was computed outside of);
- it is pure (arithmetic, math, casts, thread indices) and unnamed -- a name the user wrote stays a named local --
  or it reads memory (``load``, unnamed) or a variable (``get``) and nothing between it and the place where the
  expression is finally written can change what it reads: no ``set`` of that variable; no store or atomic to that
  buffer and no barrier (another thread's write becomes visible at a barrier);
- the expression it lands in stays small (``MAX_WEIGHT`` ops);
- it is not a ``for`` loop's bound or step (C evaluates ``c < hi`` on every iteration; the IR evaluates it once).

Constants are never locals: they are printed as literals wherever they are used. Nor are unnamed thread indices
(``group_size(0)``, ``simd_size()``...): they read builtins, so repeating them costs nothing and reads better.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import ops as O
from ...ir.core import Block, Kernel, Op

#: the most IR ops one inlined expression may contain before a named temporary is introduced
MAX_WEIGHT = 8

_INLINE_READS = {"load", "get"}


@dataclass
class EmitPlan:
    uses: dict[int, int] = field(default_factory=dict)  # value uid -> operand references by printed ops
    users: dict[int, Op] = field(default_factory=dict)  # value uid -> the op that uses it (when used once)
    inline: set[int] = field(default_factory=set)  # value uids printed inside their user's expression

    def used(self, uid: int) -> bool:
        return self.uses.get(uid, 0) > 0


def plan_kernel(kernel: Kernel, lane_buffers: frozenset[int] = frozenset()) -> EmitPlan:
    """``lane_buffers``: buffers whose accesses print without their index (the element function of a vectorised
    kernel reads and writes them through references), so the index is not a use."""
    plan = EmitPlan()
    _count_live_uses(kernel, plan, lane_buffers)
    _plan_block(kernel.body, plan)
    for op in kernel.walk():
        for region in op.regions:
            _plan_block(region, plan)
    return plan


def _count_live_uses(kernel: Kernel, plan: EmitPlan, lane_buffers: frozenset[int]) -> None:
    """Count uses only from ops that will be printed, so C never declares a variable nobody reads.

    Unoptimised IR may hold dead values, empty ``if``s and variables that are set but never read. Definitions come
    before uses in walk order, so a backward sweep settles values; a ``set`` lives only while some live ``get``
    reads its variable, which can only grow, so the sweep repeats until the set of read variables stops changing.
    """
    ops = list(kernel.walk())
    read_vars: set[int] = set()
    while True:
        plan.uses.clear()
        plan.users.clear()
        live_ops: set[int] = set()
        for op in reversed(ops):  # an op's regions come after it in walk order: they are settled first
            r = op.result
            if op.opcode == "set":
                live = op.operands[0].uid in read_vars
            elif op.opcode == "if":  # an `if` with nothing live inside prints nothing, so its condition is unused
                live = any(id(inner) in live_ops for region in op.regions for inner in region.ops)
            else:
                live = r is None or op.opcode in O.ATOMICS or plan.used(r.uid)
            if live:
                live_ops.add(id(op))
                operands = op.operands
                if op.opcode in ("load", "store") and operands[0].uid in lane_buffers:
                    operands = [v for i, v in enumerate(operands) if i != 1]
                for v in operands:
                    plan.uses[v.uid] = plan.uses.get(v.uid, 0) + 1
                    plan.users[v.uid] = op
        now_read = {op.operands[0].uid for op in ops if op.opcode == "get" and plan.used(op.result.uid)}
        if now_read == read_vars:
            return
        read_vars = now_read


def is_builtin_read(op: Op) -> bool:
    """An unnamed thread-index op: printed where it is used, as often as it is used."""
    return op.opcode in O.THREAD_AXIS or op.opcode in ("simd_lane", "simd_group", "simd_size")


def _inlinable_kind(op: Op) -> bool:
    if op.opcode == "get":
        return True  # named after its variable, which the expression shows anyway
    if op.result.name:
        return False
    return op.opcode == "load" or (O.OPS[op.opcode].pure and op.opcode != "const")


def _plan_block(block: Block, plan: EmitPlan) -> None:
    ops = block.ops
    position = {id(op): i for i, op in enumerate(ops)}
    weight: dict[int, int] = {}
    candidates: set[int] = set()
    for op in ops:
        r = op.result
        if r is not None and r.name is None and is_builtin_read(op):
            plan.inline.add(r.uid)
            continue
        if r is None or op.opcode == "const" or not _inlinable_kind(op) or plan.uses.get(r.uid) != 1:
            continue
        user = plan.users[r.uid]
        if user.parent is not block:
            continue
        if user.opcode == "for" and any(v is r for v in user.operands[1:]):
            continue
        w = 1 + sum(weight.get(v.uid, 0) for v in op.operands)
        if w > MAX_WEIGHT:
            continue
        weight[r.uid] = w
        candidates.add(r.uid)
    # Walk backwards so that each value's user is decided first: an inlined value is written where its user's
    # expression is finally written (its anchor), and reads must be safe all the way to there.
    anchor: dict[int, int] = {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        r = op.result
        if r is None or r.uid not in candidates:
            continue
        user = plan.users[r.uid]
        at = position[id(user)]
        if user.result is not None and user.result.uid in plan.inline:
            at = anchor[user.result.uid]
        if op.opcode in _INLINE_READS and _clobbered(op, ops[i + 1:at]):
            continue
        plan.inline.add(r.uid)
        anchor[r.uid] = at


def _clobbered(read: Op, between: list[Op]) -> bool:
    """Whether an op in ``between`` (or nested in one) may change what ``read`` reads."""
    target = read.operands[0]
    for outer in between:
        for op in outer.walk():
            if read.opcode == "get":
                if op.opcode == "set" and op.operands[0] is target:
                    return True
            elif op.opcode in ("barrier", "fence") or any(v is target for v in O.buffers_written(op)):
                return True
    return False
