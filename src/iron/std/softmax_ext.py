"""log_softmax, and softmax with a scale and a causal or additive mask, over the last axis (issue 18).

The layout is softmax.py's (``plan_rows``: a register path, one group per row, and a split path of 4096-element
chunks for long rows or few rows; 16-byte ``vload``s into f32 register arrays; statistics in f32). The scores of row
``r`` are ``z = x[r, :] * scale`` plus, by ``MASK``:

- ``MASK = 0``: nothing;
- ``MASK = 1`` (causal, queries aligned to the end of the keys): column ``c`` of query row ``q = r % qrows`` is
  masked (``z = -inf``) when ``c > q + (ncols - qrows)``; ``x`` may stack several (qrows, ncols) score matrices;
- ``MASK = 2`` (additive): ``z += mask[q, c]``, ``mask`` an f32 (qrows, ncols) tensor (``-inf`` masks);

and the output is ``softmax(z)`` (``LOG = False``) or ``log_softmax(z) = z - max - log(sum(exp(z - max)))``
(``LOG = True``, -inf where masked). A row masked everywhere gives NaN, as torch does.

Kernels (``mask`` is a 1-element dummy when ``MASK != 2``):

- ``softmax_ext_rows(x, mask, out, ncols, qrows, scale, MASK, LOG, BLOCK, VEC, PER)``: one group of BLOCK threads
  per row, the row in registers (ncols <= BLOCK * PER * VEC); launch rows * BLOCK threads; one read, one write.
- ``softmax_ext_stats(x, mask, stats, ncols, qrows, nchunks, scale, MASK, BLOCK, VEC, PER)``: split path, pass 1:
  (max, sum of exp(z - max)) of each chunk into an f32 workspace (a chunk masked everywhere gives (-inf, 0));
  launch rows * nchunks * BLOCK threads.
- ``softmax_ext_apply(x, mask, stats, out, ncols, qrows, nchunks, scale, MASK, LOG, BLOCK, VEC, PER)``: pass 2:
  every group combines its row's chunk statistics (online-softmax rescaling, a fixed order) and writes its chunk.

``launch_softmax_ext(x, out, scale, mask=None, causal=False, log_softmax=False)`` picks the variant (autotuned over
elements per thread on CUDA, as softmax.py). torch references: ``torch.log_softmax`` and ``torch.softmax`` of the
masked scaled scores.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    constexpr,
    exp,
    f32,
    group_id,
    local_array,
    local_id,
    log,
    shared,
    static_range,
    vload,
    vstore,
)
from .softmax import (
    BLOCK,
    PER,
    VEC,
    RowPlan,
    exp_shifted_sum,
    group_max,
    group_total,
    scratch_f32,
    store_vectors,
    thread_max,
    tuned_rows,
)

__all__ = ["BLOCK", "LOG", "MASK", "PER", "VEC", "launch_softmax_ext", "softmax_ext_apply", "softmax_ext_rows",
           "softmax_ext_stats"]

#: iron build's defaults: no mask, softmax (not its log)
MASK = 0
LOG = False


@func
def load_scores(x, mask, vals, start, q, c0, nvec, ncols, qrows, scale, MASK, BLOCK, VEC, PER):
    """vals <- the scores of the thread's vectors of the chunk at ``start`` (column c0 of query row q): x * scale,
    masked per MASK; -inf past nvec. Every x load is issued before the mask is applied."""
    tid = local_id(0)
    MV = min(VEC, 4)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            chunk = vload(x, start + v * VEC, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = chunk[j] * scale
        else:
            for j in static_range(VEC):
                vals[k * VEC + j] = -math.inf
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            if MASK == 1:
                for j in static_range(VEC):
                    if c0 + v * VEC + j > q + ncols - qrows:
                        vals[k * VEC + j] = -math.inf
            if MASK == 2:
                for h in static_range(VEC // MV):
                    mv = vload(mask, q * ncols + c0 + v * VEC + h * MV, MV)
                    for j in static_range(MV):
                        vals[k * VEC + h * MV + j] += mv[j]


@func
def safe_max(m):
    """The shift for exp: m, or 0 where every score is masked (exp(-inf - 0) = 0, never exp(-inf + inf))."""
    return 0.0 if m == -math.inf else m


@func
def exp_sum(vals, m, PER, VEC):
    """This thread's sum of exp(vals - m), vals kept."""
    s = 0.0
    for i in static_range(PER * VEC):
        s += exp(vals[i] - m)
    return s


@func
def store_log(out, vals, start, nvec, lse, BLOCK, VEC, PER):
    """out[...] = vals - lse for the thread's vectors below nvec."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j] - lse
            vstore(out, start + v * VEC, o)


@func
def finish(out, vals, start, nvec, m, LOG, BLOCK, VEC, PER):
    """Reduce the sum of exp(vals - m) over the group and write softmax (or log_softmax) of the thread's vectors."""
    if LOG:
        s = group_total(exp_sum(vals, m, PER, VEC), shared(f32, BLOCK), BLOCK)
        store_log(out, vals, start, nvec, m + log(s), BLOCK, VEC, PER)
    else:
        s = group_total(exp_shifted_sum(vals, m, PER, VEC, 0), shared(f32, BLOCK), BLOCK)
        store_vectors(out, vals, start, nvec, 1.0 / s, BLOCK, VEC, PER)


