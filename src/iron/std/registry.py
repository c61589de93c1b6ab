"""The std library's view of the harness registry (``iron.harness.registry``): import every std module so that its
kernels register, and list the std entries."""

from __future__ import annotations

import importlib
import os
import pkgutil

from ..harness.registry import DEFAULT_TOLERANCE as TOLERANCE
from ..harness.registry import REGISTRY, Registration

__all__ = ["TOLERANCE", "import_std", "load_all"]


def import_std() -> None:
    """Import every module of ``iron.std`` (each registers its kernels on import)."""
    for info in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
        if info.name != "registry":
            importlib.import_module(f"{__package__}.{info.name}")


def load_all() -> list[Registration]:
    """The std library's registered kernels (``std/...``), in registration order."""
    import_std()
    return [e for e in REGISTRY.values() if e.name.startswith("std/")]
