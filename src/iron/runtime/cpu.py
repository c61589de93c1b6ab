"""The CPU backend: runs a variant's IR in the NumPy interpreter (``iron.interp``)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..interp.executor import run_kernel
from .arrays import check_writable, host_array
from .backend import Backend

#: SIMD-group width the interpreter models (8 like lavapipe, 32 like NVIDIA/Apple, 64 like AMD CDNA).
#: ``IRON_CPU_SIMD_WIDTH`` overrides it.
SIMD_WIDTH = 32


def probe() -> str | None:
    """The interpreter runs everywhere."""
    return None


def simd_width() -> int:
    w = int(os.environ.get("IRON_CPU_SIMD_WIDTH", SIMD_WIDTH))
    if w not in (4, 8, 16, 32, 64):
        raise LaunchError(f"IRON_CPU_SIMD_WIDTH must be 4, 8, 16, 32 or 64, got {w}")
    return w


class CpuBackend(Backend):
    name = "cpu"

    def simd_width(self) -> int:
        return simd_width()

    def describe(self) -> str:
        return f"NumPy interpreter, SIMD width {simd_width()} (IRON_CPU_SIMD_WIDTH)"

    def check_array(self, param: str, value: Any, where) -> np.ndarray:
        return host_array("cpu", param, value, where)

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        k = variant.kernel
        check_writable(k, arrays)
        run_kernel(k, {**arrays, **scalars}, grid, group, simd_width())
