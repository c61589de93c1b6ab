"""std/rope in place (out is x), with a decode offset, both layouts, on every backend against float64 NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import rope as R

from ..frontend.test_kernels import as_dtype


@pytest.mark.parametrize("interleaved", [False, True], ids=["rotate_half", "interleaved"])
def test_in_place_with_offset(backend, interleaved, rng):
    tokens, heads, dim, offset = 3, 2, 64, 100
    cos, sin = R.rope_tables(128, dim)
    x = as_dtype(rng.standard_normal((tokens, heads, dim)), "f32")
    pos = rng.integers(0, 28, tokens).astype(np.int32)
    want = R.oracle({"x": x, "cos": cos, "sin": sin, "pos": pos}, offset, interleaved)
    R.launch_rope(x, x, cos, sin, pos, offset, interleaved, backend)
    assert np.allclose(x, want, rtol=1e-6, atol=1e-6)
