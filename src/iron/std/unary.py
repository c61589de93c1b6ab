"""Elementwise unary kernels."""

from __future__ import annotations

import numpy as np

from ..frontend import kernel
from ..lang import T, Tensor, exp, program_id
from .registry import StdKernel, register


@kernel
def iron_exp(a: Tensor[T], out: Tensor[T]):
    """out[i] = exp(a[i]) (the seed's example)."""
    idx = program_id(0)
    out[idx] = exp(a[idx])


def _make(shape, dtype, rng):
    a = rng.standard_normal(shape).astype(dtype)
    return {"a": a, "out": np.full_like(a, np.nan)}


register(StdKernel(
    name="std/unary/exp",
    shapes=[(1 << 16,), (1 << 20,)],
    device_shapes=[(1 << 20,), (1 << 24,), (1 << 28,)],
    make=_make,
    launch=lambda d, backend: iron_exp[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend),
    oracle=lambda d: np.exp(d["a"].astype(np.float64)),
    reference=lambda d: np.exp(d["a"].astype(np.float32)).astype(d["a"].dtype),
    bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
    torch_reference=lambda d: __import__("torch").exp(d["a"], out=d["ref_out"]),
))
