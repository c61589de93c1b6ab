"""The front-end: ``@iron.kernel`` Python functions -> typed IR, one variant per dtype and constexpr values."""

from __future__ import annotations

from .kernel import IronFunc, KernelFunction, func, kernel

__all__ = ["IronFunc", "KernelFunction", "func", "kernel"]
