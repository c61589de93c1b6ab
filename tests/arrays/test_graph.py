"""iron.graph(backend): launches recorded once and replayed (CUDA graphs; Vulkan command buffers), against NumPy.
Backends without a recording refuse with a LaunchError."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import iron
from iron import Tensor, f32, i32, program_id

RECORDS = ("cuda", "vulkan", "hip-on-cuda")


@iron.kernel
def bump(x: Tensor[f32], counter: Tensor[i32], out: Tensor[f32], n: int):
    """out[i] = x[i] * (counter[0] + 1); thread 0 then counts (read before write in one thread)."""
    i = program_id(0)
    c = counter[0]
    if i < n:
        out[i] = x[i] * (c + 1)


@iron.kernel
def count(counter: Tensor[i32]):
    counter[0] = counter[0] + 1


@iron.kernel
def copy(src: Tensor[f32], dst: Tensor[f32]):
    i = program_id(0)
    dst[i] = src[i] * 2.0


@iron.kernel
def accumulate(src: Tensor[f32], acc: Tensor[f32]):
    i = program_id(0)
    acc[i] = acc[i] + src[i]


def _need_recording(backend):
    if backend not in RECORDS:
        with pytest.raises(iron.LaunchError, match="cannot record"):
            iron.graph(backend)
        pytest.skip(f"{backend} has no recording (refusal checked)")


def test_replays_see_state_the_previous_replay_wrote(backend, rng):
    """A recorded step that reads a device counter and advances it: each replay computes with the next value,
    and the replays run in order after the work submitted before them."""
    _need_recording(backend)
    n = 300
    xs = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(xs, backend=backend)
    counter = iron.zeros((1,), iron.i32, backend=backend)
    out = iron.empty((n,), iron.f32, backend=backend)
    acc = iron.zeros((n,), iron.f32, backend=backend)
    bump[n](x, counter, out, n)  # compiled outside the recording
    count[1](counter)
    accumulate[n](out, acc)
    iron.synchronize(backend)
    with iron.graph(backend) as g:
        bump[n](x, counter, out, n)
        count[1](counter)
        accumulate[n](out, acc)
    assert int(counter.numpy()[0]) == 1  # recorded, not run
    for _ in range(5):
        g.launch()
    iron.synchronize(backend)
    assert int(counter.numpy()[0]) == 6
    assert np.allclose(out.numpy(), xs * 6, rtol=1e-6)
    want = xs.astype(np.float64) * (1 + 2 + 3 + 4 + 5 + 6)
    assert np.allclose(acc.numpy(), want, rtol=1e-5, atol=1e-5)


def test_workspaces_made_while_recording_live_with_the_graph(backend, rng):
    """An array made inside the recording (as launch helpers make workspaces) is the graph's: later allocations
    do not take its memory while the graph lives."""
    _need_recording(backend)
    n = 256
    xs = rng.standard_normal(n).astype(np.float32)
    x = iron.asarray(xs, backend=backend)
    out = iron.empty((n,), iron.f32, backend=backend)
    accumulate[n](x, out)
    copy[n](x, out)
    iron.synchronize(backend)
    with iron.graph(backend) as g:
        tmp = iron.empty((n,), iron.f32, backend=backend)
        copy[n](x, tmp)
        accumulate[n](tmp, out)
    del tmp
    gc.collect()
    others = [iron.asarray(np.full(n, 1e6, np.float32), backend=backend) for _ in range(6)]
    base = out.numpy().astype(np.float64)
    g.launch()
    iron.synchronize(backend)
    assert np.allclose(out.numpy(), base + 2 * xs.astype(np.float64), rtol=1e-5, atol=1e-5)
    del others


def test_nothing_waits_inside_a_recording(backend):
    _need_recording(backend)
    x = iron.zeros((4,), iron.f32, backend=backend)
    with pytest.raises((iron.LaunchError, RuntimeError)):
        with iron.graph(backend):
            x.numpy()
    x.numpy()  # usable again after the failed recording


def test_a_profiled_vulkan_recording_times_each_dispatch(rng):
    """With the backend's profile_recordings set, a recording writes a timestamp after each dispatch: timings() gives
    the kernel of every dispatch of the last replay, in order, with a GPU time; the results are unchanged."""
    try:
        be = iron.runtime.get_backend("vulkan")
        be.context()
    except Exception as e:  # noqa: BLE001 - no Vulkan device here
        pytest.skip(f"no Vulkan device: {e}")
    if not be.context().phys.timestamp_bits:
        pytest.skip("this Vulkan device has no timestamps")
    n = 4096
    xs = rng.standard_normal(n).astype(np.float32)
    src = iron.asarray(xs, backend="vulkan")
    dst = iron.empty((n,), iron.f32, backend="vulkan")
    acc = iron.zeros((n,), iron.f32, backend="vulkan")
    copy[n](src, dst)
    accumulate[n](dst, acc)
    iron.synchronize("vulkan")
    with iron.graph("vulkan") as plain:
        copy[n](src, dst)
    assert plain.timings() is None
    be.profile_recordings = True
    try:
        with iron.graph("vulkan") as g:
            copy[n](src, dst)
            accumulate[n](dst, acc)
            accumulate[n](dst, acc)
    finally:
        be.profile_recordings = False
    assert g.timings() is None  # not replayed yet: its timestamps are undefined
    for _ in range(3):
        g.launch()
    iron.synchronize("vulkan")
    np.testing.assert_allclose(acc.numpy(), 7 * (2.0 * xs.astype(np.float64)), rtol=1e-6)  # 1 + 3 replays x 2
    times = g.timings()
    names = [name for name, _ in times]
    assert len(names) == 3 and "copy" in names[0] and all("accumulate" in x for x in names[1:]), names
    assert all(ms >= 0.0 for _, ms in times) and sum(ms for _, ms in times) > 0.0, times
