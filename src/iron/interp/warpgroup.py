"""The interpreter's warpgroup matrix multiply (``warpgroup_mma`` / ``warpgroup_wait``): the definition that NVIDIA's
wgmma and the fragment expansion elsewhere (``codegen/warpgroup.py``) must match, and the checks that catch a kernel
that would race on the hardware.

A warpgroup is 4 consecutive SIMD groups of a group (128 threads on NVIDIA). ``wg_mma`` is a collective of the whole
warpgroup: the group size must be a multiple of 4 SIMD widths, every lane of a warpgroup that reaches it must be
there, and its indices and ldb must agree across the warpgroup. The product is computed when the call is made
(exactly: float64 sums of the inputs, one f32 rounding, as ``mma``), but the hardware reads its tiles and writes its
accumulator until a ``wg_wait`` completes the call, so the interpreter keeps the call *in flight* per thread until
then, and faults

- at the wait that completes it, if the shared memory it read has changed since the call (a tile refilled too
  early: the pipeline waited on the wrong stage);
- at any use of its accumulator other than as the accumulator of a later ``wg_mma`` (``mma``, ``frag_store``)
  while the call is in flight.

Alignment rules (checked per call): see ``warpgroup_mma`` in ``iron.ir.ops.BUILTINS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .matrix import mma, whole_groups
from .memory import Target
from .semantics import from_f64, scalar_type_of_dtype
from .threads import Fault, Geometry, Mask, first_fault

K = 64  # the K extent of one call: one 128-byte row of f16/bf16


@dataclass
class _Call:
    """One wg_mma execution still in flight for some threads."""

    live: np.ndarray  # per thread: still in flight
    reads: list[tuple[Target, np.ndarray, np.ndarray, np.ndarray]]  # (target, warpgroup ids, flat indices, values)
    line: str


@dataclass
class WarpgroupState:
    """Calls in flight, and which value slots hold an accumulator a call in flight still writes."""

    calls: list[_Call] = field(default_factory=list)
    slot_calls: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def tag(self, slot: int, calls: tuple[int, ...]) -> None:
        if calls:
            self.slot_calls[slot] = calls
        else:
            self.slot_calls.pop(slot, None)

    def check_ready(self, slots, what: str, mask: Mask, n: int) -> None:
        """Fault when a thread of ``mask`` reads an accumulator that a call in flight still writes."""
        for slot in slots:
            for i in self.slot_calls.get(slot, ()):
                bad = first_fault(self.calls[i].live, mask, n)
                if bad is not None:
                    raise Fault(f"{what} reads an accumulator of the warpgroup_mma at {self.calls[i].line} before a "
                                "warpgroup_wait completed it", *bad)

    def wait(self, pending: int, geom: Geometry, mask: Mask) -> None:
        """Complete, for the threads of ``mask``, all but their ``pending`` newest calls; check what they read."""
        active = np.ones(geom.n, bool) if mask is None else np.broadcast_to(mask, (geom.n,)).copy()
        newer = np.zeros(geom.n, np.int64)
        for call in reversed(self.calls):
            done = call.live & active & (newer >= pending)
            newer += call.live & active
            if done.any():
                _check_unchanged(call, done, geom)
                call.live = call.live & ~done


def _check_unchanged(call: _Call, done: np.ndarray, geom: Geometry) -> None:
    span = 4 * geom.simd_width
    groups = np.flatnonzero(done.reshape(-1, span).any(axis=1))
    for target, wgs, flat, values in call.reads:
        rows = np.isin(wgs, groups)
        now = target.data.take(flat[rows])
        before = values[rows]
        changed = (now != before) & ~(np.isnan(now.astype(np.float32)) & np.isnan(before.astype(np.float32)))
        if changed.any():
            wg = int(wgs[rows][np.flatnonzero(changed.reshape(changed.shape[0], -1).any(axis=1))[0]])
            raise Fault(f"the {target.desc} tile that the warpgroup_mma at {call.line} reads was written before the "
                        "warpgroup_wait that completes it (refill a stage only after the wait that frees it)",
                        wg * span, span)


def _warpgroups(geom: Geometry, mask: Mask) -> np.ndarray:
    """The warpgroup index of each warpgroup that reaches the call; faults unless they are whole."""
    whole_groups(geom, "warpgroup_mma", mask)
    span = 4 * geom.simd_width
    if geom.group_threads % span:
        raise Fault(f"warpgroup_mma needs groups of whole warpgroups (4 SIMD groups, {span} threads), but the group "
                    f"has {geom.group_threads} threads", 0, geom.n)
    lanes = np.ones((geom.n // span, span), bool) if mask is None else \
        np.broadcast_to(mask, (geom.n,)).reshape(-1, span)
    partial = lanes.any(axis=1) & ~lanes.all(axis=1)
    if partial.any():
        g = int(np.flatnonzero(partial)[0])
        raise Fault("warpgroup_mma is reached by only part of a warpgroup: all 4 SIMD groups must take part",
                    g * span, int(partial.sum()))
    return np.flatnonzero(lanes.any(axis=1))


def _uniform(geom: Geometry, wgs: np.ndarray, value, what: str) -> np.ndarray:
    """``value`` per warpgroup (its first thread's), faulting where the warpgroup's threads disagree."""
    span = 4 * geom.simd_width
    v = np.broadcast_to(np.asarray(value, np.int64), (geom.n,)).reshape(-1, span)[wgs]
    bad = (v != v[:, :1]).any(axis=1)
    if bad.any():
        raise Fault(f"warpgroup_mma's {what} differs across the warpgroup (every thread must pass the same value)",
                    int(wgs[np.flatnonzero(bad)[0]]) * span, 1)
    return v[:, 0]


def _rule(ok: np.ndarray, wgs: np.ndarray, geom: Geometry, message: str) -> None:
    if not ok.all():
        raise Fault(f"warpgroup_mma: {message}", int(wgs[np.flatnonzero(~ok)[0]]) * 4 * geom.simd_width, 1)


def _tile(target: Target, geom: Geometry, wgs: np.ndarray, flat: np.ndarray, what: str) -> np.ndarray:
    """Indices into ``target.data`` of a tile (``flat``: per warpgroup, the logical indices), bounds-checked."""
    hi, lo = flat.max(axis=(1, 2)), flat.min(axis=(1, 2))
    _rule((lo >= 0) & (hi < target.size), wgs, geom, f"the {what} tile runs past the end of the {target.desc} "
          f"({target.size} elements)")
    if target.base is not None:
        flat = flat + target.base[wgs * 4 * geom.simd_width].reshape(-1, 1, 1)
    return flat


def wg_mma(state: WarpgroupState, geom: Geometry, a: Target | np.ndarray, ai, b: Target, bi, ldb, acc: np.ndarray,
           trans_b: bool, mask: Mask, line: str) -> tuple[np.ndarray, int]:
    """Start the call: returns the new accumulator (every thread's 16 x N slice) and the call's number. ``a`` is
    the A tile's shared array, or (an array) each SIMD group's own 16 x 64 accumulator fragment: its 16 rows of A,
    rounded to B's dtype."""
    wgs = _warpgroups(geom, mask)
    ai, bi, ldb = (_uniform(geom, wgs, v, w) for v, w in ((ai, "A index"), (bi, "B index"), (ldb, "ldb")))
    n = acc.shape[-1]
    in_regs = isinstance(a, np.ndarray)
    _rule((ai % 512 == 0) | in_regs, wgs, geom, "the A index must be a multiple of 512 (8 rows of 64)")
    r = np.arange(K, dtype=np.int64)[None, :, None]
    cols = np.arange(n, dtype=np.int64)[None, None, :]
    if trans_b:
        _rule((ldb == 64) & (bi % 512 == 0), wgs, geom,
              "with trans_b, ldb must be 64 and the B index a multiple of 512")
        b_flat = bi.reshape(-1, 1, 1) + r + K * cols  # element (k, n) at bi + 64 n + k
    else:
        safe = np.maximum(ldb, 1)
        _rule((ldb % 64 == 0) & (ldb > 0) & (bi % 64 == 0) & ((bi // safe) % 64 == 0) & (bi % safe + n <= ldb), wgs,
              geom, "B must start a 64-row block at a column that is a multiple of 64: ldb % 64 == 0, bi % 64 == 0, "
              "(bi // ldb) % 64 == 0 and bi % ldb + N <= ldb")
        b_flat = bi.reshape(-1, 1, 1) + ldb.reshape(-1, 1, 1) * r + cols
    fb = _tile(b, geom, wgs, b_flat, "B")
    vb = b.data.take(fb)
    reads = [(b, wgs, fb, vb)]
    if in_regs:
        elem = scalar_type_of_dtype(b.data.dtype)
        regs = from_f64(np.broadcast_to(a, (geom.n,) + a.shape[-2:]).astype(np.float64), elem)
    else:
        fa = _tile(a, geom, wgs, ai.reshape(-1, 1, 1) + K * r + np.arange(K, dtype=np.int64)[None, None, :], "A")
        va = a.data.take(fa)
        reads.append((a, wgs, fa, va))
    span = 4 * geom.simd_width
    out = np.array(np.broadcast_to(acc, (geom.n,) + acc.shape[-2:]), dtype=np.float32)
    for j, wg in enumerate(wgs):
        for w in range(4):
            lo = wg * span + w * geom.simd_width
            rows = regs[lo] if in_regs else va[j, 16 * w:16 * w + 16]
            out[lo:lo + geom.simd_width] = mma(rows, vb[j], out[lo:lo + geom.simd_width])
    live = np.zeros(geom.n, bool)
    for wg in wgs:
        live[wg * span:(wg + 1) * span] = True
    state.calls.append(_Call(live, reads, line))
    return out, len(state.calls) - 1