@kernel
def softmax_ext_rows(x: Tensor[T], mask: Tensor[f32], out: Tensor[T], ncols: int, qrows: int, scale: float,
                     MASK: constexpr, LOG: constexpr, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """out[r, :] = (log_)softmax of row r's masked scaled scores, one group per row, the row in registers."""
    row = group_id(0)
    vals = local_array(f32, PER * VEC)
    load_scores(x, mask, vals, row * ncols, row % qrows, 0, ncols // VEC, ncols, qrows, scale, MASK, BLOCK, VEC,
                PER)
    m = safe_max(group_max(thread_max(vals, PER, VEC), shared(f32, BLOCK), BLOCK))
    finish(out, vals, row * ncols, ncols // VEC, m, LOG, BLOCK, VEC, PER)


@func
def ext_span(ncols, nchunks, BLOCK, VEC, PER):
    """(row, first column, vectors) of this group's chunk: chunk g % nchunks of row g // nchunks."""
    g = group_id(0)
    row = g // nchunks
    c0 = (g - row * nchunks) * (BLOCK * PER * VEC)
    return row, c0, min(BLOCK * PER * VEC, ncols - c0) // VEC


@kernel
def softmax_ext_stats(x: Tensor[T], mask: Tensor[f32], stats: Tensor[f32], ncols: int, qrows: int, nchunks: int,
                      scale: float, MASK: constexpr, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """Split path, pass 1: stats[2g], stats[2g + 1] = max and sum of exp(z - max) over group g's chunk."""
    row, c0, nvec = ext_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_scores(x, mask, vals, row * ncols + c0, row % qrows, c0, nvec, ncols, qrows, scale, MASK, BLOCK, VEC, PER)
    m = group_max(thread_max(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    s = group_total(exp_sum(vals, safe_max(m), PER, VEC), shared(f32, BLOCK), BLOCK)
    if local_id(0) == 0:
        stats[2 * group_id(0)] = m
        stats[2 * group_id(0) + 1] = s


@kernel
def softmax_ext_apply(x: Tensor[T], mask: Tensor[f32], stats: Tensor[f32], out: Tensor[T], ncols: int, qrows: int,
                      nchunks: int, scale: float, MASK: constexpr, LOG: constexpr, BLOCK: constexpr,
                      VEC: constexpr, PER: constexpr):
    """Split path, pass 2: combine the row's chunk statistics, then write this group's chunk (its loads issued
    first, so that they are in flight while the statistics are combined)."""
    row, c0, nvec = ext_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_scores(x, mask, vals, row * ncols + c0, row % qrows, c0, nvec, ncols, qrows, scale, MASK, BLOCK, VEC, PER)
    first = row * nchunks
    tid = local_id(0)
    m = -math.inf
    for i in range(tid, nchunks, BLOCK):
        m = max(m, stats[2 * (first + i)])
    m = safe_max(group_max(m, shared(f32, BLOCK), BLOCK))
    s = 0.0
    for i in range(tid, nchunks, BLOCK):
        s += stats[2 * (first + i) + 1] * exp(stats[2 * (first + i)] - m)
    s = group_total(s, shared(f32, BLOCK), BLOCK)
    if LOG:
        store_log(out, vals, row * ncols + c0, nvec, m + log(s), BLOCK, VEC, PER)
    else:
        exp_shifted_sum(vals, m, PER, VEC, 0)
        store_vectors(out, vals, row * ncols + c0, nvec, 1.0 / s, BLOCK, VEC, PER)


def launch_softmax_ext(x: Any, out: Any, scale: float = 1.0, mask: Any = None, causal: bool = False,
                       log_softmax: bool = False, backend: str | None = None, plan: RowPlan | None = None) -> RowPlan:
    """out = (log_)softmax(x * scale + mask) over the last axis of a C-contiguous (..., qrows, ncols) x: ``mask``
    an f32 (qrows, ncols) additive mask, or ``causal``; ``plan`` forces a variant (tests); returns the plan run."""
    qrows, ncols = x.shape[-2], x.shape[-1]
    rows = int(np.prod(x.shape[:-1]))
    kind = 2 if mask is not None else (1 if causal else 0)
    m = mask if mask is not None else scratch_f32(x, 1)
    x2, out2 = x.reshape(rows, ncols), out.reshape(rows, ncols)

    def run(p: RowPlan) -> None:
        if p.chunks == 1:
            softmax_ext_rows[rows * p.block, p.block](x2, m, out2, ncols, qrows, scale, kind, log_softmax, p.block,
                                                      p.vec, p.per, backend=backend)
            return
        stats = scratch_f32(x, 2 * rows * p.chunks)
        grid = rows * p.chunks * p.block
        softmax_ext_stats[grid, p.block](x2, m, stats, ncols, qrows, p.chunks, scale, kind, p.block, p.vec, p.per,
                                         backend=backend)
        softmax_ext_apply[grid, p.block](x2, m, stats, out2, ncols, qrows, p.chunks, scale, kind, log_softmax, p.block,
                                         p.vec, p.per, backend=backend)

    if plan is not None:
        run(plan)
        return plan
    name = "std/softmax/" + ("log_softmax" if log_softmax else "scaled_masked" if kind == 2 else "scaled_causal")
    return tuned_rows(name, x2, backend, run)



# --- registration ---------------------------------------------------------------------------------------------------

#: the registered entries' scale (1 / sqrt(head_dim 64))
SCALE = 0.125


class _Variant:
    """``softmax_ext_rows`` registered once per variant (the registry keeps one entry per object)."""

    def __init__(self, label: str):
        self.fn = softmax_ext_rows.fn
        self.kernel = softmax_ext_rows
        self.label = label

    def __repr__(self) -> str:
        return f"<iron kernel softmax_ext_rows ({self.label})>"


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(scale=4.0), "out": gen.poisoned()}


def _masked_setup(gen: InputGen) -> dict[str, np.ndarray]:
    """An additive f32 mask: normal values, about 1 in 8 -inf (never in column 0), and every 7th row (from row 1)
    masked everywhere except its first column."""
    rows, ncols = gen.shape
    mask = gen.rng.standard_normal((rows, ncols)).astype(np.float32)
    mask[gen.rng.random((rows, ncols)) < 0.125] = -np.inf
    mask[:, 0] = gen.rng.standard_normal(rows)
    mask[1::7, 1:] = -np.inf
    return {"x": gen.random(scale=16.0), "mask": mask, "out": gen.poisoned()}


def _causal(rows: int, ncols: int) -> np.ndarray:
    """True where masked: column c > r + (ncols - rows)."""
    return np.arange(ncols)[None, :] > np.arange(rows)[:, None] + (ncols - rows)


def _scores(d: dict, kind: str) -> np.ndarray:
    """float64 scores: x * scale, -inf where the causal mask hides them, plus the additive mask."""
    if kind == "log":
        return d["x"].astype(np.float64)
    z = d["x"].astype(np.float64) * SCALE
    if kind == "causal":
        return np.where(_causal(*z.shape), -np.inf, z)
    return z + d["mask"].astype(np.float64)


def _oracle(d: dict, kind: str) -> np.ndarray:
    z = _scores(d, kind)
    m = z.max(axis=1, keepdims=True)
    if kind == "log":
        return z - m - np.log(np.exp(z - m).sum(axis=1, keepdims=True))
    e = np.exp(z - m)
    return e / e.sum(axis=1, keepdims=True)


#: torch's causal masks by (rows, ncols, device)
_HIDE: dict = {}


def _torch(d: dict, kind: str):
    import torch

    x = d["x"]
    if kind == "log":
        return torch.log_softmax(x, dim=1)
    z = x.float() * SCALE
    if kind == "causal":
        key = (*x.shape, str(x.device))
        if key not in _HIDE:  # built once per shape, outside the timed calls after the first
            rows, ncols = x.shape
            _HIDE[key] = torch.ones(rows, ncols, dtype=torch.bool, device=x.device).triu(ncols - rows + 1)
        hide = _HIDE[key]
        return torch.softmax(z.masked_fill(hide, float("-inf")), dim=1).to(x.dtype)
    return torch.softmax(z + d["mask"], dim=1).to(x.dtype)


def _launch(d: dict, backend: str, kind: str) -> None:
    if kind == "log":
        launch_softmax_ext(d["x"], d["out"], log_softmax=True, backend=backend)
    else:
        launch_softmax_ext(d["x"], d["out"], SCALE, d.get("mask"), kind == "causal", backend=backend)


_SOFTMAX_TOL = {"f32": (1e-7, 1e-5), "f16": (1e-4, 2e-3), "bf16": (1e-3, 1.6e-2)}
_KINDS = {"log": ("log_softmax", _setup, {"f32": (2e-6, 1e-5), "f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)}),
          "causal": ("scaled_causal", _setup, _SOFTMAX_TOL), "masked": ("scaled_masked", _masked_setup, _SOFTMAX_TOL)}


def _register(kind: str) -> None:
    label, setup, tol = _KINDS[kind]
    target = _Variant(label)
    reads = 2 if kind == "masked" else 1  # an f32 mask element per element, counted as one more T-sized read

    def moved(shape, itemsize):
        return (2 * itemsize + (4 if kind == "masked" else 0)) * int(np.prod(shape))

    bench(f"std/softmax/{label}", setup=setup, launch=lambda d, be: _launch(d, be, kind),
          references={"numpy": lambda d: _oracle(d, kind).astype(d["x"].dtype), "torch": lambda d: _torch(d, kind)},
          bytes_moved=moved, flops=lambda shape: (5 + reads) * int(np.prod(shape)),
          device_shapes=[(4096, 4096), (16384, 8192)] + ([(32, 128256)] if kind == "log" else []))(target)
    test_kernel(oracle=lambda d: _oracle(d, kind), domain="signed", shapes=[(5, 301), (64, 64), (3, 9000)],
                tolerance=tol)(target)


for _kind in _KINDS:
    _register(_kind)
