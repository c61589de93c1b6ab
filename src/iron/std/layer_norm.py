"""LayerNorm over the last axis (issue 18): out = (x - mean) * rsqrt(var + eps) * w (+ b), weight and optional bias.

Register path (norm.py's design, ``plan_rows``): one group per row holds the row in f32 registers from 16-byte
loads; the mean, then the variance around it (two passes over registers, no cancellation from a large mean), each a
group sum; one read of x, one write. Rows too long for one group (the plan's chunks > 1, e.g. 32 x 128256) split
across groups: ``layer_norm_chunk_stats`` writes each chunk's sum and its sum of squares around its own mean, and
``layer_norm_chunk_apply`` combines a row's chunks (Chan et al.'s pairwise update) and writes its chunk: two reads
of x, one write. Where the device reports its multiprocessors, ``layer_norm_rows_ahead`` (softmax_rows_ahead's
design: a fixed number of groups, each issuing its next row's loads before this row's two reductions; the weight
and bias read a vector at a time as the row is written) is timed beside it. ``layer_norm_strided`` (one group per
row, three strided passes) is kept for ``iron build`` users; no launch helper runs it. Statistics in f32; var is
the biased (1/n) variance, as torch's layer_norm.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    cast,
    constexpr,
    f32,
    group_id,
    local_array,
    local_id,
    num_groups,
    rsqrt,
    shared,
    static_range,
    vload,
    vstore,
)
from ..runtime import get_backend
from .softmax import (
    AHEAD_PER_SM,
    BLOCK,
    ELEMS_PER_THREAD,
    MAX_RESIDENT,
    PER,
    ROW_TUNING,
    VEC,
    RowPlan,
    chunk_span,
    dtype_label,
    group_total,
    load_vectors,
    plan_rows,
    processors,
    scratch_f32,
)

__all__ = ["BLOCK", "EPS", "HAS_BIAS", "LATE", "PER", "VEC", "launch_layer_norm", "layer_norm_chunk_apply",
           "layer_norm_chunk_stats", "layer_norm_rows", "layer_norm_rows_ahead", "layer_norm_strided"]

EPS = 1e-5
HAS_BIAS = True  # iron build's default
#: layer_norm_rows: weight and bias read after the statistics, a vector at a time (iron build's default, what runs
#: untimed; GPUs time both). H100 2026-12-06, 16384 x 8192 bf16, 512 threads x 16: 232.9 us against 358.8 with the
#: rows held in registers from the start (58 registers against 67: two groups an SM against one)
LATE = True
STRIDED_BLOCK = 1024


@func
def centred_squares(vals, mean, nvec, BLOCK, VEC, PER):
    """vals <- vals - mean for this thread's elements inside the span (0 outside); returns the sum of squares."""
    tid = local_id(0)
    s = 0.0
    for k in static_range(PER):
        inside = k * BLOCK + tid < nvec
        for j in static_range(VEC):
            d = vals[k * VEC + j] - mean
            if not inside:
                d = 0.0
            vals[k * VEC + j] = d
            s += d * d
    return s


@func
def thread_sum(vals, PER, VEC):
    s = 0.0
    for i in static_range(PER * VEC):
        s += vals[i]
    return s


