"""cumsum: the inclusive scan over the last axis of a (rows, ncols) matrix (issue 18), accumulated in f32.

Kernel: ``cumsum_chunks(x, totals, out, ncols, nchunks, BLOCK, VEC, PER)``. Group g scans chunk g % nchunks
(``BLOCK * PER * VEC`` elements) of row g // nchunks; launch rows * nchunks * BLOCK threads. Thread ``tid`` holds the
chunk's contiguous vectors ``tid * PER + k`` (k < PER) of VEC elements, read with 16-byte ``vload``s into an f32
register array and scanned there; the threads' totals are combined with ``simd_prefix_exclusive_sum`` and one
shared slot per SIMD group (each thread adds the slots of the SIMD groups before its own, in order); the carry into
the chunk is the sum of the row's earlier chunk totals (``totals``, f32, one per chunk), added by the whole group.
Results are written with ``vstore``. Every order is fixed, so results are deterministic.

Rows of one chunk (the register path: ncols <= 16384 and enough rows) run that kernel alone (``totals`` is then a
1-element dummy that is never read). Longer rows, or long rows too few to fill the GPU (32 x 128256), first run
reductions.py's ``reduce_rows`` (a sum, one f32 partial per chunk), which writes the chunk totals: the carry pass.
The variant comes from softmax.py's ``plan_rows`` (16 elements per thread; autotuned over 8/16/32 on CUDA), e.g.
32 x 128256 bf16: 32 x 32 groups of 256 threads x 2 vectors of 8, x read twice (the second time mostly from L2), out
written once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    constexpr,
    f32,
    group_id,
    local_array,
    local_id,
    shared,
    simd_group,
    simd_lane,
    simd_prefix_exclusive_sum,
    simd_sum,
    static_range,
    vload,
    vstore,
)
from .reductions import reduce_partials
from .softmax import BLOCK, PER, VEC, RowPlan, group_total, scratch_f32, tuned_rows

__all__ = ["BLOCK", "PER", "VEC", "cumsum_chunks", "launch_cumsum"]


@kernel
def cumsum_chunks(x: Tensor[T], totals: Tensor[f32], out: Tensor[T], ncols: int, nchunks: int, BLOCK: constexpr,
                  VEC: constexpr, PER: constexpr):
    """out[r, c] = sum of x[r, :c + 1] over this group's chunk, plus the totals of the row's earlier chunks."""
    g = group_id(0)
    row = g // nchunks
    chunk = g - row * nchunks
    c0 = chunk * (BLOCK * PER * VEC)
    start = row * ncols + c0
    nvec = min(BLOCK * PER * VEC, ncols - c0) // VEC
    tid = local_id(0)
    vals = local_array(f32, PER * VEC)
    for k in static_range(PER):
        v = tid * PER + k
        if v < nvec:
            part = vload(x, start + v * VEC, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = part[j]
        else:
            for j in static_range(VEC):
                vals[k * VEC + j] = 0.0
    for i in static_range(1, PER * VEC):
        vals[i] += vals[i - 1]
    total = vals[PER * VEC - 1]
    before = simd_prefix_exclusive_sum(total)
    slots = shared(f32, BLOCK)
    warp_total = simd_sum(total)
    if simd_lane() == 0:
        slots[simd_group()] = warp_total
    carry = 0.0
    for i in range(tid, chunk, BLOCK):
        carry += totals[row * nchunks + i]
    carry = group_total(carry, shared(f32, BLOCK), BLOCK)  # its barrier also publishes the slots
    for i in range(simd_group()):
        before += slots[i]
    before += carry
    for k in static_range(PER):
        v = tid * PER + k
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j] + before
            vstore(out, start + v * VEC, o)


def launch_cumsum(x: Any, out: Any, backend: str | None = None, plan: RowPlan | None = None) -> RowPlan:
    """out = cumsum(x, axis=1) for a C-contiguous (rows, ncols) x (f32 accumulation); ``plan`` forces a variant."""
    rows, ncols = x.shape

    def run(p: RowPlan) -> None:
        p = RowPlan(p.block, p.vec, p.per, -(-ncols // p.chunk))  # chunks of exactly one tile
        totals = reduce_partials(x, p, backend) if p.chunks > 1 else scratch_f32(x, 1)
        cumsum_chunks[rows * p.chunks * p.block, p.block](x, totals, out, ncols, p.chunks, p.block, p.vec, p.per,
                                                          backend=backend)

    if plan is not None:
        run(plan)
        return plan
    return tuned_rows("std/scan/cumsum", x, backend, run)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(), "out": gen.poisoned()}


bench("std/scan/cumsum", setup=_setup, launch=lambda d, be: launch_cumsum(d["x"], d["out"], be),
      references={"numpy": lambda d: np.cumsum(d["x"].astype(np.float32), axis=1).astype(d["x"].dtype),
                  "torch": lambda d: __import__("torch").cumsum(d["x"], dim=1, out=d["ref_out"])},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
      flops=lambda shape: int(np.prod(shape)),
      device_shapes=[(32, 128256), (4096, 4096)])(cumsum_chunks)
# f32 accumulation (partial sums up to ~100 here: a few f32 ulps), then one rounding to T
test_kernel(oracle=lambda d: np.cumsum(d["x"].astype(np.float64), axis=1), domain="signed",
            shapes=[(5, 301), (64, 512), (3, 9000)],
            tolerance={"f32": (2e-4, 1e-5), "f16": (1e-3, 1e-3), "bf16": (1e-2, 8e-3)})(cumsum_chunks)
