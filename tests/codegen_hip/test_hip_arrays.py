"""iron Arrays on the HIP backend (issue 16): hipMalloc'd memory, launched in place by pointer with no copies and no
wait, views by offset, NumPy arrays beside them staged as before. Against the fake libamdhip64 (fake_hip.py), which
records every call and runs each launch in the interpreter; no AMD GPU has run this."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, f32, program_id


@iron.kernel
def axpy(x: Tensor[f32], y: Tensor[f32], out: Tensor[f32], a: float, n: int):
    i = program_id(0)
    if i < n:
        out[i] = a * x[i] + y[i]


@pytest.fixture
def hip(running):
    return running[0]


def _calls_between(fake, start: int) -> list[str]:
    return [name for name, _ in fake.calls[start:]]


def test_arrays_live_in_device_memory_and_launch_in_place(hip, rng):
    n = 300
    xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y = iron.asarray(xs, backend="hip"), iron.asarray(ys, backend="hip")
    out = iron.asarray(np.full(n, np.nan, np.float32), backend="hip")
    assert x.backend == "hip" and x.host_view() is None and x.store.ptr in hip.memory
    before = len(hip.calls)
    axpy[n](x, y, out, 2.0, n)
    calls = _calls_between(hip, before)
    assert "hipModuleLaunchKernel" in calls
    assert not {"hipMemcpyHtoD", "hipMemcpyDtoH", "hipStreamSynchronize", "hipMalloc"} & set(calls)  # no copy, no wait
    got = out.numpy()
    assert "hipStreamSynchronize" in _calls_between(hip, before)  # reading waits for the queued launch
    np.testing.assert_allclose(got, 2.0 * xs.astype(np.float64) + ys, rtol=1e-6, atol=1e-6)


def test_views_are_offsets_into_the_same_allocation(hip, rng):
    n = 256
    base = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(base, backend="hip")
    out = iron.asarray(np.full(n, np.nan, np.float32), backend="hip")
    axpy[100](x[50:150], x[50:150], out[10:110], 1.5, 100)
    got = out.numpy()
    np.testing.assert_allclose(got[10:110], 2.5 * base[50:150].astype(np.float64), rtol=1e-6, atol=1e-6)
    assert np.isnan(got[:10]).all() and np.isnan(got[110:]).all()


def test_numpy_beside_arrays_is_staged_and_waited_for(hip, rng):
    n = 64
    xs = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(xs, backend="hip")
    y = np.ones(n, np.float32)
    out = np.full(n, np.nan, np.float32)
    axpy[n](x, y, out, 3.0, n)
    np.testing.assert_allclose(out, 3.0 * xs.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)  # written back at once


def test_dependent_chain_on_device_arrays(hip, rng):
    n = 128
    xs = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(xs, backend="hip")
    acc = iron.zeros(n, f32, backend="hip")
    tmp = iron.empty(n, f32, backend="hip")
    for _ in range(20):  # acc <- acc + x, through tmp
        axpy[n](x, acc, tmp, 1.0, n)
        axpy[n](tmp, tmp, acc, 0.0, n)  # acc = 0 * tmp + tmp
    np.testing.assert_allclose(acc.numpy(), 20.0 * xs.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_freed_arrays_return_their_memory_to_the_pool(hip):
    x = iron.empty(1000, f32, backend="hip")
    ptr = x.store.ptr
    del x
    y = iron.empty(1000, f32, backend="hip")
    assert y.store.ptr == ptr  # reused, not a new hipMalloc
