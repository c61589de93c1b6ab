"""The Vulkan fast launchers (issue 16; runtime/vulkan_fast.py): the compiled one (vulkan_launch.c) and the generated
Python one give NumPy's answer on chains of dependent launches, views, changing scalars and threads; the compiled one
hands the uncommon cases to the Python one; a build that fails leaves the Python one in use."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import iron
from iron import Tensor, f32, program_id
from iron.runtime import unavailable_reason

pytestmark = pytest.mark.skipif(bool(unavailable_reason("vulkan")), reason=f"vulkan: {unavailable_reason('vulkan')}")


def _step_kernel():
    """A kernel made per test, so its launchers are made under the test's IRON_VULKAN_LAUNCHER."""

    @iron.kernel
    def step(src: Tensor[f32], dst: Tensor[f32], a: float, n: int):
        """dst[i] = a * src[i] + 0.25 * src[(i + 1) % n] + 1: each launch reads the whole previous one's output."""
        i = program_id(0)
        dst[i] = a * src[i] + 0.25 * src[(i + 1) % n] + 1.0

    return step


def _step_numpy(src: np.ndarray, a: float) -> np.ndarray:
    return (np.float32(a) * src + np.float32(0.25) * np.roll(src, -1) + np.float32(1.0)).astype(np.float32)


def _served_by(k_grid) -> str:
    """"c" or "python": the launcher repeat calls of ``k_grid`` (no backend=) take."""
    if type(k_grid).__name__ == "Direct":
        return "c"
    fast = k_grid._fast[None][0]
    return "c" if type(fast).__name__ == "FastLaunch" else "python"


@pytest.fixture(params=["c", "python"])
def launcher(request, monkeypatch) -> str:
    from iron.runtime import vulkan_fast

    if request.param == "c" and vulkan_fast.compiled_module() is None:
        pytest.fail(f"the compiled Vulkan launcher did not build: {vulkan_fast.EXT_REASON}")
    monkeypatch.setenv("IRON_VULKAN_LAUNCHER", request.param)
    return request.param


def test_dependent_chain_matches_numpy(launcher, rng):
    """Ping-pong over more launches than one batch holds (several submissions, each starting with a barrier), with
    the scalar changing per launch: every launch sees the previous one's writes."""
    step = _step_kernel()
    n, launches = 1000, 150
    host = rng.standard_normal(n).astype(np.float32)
    bufs = [iron.asarray(host, backend="vulkan"), iron.zeros(n, iron.f32, backend="vulkan")]
    want = host
    for k in range(launches):
        a = 0.5 + (k % 3) * 0.125
        step[n](bufs[k % 2], bufs[(k + 1) % 2], a, n)
        want = _step_numpy(want, a)
    assert _served_by(step[n]) == launcher
    assert np.allclose(bufs[launches % 2].numpy(), want, rtol=1e-5, atol=1e-5)


def test_views_aligned_and_not(launcher, rng):
    """Views at offsets the device binds in place and at 4-byte offsets it cannot (copied through a scratch buffer:
    the compiled launcher hands those to the Python one), in one chain, each launch depending on the last."""
    from iron.runtime import get_backend

    step = _step_kernel()
    n = 256
    align = get_backend("vulkan").queue().align
    shift = align // 4  # elements of one alignment unit
    host = rng.standard_normal(n).astype(np.float32)
    big = iron.zeros(4 * n + 8 * shift, iron.f32, backend="vulkan")
    src = iron.asarray(host, backend="vulkan")
    want = host
    for k, start in enumerate([0, shift, 1, 2 * shift, 3, 1, shift] * 3):  # element offsets of the destination
        dst = big[start + (k % 2) * 2 * n: start + (k % 2) * 2 * n + n]
        step[n](src, dst, 0.5, n)
        want = _step_numpy(want, 0.5)
        step[n](dst, src, 0.5, n)
        want = _step_numpy(want, 0.5)
    assert _served_by(step[n]) == launcher
    assert np.allclose(src.numpy(), want, rtol=1e-4, atol=1e-4)


def test_descriptor_pool_resets_between_repeat_launches(launcher, monkeypatch, rng):
    """The compiled launcher remembers the last call's descriptor set: a reset of the pool (more distinct views than
    it holds) in between must not leave it binding a freed set."""
    from iron.runtime import vulkan_queue

    monkeypatch.setattr(vulkan_queue, "_SETS", 4)
    step = _step_kernel()
    n, views = 64, 7
    xs = rng.standard_normal(64 * views).astype(np.float32)
    x = iron.asarray(xs, backend="vulkan")
    outs = [iron.empty(n, iron.f32, backend="vulkan") for _ in range(views)]
    for rnd in range(3):
        for i in range(views):
            for _ in range(2):  # the second call of each finds its set remembered
                step[n](x[64 * i: 64 * i + n], outs[i], float(rnd), n)
        for i in range(views):
            assert np.allclose(outs[i].numpy(), _step_numpy(xs[64 * i: 64 * i + n], rnd), rtol=1e-5, atol=1e-5)


