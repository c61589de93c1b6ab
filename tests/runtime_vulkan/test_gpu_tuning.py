"""Autotuning on a Vulkan device that is a GPU: CUDA's tuning tables (``autotune.table_for``) and cold timings
(``VulkanBackend.l2_flush``: a device-side fill between timed repeats). lavapipe stands in for the GPU here with
``is_gpu`` patched; a real CPU device tunes nothing."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.frontend import autotune
from iron.runtime import get_backend
from iron.runtime import vulkan as vulkan_rt
from iron.std import gemv as gemv_mod


@pytest.fixture
def vulkan():
    reason = vulkan_rt.probe()
    if reason:
        pytest.skip(f"Vulkan unavailable: {reason}")
    be = get_backend("vulkan")
    autotune._BORROWS.clear()
    gemv_mod.gemv_configs.cache_clear()
    yield be
    autotune._BORROWS.clear()
    gemv_mod.gemv_configs.cache_clear()
    be._flush = None


def _as_gpu(monkeypatch, be, gpu: bool) -> None:
    monkeypatch.setattr(type(be), "is_gpu", lambda self: gpu)
    monkeypatch.setattr(vulkan_rt, "FLUSH_BYTES", 1 << 20)
    be._flush = None
    autotune._BORROWS.clear()
    gemv_mod.gemv_configs.cache_clear()


def test_a_gpu_device_takes_cudas_tables_a_cpu_device_none(vulkan, monkeypatch):
    table = {"cuda": [(1, 2)], "hip": [(3, 4)]}
    _as_gpu(monkeypatch, vulkan, False)
    assert autotune.table_for(table, "vulkan") is None and autotune.table_for(table, "hip") == [(3, 4)]
    assert len(gemv_mod.gemv_configs("vulkan", 4096, 2048, 2)) == 1 and vulkan.l2_flush() is None
    _as_gpu(monkeypatch, vulkan, True)
    assert autotune.table_for(table, "vulkan") == [(1, 2)] and autotune.table_for(table, "cpu") is None
    assert len(gemv_mod.gemv_configs("vulkan", 4096, 2048, 2)) > 5


def test_fill_zeroes_the_buffer_in_queue_order(vulkan, rng):
    """queue.fill is ordered after the launch before it and before the read after it; a neighbour is untouched."""
    xs = rng.standard_normal(4096).astype(np.float32) + 5.0
    x = iron.asarray(xs, backend="vulkan")
    y = iron.asarray(xs, backend="vulkan")
    q = vulkan.queue()
    q.fill(x.store.buf, x.nbytes)
    np.testing.assert_array_equal(x.numpy(), np.zeros(4096, np.float32))
    np.testing.assert_array_equal(y.numpy(), xs)


def test_cold_timing_flushes_before_each_repeat(vulkan, monkeypatch):
    _as_gpu(monkeypatch, vulkan, True)
    flush = vulkan.l2_flush()
    assert flush is not None and vulkan.l2_flush() is flush
    calls = []
    x = iron.zeros((1024,), iron.f32, backend="vulkan")
    y = iron.empty((1024,), iron.f32, backend="vulkan")
    from iron.std.elementwise import launch_unary

    def before():
        calls.append("flush")
        flush()

    seconds = vulkan.gpu_time(lambda: launch_unary("exp", x, y, backend="vulkan"), 4, before=before)
    assert calls == ["flush"] * 4
    assert seconds is None or seconds > 0
    np.testing.assert_array_equal(y.numpy(), np.ones(1024, np.float32))


def test_gemv_tunes_cold_on_a_vulkan_gpu_and_answers_right(vulkan, monkeypatch, tmp_path, rng):
    """launch_gemv times every configuration of CUDA's tables with a flush ahead of each repeat, picks one and its
    result matches float64 NumPy."""
    _as_gpu(monkeypatch, vulkan, True)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_AUTOTUNE", "1")
    seen = []
    real = autotune._measure

    def measure(name, configs, run, be, flush=None):
        seen.append((name, len(configs), flush is not None))
        return real(name, configs, run, be, flush)

    monkeypatch.setattr(autotune, "_measure", measure)
    a = rng.standard_normal((192, 256)).astype(np.float32)
    xv = rng.standard_normal(256).astype(np.float32)
    ad, xd = iron.asarray(a, backend="vulkan"), iron.asarray(xv, backend="vulkan")
    y = iron.asarray(np.full(192, np.nan, np.float32), backend="vulkan")
    gemv_mod.launch_gemv(ad, xd, y, backend="vulkan")
    assert seen and seen[0][0] == "std/gemv" and seen[0][1] > 5 and seen[0][2], seen
    want = a.astype(np.float64) @ xv.astype(np.float64)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-4)


def test_a_tuned_launch_inside_a_recording_takes_the_first_configuration(vulkan, monkeypatch, tmp_path, rng):
    """Nothing can be timed while iron.graph() records: the first tuned launch there runs configs[0], untimed and not
    remembered (before: every configuration failed to synchronise and tune raised); the replay answers right."""
    _as_gpu(monkeypatch, vulkan, True)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_AUTOTUNE", "1")
    a = rng.standard_normal((160, 128)).astype(np.float32)
    xv = rng.standard_normal(128).astype(np.float32)
    ad, xd = iron.asarray(a, backend="vulkan"), iron.asarray(xv, backend="vulkan")
    y = iron.asarray(np.full(160, np.nan, np.float32), backend="vulkan")
    with iron.graph("vulkan") as g:
        gemv_mod.launch_gemv(ad, xd, y, backend="vulkan")
        with pytest.raises(iron.LaunchError, match="cannot be recorded"):
            vulkan.queue().fill(y.store.buf, y.nbytes)
    assert not (tmp_path / "autotune.json").exists()
    g.launch()
    iron.synchronize("vulkan")
    np.testing.assert_allclose(y.numpy(), a.astype(np.float64) @ xv.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_the_flush_is_remade_after_close(vulkan, monkeypatch):
    """close() drops the flush with the context its buffer lived in (a backend of its own: the shared one keeps its
    arrays)."""
    _as_gpu(monkeypatch, vulkan, True)
    be = vulkan_rt.VulkanBackend()
    try:
        first = be.l2_flush()
        first()
        be.close()
        again = be.l2_flush()
        assert again is not first
        again()
    finally:
        be.close()


def test_no_vulkan_here_borrows_nothing(monkeypatch):
    """Asking for Vulkan's table where the Vulkan backend cannot be made (no driver, no bindings: the sanitizer runs
    on the H200 had no bindings) answers None, as for any backend that times nothing; it does not raise."""
    from iron.errors import LaunchError

    def unavailable(name):
        raise LaunchError("the vulkan backend is not available")

    monkeypatch.setattr(autotune, "get_backend", unavailable)
    monkeypatch.setattr(autotune, "_BORROWS", {})
    assert autotune.table_for({"cuda": [(1, 2)]}, "vulkan") is None
    assert autotune.table_for({"cuda": [(1, 2)]}, "cuda") == [(1, 2)]


def test_multiprocessors_where_the_driver_says(vulkan):
    """``sms`` in info() (what softmax/layer_norm size their persistent grids by): NVIDIA's driver reports its SMs
    through VK_NV_shader_sm_builtins; a device without the extension (lavapipe) reports none, and the persistent
    row kernels are then not timed there."""
    from iron.std.softmax import processors

    ctx = vulkan.context()
    info = vulkan.info()
    if "VK_NV_shader_sm_builtins" in ctx.extensions:
        assert info["sms"] == ctx.sms > 0 and processors("vulkan") == ctx.sms
    else:
        assert "sms" not in info and ctx.sms == 0 and processors("vulkan") == 0
    # the struct the query fills is the vulkan package's own (a misspelt name or sType fails here, not on a GPU)
    sm = ctx.ffi.new("VkPhysicalDeviceShaderSMBuiltinsPropertiesNV*",
                     {"sType": ctx.vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV})
    assert sm.sType == 1000154001 and sm.shaderSMCount == 0
