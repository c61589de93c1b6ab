"""Which SIMD-group ops every live lane of the SIMD group reaches together (uniform control flow).

On NVIDIA GPUs (independent thread scheduling, Volta and later) the lanes that are converged at an instruction are
not necessarily all the lanes that will execute it: after a branch, even one every lane has left, ``__activemask()``
may return a subset of the warp (CUDA does not promise reconvergence), and a shuffle or reduction over that subset
reads lanes that are not in the mask (undefined) or leaves lanes out. So the CUDA and HIP emitters pass each SIMD op
an explicit lane mask:

- at a *convergent* op, the mask of the lanes that passed the exact-grid guard (``iron_live``, taken by a ballot at
  kernel entry, where every lane of the warp is present). Every lane in it executes the op, so the ``*_sync``
  intrinsics are well defined and see all of them;
- elsewhere (inside a branch whose condition differs between lanes, after a divergent ``return`` ...), the lanes
  active at that moment (``__activemask()``), which is Iron's "active lanes" as well as the hardware can say.

An op is convergent when every enclosing ``if``/loop was entered with a condition (or loop bounds) that is the same
in every lane of the SIMD group, and no lane left the kernel, loop or iteration before it under a condition that
differs between lanes. A value is uniform when it is a constant, a scalar parameter, a group-level index
(``group_id``, ``group_size``, ``num_groups``, ``simd_group``, ``simd_size``), a SIMD reduction at a convergent
op, or a pure op (or a variable, or a loop counter) built only from uniform values. Loads are never uniform. The
analysis is conservative: an op it cannot prove convergent gets the run-time mask, which is what every op got before.
"""

from __future__ import annotations

from ...ir import ops as O
from ...ir.core import Block, Kernel, Op

_UNIFORM_SOURCES = {"const", "group_id", "group_size", "num_groups", "simd_group", "simd_size"}
_PURE = {"binary", "bitwise", "unary", "compare", "math", "select", "cast"}
_SIMD = O.SIMD_OPS