def test_threads_launching_chains_at_once(launcher, rng):
    """Launches from several threads serialise on the queue's lock: each thread's chain gets NumPy's answer."""
    step = _step_kernel()
    n, launches, threads = 512, 80, 4
    hosts = [rng.standard_normal(n).astype(np.float32) for _ in range(threads)]
    results: dict[int, np.ndarray] = {}

    def chain(t: int) -> None:
        bufs = [iron.asarray(hosts[t], backend="vulkan"), iron.zeros(n, iron.f32, backend="vulkan")]
        for k in range(launches):
            step[n](bufs[k % 2], bufs[(k + 1) % 2], 0.5, n)
        results[t] = bufs[launches % 2].numpy()

    workers = [threading.Thread(target=chain, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for t in range(threads):
        want = hosts[t]
        for _ in range(launches):
            want = _step_numpy(want, 0.5)
        assert np.allclose(results[t], want, rtol=1e-5, atol=1e-5), t


def test_calls_the_launcher_does_not_match_take_the_full_path(launcher, monkeypatch):
    """A repeat call is checked again (written buffers overlapping, too small, a wrong scalar), and a change of
    IRON_BACKEND since the launcher was made sends calls to the full path, which decides again."""
    from iron.runtime import get_backend

    step = _step_kernel()
    n = 64
    x = iron.asarray(np.ones(n, np.float32), backend="vulkan")
    out = iron.zeros(n, iron.f32, backend="vulkan")
    step[n](x, out, 1.0, n)
    step[n](x, out, 1.0, n)
    with pytest.raises(iron.LaunchError, match="share memory"):
        step[n](out, out, 1.0, n)
    with pytest.raises(iron.LaunchError):
        step[n](x, out, 1.0, 2.5)
    with pytest.raises(iron.LaunchError):
        step[n](x[:10], out, 1.0, n)
    be = get_backend("vulkan")
    full = []
    original = type(be).launch
    monkeypatch.setattr(type(be), "launch", lambda self, *a: (full.append(1), original(self, *a))[1])
    monkeypatch.delenv("IRON_BACKEND", raising=False)
    step[n](x, out, 1.0, n)
    step[n](x, out, 1.0, n)
    full.clear()
    step[n](x, out, 1.0, n)
    assert full == []  # served by the fast launcher
    monkeypatch.setenv("IRON_BACKEND", "vulkan")
    step[n](x, out, 2.0, n)
    assert full == [1]  # IRON_BACKEND changed since: the full path
    assert np.array_equal(out.numpy(), np.full(n, 2.0 * 1 + 0.25 + 1, np.float32))


def test_graph_recording_through_the_compiled_launcher(launcher, rng):
    """While iron.graph() records, the compiled launcher hands launches to the Python one (the recording's own
    descriptor sets); the replay gives the chain's answer."""
    step = _step_kernel()
    n = 128
    host = rng.standard_normal(n).astype(np.float32)
    a, b = iron.asarray(host, backend="vulkan"), iron.zeros(n, iron.f32, backend="vulkan")
    step[n](a, b, 0.5, n)  # makes the fast launcher
    step[n](b, a, 0.5, n)
    want = _step_numpy(_step_numpy(host, 0.5), 0.5)
    with iron.graph(backend="vulkan") as g:
        step[n](a, b, 0.5, n)
        step[n](b, a, 0.5, n)
    for _ in range(3):
        g.launch()
        want = _step_numpy(_step_numpy(want, 0.5), 0.5)
    assert np.allclose(a.numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_failed_build_leaves_the_python_launcher(monkeypatch, tmp_path, rng):
    """No working compiler: the build fails cleanly (the reason kept), launches take the generated-Python launcher
    and still give NumPy's answer; IRON_VULKAN_LAUNCHER=c then refuses, naming the reason."""
    from iron.runtime import vulkan_fast

    monkeypatch.setattr(vulkan_fast, "_EXT", None)
    monkeypatch.setattr(vulkan_fast, "EXT_REASON", None)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.delenv("IRON_VULKAN_LAUNCHER", raising=False)
    assert vulkan_fast.compiled_module() is None
    assert "no-such-cc" in vulkan_fast.EXT_REASON
    step = _step_kernel()
    n = 300
    host = rng.standard_normal(n).astype(np.float32)
    bufs = [iron.asarray(host, backend="vulkan"), iron.zeros(n, iron.f32, backend="vulkan")]
    want = host
    for k in range(70):
        step[n](bufs[k % 2], bufs[(k + 1) % 2], 0.75, n)
        want = _step_numpy(want, 0.75)
    assert _served_by(step[n]) == "python"
    assert np.allclose(bufs[0].numpy(), want, rtol=1e-5, atol=1e-5)
    monkeypatch.setenv("IRON_VULKAN_LAUNCHER", "c")
    other = _step_kernel()
    with pytest.raises(iron.LaunchError, match="compiled launcher is unavailable.*no-such-cc"):
        other[n](bufs[0], bufs[1], 0.75, n)
    monkeypatch.setenv("IRON_VULKAN_LAUNCHER", "fast")
    with pytest.raises(iron.LaunchError, match="IRON_VULKAN_LAUNCHER must be"):
        _step_kernel()[n](bufs[0], bufs[1], 0.75, n)


def test_compiled_launcher_records_dispatch_then_barrier(monkeypatch, rng):
    """The Vulkan commands the compiled launcher records, seen through entry points that log and forward: per launch
    the push constants (this call's scalars), the dispatch (the group counts) and the barrier that makes its writes
    visible to the next launch (the queue's own masks); pipeline and set bound again only when they change.
    (lavapipe runs dispatches in order, so a missing barrier would not show in the results there.)"""
    import ctypes
    import struct

    from iron.runtime import get_backend, vulkan_fast

    if vulkan_fast.compiled_module() is None:
        pytest.fail(f"the compiled Vulkan launcher did not build: {vulkan_fast.EXT_REASON}")
    monkeypatch.setenv("IRON_VULKAN_LAUNCHER", "c")
    queue = get_backend("vulkan").queue()
    log: list[tuple] = []
    u32, u64, p = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    protos = [ctypes.CFUNCTYPE(None, p, ctypes.c_int32, u64),
              ctypes.CFUNCTYPE(None, p, ctypes.c_int32, u64, u32, u32, ctypes.POINTER(u64), u32, p),
              ctypes.CFUNCTYPE(None, p, u64, u32, u32, u32, p),
              ctypes.CFUNCTYPE(None, p, u32, u32, u32),
              ctypes.CFUNCTYPE(None, p, u32, u32, u32, u32, p, u32, p, u32, p)]
    real = [proto(addr) for proto, addr in zip(protos, queue.procs())]

    def logged(i, *args):
        if i == 2:  # the push-constant bytes
            log.append(("push", ctypes.string_at(args[5], args[4])))
        elif i == 3:
            log.append(("dispatch", args[1:4]))
        elif i == 4:
            sType, src, dst = struct.unpack_from("<i4x8xII", ctypes.string_at(args[5], 24))
            log.append(("barrier", args[1], args[2], args[4], (sType, src, dst)))
        else:
            log.append(("bind pipeline",) if i == 0 else ("bind set",))
        real[i](*args)

    hooks = [proto(lambda *a, i=i: logged(i, *a)) for i, proto in enumerate(protos)]
    monkeypatch.setattr(queue, "_procs", tuple(ctypes.cast(h, p).value for h in hooks))
    step = _step_kernel()
    n = 1000
    bufs = [iron.asarray(rng.standard_normal(n).astype(np.float32), backend="vulkan"),
            iron.zeros(n, iron.f32, backend="vulkan")]
    step[n](bufs[0], bufs[1], 0.5, n)  # the full path: makes the launcher
    step[n](bufs[1], bufs[0], 0.5, n)  # a set not made yet: the Python launcher's
    iron.synchronize("vulkan")
    log.clear()
    for k in range(4):
        step[n](bufs[k % 2], bufs[(k + 1) % 2], 0.5 + k, n)
    assert _served_by(step[n]) == "c"
    mb = queue.memory_barrier
    barrier = ("barrier", queue.stages, queue.stages, 1, (mb.sType, mb.srcAccessMask, mb.dstAccessMask))
    kinds = [entry[0] for entry in log]
    assert kinds == ["bind pipeline", "bind set", "push", "dispatch", "barrier"] + [
        "bind set", "push", "dispatch", "barrier"] * 3, kinds
    for k, i in enumerate([i for i, kind in enumerate(kinds) if kind == "push"]):
        assert struct.unpack_from("<fi", log[i][1]) == (0.5 + k, n)
        assert log[i + 2] == barrier
        assert log[i + 1] == log[kinds.index("dispatch")] and log[i + 1][1][1:] == (1, 1)
    iron.synchronize("vulkan")


def test_a_kernel_made_at_run_time_is_freed_with_its_launchers(launcher):
    """k[grid] -> the compiled stand-in -> its Python launcher -> the kernel -> its launch cache is a cycle the
    garbage collector frees."""
    import gc
    import weakref

    step = _step_kernel()
    n = 64
    x, out = iron.zeros(n, iron.f32, backend="vulkan"), iron.zeros(n, iron.f32, backend="vulkan")
    for _ in range(3):
        step[n](x, out, 1.0, n)
    assert _served_by(step[n]) == launcher
    gone = weakref.ref(step)
    del step
    gc.collect()
    assert gone() is None
