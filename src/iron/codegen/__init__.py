"""Code generation: IR kernel -> target source (C-family printer with per-target dialects) -> binary.

``emit_cuda(kernel)`` gives CUDA C++ plus launch metadata (``KernelSource``); ``compile_cuda(source, arch)`` turns
it into a cubin with NVRTC (``iron.codegen.nvrtc``, which imports NVIDIA's bindings only when called).
"""

from __future__ import annotations

from ..ir.core import Kernel
from .cfamily import CDialect, CParam, KernelSource, VectorEntry, emit_source
from .cfamily.cuda import CUDA, CudaDialect
from .cfamily.hip import emit_hip as emit_hip  # HIP C++ for a wavefront of 64 (gfx9xx CDNA) or 32 lanes
from .cfamily.msl import emit_msl as emit_msl  # Metal Shading Language 3.1 (Apple GPUs)


def emit_cuda(kernel: Kernel, line_comments: bool = True, vectorize: bool = True) -> KernelSource:
    """CUDA C++ for ``kernel`` (an optimised IR kernel, e.g. ``variant.kernel``), with its launch ABI.

    ``vectorize``: for elementwise kernels, also emit the vectorised entry point (``KernelSource.vector``).
    """
    return emit_source(kernel, CUDA, line_comments, vectorize)


def compile_cuda(source: str | KernelSource, arch: str = "sm_90", options=None) -> bytes:
    """NVRTC-compile CUDA source (or a ``KernelSource``) to a cubin for ``arch``; see ``iron.codegen.nvrtc``."""
    from .nvrtc import compile_cuda as _compile

    return _compile(source, arch=arch, options=options)


__all__ = ["CDialect", "CParam", "CUDA", "CudaDialect", "KernelSource", "VectorEntry", "compile_cuda", "emit_cuda",
           "emit_source"]
