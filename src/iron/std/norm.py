"""Row normalisations: RMSNorm with the row held in registers, read once (Triton's layer-norm design).

Design (the row layout, ``plan_rows`` and the group reductions are softmax.py's): on the **register path** (ncols <=
16384) one group per row loads its row with 16-byte ``vload``s into an f32 ``local_array`` and the weight row into a
``T`` one before reducing, sums squares with ``simd_sum`` plus a one-slot-per-SIMD-group shared combine, and writes
``x * rsqrt(mean + eps) * w`` from registers with ``vstore``: one read of x, one of w (L2-resident), one write. On the
**split path** (longer rows, or long rows too few to fill the GPU, e.g. 32 x 128256) ``rms_norm_chunk_sums`` writes
each 4096-element chunk's sum of squares to an f32 workspace and ``rms_norm_chunk_apply`` adds the row's partials and
re-reads its chunk (from L2 when the matrix fits there). Rows whose length is not a multiple of 16 bytes of elements
use scalar accesses (``VEC = 1``), with the same single read.

Expected on an H200 (bf16, not measured here): 16384x8192 and 4096x4096 at Triton's ~3950 and ~2900 GB/s (512 and
256 threads x 16 elements, all loads issued before the reduction); 32x128256 in 32 x 32 groups over two launches,
aiming at >= 900 GB/s. ``rms_norm`` (strided, two reads) stays as the portable baseline the HIP runtime tests pin.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    cast,
    constexpr,
    f32,
    group_id,
    local_array,
    local_id,
    rsqrt,
    shared,
    simd_group,
    simd_lane,
    static_range,
    vstore,
)
from .reduce import group_sum
from .softmax import BLOCK, PER, VEC, RowPlan, chunk_span, group_total, load_vectors, scratch_f32, tuned_rows

__all__ = ["BLOCK", "EPS", "PER", "VEC", "launch_rms_norm", "rms_norm", "rms_norm_rows"]

EPS = 1e-6


@func
def sum_squares(vals, PER, VEC):
    s = 0.0
    for i in static_range(PER * VEC):
        s += vals[i] * vals[i]
    return s


@func
def store_scaled(out, vals, wv, start, nvec, scale, BLOCK, VEC, PER):
    """out[start + (k * BLOCK + tid) * VEC + j] = vals * scale * wv for the thread's vectors below nvec."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j] * scale * wv[k * VEC + j]
            vstore(out, start + v * VEC, o)


