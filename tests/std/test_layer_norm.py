"""std/layer_norm without a bias and on the strided path (rows longer than one group holds), every backend, against
float64 NumPy; outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import layer_norm as L

from ..frontend.test_kernels import f64


@pytest.mark.parametrize("shape", [(7, 256), (2, 20000)], ids=["registers", "strided"])
def test_without_bias(backend, shape, rng):
    x = (rng.standard_normal(shape) * 2 + 5).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    L.launch_layer_norm(x, w, None, out, L.EPS, backend)
    mu = f64(x).mean(axis=1, keepdims=True)
    want = (f64(x) - mu) / np.sqrt(((f64(x) - mu) ** 2).mean(axis=1, keepdims=True) + L.EPS) * f64(w)
    assert np.allclose(out, want, rtol=2e-5, atol=2e-5)
