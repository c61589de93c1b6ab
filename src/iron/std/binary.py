"""Elementwise binary kernels."""

from __future__ import annotations

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, program_id


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"a": gen.random(), "b": gen.random(), "out": gen.poisoned()}


def _launch(d, backend: str) -> None:
    iron_add[int(np.prod(d["a"].shape))](d["a"], d["b"], d["out"], backend=backend)


@bench("std/binary/add", setup=_setup, launch=_launch,
       references={"numpy": lambda d: np.add(d["a"], d["b"]),
                   "torch": lambda d: __import__("torch").add(d["a"], d["b"], out=d["ref_out"]),
                   "mlx": "mlx.core.add"},
       bytes_moved=lambda shape, itemsize: 3 * int(np.prod(shape)) * itemsize,
       flops=lambda shape: int(np.prod(shape)),
       device_shapes=[(1 << 20,), (1 << 24,), (1 << 28,)])
@test_kernel(oracle=lambda d: d["a"].astype(np.float64) + d["b"].astype(np.float64), domain="signed",
             shapes=[(1 << 16,), (1 << 20,)],
             # one rounding of an exact sum: half an ulp relative (f16 2^-11, bf16 2^-8), tiny absolute for subnormals
             tolerance={"f32": (1e-30, 1.2e-7), "f16": (1e-7, 9.8e-4), "bf16": (1e-30, 7.9e-3)})
@kernel
def iron_add(a: Tensor[T], b: Tensor[T], out: Tensor[T]):
    """out[i] = a[i] + b[i]."""
    i = program_id(0)
    out[i] = a[i] + b[i]
