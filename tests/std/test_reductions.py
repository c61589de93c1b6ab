"""std/reduce (sum, max, min, argmax) on every backend against float64 NumPy: the split path on a long row, more
chunks than the combine group has threads, ties for argmax (within a chunk and across chunks), i32 and f32 index
outputs, and SIMD widths 8/32/64; outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import reductions as R
from iron.std.softmax import RowPlan, plan_rows

from ..frontend.test_kernels import as_dtype, f64

#: sum: f32 accumulation then one rounding to the dtype (atol, rtol); max/min/argmax are exact
SUM_TOL = {"f32": (3e-4, 1e-5), "f16": (2e-3, 1e-3)}


def _check(x, op, got, dtype):
    want = {"sum": np.sum, "max": np.max, "min": np.min}[op](f64(x), axis=1)
    if op == "sum":
        atol, rtol = SUM_TOL[dtype]
        assert np.allclose(f64(got), want, atol=atol, rtol=rtol), (op, f64(got) - want)
    else:
        assert np.array_equal(f64(got), want), (op, got, want)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("shape", [(2, 20000), (6, 77)], ids=["split", "scalar"])
def test_reduce_ops(backend, shape, dtype, rng):
    x = as_dtype(rng.standard_normal(shape) * 3, dtype)
    split = plan_rows(*shape, x.dtype.itemsize)  # untuned: a 20000 row splits (CUDA's tuning may pick the loop)
    assert (split.chunks > 1) == (shape[1] == 20000)
    for op in ("sum", "max", "min"):
        for forced, one in ((None, None), (split, False), (split, True), (split, True)):  # twice: counters reset
            out = as_dtype(np.full(shape[0], np.nan), dtype)
            R.launch_reduce(x, out, op, backend, plan=forced, one=one)
            _check(x, op, out, dtype)


@pytest.mark.parametrize("op", ["sum", "max", "min", "argmax"])
@pytest.mark.parametrize("plan", [RowPlan(64, 1, 1, 79), RowPlan(32, 4, 2, 1), RowPlan(64, 1, 2, 3)],
                         ids=["chunks", "loop", "spans"])
def test_plans(backend, op, plan, rng):
    """64-element chunks (79 per row, more than the CB = 64 threads that combine them); one group looping over the
    row in 256-element tiles; three spans of 15 tiles each, the last one short."""
    x = as_dtype(rng.standard_normal((3, 5000)), "f32")
    x[1] = np.round(x[1])  # ties
    if op == "argmax":
        for one in (False, True):  # the combine launch; one launch, the last group of a row combining
            out = np.full(3, -1, np.int32)
            R.launch_argmax(x, out, backend, plan=plan, one=one)
            assert np.array_equal(out, np.argmax(f64(x), axis=1)), one
    else:
        for one in (False, True):
            out = np.full(3, np.nan, np.float32)
            R.launch_reduce(x, out, op, backend, plan=plan, one=one)
            _check(x, op, out, "f32")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("ncols", [20000, 1003, 4096])
def test_argmax_first_index_on_ties(backend, dtype, ncols, rng):
    rows = 5
    x = as_dtype(rng.standard_normal((rows, ncols)), dtype)
    x[0] = as_dtype(rng.integers(-4, 4, ncols), dtype)  # the maximum 3 many times over
    a, b = sorted(rng.choice(ncols, 2, replace=False))
    x[1, a] = x[1, b] = 50.0  # two equal maxima, in different chunks when the row is split
    x[2] = -7.0  # a constant row: column 0
    x[3, -1] = 60.0  # the last column
    x[4, :] = -np.inf
    x[4, b] = -1e30 if dtype == "f32" else -1e4
    want = np.argmax(f64(x), axis=1)
    assert want[1] == a and want[2] == 0 and want[3] == ncols - 1 and want[4] == b
    out_i = np.full(rows, -1, np.int32)
    out_f = np.full(rows, np.nan, np.float32)
    R.launch_argmax(x, out_i, backend)
    R.launch_argmax(x, out_f, backend)
    assert np.array_equal(out_i, want), (out_i, want)
    assert np.array_equal(out_f, want.astype(np.float32)), (out_f, want)
    split = plan_rows(rows, ncols, x.dtype.itemsize)
    if split.chunks > 1:  # one launch, twice on the same counters (the last group of each row resets its count)
        for out in (np.full(rows, -1, np.int32), np.full(rows, np.nan, np.float32)):
            for _ in range(2):
                out[:] = -1
                R.launch_argmax(x, out, backend, plan=split, one=True)
                assert np.array_equal(out, want.astype(out.dtype)), (out, want)


@pytest.mark.parametrize("width", [8, 32, 64])
def test_simd_widths(width, monkeypatch, rng):
    """group_min/group_max read simd_size(): right for lavapipe's 8, NVIDIA's 32 and AMD's 64 lanes."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    x = as_dtype(np.round(rng.standard_normal((4, 9000)) * 2), "f32")
    out = np.full(4, -1, np.int32)
    R.launch_argmax(x, out, "cpu")
    assert np.array_equal(out, np.argmax(f64(x), axis=1))
    for op in ("sum", "min"):
        res = np.full(4, np.nan, np.float32)
        R.launch_reduce(x, res, op, "cpu")
        _check(x, op, res, "f32")


def test_argmax_one_launch_on_device_arrays(backend, rng):
    """The one-launch argmax on Iron arrays (device memory where the backend has it; launches queued without a
    wait on Vulkan): three launches in a row on the same counters, each right, outputs poisoned first."""
    import iron

    x = as_dtype(rng.standard_normal((5, 20000)), "f32")
    split = plan_rows(5, 20000, x.dtype.itemsize)
    assert split.chunks > 1
    xa = iron.asarray(x, backend=backend)
    for _ in range(3):
        out = iron.asarray(np.full(5, -1, np.int32), backend=backend)
        R.launch_argmax(xa, out, backend, plan=split, one=True)
        assert np.array_equal(out.numpy(), np.argmax(f64(x), axis=1))
