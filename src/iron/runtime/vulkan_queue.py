"""Device arrays on Vulkan and launches on them recorded without waiting (issue 16).

An ``iron.Array`` on Vulkan owns a device-local buffer (device-local *and* host-visible where the device has unified
memory, as lavapipe and integrated GPUs do), taken from the context's buffer pool. A launch whose buffers are all such
arrays is recorded into the current batch command buffer and not waited for: each dispatch is followed by a
compute-to-compute/transfer memory barrier, so a chain of dependent launches sees every earlier write, and each batch
starts with one so that it sees the batches submitted before it. A batch is submitted once it holds ``BATCH``
dispatches (the GPU starts on it while the host records the next) and by ``synchronize()``, which ``x.numpy()`` calls
before it copies. Descriptor sets are cached by (program, buffers, offsets, sizes), so a repeat launch on the same
arrays allocates nothing. An array freed while recorded work may still use its buffer returns the buffer to the pool
only after that work has finished.

A view whose offset is not a multiple of the device's ``minStorageBufferOffsetAlignment`` cannot be bound in place: it
is copied into an aligned scratch buffer before the dispatch and, when the kernel writes it, back after it, inside the
same command buffer.

Threads: every entry point (record, synchronize, transfers, the pools) holds ``lock``, the context's one RLock, so
launches from several Python threads serialise on it. An array's finalizer may run in any thread, at any bytecode,
even inside a locked section: it only appends its buffer to ``released`` (no lock), and the next entry point drains
that list under the lock.

The compiled fast launcher (``vulkan_launch.c``) records its dispatches itself, holding ``lock``, and reads and writes
this state as the Python code does: ``cmd_handle`` (the batch command buffer as an int, 0 before ``_begin``),
``bound``, ``count``, ``sets`` (key -> (``VkDescriptorSet[1]``, handle)) with ``sets_epoch`` (bumped when the pool is
reset), ``released``, ``recording`` and ``closed``; it calls ``_drain``, ``_begin`` and ``_submit``. A change to
those belongs in both.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from ..errors import LaunchError

#: dispatches recorded before a batch is submitted without waiting
BATCH = 64
_SETS = 512  # descriptor sets in the arrays' pool (the pool is reset, after a wait, when it runs out)


def _check(vk, result: int) -> None:
    """Raise what the `vulkan` package's wrapper raises for a failed call's VkResult."""
    if result != vk.VK_SUCCESS:
        error = vk.exception_codes.get(result)
        raise error() if error is not None else LaunchError(f"a Vulkan call failed (VkResult {result})")


class VulkanStore:
    """The device memory of one iron Array on Vulkan."""

    device = 0

    def __init__(self, queue: VulkanQueue, nbytes: int):
        ctx = queue.ctx
        self.queue = queue
        self.nbytes = nbytes
        self.kind = "unified" if ctx.unified else "device"
        self.buf = queue.alloc(self.kind, max(nbytes, 4))
        weakref.finalize(self, queue.release, self.kind, self.buf)  # the finalizer must not hold self
        if queue.recording is not None:  # a workspace the recorded launches use at every replay
            queue.recording.keep.append(self)

    def write(self, offset: int, data: np.ndarray) -> None:
        self.queue.write(self.buf, offset, data)

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        return self.queue.read(self.buf, offset, nbytes)


class ArrayArg:
    """A launch argument that is a Vulkan array: its buffer, byte offset and size (what the launch binds)."""

    __slots__ = ("buf", "offset", "nbytes", "size", "array")

    def __init__(self, array: Any):
        self.array = array
        self.buf = array.store.buf
        self.offset = array.offset
        self.nbytes = array.nbytes
        self.size = array.size


class VulkanQueue:
    """The recording side of a VulkanContext: batch command buffers in flight, cached descriptor sets, transfers."""

    def __init__(self, ctx) -> None:
        vk, dev = ctx.vk, ctx.device
        self.ctx = ctx
        self.lock: threading.RLock = ctx.lock  # one lock for the context and its queue: no lock order to get wrong
        self.released: list[tuple[str, Any]] = []  # buffers of freed arrays, drained under the lock
        self.align = max(1, int(ctx.limits.minStorageBufferOffsetAlignment))
        self.cmd: Any = None  # the batch being recorded, with its fence
        self.cmd_handle = 0  # its VkCommandBuffer as an int (the compiled launcher's, vulkan_launch.c), 0 when none
        self.closed = False  # destroyed with its context: launches on its arrays are refused
        self.count = 0
        self.inflight: list[tuple[Any, Any, list]] = []
        self.idle: list[tuple[Any, Any]] = []
        self.deferred: list[tuple[str, Any]] = []  # buffers to pool once the recorded batch has finished
        self.sets: dict[Any, tuple[Any, int]] = {}  # key -> (VkDescriptorSet[1], its handle as an int)
        self.sets_epoch = 0  # counts the resets of their pool (vulkan_launch.c remembers a set until the next)
        self.recording: Any = None  # a VulkanRecording while iron.graph() records (vulkan_record.py)
        self.retired: list[Any] = []  # recordings no graph holds any more, destroyed once nothing runs
        self.spare_fences: list[Any] = []  # fences of finished replays
        self.descriptors = 0  # buffer descriptors taken from the pool by ``sets``
        from vulkan._vulkan import lib  # the loader's functions through cffi (see ``record``)

        self.lib = lib
        self._procs: tuple[int, ...] | None = None
        self.bound: tuple[Any, Any] = (None, None)  # pipeline and descriptor set bound in the recording batch
        self.stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        self.memory_barrier = ctx.ffi.new("VkMemoryBarrier*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            "srcAccessMask": vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            "dstAccessMask": vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
            | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT})
        # a batch's begin and submit through cffi with these prebuilt (the `vulkan` package's struct wrappers cost
        # 6-9 us each, lavapipe: a third of a launch's host time amortised over a batch)
        self.begin_info = ctx.ffi.new("VkCommandBufferBeginInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            "flags": vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT})
        self.submit_cmd = ctx.ffi.new("VkCommandBuffer[1]")
        self.submit_info = ctx.ffi.new("VkSubmitInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1, "pCommandBuffers": self.submit_cmd})
        self.set_pool = vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
            maxSets=_SETS, pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                               descriptorCount=_SETS * 8)]), None)

    # -- launches -------------------------------------------------------------------------------------------------

    def enqueue(self, spk, args: dict[str, ArrayArg], push: bytes, grid: tuple[int, int, int],
                group: tuple[int, int, int], lengths: tuple[int, ...] = ()) -> None:
        """Record one dispatch of ``spk`` on arrays (by parameter) into the current batch (``lengths``: of its run-time
        sized shared arrays)."""
        with self.lock:
            prog, pipe, groups = self.prepare(spk, grid, group, lengths)
            self.record(spk, prog, pipe, groups, {name: (a.buf, a.offset, a.nbytes) for name, a in args.items()},
                        push)

    def prepare(self, spk, grid: tuple[int, int, int], group: tuple[int, int, int], lengths: tuple[int, ...] = ()):
        """(program, pipeline, group counts) of a launch shape and run-time shared lengths, after the device checks."""
        ctx = self.ctx
        with self.lock:
            ctx.check_kernel(spk, group, lengths)
            groups = ctx._group_counts(grid, group)
            prog = ctx.program(spk)
            return prog, ctx.pipeline(spk, prog, group, lengths), groups

    def record(self, spk, prog, pipe, groups, binds: dict[str, tuple], push: bytes) -> None:
        """Record a prepared dispatch on buffers (param -> (Buffer, offset, bytes)); hold ``lock``."""
        if self.ctx.lost:  # nothing may touch the sets or buffers a dispatch that never finished still uses
            raise LaunchError(self.ctx.lost)
        self._drain()
        moved = self._align_views(spk, binds)
        dset = self._set(spk, prog, binds)
        self._dispatch(spk, prog, pipe, groups, dset, push, moved)

    def record_aligned(self, spk, prog, pipe, groups, key: tuple, binds: dict[str, tuple], push: bytes) -> None:
        """``record`` for buffers all bound at aligned offsets, ``key`` their descriptor-set key as ``_set`` makes it
        (the fast launcher builds both without a loop); hold ``lock``."""
        if self.ctx.lost:
            raise LaunchError(self.ctx.lost)
        if self.released:
            self._drain()
        dset = self.sets.get(key) if self.recording is None else None
        if dset is None:
            dset = self._set(spk, prog, binds)
        self._dispatch(spk, prog, pipe, groups, dset, push, None)

    def _dispatch(self, spk, prog, pipe, groups, dset, push: bytes, moved: dict | None) -> None:
        ctx, vk, lib = self.ctx, self.ctx.vk, self.lib
        cmd = self._begin()
        # the hot path calls the loader through cffi directly (the `vulkan` package's wrappers convert every
        # argument in Python); state already bound in this command buffer is not bound again
        if self.bound[0] is not pipe:
            lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
            self.bound = (pipe, None)
        if self.bound[1] is not dset:
            lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, prog.pipeline_layout, 0, 1, dset[0],
                                        0, ctx.ffi.NULL)
            self.bound = (pipe, dset)
        if spk.push_size:
            # bytes go to a void* parameter as they are (ffi.from_buffer would cost ~0.2 us more)
            lib.vkCmdPushConstants(cmd, prog.pipeline_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, spk.push_size, push)
        lib.vkCmdDispatch(cmd, *groups)
        self._barrier(cmd)
        if moved:
            for name, (scratch, (buf, off, n)) in moved.items():
                if not next(b for b in spk.buffers if b.param == name).readonly and n:
                    vk.vkCmdCopyBuffer(cmd, scratch.handle, buf.handle, 1,
                                       [vk.VkBufferCopy(srcOffset=0, dstOffset=off, size=n)])
                (self.deferred if self.recording is None else self.recording.held).append(("device", scratch))
            self._barrier(cmd)
        if self.recording is not None:
            self.recording.dispatches += 1
            if self.recording.stamps is not None:
                self.recording.stamp(cmd, spk.entry)
            return
        self.count += 1
        if self.count >= BATCH:
            self._submit()

    def _align_views(self, spk, binds: dict[str, tuple]) -> dict[str, tuple]:
        """Copy each misaligned view into an aligned scratch buffer (recorded), rebinding it there."""
        moved = {}
        vk = self.ctx.vk
        for name, (buf, off, n) in list(binds.items()):
            if off % self.align:
                scratch = self.ctx.get_buffer("device", max(n, 4))
                cmd = self._begin()
                if n:
                    vk.vkCmdCopyBuffer(cmd, buf.handle, scratch.handle, 1,
                                       [vk.VkBufferCopy(srcOffset=off, dstOffset=0, size=n)])
                moved[name] = (scratch, (buf, off, n))
                binds[name] = (scratch, 0, n)
        if moved:
            self._barrier(self._begin())
        return moved

    def _set(self, spk, prog, binds: dict[str, tuple]) -> tuple[Any, int]:
        """The (cached) descriptor set binding each buffer parameter to its array's range: (the ``VkDescriptorSet[1]``
        vkCmdBindDescriptorSets takes, its handle as an int)."""
        if self.recording is not None:
            return self.recording.descriptor_set(spk, prog, binds)
        key = (id(prog), tuple((b.binding, id(binds[b.param][0]), binds[b.param][1], binds[b.param][2])
                               for b in spk.buffers))
        dset = self.sets.get(key)
        if dset is not None:
            return dset
        vk, dev = self.ctx.vk, self.ctx.device
        info = vk.VkDescriptorSetAllocateInfo(descriptorPool=self.set_pool, descriptorSetCount=1,
                                              pSetLayouts=[prog.set_layout])
        # the pool is counted here rather than waiting for the driver to refuse: NVIDIA's answer when it is full
        # (VK_ERROR_OUT_OF_POOL_MEMORY) is missing from the `vulkan` package's error table (a KeyError there)
        need = max(1, len(spk.buffers))
        if len(self.sets) + 1 > _SETS or self.descriptors + need > _SETS * 8:
            self._reset_sets()
        try:
            handle = vk.vkAllocateDescriptorSets(dev, info)[0]
        except (vk.VkErrorOutOfPoolMemory, vk.VkErrorFragmentedPool, KeyError):
            self._reset_sets()
            handle = vk.vkAllocateDescriptorSets(dev, info)[0]
        self.descriptors += need
        dset = self.set_entry(handle)
        self.write_set(handle, spk, binds)
        self.sets[key] = dset
        return dset

    def set_entry(self, handle) -> tuple[Any, int]:
        """(``VkDescriptorSet[1]`` holding ``handle``, the handle as an int): how ``sets`` and ``bound`` hold a set."""
        ffi = self.ctx.ffi
        return ffi.new("VkDescriptorSet[1]", [handle]), int(ffi.cast("uintptr_t", handle))

    def procs(self) -> tuple[int, ...]:
        """The addresses of vkCmdBindPipeline, vkCmdBindDescriptorSets, vkCmdPushConstants, vkCmdDispatch and
        vkCmdPipelineBarrier for this device (vkGetDeviceProcAddr: no loader trampoline), for vulkan_launch.c."""
        if self._procs is None:
            ffi, dev = self.ctx.ffi, self.ctx.device
            names = ("vkCmdBindPipeline", "vkCmdBindDescriptorSets", "vkCmdPushConstants", "vkCmdDispatch",
                     "vkCmdPipelineBarrier")
            self._procs = tuple(int(ffi.cast("uintptr_t", self.lib.vkGetDeviceProcAddr(dev, name.encode())))
                                for name in names)
        return self._procs

    def write_set(self, handle, spk, binds: dict[str, tuple]) -> None:
        """Point the descriptor set ``handle``'s bindings at the buffer ranges of ``binds``."""
        vk = self.ctx.vk
        if spk.buffers:
            writes = [vk.VkWriteDescriptorSet(
                dstSet=handle, dstBinding=b.binding, descriptorCount=1,
                descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=binds[b.param][0].handle, offset=binds[b.param][1],
                                                       range=max(4, binds[b.param][2]))]) for b in spk.buffers]
            vk.vkUpdateDescriptorSets(self.ctx.device, len(writes), writes, 0, None)

    def _reset_sets(self) -> None:
        """Empty the descriptor pool, after a wait: every set may be in use by recorded work until it has run."""
        self.synchronize()
        self.ctx.vk.vkResetDescriptorPool(self.ctx.device, self.set_pool, 0)
        self.sets.clear()
        self.sets_epoch += 1
        self.descriptors = 0

    # -- batches --------------------------------------------------------------------------------------------------

    def _begin(self):
        """The batch command buffer being recorded (begun, with its leading barrier, on first use); while
        ``iron.graph()`` records, the recording's."""
        if self.recording is not None:
            return self.recording.cmd
        if self.cmd is None:
            vk, dev = self.ctx.vk, self.ctx.device
            if self.ctx.lost:
                raise LaunchError(self.ctx.lost)
            if self.closed:
                raise LaunchError("an array of this launch was made on a Vulkan context that has been closed",
                                  hint="make the array again after closing the backend")
            if not self.idle:
                self._reclaim()
            if self.idle:
                cmd, fence = self.idle.pop()
            else:
                cmd = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(
                    commandPool=self.ctx.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                    commandBufferCount=1))[0]
                fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
            _check(vk, self.lib.vkBeginCommandBuffer(cmd, self.begin_info))
            self.cmd = (cmd, fence)
            self.cmd_handle = int(self.ctx.ffi.cast("uintptr_t", cmd))
            self.bound = (None, None)
            self._barrier(cmd)  # see the writes of batches submitted earlier
        return self.cmd[0]

    def _barrier(self, cmd) -> None:
        """Compute and transfer writes before this point are visible to compute and transfer work after it."""
        self.lib.vkCmdPipelineBarrier(cmd, self.stages, self.stages, 0, 1, self.memory_barrier, 0, self.ctx.ffi.NULL,
                                      0, self.ctx.ffi.NULL)

    def _submit(self) -> None:
        if self.cmd is None:
            return
        vk, lib = self.ctx.vk, self.lib
        cmd, fence = self.cmd
        self.cmd, self.cmd_handle, self.count = None, 0, 0
        _check(vk, lib.vkEndCommandBuffer(cmd))
        self.submit_cmd[0] = cmd
        _check(vk, lib.vkQueueSubmit(self.ctx.queue, 1, self.submit_info, fence))
        self.inflight.append((cmd, fence, self.deferred))
        self.deferred = []

    def synchronize(self) -> None:
        """Submit the batch being recorded and wait for every batch in flight."""
        vk, dev = self.ctx.vk, self.ctx.device
        with self.lock:
            if self.recording is not None:
                raise LaunchError("nothing can wait for the GPU while launches are being recorded (iron.graph()): "
                                  "read arrays back after the with block")
            self._drain()
            self._submit()
            limit = self.ctx.fence_limit()
            while self.inflight:
                cmd, fence, freed = self.inflight[0]
                try:
                    vk.vkWaitForFences(dev, 1, [fence], vk.VK_TRUE, int(limit * 1e9))
                except vk.VkTimeout:
                    self.ctx.lost = (f"a batch of launches did not finish within {limit:g} s on Vulkan device "
                                     f"{self.ctx.phys.name} (an endless loop?); this process cannot use it again "
                                     "(IRON_VULKAN_TIMEOUT sets the limit)")
                    raise LaunchError(self.ctx.lost) from None
                self._retire_oldest()
            while self.retired:
                self.retired.pop().destroy()

    def _retire_oldest(self) -> None:
        """The oldest batch in flight has finished (its fence is signalled): its command buffer and fence go back to
        ``idle`` (a replay's fence to ``spare_fences``), the buffers freed while it ran to the pool. Hold ``lock``."""
        vk, dev = self.ctx.vk, self.ctx.device
        cmd, fence, freed = self.inflight.pop(0)
        vk.vkResetFences(dev, 1, [fence])
        if cmd is None:  # a replay: its command buffer is the recording's
            self.spare_fences.append(fence)
        else:
            vk.vkResetCommandBuffer(cmd, 0)
            self.idle.append((cmd, fence))
        for kind, buf in freed:
            self.ctx.put_buffer(kind, buf)

    def _reclaim(self) -> None:
        """Retire the batches in flight that have finished, oldest first, without waiting: a new batch then reuses
        a command buffer and fence rather than allocating them (on NVIDIA's driver an allocation cost ~0.4 ms: 15 us
        a launch over 5,000 launches in batches of 64 on the H200, 4.4 us once they were reused; 2026-12-04,
        bench/experiments/vk_barrier_cost.py). Hold ``lock``."""
        vk, dev = self.ctx.vk, self.ctx.device
        while self.inflight and self.lib.vkGetFenceStatus(dev, self.inflight[0][1]) == vk.VK_SUCCESS:
            self._retire_oldest()

    def replay(self, rec) -> None:
        """Submit a recording (after the batch being recorded), without waiting."""
        vk = self.ctx.vk
        with self.lock:
            if self.ctx.lost:
                raise LaunchError(self.ctx.lost)
            self._drain()
            self._submit()
            fence = self.spare_fences.pop() if self.spare_fences else vk.vkCreateFence(
                self.ctx.device, vk.VkFenceCreateInfo(), None)
            vk.vkQueueSubmit(self.ctx.queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[rec.cmd])],
                             fence)
            rec.replays += 1
            self.inflight.append((None, fence, []))

    def retire(self, rec) -> None:
        """A graph's finalizer: its recording is destroyed at the next wait (replays may still run). Takes no
        lock (see ``release``)."""
        if not self.ctx._destroyed:
            self.retired.append(rec)

    @property
    def busy(self) -> bool:
        return self.cmd is not None or bool(self.inflight)

    def release(self, kind: str, buf) -> None:
        """An array's finalizer: its buffer goes back to the pool once no recorded work can use it. Runs in any
        thread, possibly inside a section that holds the lock, so it takes none: ``_drain`` does the rest."""
        if not self.ctx._destroyed:
            self.released.append((kind, buf))  # list.append is atomic

    def alloc(self, kind: str, nbytes: int):
        """A buffer for a new array (the buffers of freed arrays go back to the pool first)."""
        with self.lock:
            self._drain()
            return self.ctx.get_buffer(kind, nbytes)

    def _drain(self) -> None:
        """Hand the buffers of freed arrays on: to the batch being recorded, to the last batch in flight, or (no work
        queued) to the pool. Hold ``lock``."""
        while self.released:
            kind, buf = self.released.pop()
            if self.recording is not None:  # the recording may use it: it goes back with the recording
                self.recording.held.append((kind, buf))
            elif self.cmd is not None:
                self.deferred.append((kind, buf))
            elif self.inflight:
                self.inflight[-1][2].append((kind, buf))
            else:
                self.ctx.put_buffer(kind, buf)

    # -- transfers (waiting) --------------------------------------------------------------------------------------

    def write(self, buf, offset: int, data: np.ndarray) -> None:
        """Copy host bytes into ``buf`` at ``offset``, after the work queued so far."""
        with self.lock:
            self.synchronize()
            if buf.view is not None:
                buf.view[offset: offset + data.nbytes] = data
                return
            st = self.ctx.get_buffer("staging", data.nbytes)
            try:
                st.view[: data.nbytes] = data
                self._copy(st, 0, buf, offset, data.nbytes)
            finally:
                self.ctx.put_buffer("staging", st)

    def read(self, buf, offset: int, nbytes: int) -> np.ndarray:
        """The bytes of ``buf`` at ``offset``, once the work queued so far has finished."""
        with self.lock:
            self.synchronize()
            if buf.view is not None:
                return buf.view[offset: offset + nbytes].copy()
            st = self.ctx.get_buffer("staging", nbytes)
            try:
                self._copy(buf, offset, st, 0, nbytes)
                return st.view[:nbytes].copy()
            finally:
                self.ctx.put_buffer("staging", st)

    def _copy(self, src, src_off: int, dst, dst_off: int, n: int) -> None:
        if not n:
            return
        ctx, vk = self.ctx, self.ctx.vk
        cmd = ctx.cmd
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        vk.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1,
                           [vk.VkBufferCopy(srcOffset=src_off, dstOffset=dst_off, size=n)])
        ctx._barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                     vk.VK_PIPELINE_STAGE_HOST_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                     vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_SHADER_READ_BIT)
        vk.vkEndCommandBuffer(cmd)
        ctx._submit_and_wait("copy")

    def fill(self, buf, nbytes: int) -> None:
        """Queue zeros over the first ``nbytes`` (a multiple of 4) of ``buf`` on the device, ordered with the
        launches around it (barriers), without waiting."""
        if nbytes % 4:
            raise ValueError(f"fill: {nbytes} bytes is not a whole number of 4-byte words")
        with self.lock:
            if self.recording is not None:
                raise LaunchError("a fill cannot be recorded into an iron.graph() (it is a timing tool's)")
            cmd = self._begin()
            self.ctx.vk.vkCmdFillBuffer(cmd, buf.handle, 0, nbytes, 0)
            self._barrier(cmd)

    def copy_gbps(self, nbytes: int = 256 << 20, repeats: int = 5) -> float | None:
        """Median device-to-device copy rate of ``nbytes`` (read + write, GB/s) by timestamp queries, or None."""
        ctx, vk = self.ctx, self.ctx.vk
        if ctx.query_pool is None:
            return None
        with self.lock:
            self.synchronize()
            src, dst = ctx.get_buffer("device", nbytes), ctx.get_buffer("device", nbytes)
            rates = []
            try:
                for _ in range(repeats + 1):  # the first is a warm-up
                    cmd = ctx.cmd
                    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
                        flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
                    vk.vkCmdResetQueryPool(cmd, ctx.query_pool, 0, 2)
                    vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx.query_pool, 0)
                    vk.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, [vk.VkBufferCopy(srcOffset=0, dstOffset=0,
                                                                                        size=nbytes)])
                    vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx.query_pool, 1)
                    vk.vkEndCommandBuffer(cmd)
                    ctx._submit_and_wait("copy")
                    ms = ctx._gpu_time(1)
                    if ms:
                        rates.append(2 * nbytes / (ms * 1e-3) / 1e9)
            finally:
                ctx.put_buffer("device", src)
                ctx.put_buffer("device", dst)
        rates = sorted(rates[1:])
        return rates[len(rates) // 2] if rates else None

    def destroy(self) -> None:
        """Free the queue's Vulkan objects (the context waits for the device first)."""
        vk, dev = self.ctx.vk, self.ctx.device
        for kind, buf in [*self.released, *self.deferred, *(b for _, _, freed in self.inflight for b in freed)]:
            self.ctx.put_buffer(kind, buf)  # the context frees its pool next
        self.released, self.deferred = [], []
        for _, fence, _ in self.inflight:
            vk.vkDestroyFence(dev, fence, None)
        for _, fence in self.idle:
            vk.vkDestroyFence(dev, fence, None)
        if self.cmd is not None:
            vk.vkDestroyFence(dev, self.cmd[1], None)
        for fence in self.spare_fences:
            vk.vkDestroyFence(dev, fence, None)
        while self.retired:
            self.retired.pop().destroy()
        self.inflight, self.idle, self.cmd, self.cmd_handle, self.spare_fences = [], [], None, 0, []
        self.closed = True
        vk.vkDestroyDescriptorPool(dev, self.set_pool, None)
