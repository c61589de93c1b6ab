"""The NumPy interpreter of Iron's IR: the executable definition of the ops, run over all threads at once."""

from __future__ import annotations

from .executor import run_kernel
from .semantics import const_array, eval_pure

__all__ = ["const_array", "eval_pure", "run_kernel"]
