"""Elementwise unary kernels."""

from __future__ import annotations

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, exp, program_id


@kernel
def iron_exp(a: Tensor[T], out: Tensor[T]):
    """out[i] = exp(a[i]) (the seed's example)."""
    idx = program_id(0)
    out[idx] = exp(a[idx])


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"a": gen.random(), "out": gen.poisoned()}


bench("std/unary/exp", setup=_setup,
      launch=lambda d, backend: iron_exp[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend),
      references={"numpy": lambda d: np.exp(d["a"].astype(np.float32)).astype(d["a"].dtype),
                  "torch": lambda d: __import__("torch").exp(d["a"], out=d["ref_out"]),
                  "mlx": "mlx.core.exp"},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
      flops=lambda shape: int(np.prod(shape)),
      device_shapes=[(1 << 20,), (1 << 24,), (1 << 28,)])(iron_exp)
test_kernel(oracle=lambda d: np.exp(d["a"].astype(np.float64)), domain="signed", shapes=[(1 << 16,), (1 << 20,)]
            )(iron_exp)
