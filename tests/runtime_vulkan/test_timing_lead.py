"""The busy lead of timed Vulkan dispatches (runtime/vulkan_lead.py): a valid module, run ahead of each timed
dispatch where wanted (GPU devices; forced here on lavapipe), leaving the timed kernel's results and timing intact,
and never run outside a timer."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import iron
from iron.runtime import get_backend, vulkan_device, vulkan_lead
from iron.runtime import vulkan as vulkan_rt


@iron.kernel
def _scale(x: iron.Tensor[iron.f32], y: iron.Tensor[iron.f32], n: int):
    i = iron.program_id(0)
    if i < n:
        y[i] = x[i] * 3.0 + 1.0


@pytest.fixture
def vulkan():
    reason = vulkan_rt.probe()
    if reason:
        pytest.skip(f"Vulkan unavailable: {reason}")
    return get_backend("vulkan")


def test_lead_module_validates(tmp_path):
    tool = shutil.which("spirv-val")
    if tool is None:
        pytest.skip("spirv-val not installed")
    path = tmp_path / "lead.spv"
    path.write_bytes(vulkan_lead.lead_kernel().words)
    run = subprocess.run([tool, "--target-env", "vulkan1.2", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("flag, gpu, want", [("", True, True), ("", False, False), ("0", True, False),
                                             ("1", False, True)])
def test_wanted_by_device_and_switch(monkeypatch, flag, gpu, want):
    monkeypatch.setenv("IRON_VULKAN_TIMING_LEAD", flag)
    assert vulkan_lead.wanted(gpu) is want


def test_forced_lead_runs_before_each_timed_dispatch(vulkan, monkeypatch, rng):
    """Forced on lavapipe with 5 iterations: the lead's buffer holds 2 - 2^-5 after a timed run (its loop ran), the
    timed kernel's output is right, the time is a positive number, and the switch is off again after the timer."""
    monkeypatch.setenv("IRON_VULKAN_TIMING_LEAD", "1")
    monkeypatch.setenv("IRON_VULKAN_LEAD_ITERATIONS", "5")
    ctx = vulkan.context()
    n = 1024
    x = iron.asarray(rng.standard_normal(n).astype(np.float32), backend="vulkan")
    y = iron.asarray(np.full(n, np.nan, np.float32), backend="vulkan")
    seconds = vulkan.gpu_time(lambda: _scale[n, 64](x, y, n, backend="vulkan"), 3)
    assert ctx.timing_lead is False
    np.testing.assert_allclose(y.numpy(), x.numpy().astype(np.float64) * 3.0 + 1.0, rtol=1e-6, atol=1e-6)
    if ctx.query_pool is not None:
        assert seconds is not None and seconds > 0
    if ctx.unified:  # the lead's 4-byte buffer is host-visible there
        assert ctx.lead_buffer.view[:4].view(np.float32)[0] == np.float32(2.0 - 2.0 ** -5)


def test_no_lead_outside_a_timer(vulkan, monkeypatch, rng):
    """A launch outside gpu_time records no lead (the switch is off), even when forced on for timers."""
    monkeypatch.setenv("IRON_VULKAN_TIMING_LEAD", "1")
    calls = []
    monkeypatch.setattr(vulkan_device, "record_lead", lambda *a: calls.append(a))
    n = 64
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    _scale[n, 64](x, y, n, backend="vulkan")
    np.testing.assert_allclose(y, x.astype(np.float64) * 3.0 + 1.0, rtol=1e-6, atol=1e-6)
    assert vulkan.context().timing_lead is False and not calls