@func
def store_normed(out, vals, wv, bv, start, nvec, scale, BLOCK, VEC, PER, HAS_BIAS):
    """out[start + (k * BLOCK + tid) * VEC + j] = vals * scale * w (+ b) for the thread's vectors below nvec (vals
    already centred)."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                y = vals[k * VEC + j] * scale * wv[k * VEC + j]
                if HAS_BIAS:
                    y += bv[k * VEC + j]
                o[j] = y
            vstore(out, start + v * VEC, o)


@kernel
def layer_norm_rows(x: Tensor[T], w: Tensor[T], b: Tensor[T], out: Tensor[T], ncols: int, eps: float,
                    BLOCK: constexpr, VEC: constexpr, PER: constexpr, HAS_BIAS: constexpr, LATE: constexpr):
    """One group of BLOCK threads per row, the row in registers (ncols <= BLOCK * PER * VEC, a multiple of VEC); the
    weight and bias rows wait in registers too (raw T), loaded before the reductions, or with ``LATE`` after them
    (from L1/L2, shared by every row: fewer registers held across the two reductions, more rows in flight)."""
    start = group_id(0) * ncols
    nvec = ncols // VEC
    vals = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    bv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    if not LATE:
        load_affine(w, b, wv, bv, nvec, BLOCK, VEC, PER, HAS_BIAS)
    mean = group_total(thread_sum(vals, PER, VEC), shared(f32, BLOCK), BLOCK) / cast(ncols, f32)
    var = group_total(centred_squares(vals, mean, nvec, BLOCK, VEC, PER), shared(f32, BLOCK), BLOCK)
    scale = rsqrt(var / cast(ncols, f32) + eps)
    if LATE:
        store_affine(out, vals, w, b, start, nvec, scale, BLOCK, VEC, PER, HAS_BIAS)
    else:
        store_normed(out, vals, wv, bv, start, nvec, scale, BLOCK, VEC, PER, HAS_BIAS)


@kernel
def layer_norm_rows_ahead(x: Tensor[T], w: Tensor[T], b: Tensor[T], out: Tensor[T], nrows: int, ncols: int,
                          eps: float, BLOCK: constexpr, VEC: constexpr, PER: constexpr, HAS_BIAS: constexpr):
    """``layer_norm_rows`` by a fixed number of groups G = num_groups(0): group g does rows g, g + G, ... and issues
    the next row's loads (raw T) before this row's reductions, so a row is on its way while the group waits at its
    barriers; the weight and bias (the same columns every row) are read a vector at a time as the row is written,
    from L1, with no registers held for them. The two reductions keep their own shared slots (softmax_rows_ahead's
    argument: a slot is written again only after every SIMD group passed the barrier that follows its last read)."""
    nvec = ncols // VEC
    cur = local_array(f32, PER * VEC)
    nxt = local_array(T, PER * VEC)
    psum = shared(f32, BLOCK)
    psq = shared(f32, BLOCK)
    r = group_id(0)
    if r < nrows:
        load_vectors(x, cur, r * ncols, nvec, 0.0, BLOCK, VEC, PER)
    while r < nrows:
        after = r + num_groups(0)
        if after < nrows:
            load_vectors(x, nxt, after * ncols, nvec, 0.0, BLOCK, VEC, PER)
        mean = group_total(thread_sum(cur, PER, VEC), psum, BLOCK) / cast(ncols, f32)
        var = group_total(centred_squares(cur, mean, nvec, BLOCK, VEC, PER), psq, BLOCK)
        scale = rsqrt(var / cast(ncols, f32) + eps)
        store_affine(out, cur, w, b, r * ncols, nvec, scale, BLOCK, VEC, PER, HAS_BIAS)
        for i in static_range(PER * VEC):
            cur[i] = nxt[i]
        r = after


@func
def store_affine(out, vals, w, b, start, nvec, scale, BLOCK, VEC, PER, HAS_BIAS):
    """``store_normed`` with each weight (and bias) vector loaded just before the output vector it scales."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            wk = vload(w, v * VEC, VEC)
            o = local_array(T, VEC)
            if HAS_BIAS:
                bk = vload(b, v * VEC, VEC)
                for j in static_range(VEC):
                    o[j] = vals[k * VEC + j] * scale * wk[j] + bk[j]
            else:
                for j in static_range(VEC):
                    o[j] = vals[k * VEC + j] * scale * wk[j]
            vstore(out, start + v * VEC, o)


@func
def load_affine(w, b, wv, bv, nvec, BLOCK, VEC, PER, HAS_BIAS):
    """wv, bv <- this thread's vectors of the weight and (with HAS_BIAS) bias rows, raw T."""
    load_vectors(w, wv, 0, nvec, 0.0, BLOCK, VEC, PER)
    if HAS_BIAS:
        load_vectors(b, bv, 0, nvec, 0.0, BLOCK, VEC, PER)


