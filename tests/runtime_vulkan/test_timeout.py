"""A Vulkan dispatch that does not finish in IRON_VULKAN_TIMEOUT seconds is a LaunchError, not a hung process
(seen: the differential fuzzer hung a test run in vkWaitForFences). The kernel is merely long (lavapipe stops any
loop after 65535 iterations, so an endless one cannot be written for it): 200 x 60000 dependent steps a thread,
which an H200 on NVIDIA's driver does not finish in the limit either (60000 alone it did: 2026-12-04).
Run in a child process, which leaves with os._exit: the device is still running the kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import iron
from iron.runtime import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason("vulkan") is not None, reason="no Vulkan device")

CHILD = textwrap.dedent('''
    import os, sys
    import numpy as np
    sys.path.insert(0, {folder!r})
    import endless
    import iron
    x = np.ones(1 << 20, np.float32)
    try:
        endless.spin[1 << 20](x, 60000, backend="vulkan")
        print("FINISHED", flush=True)
    except iron.LaunchError as e:
        print("LAUNCH-ERROR", e, flush=True)
        try:
            endless.spin[1 << 20](x, 60000, backend="vulkan")
        except iron.LaunchError as again:
            print("REFUSED", again, flush=True)
    os._exit(0)
''')

KERNEL = '''import iron


@iron.kernel
def spin(x: iron.Tensor[iron.f32], n: int):
    i = iron.program_id(0)
    acc = x[i % 8]
    for k in range(200):
        for j in range(n):  # 200 x 60000 dependent steps in each of 2^20 threads: far longer than the limit
            acc = acc * 0.999999 + x[(i + j + k) % 8]
    x[i] = acc
'''


def test_an_endless_dispatch_is_a_launch_error(tmp_path):
    (tmp_path / "endless.py").write_text(KERNEL)
    env = {**os.environ, "IRON_VULKAN_TIMEOUT": "2"}
    r = subprocess.run([sys.executable, "-c", CHILD.format(folder=str(tmp_path))], capture_output=True, text=True,
                       timeout=120, env=env)
    assert "FINISHED" not in r.stdout, r.stdout + r.stderr
    assert "LAUNCH-ERROR" in r.stdout and "did not finish within 2 s" in r.stdout, r.stdout + r.stderr
    assert "REFUSED" in r.stdout and "cannot use it again" in r.stdout, r.stdout + r.stderr


def test_closing_a_lost_device_does_not_wait_for_it(monkeypatch):
    """After a dispatch that never finished (ctx.lost), close() and the context's destroy() do not call into the
    device: vkDeviceWaitIdle on it crashed the process (SIGSEGV in a 2026-12-03 test run under load). A later
    launch starts on a fresh context."""
    from iron.runtime.vulkan import VulkanBackend, probe

    if probe():
        pytest.skip(f"Vulkan unavailable: {probe()}")
    be = VulkanBackend()
    ctx = be.context()
    be.queue()
    ctx.lost = "a dispatch did not finish (test)"

    def refuse(*args):
        raise AssertionError("called into a lost device")

    monkeypatch.setattr(ctx.vk, "vkDeviceWaitIdle", refuse)
    be.close()
    ctx.destroy()
    monkeypatch.undo()
    assert be.context() is not ctx and not be.context().lost
    be.close()


def test_a_lost_device_is_not_touched_by_later_launches(monkeypatch):
    """After a dispatch that never finished (ctx.lost), a launch on NumPy arrays or on device arrays is refused
    before it resets the command buffer or descriptor pool, writes a set or hands a buffer back: the device still
    runs the old dispatch from them. Stop 35's CI timed out once (120 s), then the later launches re-recorded under
    it and the process died of SIGSEGV about 200 tests on."""
    import numpy as np

    import iron
    from iron.runtime import get_backend

    be = get_backend("vulkan")
    ctx = be.context()
    x = np.ones(64, np.float32)
    arr = iron.asarray(x, backend="vulkan")
    iron.synchronize("vulkan")
    pooled = {key: list(bufs) for key, bufs in ctx.pool.items()}

    def refuse(*args):
        raise AssertionError("called into a lost device")

    for name in ("vkResetDescriptorPool", "vkAllocateDescriptorSets", "vkUpdateDescriptorSets",
                 "vkBeginCommandBuffer", "vkResetCommandBuffer", "vkQueueSubmit"):
        monkeypatch.setattr(ctx.vk, name, refuse)
    ctx.lost = "a dispatch did not finish (test)"
    try:
        for args in ((x,), (arr,)):
            with pytest.raises(iron.LaunchError, match="did not finish"):
                _double[64](*args, backend="vulkan")
        assert {key: list(bufs) for key, bufs in ctx.pool.items()} == pooled
    finally:
        ctx.lost = None  # nothing ran: the context is as it was
        monkeypatch.undo()
    _double[64](x, backend="vulkan")
    assert (x == 2).all()


@iron.kernel
def _double(x: iron.Tensor[iron.f32]):
    i = iron.program_id(0)
    x[i] = x[i] * 2.0
