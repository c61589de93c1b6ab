"""Row normalisations: RMSNorm, one group per row."""

from __future__ import annotations

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    cast,
    constexpr,
    f32,
    group_id,
    local_id,
    rsqrt,
    shared,
    simd_group,
    simd_lane,
)
from .reduce import group_sum

#: threads per group (one group per row); a multiple of every SIMD width (8 lavapipe, 32 NVIDIA/Apple, 64 AMD)
BLOCK = 256
EPS = 1e-6


@kernel
def rms_norm(x: Tensor[T], w: Tensor[T], out: Tensor[T], ncols: int, eps: float, BLOCK: constexpr):
    """out[r, c] = x[r, c] * rsqrt(mean(x[r, :]^2) + eps) * w[c] for a row-major (rows, ncols) matrix; launch
    rows * BLOCK threads in groups of BLOCK. Sums in f32: a strided pass per thread, ``simd_sum`` per SIMD group,
    then the first SIMD group sums the per-group partials (there are BLOCK / simd_size() of them, which may exceed
    one SIMD group's lanes on narrow hardware, hence its strided loop)."""
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


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(), "w": gen.random(shape=gen.shape[1:]), "out": gen.poisoned()}


def _launch(d, backend: str) -> None:
    rows, ncols = d["x"].shape
    rms_norm[rows * BLOCK, BLOCK](d["x"], d["w"], d["out"], ncols, EPS, BLOCK, backend=backend)


def _oracle(d) -> np.ndarray:
    x, w = d["x"].astype(np.float64), d["w"].astype(np.float64)
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS) * w


def _reference(d) -> np.ndarray:
    x, w = d["x"].astype(np.float32), d["w"].astype(np.float32)
    return (x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + np.float32(EPS)) * w).astype(d["x"].dtype)


def _torch_reference(d):
    import torch

    return torch.mul(torch.nn.functional.rms_norm(d["x"], d["x"].shape[1:], d["w"], eps=EPS), 1, out=d["ref_out"])


bench("std/norm/rms_norm", setup=_setup, launch=_launch,
      references={"numpy": _reference, "torch": _torch_reference, "mlx": "mlx.core.fast.rms_norm"},
      bytes_moved=lambda shape, itemsize: (2 * int(np.prod(shape)) + shape[1]) * itemsize,
      flops=lambda shape: 4 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192)])(rms_norm)
# f32: rsqrt and the f32 sum of ncols squares; f16/bf16: the final rounding of the output
test_kernel(oracle=_oracle, domain="signed", shapes=[(64, 1024), (256, 4096), (33, 100)],
            tolerance={"f32": (1e-6, 2e-5), "f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)})(rms_norm)