class _Analysis:
    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.uniform: set[int] = {p.value.uid for p in kernel.params if p.kind != "buffer"}
        self.varying_vars: set[int] = set()  # var slots proven non-uniform (the fixpoint only grows this set)
        self.convergent: set[int] = set()  # id() of convergent SIMD ops

    def run(self) -> set[int]:
        while True:
            before = (len(self.varying_vars), frozenset(self.convergent))
            self.uniform = {p.value.uid for p in self.kernel.params if p.kind != "buffer"}
            self.convergent = set()
            self._block(self.kernel.body, True)
            if (len(self.varying_vars), frozenset(self.convergent)) == before:
                return self.convergent

    def _is_uniform(self, op: Op) -> bool:
        code = op.opcode
        if code in _UNIFORM_SOURCES:
            return True
        if code == "get":
            return op.operands[0].uid not in self.varying_vars
        info = O.OPS[code]
        if info.category in _PURE or code in ("abs", "fma"):
            return all(v.uid in self.uniform for v in op.operands)
        return False

    def _block(self, block: Block, conv: bool) -> bool:
        """Walk ``block`` entered convergently or not; returns whether it is still convergent at its end (a
        divergent jump inside makes the rest non-convergent)."""
        for op in block.ops:
            conv = self._op(op, conv)
        return conv

    def _op(self, op: Op, conv: bool) -> bool:
        code = op.opcode
        if code in _SIMD:
            if conv:
                self.convergent.add(id(op))
                # a reduction's result is the same in every lane, and so is a broadcast of lane 0 (every SIMD group
                # has a lane 0; reading past the end of a partial group gives the reader's own value instead)
                if code in O.SIMD_REDUCE | O.SIMD_VOTE or (code == "simd_broadcast" and _is_const(op.operands[1], 0)):
                    self.uniform.add(op.result.uid)
            return conv
        if code == "set":
            if not (conv and op.operands[1].uid in self.uniform):
                self.varying_vars.add(op.operands[0].uid)
            return conv
        if code in O.JUMPS:
            return conv
        if code == "if":
            inner = conv and op.operands[0].uid in self.uniform
            ends = [self._block(region, inner) for region in op.regions]
            if inner:
                return all(ends)  # a uniform branch: convergent after it unless a jump in it was divergent
            exits = any(_leaves(region) for region in op.regions)
            # a divergent branch reconverges after the `if`, unless some lanes left the kernel, the loop or the
            # iteration inside it
            return conv and not exits
        if code == "for":
            lo, hi, step = op.operands
            inner = conv and all(v.uid in self.uniform for v in (lo, hi, step))
            if inner:
                self.uniform.add(op.regions[0].args[0].uid)
            self._loop_body(op.regions[0], None, inner, set(self.convergent))
            return self._after_loop(op, conv)
        if code == "while":
            cond_region, body = op.regions
            snapshot = set(self.convergent)  # before the condition: its ops run again in later iterations
            self._block(cond_region, conv)
            cond = cond_region.ops[-1].operands[0] if cond_region.ops else None
            inner = conv and cond is not None and cond.uid in self.uniform
            if not inner and conv:  # the condition region runs again in later iterations, with fewer lanes
                self.convergent = set(snapshot)
                self._block(cond_region, False)
            self._loop_body(body, cond_region if inner else None, inner, snapshot)
            return self._after_loop(op, conv)
        if op.result is not None and self._is_uniform(op):
            self.uniform.add(op.result.uid)
        for region in op.regions:
            self._block(region, False)
        return conv

    def _loop_body(self, body: Block, cond_region: Block | None, inner: bool, snapshot: set[int]) -> None:
        """Walk a loop body entered convergently or not. A divergent break/continue/return in it means some lanes
        skip the rest of this iteration and later ones: then the whole loop (condition and body) is walked as
        divergent, from ``snapshot`` (the convergent ops before the loop)."""
        if self._block(body, inner) or not inner:
            return
        self.convergent = set(snapshot)
        if cond_region is not None:
            self._block(cond_region, False)
        self._block(body, False)

    def _after_loop(self, op: Op, conv: bool) -> bool:
        """After a loop every lane that entered it has left it (break/continue stay inside), unless some lane
        returned from inside it under a divergent condition."""
        return conv and not _divergent_return(op)


def _is_const(v, value) -> bool:
    op = getattr(v, "owner", None)
    return getattr(op, "opcode", None) == "const" and op.attrs.get("value") == value


def _leaves(block: Block, in_loop: bool = False) -> bool:
    """Whether running ``block`` can leave the kernel (``return``) or, outside a nested loop, the enclosing loop
    or iteration (``break``/``continue``)."""
    for op in block.ops:
        if op.opcode == "return" or (op.opcode in ("break", "continue") and not in_loop):
            return True
        nested = in_loop or op.opcode in ("for", "while")
        if any(_leaves(r, nested) for r in op.regions):
            return True
    return False


def _divergent_return(loop: Op) -> bool:
    """Whether a lane can return from inside ``loop`` (conservatively: any ``return`` in it)."""
    return any(_returns(r) for r in loop.regions)


def _returns(block: Block) -> bool:
    return any(op.opcode == "return" or any(_returns(r) for r in op.regions) for op in block.ops)


def convergent_simd_ops(kernel: Kernel) -> set[int]:
    """``id()`` of the SIMD ops of ``kernel`` that all lanes past the exact-grid guard reach together."""
    if not any(op.opcode in _SIMD for op in kernel.walk()):
        return set()
    return _Analysis(kernel).run()


def always_exits(op: Op) -> bool:
    """Whether control never falls through ``op``: a jump, or an if/else whose branches both end in one."""
    if op.opcode in ("return", "break", "continue"):
        return True
    if op.opcode == "if" and len(op.regions) == 2 and all(r.ops for r in op.regions):
        return all(any(always_exits(o) for o in r.ops) for r in op.regions)
    return False
