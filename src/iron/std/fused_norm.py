"""Fused residual add + RMSNorm (issue 18), the pre-norm step of every decoder layer: ``h = x + residual`` (written,
the next layer's residual) and ``out = rms_norm(h) * w``, reading x and the residual once.

The register path is norm.py's (``plan_rows``, one group per row, the row in f32 registers from 16-byte loads):
the sum is rounded to T, stored with ``vstore`` and normalised from those rounded values, so ``out`` is exactly
``rms_norm(h)`` of the ``h`` written (as torch's unfused pair computes it). Rows too long for one group (the split
path, the vocabulary-wide rows) take two launches: ``add_rms_norm_chunk_sums`` (h of each chunk written and its
sum of squares kept) and norm.py's ``rms_norm_chunk_apply`` over h (a read that L2 serves at these sizes). Until
2026-12-06 they ran the add, then rms_norm's own two passes: three launches and one more read of h.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, constexpr, f32, group_id, local_array, local_id, rsqrt, shared, static_range, vstore
from .norm import EPS, rms_norm_chunk_apply, store_scaled, sum_squares
from .softmax import BLOCK, PER, VEC, RowPlan, chunk_span, group_total, load_vectors, scratch_f32, tuned_rows

__all__ = ["BLOCK", "PER", "VEC", "add_rms_norm_rows", "launch_add_rms_norm"]  # BLOCK, PER, VEC: iron build's


@kernel
def add_rms_norm_rows(x: Tensor[T], res: Tensor[T], w: Tensor[T], h: Tensor[T], out: Tensor[T], ncols: int,
                      eps: float, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """h = x + res (rounded to T), out = h * rsqrt(mean(h^2) + eps) * w per row; one group of BLOCK threads per row
    (ncols <= BLOCK * PER * VEC, a multiple of VEC). Sums in f32."""
    start = group_id(0) * ncols
    nvec = ncols // VEC
    vals = local_array(f32, PER * VEC)
    rv = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(res, rv, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(w, wv, 0, nvec, 0.0, BLOCK, VEC, PER)
    store_sum(h, vals, rv, start, nvec, BLOCK, VEC, PER)
    total = group_total(sum_squares(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    scale = rsqrt(total / cast(ncols, f32) + eps)
    store_scaled(out, vals, wv, start, nvec, scale, BLOCK, VEC, PER)


@kernel
def add_rms_norm_chunk_sums(x: Tensor[T], res: Tensor[T], h: Tensor[T], sums: Tensor[f32], ncols: int,
                            nchunks: int, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """Split path, pass 1: h = x + res (rounded to T) over group g's chunk (chunk g % nchunks of row g // nchunks),
    sums[g] = the sum of the rounded values' squares; pass 2 is ``rms_norm_chunk_apply`` over h."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    rv = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(res, rv, start, nvec, 0.0, BLOCK, VEC, PER)
    store_sum(h, vals, rv, start, nvec, BLOCK, VEC, PER)
    total = group_total(sum_squares(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    if local_id(0) == 0:
        sums[group_id(0)] = total


@func
def store_sum(h, vals, rv, start, nvec, BLOCK, VEC, PER):
    """h[start + (k * BLOCK + tid) * VEC + j] = vals + rv rounded to T, for the thread's vectors below nvec; vals
    becomes the rounded sum (so the norm is of the h written)."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = cast(vals[k * VEC + j] + rv[k * VEC + j], T)
                vals[k * VEC + j] = cast(o[j], f32)
            vstore(h, start + v * VEC, o)


def launch_add_rms_norm(x: Any, res: Any, w: Any, h: Any, out: Any, eps: float = EPS,
                        backend: str | None = None) -> RowPlan:
    """h = x + res; out = rms_norm(h) * w over the rows of C-contiguous (rows, ncols) matrices; returns the plan."""
    return tuned_rows("std/add_rms_norm", x, backend, lambda p: _launch_plan(x, res, w, h, out, eps, p, backend))


def _launch_plan(x: Any, res: Any, w: Any, h: Any, out: Any, eps: float, p: RowPlan, backend: str | None) -> None:
    rows, ncols = x.shape
    if p.chunks == 1:
        add_rms_norm_rows[rows * p.block, p.block](x, res, w, h, out, ncols, eps, p.block, p.vec, p.per,
                                                   backend=backend)
        return
    sums = scratch_f32(x, rows * p.chunks)
    grid = rows * p.chunks * p.block
    add_rms_norm_chunk_sums[grid, p.block](x, res, h, sums, ncols, p.chunks, p.block, p.vec, p.per, backend=backend)
    rms_norm_chunk_apply[grid, p.block](h, w, sums, out, ncols, eps, p.chunks, p.block, p.vec, p.per,
                                        backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(), "res": gen.random(), "w": gen.random(shape=gen.shape[1:]), "h": gen.poisoned(),
            "out": gen.poisoned()}


def _oracle(d) -> np.ndarray:
    """float64, from the inputs alone (not from the kernel's h)."""
    hh = d["x"].astype(np.float64) + d["res"].astype(np.float64)
    return hh / np.sqrt(np.mean(hh * hh, axis=1, keepdims=True) + EPS) * d["w"].astype(np.float64)


def _reference(d) -> np.ndarray:
    hh = (d["x"].astype(np.float32) + d["res"].astype(np.float32)).astype(d["x"].dtype).astype(np.float32)
    w = d["w"].astype(np.float32)
    return (hh / np.sqrt(np.mean(hh * hh, axis=1, keepdims=True) + np.float32(EPS)) * w).astype(d["x"].dtype)


def _torch_reference(d):
    """torch's unfused pair: the add, then its fused rms_norm."""
    import torch

    hh = torch.add(d["x"], d["res"])
    return torch.nn.functional.rms_norm(hh, hh.shape[1:], d["w"], eps=EPS)


bench("std/norm/add_rms_norm", setup=_setup,
      launch=lambda d, be: launch_add_rms_norm(d["x"], d["res"], d["w"], d["h"], d["out"], EPS, be),
      references={"numpy": _reference, "torch": _torch_reference},
      bytes_moved=lambda shape, itemsize: (4 * int(np.prod(shape)) + shape[1]) * itemsize,
      flops=lambda shape: 5 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192), (32, 128256)])(add_rms_norm_rows)
# h's rounding to T propagates into out: one more rounding than rms_norm's allowance
test_kernel(oracle=_oracle, domain="signed", shapes=[(64, 1024), (33, 100), (4, 40000)],
            tolerance={"f32": (1e-6, 2e-5), "f16": (2e-3, 4e-3), "bf16": (2e-2, 3.2e-2)})(add_rms_norm_rows)
