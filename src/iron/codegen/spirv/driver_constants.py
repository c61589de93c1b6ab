"""The values a Vulkan driver may turn into constants that Iron's IR computes at run time.

lavapipe's gallivm (Mesa 22.3, ``lp_build_mul``/``lp_build_div``/``lp_build_add`` in lp_bld_arit.c) returns 0.0 for
``x * 0.0`` and ``0.0 / x``, and x for ``x + 0.0``, whenever an operand *is* its constant +0.0, despite
SignedZeroInfNanPreserve. Before gallivm, NIR makes constants of values Iron's IR computes at run time: it unrolls
loops of a constant trip count (the index is a constant in each copy), promotes variables and register arrays to
SSA values, forwards a store to a later load of the same address in the same invocation (buffers and shared memory
too, up to a barrier) and removes the branches it decides (a variable set to 0.0 on the one path taken *is* 0.0
afterwards). ``f32(j) * inf`` gave 0.0 for NaN in the copy with j = 0, ``1.0 / f32(j)`` 0.0 for inf, and a helper's
``return 0.0`` from inside a loop (a variable set to 0.0 there, and to a run-time value on the path NIR removed)
made ``h(x) * -inf`` 0.0 (fuzz seed 705000879).

``driver_constants(kernel)`` finds the values that might so become constants, and the emitter takes products and
quotients with such an operand without letting a +0.0 reach gallivm (``values.ValueOps.zero_safe_product``). It
walks the structured IR once in program order (loops to a fixed point), with the variables and memories that may
hold a constant at each point, and errs towards "constant": a wrong one costs two integer xors, a missed one a
wrong result. A value is run-time when it depends on what only a launch knows (buffer contents, thread and group
indices along axis 0, scalar arguments, atomics, SIMD reductions) in a way no fold removes. Where a loop's trip
count or a branch's condition is run-time, a variable is a constant after it only if it is one on every path in:
a constant set before a run-time loop does not make the accumulator updated in it one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...ir import ops as O
from ...ir.core import Block, Kernel, Op, Value
from .values import driver_constant

#: thread indices the driver does not know (local_id along axis 1 or 2 is the constant 0 in the usual groups of
#: size 1 there; the group size is a specialisation constant, the SIMD width the driver's own)
_RUN_TIME = frozenset({"program_id", "group_id", "simd_lane", "simd_group", "num_groups", "num_threads"})
#: ops whose result is their first operand when that is one constant in every lane (Mesa folds them so)
_UNIFORM_OF_CONSTANT = frozenset({"simd_shuffle", "simd_shuffle_xor", "simd_broadcast", "simd_shuffle_up",
                                  "simd_shuffle_down", "simd_min", "simd_max"})
#: run-time values of a small range, which NIR's range analysis may compare with a constant (``(x & 7) < 8``)
_BOUNDED = frozenset({"and", "rem", "shr", "popcount", "clz", "ctz", "umulhi"})
#: ops that give a constant for two equal operands (``x - x``, ``x ^ x``, ``x == x``, ``x % x``)
_SELF_CANCELLING = frozenset({"sub", "xor", "div", "rem", *O.COMPARE})

#: ops other than ``store`` that write memory (copies, atomics, fragment stores): what they write may be a constant
#: only if what they copy is
_WRITERS = frozenset(name for name, info in O.OPS.items() if info.writes and name != "store")
#: the ops that change what may hold a constant, or where control goes
_STATEMENTS = frozenset({"set", "store", "barrier", "fence", "if", "for", "while", "break", "continue", "return",
                         "condition", *_WRITERS})
#: what may hold a constant at a point of the program, None where it is unreachable: (uid, None) for a variable or
#: a memory written at an index the driver need not know, (uid, index) for one element written at a literal index
#: (NIR splits register arrays indexed by constants into SSA values, one per element), and with either (uid, SOME),
#: what a load at an index the driver need not know may read
Key = tuple[int, int | str | None]
SOME = "some element"
State = frozenset[Key] | None


def _union(*states: State) -> State:
    live = [s for s in states if s is not None]
    return frozenset().union(*live) if live else None


def _meet(*states: State) -> State:
    live = [s for s in states if s is not None]
    return frozenset.intersection(*live) if live else None


@dataclass
class _Loop:
    latch: list[State] = field(default_factory=list)  # the states at `continue`s
    breaks: list[State] = field(default_factory=list)
    condition: Value | None = None  # a while loop's


def driver_constants(kernel: Kernel) -> frozenset[int]:
    """The uids of the values of ``kernel`` that a driver's folding may make constants (see the module doc)."""
    analysis = _Analysis(kernel)
    analysis.block(kernel.body, frozenset())
    return frozenset(analysis.known)


