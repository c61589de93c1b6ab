"""Float64 reference functions of Iron's float math ops: the definition the op table (``ops.py``) points to.

Every float math op is defined as its exact result rounded once to the result type; these functions compute that
exact result to well below float32's precision (float64, a few float64 ulp), so rounding their output once gives the
correctly rounded value in every Iron float type but in rare near-tie cases. The interpreter and the constant folder
call them (``iron.interp.semantics``), so a folded constant and an interpreted value agree bit for bit, on any host.

NumPy's float64 ``exp``/``log``/``sin``... are used as they are (glibc-quality, < 1 ulp of float64). ``erf`` has no
NumPy ufunc: it is fitted once here (Chebyshev series against libm's ``math.erf``, |rel. error| < 1e-14).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.polynomial import chebyshev

Ref = Callable[..., np.ndarray]


def _fit(func: Callable[[np.ndarray], np.ndarray], deg: int, lo: float, hi: float) -> chebyshev.Chebyshev:
    return chebyshev.Chebyshev.interpolate(func, deg, domain=[lo, hi])


_erf_vec = np.vectorize(math.erf, otypes=[np.float64])
_erfc_vec = np.vectorize(math.erfc, otypes=[np.float64])
# erf(x) = x * g(x^2) near zero keeps the relative error small for tiny x; erfc(x) = exp(-x^2) * h(x) on [1, 4] is
# smooth enough for a short Chebyshev series. Fitted once at import against libm (|rel. error| < 1e-14 in float64).
_ERF_G = _fit(lambda u: _erf_vec(np.sqrt(u)) / np.sqrt(u), 12, 0.0, 1.0)
_ERFC_H = _fit(lambda x: _erfc_vec(x) * np.exp(x * x), 24, 1.0, 4.0)


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 to ~1e-14 relative; beyond |x| = 4, erf rounds to +-1 in every Iron float type."""
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    out = np.where(ax >= 4.0, np.sign(x), x)  # keeps NaN
    small = ax < 1.0
    if small.any():
        xs = x[small]
        out[small] = xs * _ERF_G(xs * xs)
    mid = (ax >= 1.0) & (ax < 4.0)
    if mid.any():
        xm = ax[mid]
        out[mid] = np.copysign(1.0 - np.exp(-xm * xm) * _ERFC_H(xm), x[mid])
    return out


def rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x), without overflow: e^x / (1 + e^x) for negative x (exact to a few float64 ulp)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) (SiLU, swish)."""
    return np.asarray(x, dtype=np.float64) * sigmoid(x)


def gelu(x: np.ndarray) -> np.ndarray:
    """The erf form of GELU, x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)); through erfc where 1 + erf(...) would cancel
    (x < -1), so the tiny results of very negative x keep their relative precision."""
    x = np.asarray(x, dtype=np.float64)
    out = np.array(0.5 * x * (1.0 + erf(x * (1.0 / math.sqrt(2.0)))), ndmin=1)  # writable, also for one value
    flat = np.atleast_1d(x)
    low = flat < -1.0
    if low.any():
        out[low] = 0.5 * flat[low] * _erfc_vec(-flat[low] / math.sqrt(2.0))
    return out.reshape(x.shape)


def isnan(x: np.ndarray) -> np.ndarray:
    return np.isnan(x)


def isinf(x: np.ndarray) -> np.ndarray:
    return np.isinf(x)


#: float64 references by op name (the unary and binary float math of the op table)
REFS: dict[str, Ref] = {
    "exp": np.exp, "exp2": np.exp2, "fast_exp": np.exp, "fast_exp2": np.exp2,
    "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "rsqrt": rsqrt, "erf": erf, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil, "rint": np.rint,
    "sigmoid": sigmoid, "silu": silu, "gelu": gelu, "atan2": np.arctan2, "pow": np.power, "copysign": np.copysign,
    "isnan": isnan, "isinf": isinf,
}
