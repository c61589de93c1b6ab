"""std/scan/cumsum on every backend against float64 NumPy: one chunk, a long row split into chunks with a carry pass,
scalar rows (length not a multiple of 16 bytes), a forced small-chunk plan, and SIMD widths 8/32/64; outputs poisoned
first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import scan as S
from iron.std.softmax import RowPlan, plan_rows, row_plans

from ..frontend.test_kernels import as_dtype, f64


def _check(x, out, dtype):
    want = np.cumsum(f64(x), axis=1)
    # f32 accumulation: a few ulps of the largest partial sum; f16/bf16: then one rounding of each output
    scale = np.abs(want).max() + 1
    atol, rtol = {"f32": (2e-6 * scale, 1e-5), "f16": (1e-5 * scale, 1e-3), "bf16": (1e-4 * scale, 8e-3)}[dtype]
    assert not np.isnan(f64(out)).any()
    err = np.abs(f64(out) - want)
    assert (err <= atol + rtol * np.abs(want)).all(), err.max()


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(2, 20000), (7, 1000), (5, 333)], ids=["split", "one_chunk", "scalar"])
def test_cumsum(backend, shape, dtype, rng):
    x = as_dtype(rng.standard_normal(shape), dtype)
    out = as_dtype(np.full(shape, np.nan), dtype)
    plan = S.launch_cumsum(x, out, backend)
    assert plan in row_plans(*shape, x.dtype.itemsize, backend)
    _check(x, out, dtype)
    split = plan_rows(*shape, x.dtype.itemsize)  # untuned: a 20000 row splits (tuning may pick one longer chunk)
    assert (split.chunks > 1) == (shape[1] == 20000)
    if split != plan:
        out[:] = np.nan
        S.launch_cumsum(x, out, backend, plan=split)
        _check(x, out, dtype)


def test_small_chunks(backend, rng):
    """64-element chunks of vectors: 16 per row, each adding the carry of the ones before it; a positive row so
    that the running sum only grows."""
    x = as_dtype(rng.uniform(0, 1, (3, 1000)), "f32")
    out = np.full_like(x, np.nan)
    S.launch_cumsum(x, out, backend, plan=RowPlan(8, 4, 2, 16))
    _check(x, out, "f32")
    assert (np.diff(out, axis=1) >= 0).all()


@pytest.mark.parametrize("width", [8, 32, 64])
def test_simd_widths(width, monkeypatch, rng):
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    x = as_dtype(rng.standard_normal((3, 9000)), "f32")
    out = np.full_like(x, np.nan)
    S.launch_cumsum(x, out, "cpu")
    _check(x, out, "f32")
