"""The Metal backend (Apple GPUs): MSL from the C-family printer (``iron.codegen.cfamily.msl``).

Status: source generation works everywhere (``source``). Compiling and launching need macOS with Metal through
PyObjC (``pyobjc-framework-Metal``): ``newLibraryWithSource:options:error:`` with ``MTLCompileOptions.mathMode =
MTLMathModeSafe`` (Iron's NaN/inf semantics need fast math off) and language version 3.1 (``bfloat``), a pipeline
cache per variant, shared-storage buffers, and ``dispatchThreads`` over the exact grid. That host code is a later
session's work (issue 6, point 2): ``compile`` and ``launch`` refuse with that reason. Not verified on Apple hardware
by this project's CI.

ABI of the emitted kernel (``KernelSource.params``): parameter ``i`` is bound at buffer index ``i`` -- buffers with
``setBuffer:offset:atIndex:``, scalars and the grid sizes ``iron_n0..2`` (each an ``int``) with
``setBytes:length:atIndex:``.
"""

from __future__ import annotations

import platform
from typing import Any

from ..errors import LaunchError
from . import Backend

NOT_YET = "the Metal host runtime (PyObjC) is not written yet (issue 6, point 2)"


def probe() -> str | None:
    """None when Metal could run kernels here, else why not."""
    if platform.system() != "Darwin":
        return f"macOS only (this is {platform.system() or 'an unknown system'})"
    return NOT_YET


class MetalBackend(Backend):
    name = "metal"

    def source(self, variant) -> str:
        from ..codegen import emit_msl

        return emit_msl(variant.kernel).source

    def compile(self, variant, target: str | None = None) -> Any:
        reason = probe()
        if platform.system() != "Darwin":
            raise LaunchError(f"backend 'metal' cannot compile here: {reason}; its MSL source is available with "
                              "k.source('metal')")
        raise LaunchError(f"backend 'metal' cannot compile yet: {NOT_YET}")

    def check_array(self, param: str, value: Any, where) -> Any:
        raise LaunchError(f"backend 'metal' cannot run kernels here: {probe()}")

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        raise LaunchError(f"backend 'metal' cannot run kernels here: {probe()}")