class _Analysis:
    def __init__(self, kernel: Kernel):
        ops = list(kernel.walk())
        self.known: set[int] = {op.result.uid for op in ops if op.opcode == "const"}
        self.added: list[int] = []  # what ``known`` gained, in order: a loop's pass under too large a state is undone
        # memories a barrier makes other invocations' (the driver forwards no store across one)
        self.shared_memory = {p.value.uid for p in kernel.params if p.kind == "buffer"}
        self.shared_memory |= {op.result.uid for op in ops if op.opcode == "shared"}
        self.loops: list[_Loop] = []
        self.same: dict[tuple[int, int], bool] = {}  # _same's answers

    def const(self, v: Value) -> bool:
        return v.uid in self.known

    def add(self, v: Value) -> None:
        if v.uid not in self.known:
            self.known.add(v.uid)
            self.added.append(v.uid)

    def undo(self, mark: int) -> None:
        """Forget what was found since ``len(self.added)`` was ``mark``."""
        self.known.difference_update(self.added[mark:])
        del self.added[mark:]

    def block(self, block: Block, state: State) -> State:
        for op in block.ops:
            if state is None:
                break
            if op.opcode in _STATEMENTS:
                state = self.statement(op, state)
            elif op.result is not None and op.result.uid not in self.known and self.constant(op, state):
                self.add(op.result)
        return state

    def statement(self, op: Op, state: frozenset[Key]) -> State:  # noqa: PLR0911 - one flat dispatch
        code = op.opcode
        if code == "set":
            var = (op.operands[0].uid, None)
            return state | {var} if self.const(op.operands[1]) else state - {var}
        if code == "store":
            # an element written at a literal index is replaced; elsewhere, the memory may keep a constant
            memory, index = op.operands[0].uid, _literal_index(op.operands[1])
            if self.const(op.operands[2]):
                return state | {(memory, index), (memory, SOME)}
            return state - {(memory, index)} if index is not None else state
        if code in ("barrier", "fence"):  # other invocations' writes may be visible after either
            return frozenset(k for k in state if k[0] not in self.shared_memory)
        if code in _WRITERS:
            info, memories = O.OPS[code], {k[0] for k in state}
            copied = any(op.operands[i].uid in memories for i in info.reads) or any(self.const(v) for v in op.operands)
            return state | {(op.operands[i].uid, key) for i in info.writes for key in (None, SOME)} if copied else state
        if code == "if":
            return self.branch(op, state)
        if code in ("for", "while"):
            return self.loop(op, state)
        if code in ("break", "continue"):
            (self.loops[-1].breaks if code == "break" else self.loops[-1].latch).append(state)
            return None
        if code == "condition":
            self.loops[-1].condition = op.operands[0]
            return state
        return None  # return

    def branch(self, op: Op, state: frozenset[Key]) -> State:
        """An ``if``. NIR replaces its condition by true / false where the branch decides it: inside either arm, and
        after an arm that leaves (``if b: return`` makes b false below; ``cast(b, f32) * x`` gave 0.0 for inf, NaN
        and -2.0 there: fuzz seed 813761036). So the condition, and the variable it was read from, are constants
        in the arms; after the join only where one arm left, or where the driver decides the branch itself."""
        cond = op.operands[0]
        decided = self.const(cond)
        self.add(cond)
        owner = cond.owner
        key = (owner.operands[0].uid, None) if isinstance(owner, Op) and owner.opcode == "get" else None
        inside = state | {key} if key is not None else state
        then, else_ = (self.block(r, inside) for r in op.regions)
        after = _union(then, else_) if decided else _meet(then, else_)
        if key is not None and key not in state and then is not None and else_ is not None and after is not None:
            after = after - {key}  # both arms reach the join: nothing decides the variable below it
        return after

    def loop(self, op: Op, entry: frozenset[Key]) -> State:
        """A loop the driver may unroll (a ``for`` with constant bounds, a ``while`` with a constant condition):
        each copy of the body starts where the previous one ended, so the state at the top is the union over
        iterations. Another: the top of the body merges the entry with the end of an iteration the driver cannot
        tell apart, so a variable is a constant there only if it is one on both."""
        if op.opcode == "for":
            unrolled = all(self.const(v) for v in op.operands)
            if unrolled:
                self.add(op.regions[0].args[0])
            return self.iterate(op, entry, unrolled)[0]
        mark = len(self.added)
        out, condition = self.iterate(op, entry, False)
        if condition is not None and self.const(condition):
            self.undo(mark)
            out = self.iterate(op, entry, True)[0]
        return out

    def iterate(self, op: Op, entry: frozenset[Key], unrolled: bool) -> tuple[State, Value | None]:
        """The state after the loop, and a while loop's condition."""
        top = entry
        while True:
            mark = len(self.added)
            ctx = _Loop()
            self.loops.append(ctx)
            try:
                tested = self.block(op.regions[0], top) if op.opcode == "while" else top
                end = self.block(op.regions[-1], tested)
            finally:
                self.loops.pop()
            latch = _union(end, *ctx.latch)
            new = _union(top, latch) if unrolled else _meet(entry, latch)
            if new is None or new == top:
                break
            if not unrolled:  # the values found under too large a state are found again under the right one
                self.undo(mark)
            top = new
        if unrolled and op.opcode == "for" and _runs_once_at_least(op):
            return _union(latch, *ctx.breaks), None
        return _union(tested, *ctx.breaks), ctx.condition

    def constant(self, op: Op, state: frozenset[Key]) -> bool:  # noqa: PLR0911 - one rule a line
        """Whether ``op``'s result may be a constant for the driver at this point of the program."""
        code, const = op.opcode, self.const
        if code == "get":
            return (op.operands[0].uid, None) in state
        if code == "load":
            memory, index = op.operands[0].uid, _literal_index(op.operands[1])
            return (memory, None) in state or (memory, SOME if index is None else index) in state
        if code in _RUN_TIME or code not in O.OPS:
            return False
        if code == "local_id":
            return op.attrs.get("axis", 0) != 0
        if code in _UNIFORM_OF_CONSTANT:
            return const(op.operands[0])
        if code == "select":  # the driver may decide the condition, or both values are one constant
            c, a, b = (const(v) for v in op.operands)
            return (a and b) or (c and (a or b))
        if O.OPS[code].category == "thread":  # group_size, simd_size
            return True
        if not O.OPS[code].pure or not op.operands:
            return False
        if all(const(v) for v in op.operands):
            return True
        if op.result.type.is_float:
            # float arithmetic of a run-time value stays run-time: NIR honours exact float rules, and the emitter
            # keeps products and quotients from gallivm's zero folds
            return False
        if code in _SELF_CANCELLING and len(op.operands) == 2 and _same(*op.operands, self.same):
            return True
        return any(const(v) and _absorbs(op, i) for i, v in enumerate(op.operands))


