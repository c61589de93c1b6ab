"""Kernels for the build tests: buffers, scalars and a constexpr; read, write and read-write buffers."""

from __future__ import annotations

from iron import T, Tensor, constexpr, exp, kernel, program_id

SCALE = 3


@kernel
def axpy_acc(x: Tensor[T], acc: Tensor[T], out: Tensor[T], alpha: float, n: int, SCALE: constexpr):
    """out[i] = acc[i]; acc[i] += SCALE * alpha * x[i] (for i < n)."""
    i = program_id(0)
    if i < n:
        out[i] = acc[i]
        acc[i] = acc[i] + SCALE * alpha * x[i]


@kernel
def exp_plus_one(a: Tensor[T], out: Tensor[T]):
    """A deliberately wrong exp, for the example host's mismatch check."""
    i = program_id(0)
    out[i] = exp(a[i]) + 1.0
