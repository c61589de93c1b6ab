"""Backends behind one small interface: check arrays, launch a variant, show source, compile.

Each backend module defines a ``Backend`` subclass; ``get_backend(name)`` imports it lazily so that importing
iron never loads a GPU stack.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import LaunchError

#: backend name -> (module, class, one-line description)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "cpu": ("iron.runtime.cpu", "CpuBackend", "NumPy interpreter of the IR (always present)"),
}
PLANNED = {"cuda": "issue #3", "vulkan": "issue #4", "metal": "issue #6", "msl-cpu": "issue #6", "hip": "issue #7"}
_INSTANCES: dict[str, Any] = {}


class Backend:
    """The interface every runtime implements."""

    name = "?"

    def check_array(self, param: str, value: Any, where) -> Any:
        """Validate one buffer argument (type, layout, device); return what ``launch`` takes."""
        raise NotImplementedError

    def launch(self, variant, arrays: dict[str, Any], scalars: dict[str, Any], grid: tuple[int, int, int],
               group: tuple[int, int, int]) -> None:
        raise NotImplementedError

    def source(self, variant) -> str:
        raise LaunchError(f"backend '{self.name}' has no generated source")

    def compile(self, variant, target: str | None = None) -> Any:
        raise LaunchError(f"backend '{self.name}' has no binary to compile")


def get_backend(name: str) -> Backend:
    be = _INSTANCES.get(name)
    if be is not None:
        return be
    if name not in BACKENDS:
        if name in PLANNED:
            raise LaunchError(f"backend '{name}' is not available in this version of Iron ({PLANNED[name]})")
        raise LaunchError(f"unknown backend '{name}'; choose one of: {', '.join(list(BACKENDS) + list(PLANNED))}")
    module, cls, _ = BACKENDS[name]
    be = getattr(importlib.import_module(module), cls)()
    _INSTANCES[name] = be
    return be


def resolve_backend_name(backend: str | None, bound: dict[str, Any]) -> str:
    """``backend=`` if given, else ``IRON_BACKEND``, else the arrays' device, else the best backend present."""
    if backend:
        return backend
    env = os.environ.get("IRON_BACKEND")
    if env:
        return env
    return "cpu"