#: ops whose two results NIR's CSE may merge although Iron's IR keeps both: loads (of a readonly buffer, or with no
#: store between: ``xu[i] - xu[i]`` is two loads, 0 for the driver: fuzz seed 706000716) and variable reads
_MERGED = frozenset({"load", "get"})


def _same(a: Value, b: Value, memo: dict[tuple[int, int], bool], depth: int = 0) -> bool:
    """Whether the driver may see ``a`` and ``b`` as one value: the same op of operands it may see as one (NIR's
    CSE), reads of one memory or variable at one index included. Errs towards "one": the stores between two reads
    are not looked at."""
    if a is b:
        return True
    x, y = a.owner, b.owner
    if depth > 64 or not isinstance(x, Op) or not isinstance(y, Op) or x.opcode != y.opcode or a.type != b.type:
        return False
    info = O.OPS.get(x.opcode)
    if info is None or not (info.pure or x.opcode in _MERGED) or x.regions or x.attrs != y.attrs \
            or len(x.operands) != len(y.operands):
        return False
    key = (a.uid, b.uid)
    if key not in memo:
        memo[key] = all(_same(u, v, memo, depth + 1) for u, v in zip(x.operands, y.operands))
    return memo[key]


def _literal_index(v: Value) -> int | None:
    owner = v.owner
    return owner.attrs["value"] if isinstance(owner, Op) and owner.opcode == "const" else None


def _runs_once_at_least(op: Op) -> bool:
    """A ``for`` whose bounds are literals with at least one iteration: after it, its entry state is overwritten."""
    lo, hi, step = (v.owner.attrs["value"] if isinstance(v.owner, Op) and v.owner.opcode == "const" else None
                    for v in op.operands)
    if lo is None or hi is None or not step:
        return False
    return lo < hi if step > 0 else lo > hi


def _absorbs(op: Op, position: int) -> bool:
    """Whether the constant operand ``position`` of the integer or bool ``op`` may make its result a constant
    whatever the others are: ``x * 0``, ``x & 0``, ``x | -1``, ``0 << x``, ``0 / x``, ``x % 1``, ``min(x, INT_MIN)``,
    ``u < 0``, ``false and b``, a compare of a small-range value (``(x & 7) < 8``); any value the driver knows and
    Iron's IR does not (a loop index) may be the one."""
    code, v = op.opcode, op.operands[position]
    c = driver_constant(v)
    if c is None:
        return code in ("mul", "umulhi", "dp4a", "and", "or", "shl", "shr", "div", "rem", "min", "max", *O.COMPARE)
    st = v.type
    if st.is_bool:
        return code in ("and", "or") and bool(c) == (code == "or")
    if st.is_float:  # compares only (float arithmetic is run-time): x < -inf, x <= inf but NaN
        return code in O.COMPARE and math.isinf(c)
    lowest, highest = (-(1 << (st.bits - 1)), (1 << (st.bits - 1)) - 1) if st.is_signed else (0, (1 << st.bits) - 1)
    if code in ("mul", "umulhi", "and") or code == "dp4a" and position < 2:
        return c == 0
    if code == "or":
        return c == (-1 if st.is_signed else highest)
    if code in ("shl", "shr", "div"):
        return position == 0 and (c == 0 or (code == "shr" and c == -1))
    if code == "rem":
        return c == 0 if position == 0 else c in (1, -1)
    if code in ("min", "max"):
        return c == (lowest if code == "min" else highest)
    if code in O.COMPARE:
        other = op.operands[1 - position]
        source = getattr(other.owner, "opcode", None)
        return c in (lowest, highest) or source in _BOUNDED or (source == "cast" and
                                                                  other.owner.operands[0].type.is_bool)
    return False
