"""A new batch of Vulkan launches reuses the command buffer and fence of a batch that has finished, without a
synchronize() in between (vulkan_queue._reclaim): on NVIDIA's driver each allocation cost ~0.4 ms, 15 us a launch
over 5,000 launches in a fresh process (bench/results/2026-12-04-h200-README.txt, session 15). Results against
NumPy, so the reuse cannot hide a lost or reordered batch."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, f32, program_id
from iron.runtime import unavailable_reason, vulkan_queue

pytestmark = pytest.mark.skipif(unavailable_reason("vulkan") is not None, reason="no Vulkan device")


@iron.kernel
def bump(x: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        x[i] = x[i] * 0.5 + 1.0


def test_a_finished_batch_is_reused_before_allocating():
    n = 256
    x = iron.asarray(np.zeros(n, np.float32), backend="vulkan")
    queue = x.store.queue
    bump[n](x, n)
    iron.synchronize("vulkan")
    spare, queue.idle = queue.idle, []  # none idle: the next batch comes from a finished one in flight, or is new
    try:
        launches = 1
        for _ in range(vulkan_queue.BATCH):  # fills one batch: submitted without a wait
            bump[n](x, n)
            launches += 1
        assert not queue.idle and len(queue.inflight) >= 1
        cmd, fence, _ = queue.inflight[0]
        vk = queue.ctx.vk
        vk.vkWaitForFences(queue.ctx.device, 1, [fence], vk.VK_TRUE, 60 * 10**9)  # finished, not yet retired
        bump[n](x, n)  # begins a new batch: it takes the finished one's command buffer
        launches += 1
        assert queue.cmd is not None and queue.cmd[0] == cmd, "a finished batch's command buffer was not reused"
        want = np.zeros(n)
        for _ in range(launches):
            want = want * 0.5 + 1.0
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-6)
    finally:
        queue.idle.extend(spare)  # back to the queue, which destroys them with its context
