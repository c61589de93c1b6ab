"""The CPU backend: runs a variant's IR in the NumPy interpreter (``iron.interp``)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import LaunchError
from . import Backend

#: SIMD-group width the interpreter models (8 like lavapipe, 32 like NVIDIA/Apple, 64 like AMD CDNA).
#: ``IRON_CPU_SIMD_WIDTH`` overrides it.
SIMD_WIDTH = 32


def simd_width() -> int:
    w = int(os.environ.get("IRON_CPU_SIMD_WIDTH", SIMD_WIDTH))
    if w not in (4, 8, 16, 32, 64):
        raise LaunchError(f"IRON_CPU_SIMD_WIDTH must be 4, 8, 16, 32 or 64, got {w}")
    return w


class CpuBackend(Backend):
    name = "cpu"

    def check_array(self, param: str, value: Any, where) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise LaunchError(f"argument '{param}' is a {type(value).__module__}.{type(value).__name__}; the cpu "
                              "backend takes NumPy arrays", where(), "convert with .cpu().numpy() or np.asarray")
        if not value.flags.c_contiguous:
            raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                              f"pass np.ascontiguousarray({param})")
        return value.reshape(-1)

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        from ..interp.executor import run_kernel

        k = variant.kernel
        for p in k.params:
            if p.kind == "buffer" and not p.readonly and not arrays[p.name].flags.writeable:
                raise LaunchError(f"argument '{p.name}' is read-only but {k.name} writes to it")
        run_kernel(k, {**arrays, **scalars}, grid, group, simd_width())
