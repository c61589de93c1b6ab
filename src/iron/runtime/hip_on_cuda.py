"""``backend="hip-on-cuda"``: Iron's HIP source (wavefront 32) run on an NVIDIA GPU.

HIP source is meant to run on NVIDIA GPUs too. This backend takes exactly what the HIP emitter writes for a 32-lane
wavefront (``HIP_ON_NVIDIA``), puts the project's small compatibility header in front of it (``HIP_COMPAT_HEADER``:
Iron's masked wavefront shuffles as ``__shfl_sync``/``__shfl_xor_sync``, ``__ballot`` on the active lanes),
compiles it with NVRTC and launches it through the CUDA runtime (same arrays, streams, caches and launchers as
``backend="cuda"``). It exists to prove the HIP emitter on real hardware where no AMD GPU is at hand; on AMD
GPUs use ``backend="hip"``.
"""

from __future__ import annotations

import dataclasses

from .backend import Backend
from .cuda import CudaBackend
from .cuda import probe as probe  # the same requirements: an NVIDIA GPU, its driver, NVRTC


class HipOnCudaBackend(CudaBackend):
    name = "hip-on-cuda"
    writes_artifacts = False  # iron build writes HIP through backend "hip"
    torch_device = False  # the bench times it like the other host-array backends (as before the contract)
    timer_name = None

    def emitted(self, variant, arch: str | None = None):
        """The HIP source for a 32-lane wavefront, behind the compatibility header (one CUDA translation unit); the
        same for every ``arch`` (no wgmma, no programmatic dependent launch)."""
        src = variant.artifacts.get("hip-on-cuda-src")
        if src is None:
            from ..codegen.cfamily.hip import HIP_ON_NVIDIA, emit_source, for_nvidia

            hip = emit_source(variant.kernel, HIP_ON_NVIDIA)
            src = variant.artifacts["hip-on-cuda-src"] = dataclasses.replace(hip, source=for_nvidia(hip.source))
        return src

    def artifacts(self, variant, targets=(), metallib: bool = False):
        return Backend.artifacts(self, variant, targets, metallib)

    def info(self):
        info = super().info()
        info["features"] = [*info["features"], "hip-source (wavefront 32, compatibility header)"]
        return info
