"""Iron's standard kernel library. Each module defines kernels plus a ``StdKernel`` entry per kernel: shapes,
input maker, launcher, NumPy float64 oracle and reference, tolerances and bytes moved, read by ``iron bench``.

(The full registration API — ``@iron.bench``/``@iron.test_kernel`` — is built by the harness issue; this small
registry is what the spine's bench runs.)
"""

from __future__ import annotations

from .registry import STD_KERNELS, StdKernel

__all__ = ["STD_KERNELS", "StdKernel"]