@kernel
def layer_norm_chunk_stats(x: Tensor[T], stats: Tensor[f32], ncols: int, nchunks: int, BLOCK: constexpr,
                           VEC: constexpr, PER: constexpr):
    """Split path, pass 1: stats[2g], stats[2g + 1] = the sum of group g's chunk (chunk g % nchunks of row
    g // nchunks) and its sum of squares around the chunk's own mean (no cancellation from a large mean)."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    s = group_total(thread_sum(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    m2 = group_total(centred_squares(vals, s / cast(nvec * VEC, f32), nvec, BLOCK, VEC, PER), shared(f32, BLOCK),
                     BLOCK)
    if local_id(0) == 0:
        stats[2 * group_id(0)] = s
        stats[2 * group_id(0) + 1] = m2


@kernel
def layer_norm_chunk_apply(x: Tensor[T], w: Tensor[T], b: Tensor[T], stats: Tensor[f32], out: Tensor[T], ncols: int,
                           eps: float, nchunks: int, BLOCK: constexpr, VEC: constexpr, PER: constexpr,
                           HAS_BIAS: constexpr):
    """Split path, pass 2: combine the row's chunk statistics (Chan et al.'s pairwise update: M2 = sum of the
    chunks' M2 + n_c (mean_c - mean)^2), then write this group's chunk, its loads issued first."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    row = group_id(0) // nchunks
    vals = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    bv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(w, wv, start - row * ncols, nvec, 0.0, BLOCK, VEC, PER)
    if HAS_BIAS:
        load_vectors(b, bv, start - row * ncols, nvec, 0.0, BLOCK, VEC, PER)
    s = 0.0
    for i in range(local_id(0), nchunks, BLOCK):
        s += stats[2 * (row * nchunks + i)]
    mean = group_total(s, shared(f32, BLOCK), BLOCK) / cast(ncols, f32)
    q = 0.0
    for i in range(local_id(0), nchunks, BLOCK):
        n_c = cast(min(BLOCK * PER * VEC, ncols - i * (BLOCK * PER * VEC)), f32)
        d = stats[2 * (row * nchunks + i)] / n_c - mean
        q += stats[2 * (row * nchunks + i) + 1] + n_c * d * d
    scale = rsqrt(group_total(q, shared(f32, BLOCK), BLOCK) / cast(ncols, f32) + eps)
    centred_squares(vals, mean, nvec, BLOCK, VEC, PER)
    store_normed(out, vals, wv, bv, start, nvec, scale, BLOCK, VEC, PER, HAS_BIAS)


@kernel
def layer_norm_strided(x: Tensor[T], w: Tensor[T], b: Tensor[T], out: Tensor[T], ncols: int, eps: float,
                       BLOCK: constexpr, HAS_BIAS: constexpr):
    """Any row length: one group of BLOCK threads per row, strided passes for the mean, the variance and the
    output. Launch rows * BLOCK threads."""
    start = group_id(0) * ncols
    tid = local_id(0)
    s = 0.0
    for c in range(tid, ncols, BLOCK):
        s += cast(x[start + c], f32)
    mean = group_total(s, shared(f32, BLOCK), BLOCK) / cast(ncols, f32)
    q = 0.0
    for c in range(tid, ncols, BLOCK):
        d = cast(x[start + c], f32) - mean
        q += d * d
    scale = rsqrt(group_total(q, shared(f32, BLOCK), BLOCK) / cast(ncols, f32) + eps)
    for c in range(tid, ncols, BLOCK):
        y = (cast(x[start + c], f32) - mean) * scale * cast(w[c], f32)
        if HAS_BIAS:
            y += cast(b[c], f32)
        out[start + c] = cast(y, T)


