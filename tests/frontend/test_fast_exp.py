"""``fast_exp``/``fast_exp2`` (each target's fast approximation, docs/dsl.md) on every backend and dtype, against
float64 NumPy, within each target's documented bound: the interpreter and msl-cpu exactly rounded (the table's
``math_fn`` allowance), CUDA/HIP ``__expf`` 2 + 1.173|x| ulp and ``exp2f`` 2 ulp, Vulkan GLSL ``Exp``/``Exp2`` the
spec's 3 + 2|x| ulp (lavapipe's ``Exp`` is ~30 ulp off near |x| = 30); flushed subnormal results where a device
does not preserve them. Large arguments give +inf and 0 on every target."""

from __future__ import annotations

import numpy as np
import pytest

import iron

from ..backends.capabilities import caps
from .fast_exp_kernels import fast_pair
from .test_kernels import F32_UNIT, as_dtype, assert_close, f64, poisoned
from .test_math_ops import flushed_subnormals


def _ulps(backend: str, ax: np.ndarray, two: bool) -> np.ndarray:
    """The target's documented bound in f32 ulps (beyond the exactly rounded result's)."""
    if caps(backend).glsl_exp_pow or backend == "metal":  # GLSL.std.450's and MSL fast math's 3 + 2|x| ulp
        return 3.0 + 2.0 * ax
    if backend in ("cpu", "msl-cpu"):
        return np.zeros_like(ax)
    return np.full_like(ax, 2.0) if two else 2.0 + 1.173 * ax


@pytest.mark.parametrize("which", ["fast_exp", "fast_exp2"])
def test_fast_exp(backend, which, dtype, rng):
    hi = 10.0 if dtype == "f16" else 80.0  # f16's range ends at 65504 = e^11.1
    x = np.concatenate([[0.0, -0.0, 1.0, -1.0, 0.5], rng.uniform(-hi, hi, 2000), rng.standard_normal(500)])
    x = as_dtype(x, dtype)
    e, e2 = poisoned(x.size, dtype), poisoned(x.size, dtype)
    fast_pair[x.size](x, e, e2, backend=backend)
    two = which == "fast_exp2"
    want = np.exp2(f64(x)) if two else np.exp(f64(x))
    ax = np.abs(f64(x))
    extra = _ulps(backend, ax, two) * F32_UNIT * np.abs(want) + flushed_subnormals(backend, want)
    assert_close(e2 if two else e, want, dtype, math_fn=True, extra=extra, what=which)


def test_fast_exp_limits(backend):
    """Past f32's range the result is +inf above and 0 below, as exp's; exp(+inf) = +inf and exp(-inf) = 0 (a
    softmax's masked lanes hold -inf), NaN stays NaN."""
    x = np.array([200.0, 1000.0, np.inf, -200.0, -1000.0, -np.inf, np.nan], np.float32)
    e, e2 = poisoned(x.size, "f32"), poisoned(x.size, "f32")
    fast_pair[x.size](x, e, e2, backend=backend)
    for got in (e, e2):
        assert np.all(np.isposinf(got[:3])) and np.all(got[3:6] == 0.0) and np.isnan(got[6]), got


def test_fast_math_is_for_half_data_only():
    """std's FAST constexpr: 1 for f16/bf16 data, 0 for f32 (which keeps exp's precision), and an f32 CUDA unary exp
    has no fast exp (ex2.approx.ftz) in its source."""
    from iron.codegen import emit_cuda
    from iron.std import elementwise as E

    assert [E.fast_math(np.zeros(2, d)) for d in (np.float32, np.float16)] == [0, 1]
    for fast, want in ((0, False), (1, True)):
        src = emit_cuda(E.unary.variant(iron.f32, (E.EXP, 4, 4, fast)).kernel).source
        assert ("ex2.approx.ftz" in src) is want
