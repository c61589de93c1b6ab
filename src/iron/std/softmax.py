"""Row softmax: one group per row, a strided pass per statistic, tree reductions in shared memory."""

from __future__ import annotations

import math

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, barrier, constexpr, exp, f32, group_id, local_id, shared


@kernel
def softmax(x: Tensor[T], out: Tensor[T], ncols: int, BLOCK: constexpr):
    """out[r, :] = softmax(x[r, :]) for a row-major (rows, ncols) matrix; launch rows * BLOCK threads in groups
    of BLOCK (a power of two)."""
    row = group_id(0)
    tid = local_id(0)
    base = row * ncols
    red = shared(f32, BLOCK)
    m = -math.inf
    for c in range(tid, ncols, BLOCK):
        m = max(m, x[base + c])
    red[tid] = m
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = max(red[tid], red[tid + s])
        barrier()
        s = s // 2
    m = red[0]
    barrier()
    acc = 0.0
    for c in range(tid, ncols, BLOCK):
        acc += exp(x[base + c] - m)
    red[tid] = acc
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = red[tid] + red[tid + s]
        barrier()
        s = s // 2
    inv = 1.0 / red[0]
    for c in range(tid, ncols, BLOCK):
        out[base + c] = exp(x[base + c] - m) * inv


#: threads per group (one group per row); a power of two
BLOCK = 256


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(scale=4.0), "out": gen.poisoned()}


def _launch(d, backend: str) -> None:
    rows, ncols = d["x"].shape
    softmax[rows * BLOCK, BLOCK](d["x"], d["out"], ncols, BLOCK, backend=backend)


def _oracle(d):
    x = d["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _reference(d):
    x = d["x"].astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(d["x"].dtype)


bench("std/softmax/row", setup=_setup, launch=_launch,
      references={"numpy": _reference, "torch": lambda d: __import__("torch").softmax(d["x"], dim=1, out=d["ref_out"]),
                  "mlx": "mlx.core.softmax"},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
      flops=lambda shape: 5 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192)])(softmax)
test_kernel(oracle=_oracle, domain="signed", shapes=[(256, 1024), (1024, 1024)],
            tolerance={"f32": (1e-7, 1e-5), "f16": (1e-4, 2e-3), "bf16": (1e-3, 1.6e-2)})(softmax)
