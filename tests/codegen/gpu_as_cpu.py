"""pytest plugin for a GPU machine: launches that go to ``backend="cpu"`` run the emitted CUDA on the GPU instead.

    PYTHONPATH=src:tests python -m pytest -p codegen.gpu_as_cpu tests/frontend/test_kernels.py

runs the front-end's whole kernel suite, with its NumPy oracles, against the CUDA emitter, before a CUDA runtime
exists. Tests that expect the interpreter's own checks (out-of-bounds errors, divergent barriers) fail under it, by
design: the GPU does not check. ``IRON_GPU_VECTOR=1`` launches the vectorised entry of kernels that have one (1-D
grids), and ``IRON_GPU_OFFSET=4`` misaligns every buffer by 4 bytes (its scalar fallback).
"""

from __future__ import annotations

import os

import numpy as np

from iron.codegen import emit_cuda
from iron.codegen.nvrtc import compile_cuda
from iron.runtime.cpu import CpuBackend

from .cuda_driver import Gpu

_GPU: Gpu | None = None
_CUBINS: dict[str, bytes] = {}


def _launch_on_gpu(self, variant, arrays, scalars, grid, group) -> None:
    global _GPU
    if _GPU is None:
        _GPU = Gpu()
    src = emit_cuda(variant.kernel)
    cubin = _CUBINS.get(src.source)
    if cubin is None:
        cubin = _CUBINS[src.source] = compile_cuda(src, arch=_GPU.arch)
    args = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    args.update({name: np.asarray(v) for name, v in scalars.items()})
    vector = os.environ.get("IRON_GPU_VECTOR") == "1" and src.vector is not None and tuple(grid[1:]) in ((), (1, 1))
    _GPU.run(src, cubin, args, grid, group, vector=vector, offset=int(os.environ.get("IRON_GPU_OFFSET", "0")))
    for name, a in arrays.items():
        if a is not args[name]:
            a[...] = args[name]


def pytest_configure(config) -> None:
    CpuBackend.launch = _launch_on_gpu
