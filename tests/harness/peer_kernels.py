"""Registrations that show the bench peers (Triton beside torch) until the std library declares its own: imported
with ``iron bench -m tests/harness/peer_kernels.py`` (the workers import it again through ``IRON_KERNEL_PATH``).

- ``peers/gemm/naive`` and ``peers/gemm/naive_bt``: a one-thread-per-output Iron GEMM (C = A @ B, C = A @ B^T),
  f32 accumulation, shapes (M, N, K), beside torch (``"matmul"``) and Triton (``"gemm"``) by name; the harness side of
  the GEMM rows that issue 14 will register as ``std/gemm/...``.
- the std softmax and rms_norm rows get their Triton peer (``"softmax"``, ``("rms_norm", {"eps": EPS})``), which
  is what those modules' ``references`` should declare themselves.
"""

from __future__ import annotations

import numpy as np

import iron
from iron.harness.registry import REGISTRY, InputGen, bench, library_modules, test_kernel
from iron.lang import T, Tensor, cast, f32, program_id

NAMES = ("peers/gemm/naive", "peers/gemm/naive_bt")


@iron.kernel
def naive_gemm(a: Tensor[T], b: Tensor[T], c: Tensor[T], M: int, N: int, K: int):
    """c[m, n] = sum_k a[m, k] * b[k, n]: one thread per output, f32 accumulation (a straw man, on purpose)."""
    i = program_id(0)
    m = i // N
    n = i % N
    acc = 0.0
    for k in range(K):
        acc += cast(a[m * K + k], f32) * cast(b[k * N + n], f32)
    c[i] = cast(acc, T)


@iron.kernel
def naive_gemm_bt(a: Tensor[T], b: Tensor[T], c: Tensor[T], M: int, N: int, K: int):
    """c[m, n] = sum_k a[m, k] * b[n, k] (B stored transposed)."""
    i = program_id(0)
    m = i // N
    n = i % N
    acc = 0.0
    for k in range(K):
        acc += cast(a[m * K + k], f32) * cast(b[n * K + k], f32)
    c[i] = cast(acc, T)


def _setup(trans_b: bool):
    def setup(gen: InputGen):
        M, N, K = gen.shape
        return {"a": gen.random(shape=(M, K)), "b": gen.random(shape=(N, K) if trans_b else (K, N)),
                "out": gen.poisoned(shape=(M, N))}
    return setup


def _launch(kernel):
    def launch(d, backend: str) -> None:
        M, K = d["a"].shape
        N = d["out"].shape[1]
        kernel[M * N, 128](d["a"], d["b"], d["out"], M, N, K, backend=backend)
    return launch


def _oracle(trans_b: bool):
    def oracle(d):
        b = d["b"].astype(np.float64)
        return d["a"].astype(np.float64) @ (b.T if trans_b else b)
    return oracle


# f32 accumulation over K terms of N(0,1) products: |c| ~ sqrt(K); the f16/bf16 output rounding is relative
_TOLERANCE = {"f32": (1e-3, 1e-4), "f16": (1e-2, 2e-3), "bf16": (5e-2, 1.6e-2)}

for _name, _kernel, _trans_b in ((NAMES[0], naive_gemm, False), (NAMES[1], naive_gemm_bt, True)):
    bench(_name, setup=_setup(_trans_b), launch=_launch(_kernel),
          references={"numpy": ("matmul", {"trans_b": _trans_b}), "torch": ("matmul", {"trans_b": _trans_b}),
                      "triton": ("gemm", {"trans_b": _trans_b})},
          bytes_moved=lambda s, itemsize: (s[0] * s[2] + s[2] * s[1] + s[0] * s[1]) * itemsize,
          flops=lambda s: 2 * s[0] * s[1] * s[2],
          shapes=[(64, 48, 40), (33, 17, 70)], device_shapes=[(1024, 1024, 1024), (1000, 520, 333)])(_kernel)
    test_kernel(oracle=_oracle(_trans_b), tolerance=_TOLERANCE)(_kernel)

# the std rows' Triton peers (the std modules should declare these in their own ``references``)
library_modules()
for _name, _peer in (("std/softmax/row", "softmax"), ("std/norm/rms_norm", ("rms_norm", {"eps": 1e-6}))):
    if _name in REGISTRY:
        REGISTRY[_name].references.setdefault("triton", _peer)
