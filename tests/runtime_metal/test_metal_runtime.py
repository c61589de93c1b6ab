"""``iron/runtime/metal.py`` (PyObjC) driven through a fake ``Metal`` module that executes each dispatch on the CPU
model of Metal: the runtime's bindings, scalar encodings, threadgroup lengths and dispatch sizes must agree with the
emitted MSL for the results to match NumPy. Not Apple's API itself -- see the runtime's docstring."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import iron
import iron.runtime as rt
from iron.runtime import metal as metal_rt
from iron.runtime import unavailable_reason

from . import fake_metal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from frontend import kernels as K  # noqa: E402

pytestmark = pytest.mark.skipif(unavailable_reason("msl-cpu") is not None,
                                reason=f"the fake Metal executes on msl-cpu: {unavailable_reason('msl-cpu')}")


@pytest.fixture
def metal(monkeypatch):
    """backend="metal" with the fake Metal module; every MSL text Iron emits is registered as known."""
    monkeypatch.setattr(metal_rt, "_metal", lambda: fake_metal)
    monkeypatch.setitem(rt._PROBES, "metal", None)
    backend = metal_rt.MetalBackend()
    monkeypatch.setitem(rt._INSTANCES, "metal", backend)
    fake_metal.RECORD.calls.clear()
    real_emitted = backend.emitted

    def registering(variant):  # the fake needs the KernelSource behind each text (tests check the text itself)
        src = real_emitted(variant)
        fake_metal.RECORD.known[src.source] = src
        return src

    backend.emitted = registering
    return backend


def test_exp_in_every_dtype_matches_numpy(metal, rng):
    for dt in (np.float32, np.float16, ml_dtypes.bfloat16):
        a = rng.standard_normal(1000).astype(dt)
        out = np.full_like(a, np.nan)
        K.iron_exp[a.size](a, out, backend="metal")
        want = np.exp(a.astype(np.float64)).astype(dt).astype(np.float64)
        np.testing.assert_allclose(out.astype(np.float64), want, rtol=2e-2 if dt != np.float32 else 1e-6)
    sources = [c[1] for c in fake_metal.RECORD.calls if c[0] == "newLibraryWithSource"]
    assert sources == [K.iron_exp.source("metal", dtype=d) for d in (iron.f32, iron.f16, iron.bf16)]
    assert ("mathMode", fake_metal.MTLMathModeSafe) in fake_metal.RECORD.calls
    assert ("languageVersion", fake_metal.MTLLanguageVersion3_1) in fake_metal.RECORD.calls
    assert metal.last_gpu_seconds == pytest.approx(0.25)


def test_scalars_of_each_type_are_bound_at_their_index(metal, rng):
    n, grid = 301, 1000
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(grid, np.nan, np.float32)
    scale, stride, offset = 1.75, 4_000_000_007 % 2**32, -123
    K.scalar_params[grid](x, out, n, scale, stride, offset, backend="metal")
    i = np.arange(grid)
    j = ((offset + i * stride) % 2**32) % n
    np.testing.assert_array_equal(out, x[j] * np.float32(scale))


def test_threadgroup_arrays_and_barriers(metal, rng):
    x = rng.standard_normal(4 * 64).astype(np.float32)
    out = np.full(4, np.nan, np.float32)
    K.block_sum[x.size, 64](x, out, 64, backend="metal")
    rows = x.reshape(4, 64).astype(np.float64)
    # any f32 summation order: |error| <= n * 2**-24 * sum|x| (a relative bound fails on a row that cancels)
    err, bound = np.abs(out - rows.sum(1)), 64 * 2.0**-24 * np.abs(rows).sum(1)
    assert (err <= bound).all(), (out, rows.sum(1), bound)


def test_shared_array_is_used_in_place(metal, rng):
    a = metal.shared_array((500,), np.float32)
    out = metal.shared_array((500,), np.float32)
    a[...] = rng.standard_normal(500)
    out[...] = np.nan
    K.iron_exp[500](a, out, backend="metal")
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64)), rtol=1e-6)  # written with no copy back
    view = out[100:]
    bound = metal._bound(view)
    assert bound is not None and bound[1] == 400


def test_off_macos_the_reason_is_given(monkeypatch):
    if sys.platform == "darwin":
        pytest.skip("on macOS the real Metal module is imported")
    monkeypatch.setitem(rt._PROBES, "metal", None)
    assert "macOS only" in metal_rt.probe()
    with pytest.raises(iron.LaunchError, match=r"backend 'metal' is macOS only .*backend='msl-cpu' runs it"):
        metal_rt._metal()


def test_bench_rows_on_metal_are_timed_by_gpu_times_and_checked(metal):
    from iron.harness.measure import bench_case
    from iron.harness.registry import selected

    (entry,) = [e for e in selected("std/unary/exp") if e.benched]
    row = bench_case(entry, "metal", "f32", (4096,), seed=3, options={"repeats": 3})
    assert "error" not in row, row
    assert row["timing"] == "Metal GPU times" and row["iron_s"] == pytest.approx(0.25)  # the fake's GPU time
    assert row["ok"] is True


def test_iron_arrays_live_in_shared_buffers_and_launch_without_copies(metal, rng):
    """issue 16: iron.asarray(..., backend="metal") is a shared-storage MTLBuffer; launches bind it (and views of it,
    at their offset) in place, with no newBufferWithBytes copy in or copy back."""
    xs = rng.standard_normal(500).astype(np.float32)
    x = iron.asarray(xs, backend="metal")
    out = iron.asarray(np.full(500, np.nan, np.float32), backend="metal")
    fake_metal.RECORD.calls.clear()
    K.iron_exp[400](x[100:], out[:400], backend="metal")
    assert not [c for c in fake_metal.RECORD.calls if c[0] == "newBufferWithBytes"]
    got = out.numpy()
    np.testing.assert_allclose(got[:400], np.exp(xs[100:].astype(np.float64)), rtol=1e-6)
    assert np.isnan(got[400:]).all()
    assert metal._bound(out.host_view()[10:]) is not None  # the Array's memory is a registered MTLBuffer
