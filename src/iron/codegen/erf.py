"""Coefficients for erf in f32, which GLSL.std.450 lacks: fitted once at import against ``math.erf``.

- ``|x| < 1``: ``erf(x) = x * P(x*x)`` (odd function; relative error stays small for tiny ``x``);
- ``1 <= |x| < 4``: ``erf(|x|) = 1 - exp(-x*x) * Q((|x| - 2.5) / 1.5)``; the factor ``exp(-x*x)`` carries the fast
  decay so ``Q`` is smooth and a short polynomial;
- ``|x| >= 4``: ``+-1`` (erf rounds to 1 in f32 from 3.92 on).

Both polynomials are evaluated with fma in Horner form; ``tests/codegen_spirv`` checks the f32 evaluation against
float64 erf (a few ulp).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.polynomial import chebyshev

SMALL_DEGREE = 7
MID_DEGREE = 14
MID_CENTER, MID_HALF_WIDTH = 2.5, 1.5


@lru_cache(maxsize=1)
def coefficients() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(P, Q) in the power basis, highest degree first, each rounded to f32."""
    erf = np.vectorize(math.erf, otypes=[np.float64])
    erfc = np.vectorize(math.erfc, otypes=[np.float64])

    def small(u):
        u = np.maximum(u, 1e-300)
        return erf(np.sqrt(u)) / np.sqrt(u)

    def mid(t):
        x = MID_CENTER + MID_HALF_WIDTH * t
        return erfc(x) * np.exp(x * x)

    p = chebyshev.Chebyshev.interpolate(small, SMALL_DEGREE, domain=[0.0, 1.0]).convert(
        kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1])
    q = chebyshev.Chebyshev.interpolate(mid, MID_DEGREE, domain=[-1.0, 1.0]).convert(
        kind=np.polynomial.Polynomial)
    as_f32 = lambda c: tuple(float(np.float32(v)) for v in reversed(c.coef))  # noqa: E731
    return as_f32(p), as_f32(q)


def erf_f32_reference(x: np.ndarray) -> np.ndarray:
    """The emitted algorithm in NumPy f32 arithmetic (fma approximated in float64), for the accuracy test."""
    p, q = coefficients()
    x = np.asarray(x, dtype=np.float32)
    ax = np.abs(x)
    u = (x * x).astype(np.float32)
    r = np.full_like(x, p[0])
    for c in p[1:]:
        r = (r.astype(np.float64) * u + c).astype(np.float32)
    small = (x.astype(np.float64) * r).astype(np.float32)
    t = ((np.clip(ax, 1, 4) - np.float32(MID_CENTER)) * np.float32(1 / MID_HALF_WIDTH)).astype(np.float32)
    s = np.full_like(x, q[0])
    for c in q[1:]:
        s = (s.astype(np.float64) * t + c).astype(np.float32)
    e = np.exp(-(np.clip(ax, 1, 4) ** 2).astype(np.float32)).astype(np.float32)
    mid = np.copysign((np.float32(1) - e * s).astype(np.float32), x)
    out = np.where(ax < 1, small, np.where(ax >= 4, np.sign(x), mid)).astype(np.float32)
    return np.where(np.isnan(x), x, out)
