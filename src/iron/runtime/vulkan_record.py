"""Launches recorded once into a Vulkan command buffer and replayed (``iron.graph(backend="vulkan")``; issue 19).

Vulkan's counterpart of a CUDA graph. While a ``VulkanGraph`` is open, every launch on device arrays is recorded
into one command buffer of its own (``VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT``, so a replay may be submitted
while the previous one runs) instead of the queue's batches, with the same barriers: it begins with one, so a replay
sees every write submitted before it, and each dispatch is followed by one. Its descriptor sets come from pools of
its own (never reset while it lives), and the arrays made while recording (launch helpers' workspaces) are kept for
its lifetime. ``launch()`` submits the command buffer without waiting: a decode step's ~200 dispatches cost one
``vkQueueSubmit`` instead of ~200 recordings.

What a recording reads and writes is fixed when it is made: the buffers (and their offsets), the push constants
(scalar arguments, grid sizes) and the pipelines. Arrays it uses that were made before it must outlive it. Nothing
can wait while recording (``synchronize()``, ``x.numpy()`` and copies into arrays raise).

A recording made while the backend's ``profile_recordings`` is set (a tool's switch: scripts/gpu_model.py sets it to
see where a Vulkan decode step's time goes) also writes a timestamp before its first dispatch and after each one;
``g.timings()`` reads those of the last replay that finished: per dispatch, its kernel's entry point and the GPU time
from the end of the dispatch before it to its own end (its barrier included) — the Vulkan counterpart of the kernel
list CUPTI gives for a CUDA graph.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..errors import LaunchError

#: descriptor sets per pool of a recording (a new pool is made when one is full)
_POOL_SETS = 256
_MAX_BINDINGS = 32
#: timestamps a profiled recording holds (one before its first dispatch, one after each; later dispatches go unstamped)
PROFILE_QUERIES = 4096


class VulkanRecording:
    """One recorded command buffer, its descriptor pools and the buffers it keeps."""

    def __init__(self, queue, profile: bool = False) -> None:
        ctx = queue.ctx
        vk, dev = ctx.vk, ctx.device
        self.queue = queue
        self.cmd = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(
            commandPool=ctx.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(self.cmd, vk.VkCommandBufferBeginInfo(
            flags=vk.VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT))
        queue._barrier(self.cmd)  # see the writes of everything submitted before a replay
        self.pools: list[Any] = []
        self.left = 0  # sets the newest pool can still give
        self.keep: list[Any] = []  # stores of arrays made while recording
        self.held: list[tuple[str, Any]] = []  # pool buffers (scratch, freed arrays') released with the recording
        self.dispatches = 0
        self.replays = 0  # submitted so far (the timestamps are undefined before the first has run)
        self.stamps: list[str] | None = None  # a profiled recording's kernel names, one per timestamp after the first
        self.query_pool = None
        if profile and ctx.phys.timestamp_bits:
            self.query_pool = vk.vkCreateQueryPool(dev, vk.VkQueryPoolCreateInfo(
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=PROFILE_QUERIES), None)
            vk.vkCmdResetQueryPool(self.cmd, self.query_pool, 0, PROFILE_QUERIES)
            vk.vkCmdWriteTimestamp(self.cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.query_pool, 0)
            self.stamps = []

    def stamp(self, cmd, name: str) -> None:
        """After a dispatch (and its barrier) of a profiled recording: a timestamp written once it has finished."""
        if len(self.stamps) + 1 < PROFILE_QUERIES:
            self.stamps.append(name)
            self.queue.ctx.vk.vkCmdWriteTimestamp(cmd, self.queue.ctx.vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT,
                                                  self.query_pool, len(self.stamps))

    def timings(self) -> list[tuple[str, float]]:
        """(entry point, ms) per stamped dispatch of the last replay that finished (waits for it)."""
        ctx = self.queue.ctx
        vk, n = ctx.vk, len(self.stamps) + 1
        out = ctx.ffi.new(f"uint64_t[{n}]")
        try:
            vk.vkGetQueryPoolResults(ctx.device, self.query_pool, 0, n, 8 * n, out, 8,
                                     vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        except (vk.VkError, vk.VkException) as e:
            raise LaunchError(f"reading a recording's timestamps failed: {type(e).__name__}") from None
        bits = ctx.phys.timestamp_bits
        mask = (1 << bits) - 1 if bits < 64 else 2**64 - 1
        ms = ctx.timestamp_period_ns / 1e6
        return [(name, ((int(out[i + 1]) - int(out[i])) & mask) * ms) for i, name in enumerate(self.stamps)]

    def descriptor_set(self, spk, prog, binds: dict[str, tuple]) -> tuple[Any, int]:
        """A new descriptor set binding each buffer parameter of ``spk`` to its range (``binds``), as the queue holds
        one (``VulkanQueue.set_entry``)."""
        ctx = self.queue.ctx
        vk, dev = ctx.vk, ctx.device
        if self.left == 0:
            self.pools.append(vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
                maxSets=_POOL_SETS, pPoolSizes=[vk.VkDescriptorPoolSize(
                    type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=_POOL_SETS * _MAX_BINDINGS)]), None))
            self.left = _POOL_SETS
        handle = vk.vkAllocateDescriptorSets(dev, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.pools[-1], descriptorSetCount=1, pSetLayouts=[prog.set_layout]))[0]
        self.left -= 1
        self.queue.write_set(handle, spk, binds)
        return self.queue.set_entry(handle)

    def destroy(self) -> None:
        """Free the command buffer and pools and give the buffers back (after every replay has finished)."""
        ctx = self.queue.ctx
        if ctx._destroyed:
            return
        vk, dev = ctx.vk, ctx.device
        vk.vkFreeCommandBuffers(dev, ctx.cmd_pool, 1, [self.cmd])
        for pool in self.pools:
            vk.vkDestroyDescriptorPool(dev, pool, None)
        if self.query_pool is not None:
            vk.vkDestroyQueryPool(dev, self.query_pool, None)
            self.query_pool = None
        for kind, buf in self.held:
            ctx.put_buffer(kind, buf)
        self.pools, self.held, self.keep = [], [], []


class VulkanGraph:
    """``with backend.graph() as g:`` records the launches made inside; ``g.launch()`` replays them."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.profile = bool(getattr(backend, "profile_recordings", False))
        self._rec: VulkanRecording | None = None

    def __enter__(self) -> VulkanGraph:
        queue = self.backend.queue()
        with queue.lock:
            if queue.recording is not None:
                raise LaunchError("a Vulkan recording cannot be nested in another")
            queue.synchronize()
            queue.recording = VulkanRecording(queue, self.profile)
            queue.bound = (None, None)
        return self

    def __exit__(self, *exc) -> None:
        queue = self.backend.queue()
        with queue.lock:
            rec, queue.recording = queue.recording, None
            queue.bound = (None, None)
            queue.ctx.vk.vkEndCommandBuffer(rec.cmd)
            if exc[0] is not None:
                rec.destroy()
                return
            self._rec = rec
            weakref.finalize(self, queue.retire, rec)

    @property
    def dispatches(self) -> int:
        """How many dispatches the recording holds."""
        return 0 if self._rec is None else self._rec.dispatches

    def timings(self) -> list[tuple[str, float]] | None:
        """A profiled recording's GPU time per dispatch of its last finished replay, [(entry point, ms)]; None when
        it was not profiled, the device has no timestamps or it has not been replayed. Call after
        ``iron.synchronize``."""
        if self._rec is None or self._rec.stamps is None or self._rec.replays == 0:
            return None
        return self._rec.timings()

    def launch(self) -> None:
        """Submit the recorded launches (asynchronous: ``iron.synchronize`` waits)."""
        if self._rec is None:
            raise RuntimeError("the graph has not been recorded")
        self.backend.queue().replay(self._rec)
