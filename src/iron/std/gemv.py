"""Matrix-vector product: one group per row."""

from __future__ import annotations

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    cast,
    constexpr,
    f32,
    group_id,
    local_id,
    shared,
    simd_group,
    simd_lane,
)
from .reduce import group_sum

#: threads per group (one group per row); a multiple of every SIMD width (8 lavapipe, 32 NVIDIA/Apple, 64 AMD)
BLOCK = 256


@kernel
def gemv(a: Tensor[T], x: Tensor[T], y: Tensor[T], ncols: int, BLOCK: constexpr):
    """y[r] = sum_c a[r, c] * x[c] for a row-major (rows, ncols) matrix; launch rows * BLOCK threads in groups of
    BLOCK. Adjacent threads read adjacent columns (coalesced), sum in f32 with ``simd_sum`` per SIMD group, then the
    first SIMD group sums the BLOCK / simd_size() partials."""
    row = group_id(0)
    tid = local_id(0)
    base = row * ncols
    partial = shared(f32, BLOCK)
    acc = 0.0
    for c in range(tid, ncols, BLOCK):
        acc += cast(a[base + c], f32) * cast(x[c], f32)
    s = group_sum(acc, partial, BLOCK)
    if simd_group() == 0 and simd_lane() == 0:
        y[row] = cast(s, T)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    rows, ncols = gen.shape
    return {"a": gen.random(), "x": gen.random(shape=(ncols,)), "y": gen.poisoned(shape=(rows,))}


def _launch(d, backend: str) -> None:
    rows, ncols = d["a"].shape
    gemv[rows * BLOCK, BLOCK](d["a"], d["x"], d["y"], ncols, BLOCK, backend=backend)


def _oracle(d) -> np.ndarray:
    return d["a"].astype(np.float64) @ d["x"].astype(np.float64)


def _reference(d) -> np.ndarray:
    return (d["a"].astype(np.float32) @ d["x"].astype(np.float32)).astype(d["a"].dtype)


bench("std/gemv/gemv", setup=_setup, launch=_launch, output="y",
      references={"numpy": _reference, "torch": lambda d: __import__("torch").mv(d["a"], d["x"], out=d["ref_out"]),
                  "mlx": "mlx.core.matmul"},
      bytes_moved=lambda shape, itemsize: (shape[0] * shape[1] + shape[0] + shape[1]) * itemsize,
      flops=lambda shape: 2 * shape[0] * shape[1],
      device_shapes=[(4096, 4096), (8192, 8192), (16384, 16384)])(gemv)
# inputs are N(0,1): each output is a sum of ncols terms, |y| ~ sqrt(ncols), so the f32 summation error is absolute
# at ~ ncols * 2^-24 * sqrt(ncols)-ish; f16/bf16 add the output rounding (relative)
test_kernel(oracle=_oracle, domain="signed", shapes=[(256, 1024), (1024, 1024), (37, 300)],
            tolerance={"f32": (2e-4, 1e-5), "f16": (2e-4, 1e-3), "bf16": (2e-4, 7.9e-3)})(gemv)