def launch_layer_norm(x: Any, w: Any, b: Any | None, out: Any, eps: float = EPS, backend: str | None = None,
                      late: bool | None = None, ahead: int | None = None) -> RowPlan:
    """out = layer_norm(x) * w (+ b) over the rows of a C-contiguous (rows, ncols) matrix; ``b`` None for no bias
    (``w`` is then passed in its place, unread). Where the backend autotunes, the elements per thread and ``LATE``
    (weight and bias loaded after the statistics; the register path only, the split path has no such choice) are
    timed together, and where it also reports its multiprocessors, ``layer_norm_rows_ahead`` with ``AHEAD_PER_SM``
    groups per multiprocessor (softmax's rule: register plans, at least two rows a group); ``late`` forces the
    former, ``ahead`` = G (1 <= G < rows) runs the latter with G groups where the plan keeps a row in registers.
    Returns the plan it ran."""
    rows, ncols = x.shape
    be = backend or get_backend(None).name
    tuned = table_for(ROW_TUNING, be)
    # a forced persistent grid ignores LATE: time it once
    lates = (LATE, not LATE) if late is None and tuned and not ahead else (LATE if late is None else late,)
    fixed = 0 if ahead is None else ahead
    configs = [{"EPT": e, "LATE": lt, "AHEAD": fixed} for e in tuned or (ELEMS_PER_THREAD,) for lt in lates
               if lt == lates[0] or plan_rows(rows, ncols, x.dtype.itemsize, e).chunks == 1]  # split: no LATE
    whole = [e for e in tuned or () if plan_rows(rows, ncols, x.dtype.itemsize, e).chunks == 1]
    if ahead is None and late is None and whole:
        sms = processors(be)
        size = x.dtype.itemsize
        configs += [{"EPT": e, "LATE": LATE, "AHEAD": k * sms} for e in whole for k in AHEAD_PER_SM
                    if 0 < 2 * k * sms <= rows and k * plan_rows(rows, ncols, size, e).block <= MAX_RESIDENT]

    def run(cfg: dict) -> RowPlan:
        p = plan_rows(rows, ncols, x.dtype.itemsize, cfg["EPT"])
        _launch_plan(x, w, b, out, eps, p, backend, cfg["LATE"], cfg["AHEAD"])
        return p

    return run(tune("std/layer_norm", configs, run, backend=be, dtype=dtype_label(x), key=(rows, ncols)))


def _launch_plan(x: Any, w: Any, b: Any | None, out: Any, eps: float, p: RowPlan, backend: str | None,
                 late: bool = LATE, ahead: int = 0) -> None:
    rows, ncols = x.shape
    has_bias = b is not None
    bias = b if has_bias else w
    if p.chunks == 1 and 0 < ahead < rows:
        layer_norm_rows_ahead[ahead * p.block, p.block](x, w, bias, out, rows, ncols, eps, p.block, p.vec, p.per,
                                                        has_bias, backend=backend)
        return
    if p.chunks == 1:
        layer_norm_rows[rows * p.block, p.block](x, w, bias, out, ncols, eps, p.block, p.vec, p.per, has_bias, late,
                                                 backend=backend)
        return
    stats = scratch_f32(x, 2 * rows * p.chunks)
    grid = rows * p.chunks * p.block
    layer_norm_chunk_stats[grid, p.block](x, stats, ncols, p.chunks, p.block, p.vec, p.per, backend=backend)
    layer_norm_chunk_apply[grid, p.block](x, w, bias, stats, out, ncols, eps, p.chunks, p.block, p.vec, p.per,
                                          has_bias, backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    # a row offset of 3 makes the mean matter (a one-pass sum of squares would lose digits to it)
    return {"x": gen.random() + np.asarray(3.0, gen.dtype), "w": gen.random(shape=gen.shape[1:]),
            "b": gen.random(shape=gen.shape[1:]), "out": gen.poisoned()}


def _oracle(d) -> np.ndarray:
    x = d["x"].astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * d["w"].astype(np.float64) + d["b"].astype(np.float64)


def _reference(d) -> np.ndarray:
    return _oracle({k: v.astype(np.float32) for k, v in d.items() if k in "xwb"}).astype(d["x"].dtype)


def _torch_reference(d):
    import torch

    return torch.nn.functional.layer_norm(d["x"], d["x"].shape[1:], d["w"], d["b"], eps=EPS)


bench("std/norm/layer_norm", setup=_setup,
      launch=lambda d, be: launch_layer_norm(d["x"], d["w"], d["b"], d["out"], EPS, be),
      references={"numpy": _reference, "torch": _torch_reference, "triton": ("layer_norm", {"eps": EPS}),
                  "mlx": "mlx.core.fast.layer_norm"},
      bytes_moved=lambda shape, itemsize: (2 * int(np.prod(shape)) + 2 * shape[1]) * itemsize,
      flops=lambda shape: 7 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192), (32, 128256)])(layer_norm_rows)
test_kernel(oracle=_oracle, domain="signed", shapes=[(64, 1024), (33, 100), (3, 40000)],
            tolerance={"f32": (1e-5, 2e-5), "f16": (4e-3, 2e-3), "bf16": (3e-2, 1.6e-2)})(layer_norm_rows)
