"""A minimal registry of standard kernels for the bench and tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: default tolerances (max |err| <= atol + rtol * |oracle|) per dtype for one-rounding elementwise kernels
TOLERANCE = {"f32": (1e-6, 1e-5), "f16": (1e-3, 2e-3), "bf16": (1e-2, 1.6e-2)}


@dataclass
class StdKernel:
    """One benchmarkable kernel: ``make(shape, dtype, rng)`` -> inputs dict; ``launch(inputs, backend)`` runs
    Iron; ``oracle(inputs)`` -> float64 expected output; ``reference(inputs)`` runs the baseline (NumPy here)."""

    name: str
    shapes: list[tuple[int, ...]]
    make: Callable[[tuple[int, ...], Any, np.random.Generator], dict[str, np.ndarray]]
    launch: Callable[[dict[str, np.ndarray], str], None]
    oracle: Callable[[dict[str, np.ndarray]], np.ndarray]
    reference: Callable[[dict[str, np.ndarray]], np.ndarray]
    bytes_moved: Callable[[tuple[int, ...], int], int]
    output: str = "out"
    #: the baseline on a GPU: the same computation in torch on device tensors (None: no GPU reference)
    torch_reference: Callable[[dict[str, Any]], Any] | None = None
    tolerance: dict[str, tuple[float, float]] = field(default_factory=lambda: dict(TOLERANCE))
    dtypes: tuple[str, ...] = ("f32", "f16", "bf16")
    #: shapes on a GPU, large enough that a launch is not just overhead (defaults to ``shapes``)
    device_shapes: list[tuple[int, ...]] | None = None


STD_KERNELS: list[StdKernel] = []


def register(entry: StdKernel) -> StdKernel:
    STD_KERNELS.append(entry)
    return entry


def load_all() -> list[StdKernel]:
    """Import every std module so that its kernels register."""
    from . import softmax, unary  # noqa: F401

    return STD_KERNELS
