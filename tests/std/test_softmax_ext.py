"""std/softmax log_softmax, scaled causal and additive-mask softmax on every backend against float64 NumPy: the split
path on a long row, chunks masked everywhere (a square causal matrix in small chunks), rows masked everywhere but
their first column, stacked score matrices; outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import softmax_ext as S
from iron.std.softmax import RowPlan, plan_rows, row_plans

from ..frontend.test_kernels import as_dtype, f64


def _want(z: np.ndarray, log: bool) -> np.ndarray:
    """float64 (log_)softmax of scores z (-inf where masked) over the last axis."""
    m = z.max(axis=-1, keepdims=True)
    lse = m + np.log(np.exp(z - m).sum(axis=-1, keepdims=True))
    return z - lse if log else np.exp(z - lse)


def _causal_scores(x: np.ndarray, scale: float) -> np.ndarray:
    q, n = x.shape[-2:]
    hide = np.arange(n)[None, :] > np.arange(q)[:, None] + (n - q)
    return np.where(hide, -np.inf, f64(x) * scale)


def _close(got, want, log):
    tol = dict(rtol=2e-5, atol=2e-5) if log else dict(rtol=1e-5, atol=1e-7)
    assert not np.isnan(got).any()
    assert np.allclose(f64(got), want, **tol), np.nanmax(np.abs(f64(got) - want))


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_log_softmax_long_row(backend, log, rng):
    x = as_dtype(rng.standard_normal((2, 20000)) * 4, "f32")
    for forced in (None, plan_rows(2, 20000, 4)):  # as tuned, then split (untuned: 20000 splits; tuning may not)
        out = np.full_like(x, np.nan)
        plan = S.launch_softmax_ext(x, out, 0.5, log_softmax=log, backend=backend, plan=forced)
        assert plan in row_plans(2, 20000, 4, backend) and (forced is None or plan.chunks > 1)
        _close(out, _want(f64(x) * 0.5, log), log)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("plan", [None, RowPlan(64, 1, 1, 5)], ids=["registers", "chunks"])
def test_causal_square(backend, log, plan, rng):
    """Row 0 sees column 0 only; in 64-column chunks, most of the early rows' chunks are masked everywhere."""
    x = as_dtype(rng.standard_normal((300, 300)) * 4, "f32")
    out = np.full_like(x, np.nan)
    S.launch_softmax_ext(x, out, 0.125, causal=True, log_softmax=log, backend=backend, plan=plan)
    want = _want(_causal_scores(x, 0.125), log)
    if log:
        assert np.array_equal(np.isinf(out), np.isinf(want)) and (out[np.isinf(want)] == -np.inf).all()
        out, want = np.where(np.isinf(want), 0, out), np.where(np.isinf(want), 0, want)
    _close(out, want, log)
    if not log:
        assert out[0, 0] == 1.0 and (out[0, 1:] == 0).all()


def test_causal_stacked_rectangular(backend, rng):
    """Two (3, 40) score matrices stacked (heads): queries aligned to the end, row r sees c <= r + 37."""
    x = as_dtype(rng.standard_normal((2, 3, 40)) * 4, "f32")
    out = np.full_like(x, np.nan)
    S.launch_softmax_ext(x, out, 0.3, causal=True, backend=backend)
    _close(out, _want(_causal_scores(x, 0.3), False), False)
    assert (out[:, 0, 38:] == 0).all() and (out[:, 1, 39:] == 0).all() and (out[:, 2] > 0).all()


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [(9, 20000), (9, 123)], ids=["split", "scalar"])
def test_additive_mask(backend, shape, dtype, rng):
    x = as_dtype(rng.standard_normal(shape) * 8, dtype)
    mask = rng.standard_normal(shape).astype(np.float32)
    mask[rng.random(shape) < 0.25] = -np.inf
    mask[:, 0] = 1.5
    mask[::4, 1:] = -np.inf  # rows masked everywhere but the first column
    want = _want(f64(x) * 0.25 + f64(mask), False)
    split = plan_rows(*shape, x.dtype.itemsize)  # untuned: a 20000 row splits (tuning may pick one longer chunk)
    assert (split.chunks > 1) == (shape[1] == 20000)
    for forced in (None, split):
        out = as_dtype(np.full(shape, np.nan), dtype)
        plan = S.launch_softmax_ext(x, out, 0.25, mask=mask, backend=backend, plan=forced)
        assert plan in row_plans(*shape, x.dtype.itemsize, backend) or plan == split
        if dtype == "f32":
            _close(out, want, False)
        else:
            assert np.allclose(f64(out), want, rtol=2e-3, atol=1e-4)
        assert (f64(out)[::4, 0] == 1.0).all() and (f64(out)[::4, 1:] == 0).all()
