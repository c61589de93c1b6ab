"""The HIP backend (AMD GPUs): HIP C++ from the C-family printer, compiled by hipRTC to a code object, disk-cached.

What works without an AMD GPU, and is proven in CI: ``k.source("hip")`` and ``k.compile("hip", target="gfx90a")``
(any ``gfxNNN``; the wavefront size, and so the source, follows the target: 64 lanes on gfx9xx, 32 on gfx10xx+).
``probe()`` says why kernels cannot *run* here (no HIP runtime, no AMD device). Loading the code object
(``hipModuleLoadData``) and launching it (``hipModuleLaunchKernel``) is not written yet: with no AMD GPU to test on,
``launch`` raises ``LaunchError`` with the reason instead of running unverified code.

The runtime library is reached through ctypes over ``libamdhip64.so`` (Debian: ``libamdhip64-5``); nothing here is
loaded until a HIP backend call asks for it.
"""

from __future__ import annotations

import ctypes
import os
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import LaunchError
from . import Backend
from .cache import cache_key, cached_binary

_RUNTIME_LIBRARIES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
#: the target ``compile`` uses when none is given (``IRON_HIP_TARGET`` overrides): CDNA2, MI200
DEFAULT_TARGET = "gfx90a"


@lru_cache(maxsize=1)
def _runtime() -> ctypes.CDLL | str:
    """The HIP runtime library, or why it cannot be loaded."""
    errors = []
    for name in _RUNTIME_LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
            continue
        lib.hipGetErrorString.restype = ctypes.c_char_p
        lib.hipGetErrorString.argtypes = [ctypes.c_int]
        return lib
    return f"no HIP runtime (libamdhip64.so: {errors[-1] if errors else 'not found'}); install ROCm or libamdhip64-5"


def probe() -> str | None:
    """None when an AMD GPU can run HIP kernels here, else why not."""
    lib = _runtime()
    if isinstance(lib, str):
        return lib
    err = lib.hipInit(0)
    if err != 0:
        return f"no AMD GPU or driver (hipInit: {lib.hipGetErrorString(err).decode(errors='replace')})"
    count = ctypes.c_int()
    err = lib.hipGetDeviceCount(ctypes.byref(count))
    if err != 0 or count.value == 0:
        return "no AMD GPU (hipGetDeviceCount found none)"
    return ("an AMD GPU is present, but launching HIP kernels is not implemented yet (issue 7: code objects compile; "
            "hipModuleLoadData/hipModuleLaunchKernel are unwritten without a GPU to verify them)")


class HipBackend(Backend):
    name = "hip"

    def __init__(self) -> None:
        self.target = os.environ.get("IRON_HIP_TARGET", DEFAULT_TARGET)

    # -- device ---------------------------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """What ``iron device`` shows: the first AMD GPU, or a LaunchError with the reason there is none."""
        lib = _runtime()
        if isinstance(lib, str):
            raise LaunchError(f"the hip backend is not available: {lib}")
        reason = probe()
        count = ctypes.c_int()
        if lib.hipGetDeviceCount(ctypes.byref(count)) != 0 or count.value == 0:
            raise LaunchError(f"the hip backend is not available: {reason}")
        name = ctypes.create_string_buffer(256)
        lib.hipDeviceGetName(name, 256, 0)
        total = ctypes.c_size_t()
        lib.hipDeviceTotalMem(ctypes.byref(total), 0)
        return {"name": name.value.decode(errors="replace"), "devices": count.value, "target": self.target,
                "wavefront": _wavefront(self.target), "memory_gib": round(total.value / 2**30, 1),
                "launch": reason or "ready"}

    # -- compile --------------------------------------------------------------------------------------------------

    def emitted(self, variant, target: str | None = None):
        """The HIP source of a variant for ``target`` (its wavefront size decides the source)."""
        from ..codegen.cfamily.hip import emit_hip

        wavefront = _wavefront(target or self.target)
        key = ("hip-src", wavefront)
        src = variant.artifacts.get(key)
        if src is None:
            src = variant.artifacts[key] = emit_hip(variant.kernel, wavefront)
        return src

    def source(self, variant) -> str:
        return self.emitted(variant).source

    def compile(self, variant, target: str | None = None) -> bytes:
        """The code object of a variant for the AMD ``target`` (``gfx90a``, ``gfx1030``, ...); needs hipRTC, not a
        GPU. Disk-cached."""
        from ..codegen import hiprtc

        target = target or self.target
        src = self.emitted(variant, target)
        options = hiprtc.default_options()
        key = cache_key("hip", src.source, target, options, hiprtc.hiprtc_version())
        return cached_binary("hip", key, lambda: hiprtc.compile_hip(src, target=target, options=options))

    # -- launch ---------------------------------------------------------------------------------------------------

    def check_array(self, param: str, value: Any, where) -> Any:
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where())
            return value
        raise LaunchError(f"argument '{param}' is a {type(value).__module__}.{type(value).__name__}; the hip backend "
                          "takes NumPy arrays", where())

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        reason = probe()
        raise LaunchError(f"cannot launch {variant.kernel.name} on the hip backend: {reason}")


def _wavefront(target: str) -> int:
    from ..codegen.cfamily.hip import wavefront_of

    try:
        return wavefront_of(target)
    except ValueError as e:
        raise LaunchError(str(e)) from None
