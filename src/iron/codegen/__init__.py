"""Code generation: IR kernel -> target source (C-family printer with per-target dialects) -> binary.

``emit_cuda(kernel)`` gives CUDA C++ plus launch metadata (``KernelSource``); ``compile_cuda(source, arch)`` turns
it into a cubin with NVRTC (``iron.codegen.nvrtc``, which imports NVIDIA's bindings only when called).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.core import Kernel
from .cfamily import CDialect, CParam, KernelSource, VectorEntry, emit_source
from .cfamily.cuda import CUDA, PDL_PROLOGUE, CudaDialect, pdl_capable
from .cfamily.hip import emit_hip as emit_hip  # HIP C++ for a wavefront of 64 (gfx9xx CDNA) or 32 lanes
from .cfamily.msl import emit_msl as emit_msl  # Metal Shading Language 3.1 (Apple GPUs)
from .warpgroup import has_warpgroup, plan_wgmma


def emit_cuda(kernel: Kernel, line_comments: bool = True, vectorize: bool = True, arch: str | None = None,
              pdl: bool = False) -> KernelSource:
    """CUDA C++ for ``kernel`` (an optimised IR kernel, e.g. ``variant.kernel``), with its launch ABI.

    ``vectorize``: for elementwise kernels, also emit the vectorised entry point (``KernelSource.vector``).
    ``arch``: the device's target (``sm_90``...). On sm_90 a kernel whose warpgroup_mma calls qualify
    (``codegen/warpgroup.py``) runs them as wgmma, and the source then needs ``sm_90a`` (``KernelSource.arch``);
    elsewhere, and with no arch, they are matrix fragments (mma.sync), which any sm_80+ target runs.
    ``pdl``: programmatic dependent launch (opt-in, unmeasured): on an sm_90+ ``arch`` every entry starts with
    ``griddepcontrol.wait`` then ``griddepcontrol.launch_dependents`` (``PDL_PROLOGUE``) and ``KernelSource.pdl`` is
    set, so the runtime launches it with programmatic stream serialization; ignored for older or no targets.
    """
    prologue = PDL_PROLOGUE if pdl and pdl_capable(arch) else ()
    if arch in ("sm_90", "sm_90a") and has_warpgroup(kernel) and plan_wgmma(kernel):
        from .cfamily.cuda_wgmma import CUDA_SM90

        src = replace(emit_source(kernel, CUDA_SM90, line_comments, vectorize=False, prologue=prologue), arch="sm_90a")
    else:
        src = emit_source(kernel, CUDA, line_comments, vectorize, prologue)
    return replace(src, pdl=True) if prologue else src


def compile_cuda(source: str | KernelSource, arch: str = "sm_90", options=None) -> bytes:
    """NVRTC-compile CUDA source (or a ``KernelSource``) to a cubin for ``arch``; see ``iron.codegen.nvrtc``."""
    from .nvrtc import compile_cuda as _compile

    return _compile(source, arch=arch, options=options)


__all__ = ["CDialect", "CParam", "CUDA", "CudaDialect", "KernelSource", "VectorEntry", "compile_cuda", "emit_cuda",
           "emit_source"]