@kernel
def rms_norm_rows(x: Tensor[T], w: Tensor[T], out: Tensor[T], ncols: int, eps: float, BLOCK: constexpr,
                  VEC: constexpr, PER: constexpr):
    """out[r, c] = x[r, c] * rsqrt(mean(x[r, :]^2) + eps) * w[c], one group of BLOCK threads per row, the row in
    registers (ncols <= BLOCK * PER * VEC; ncols a multiple of VEC). Sums in f32."""
    start = group_id(0) * ncols
    nvec = ncols // VEC
    vals = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(w, wv, 0, nvec, 0.0, BLOCK, VEC, PER)  # the weights wait in registers, as raw T
    total = group_total(sum_squares(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    scale = rsqrt(total / cast(ncols, f32) + eps)
    store_scaled(out, vals, wv, start, nvec, scale, BLOCK, VEC, PER)


@kernel
def rms_norm_chunk_sums(x: Tensor[T], sums: Tensor[f32], ncols: int, nchunks: int, BLOCK: constexpr,
                        VEC: constexpr, PER: constexpr):
    """Split path, pass 1: sums[g] = sum of x^2 over group g's chunk (chunk g % nchunks of row g // nchunks)."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    total = group_total(sum_squares(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    if local_id(0) == 0:
        sums[group_id(0)] = total


@kernel
def rms_norm_chunk_apply(x: Tensor[T], w: Tensor[T], sums: Tensor[f32], out: Tensor[T], ncols: int, eps: float,
                         nchunks: int, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """Split path, pass 2: add the row's chunk sums, then write this group's chunk (its loads issued first)."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    row = group_id(0) // nchunks
    vals = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(w, wv, start - row * ncols, nvec, 0.0, BLOCK, VEC, PER)
    s = 0.0
    for i in range(local_id(0), nchunks, BLOCK):
        s += sums[row * nchunks + i]
    total = group_total(s, shared(f32, BLOCK), BLOCK)
    scale = rsqrt(total / cast(ncols, f32) + eps)
    store_scaled(out, vals, wv, start, nvec, scale, BLOCK, VEC, PER)


@kernel
def rms_norm(x: Tensor[T], w: Tensor[T], out: Tensor[T], ncols: int, eps: float, BLOCK: constexpr):
    """The portable baseline: out[r, c] = x[r, c] * rsqrt(mean(x[r, :]^2) + eps) * w[c] with one group of BLOCK
    threads per row and strided passes (two reads of the row); launch rows * BLOCK threads. Not the registered path
    (see the module docstring); the HIP runtime tests pin it. Sums in f32: ``simd_sum`` per SIMD group, then the
    first SIMD group sums the BLOCK / simd_size() partials."""
    row = group_id(0)
    tid = local_id(0)
    base = row * ncols
    partial = shared(f32, BLOCK)
    total = shared(f32, 1)
    acc = 0.0
    for c in range(tid, ncols, BLOCK):
        v = cast(x[base + c], f32)
        acc += v * v
    s = group_sum(acc, partial, BLOCK)
    if simd_group() == 0 and simd_lane() == 0:
        total[0] = s
    barrier()
    scale = rsqrt(total[0] / cast(ncols, f32) + eps)
    for c in range(tid, ncols, BLOCK):
        out[base + c] = cast(cast(x[base + c], f32) * scale * cast(w[c], f32), T)


def launch_rms_norm(x: Any, w: Any, out: Any, eps: float = EPS, backend: str | None = None) -> RowPlan:
    """out = rms_norm(x) * w over the rows of a C-contiguous (rows, ncols) matrix; returns the plan it ran."""
    return tuned_rows("std/rms_norm", x, backend, lambda p: _launch_plan(x, w, out, eps, p, backend))


def _launch_plan(x: Any, w: Any, out: Any, eps: float, p: RowPlan, backend: str | None) -> None:
    rows, ncols = x.shape
    if p.chunks == 1:
        rms_norm_rows[rows * p.block, p.block](x, w, out, ncols, eps, p.block, p.vec, p.per, backend=backend)
        return
    sums = scratch_f32(x, rows * p.chunks)
    grid = rows * p.chunks * p.block
    rms_norm_chunk_sums[grid, p.block](x, sums, ncols, p.chunks, p.block, p.vec, p.per, backend=backend)
    rms_norm_chunk_apply[grid, p.block](x, w, sums, out, ncols, eps, p.chunks, p.block, p.vec, p.per,
                                        backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(), "w": gen.random(shape=gen.shape[1:]), "out": gen.poisoned()}


def _launch(d, backend: str) -> None:
    launch_rms_norm(d["x"], d["w"], d["out"], EPS, backend)


def _oracle(d) -> np.ndarray:
    x, w = d["x"].astype(np.float64), d["w"].astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS) * w


def _reference(d) -> np.ndarray:
    x, w = d["x"].astype(np.float32), d["w"].astype(np.float32)
    return (x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + np.float32(EPS)) * w).astype(d["x"].dtype)


def _torch_reference(d):
    """torch's own fused ``rms_norm``, returned as is (the harness accepts a returned output): no copy into
    ``ref_out``, so no extra read and write beside what torch's kernel does."""
    import torch

    return torch.nn.functional.rms_norm(d["x"], d["x"].shape[1:], d["w"], eps=EPS)


bench("std/norm/rms_norm", setup=_setup, launch=_launch,
      references={"numpy": _reference, "torch": _torch_reference, "triton": ("rms_norm", {"eps": EPS}),
                  "mlx": "mlx.core.fast.rms_norm"},
      bytes_moved=lambda shape, itemsize: (2 * int(np.prod(shape)) + shape[1]) * itemsize,
      flops=lambda shape: 4 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192), (32, 128256)])(rms_norm_rows)
# f32: rsqrt and the f32 sum of ncols squares; f16/bf16: the final rounding of the output
test_kernel(oracle=_oracle, domain="signed", shapes=[(64, 1024), (256, 4096), (33, 100)],
            tolerance={"f32": (1e-6, 2e-5), "f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)})(rms_norm_rows)
