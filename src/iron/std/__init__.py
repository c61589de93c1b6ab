"""Iron's standard kernel library, one module per family. Each kernel is registered for ``iron bench`` and
``iron test`` with ``iron.harness.registry``'s ``@bench``/``@test_kernel``: setup, launch, NumPy float64 oracle,
NumPy and torch references, tolerances per dtype, shapes, bytes and flops."""

from __future__ import annotations

from .registry import load_all

__all__ = ["load_all"]
