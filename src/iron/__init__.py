"""Iron: write GPU kernels once in Python, run them on CUDA, HIP, Vulkan, Metal and the CPU.

Quick start::

    import numpy as np, iron
    from iron import kernel, Tensor, T, program_id, exp

    @kernel
    def iron_exp(a: Tensor[T], out: Tensor[T]):
        idx = program_id(0)
        out[idx] = exp(a[idx])

    a = np.random.randn(1000).astype(np.float32); out = np.full_like(a, np.nan)
    iron_exp[a.size](a, out, backend="cpu")
"""

from __future__ import annotations

from . import cuda
from .errors import CompileError, ExecutionError, IronError, LaunchError
from .frontend import IronFunc, KernelFunction, func, kernel
from .frontend.torch_op import torch_op
from .harness.registry import InputGen, bench, test_kernel
from .lang import *  # noqa: F403
from .lang import (
    BUILTINS,
    FLOAT_DTYPES,
    DTypeVar,
    T,
    Tensor,
    bf16,
    constexpr,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    u8,
    u32,
    u64,
)
from .runtime.device_array import Array, asarray, empty, from_dlpack, graph, synchronize, zeros
from .version import __version__ as __version__

__all__ = ["Array", "BUILTINS", "CompileError", "DTypeVar", "ExecutionError", "FLOAT_DTYPES", "IronError", "IronFunc",
           "InputGen", "KernelFunction", "LaunchError", "T", "Tensor", "bench", "bf16", "constexpr", "cuda", "f16",
           "f32", "f64", "func", "graph", "i8", "i32", "i64", "kernel", "test_kernel", "torch_op", "u8", "u32", "u64",
           "asarray", "empty", "from_dlpack", "synchronize", "zeros", *BUILTINS]
