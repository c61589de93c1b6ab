"""Backends behind one contract (:class:`iron.runtime.backend.Backend`): probe, info, compile, launch, time, build.

Each backend module defines a ``probe()`` and a ``Backend`` subclass; ``get_backend(name)`` imports it lazily so that
importing iron never loads a GPU stack. Adding a backend is a module and a row in ``BACKENDS``.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import LaunchError
from .arrays import is_iron_array
from .backend import Backend

__all__ = ["ALIASES", "BACKENDS", "PLANNED", "PREFERENCE", "Backend", "backend_class", "best_backend", "get_backend",
           "resolve_backend_name", "unavailable_reason"]

#: backend name -> (module, class, one-line description)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "cpu": ("iron.runtime.cpu", "CpuBackend", "NumPy interpreter of the IR (always present)"),
    "cuda": ("iron.runtime.cuda", "CudaBackend", "NVIDIA GPUs through cuda.core + NVRTC"),
    "vulkan": ("iron.runtime.vulkan", "VulkanBackend", "any Vulkan 1.1+ device, SPIR-V built from the IR"),
    "hip": ("iron.runtime.hip", "HipBackend", "AMD GPUs through hipRTC + libamdhip64 (not verified on AMD hardware)"),
    "metal": ("iron.runtime.metal", "MetalBackend", "Apple GPUs via Metal + PyObjC (not verified on Apple hardware)"),
    "msl-cpu": ("iron.runtime.msl_cpu", "MslCpuBackend",
                "the MSL run on the CPU by a C++ model of Metal (clang; threadgroups as concurrent threads)"),
    "hip-on-cuda": ("iron.runtime.hip_on_cuda", "HipOnCudaBackend",
                    "Iron's HIP source (wavefront 32) on NVIDIA GPUs, behind a compatibility header (verifies HIP)"),
}
PLANNED: dict[str, str] = {}
#: order in which "the best backend present" is chosen
PREFERENCE = ("cuda", "vulkan", "cpu")
_PROBES: dict[str, str | None] = {}
_INSTANCES: dict[str, Any] = {}


#: other names a backend answers to (``iron inspect --backend spirv`` shows the Vulkan backend's SPIR-V)
ALIASES = {"spirv": "vulkan", "cu": "cuda", "interpreter": "cpu"}


def get_backend(name: str) -> Backend:
    name = ALIASES.get(name, name)
    be = _INSTANCES.get(name)
    if be is not None:
        return be
    if name not in BACKENDS:
        if name in PLANNED:
            raise LaunchError(f"backend '{name}' is not available in this version of Iron ({PLANNED[name]})")
        raise LaunchError(f"unknown backend '{name}'; choose one of: {', '.join(list(BACKENDS) + list(PLANNED))}")
    be = _INSTANCES[name] = backend_class(name)()
    return be


def backend_class(name: str) -> type[Backend]:
    """The ``Backend`` subclass of ``BACKENDS[name]`` (its module imported, nothing instantiated)."""
    module, cls, _ = BACKENDS[name]
    return getattr(importlib.import_module(module), cls)


def unavailable_reason(name: str) -> str | None:
    """None when backend ``name`` can run kernels on this machine, else why not (cached per process)."""
    if name not in _PROBES:
        if name in BACKENDS:
            _PROBES[name] = importlib.import_module(BACKENDS[name][0]).probe()
        elif name in PLANNED:
            _PROBES[name] = f"not implemented yet ({PLANNED[name]})"
        else:
            _PROBES[name] = "unknown backend"
    return _PROBES[name]


def best_backend() -> str:
    """The best backend present: CUDA if a GPU, else (as they land) Vulkan, else the interpreter."""
    for name in PREFERENCE:
        if unavailable_reason(name) is None:
            return name
    return "cpu"


def resolve_backend_name(backend: str | None, bound: dict[str, Any]) -> str:
    """``backend=`` if given, else ``IRON_BACKEND``, else the arrays' device, else the best backend present."""
    if backend:
        return backend
    env = os.environ.get("IRON_BACKEND")
    if env:
        return env
    for value in bound.values():
        if is_iron_array(value):
            return value.backend
    for value in bound.values():
        mod = type(value).__module__
        if mod.startswith("torch") and getattr(value, "is_cuda", False):
            return "cuda"
        if hasattr(value, "__cuda_array_interface__"):
            return "cuda"
    return best_backend()
