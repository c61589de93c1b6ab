"""std/fused_norm: both outputs of the fused residual add + RMSNorm (h = x + res, and out) against float64 NumPy on
every backend, register and split paths, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import fused_norm as F

from ..frontend.test_kernels import as_dtype, f64


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(16, 512), (5, 72), (2, 40000), (2, 40001)],
                         ids=["register", "ragged", "split", "split_scalar"])
def test_writes_the_sum_and_its_norm(backend, dtype, shape, rng):
    x = as_dtype(rng.standard_normal(shape), dtype)
    res = as_dtype(rng.standard_normal(shape), dtype)
    w = as_dtype(rng.standard_normal(shape[1]), dtype)
    h = np.full(shape, np.nan, x.dtype)
    out = np.full(shape, np.nan, x.dtype)
    F.launch_add_rms_norm(x, res, w, h, out, F.EPS, backend)
    want_h = f64(x) + f64(res)
    h_tol = 2.0 ** -24 if dtype == "f32" else 2.0 ** -8  # one rounding of an exact sum
    assert np.all(np.abs(f64(h) - want_h) <= h_tol * np.abs(want_h) + 1e-30), "h"
    # out is the norm of the h written (exactly what an unfused pair computes from it)
    hh = f64(h)
    want = hh / np.sqrt(np.mean(hh * hh, axis=1, keepdims=True) + F.EPS) * f64(w)
    tol = 2e-5 if dtype == "f32" else 1.6e-2
    assert np.all(np.abs(f64(out) - want) <= tol * np.abs(want) + tol), "out"
