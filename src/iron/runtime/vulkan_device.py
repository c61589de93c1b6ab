"""The Vulkan compute context behind the ``vulkan`` backend: instance, physical-device choice, one compute queue,
buffers, descriptor sets, pipelines (with a ``VkPipelineCache``), push constants, dispatch and timestamp queries.
Shader modules, pipelines and the checks a kernel passes before they are built live in vulkan_programs.py.

Everything is synchronous: a launch records one command buffer, submits it and waits on a fence. That keeps the
NumPy copy-in/copy-out semantics simple and lets one descriptor pool be reset after every launch.

Memory: where the device offers memory that is both device-local and host-visible (CPU devices such as lavapipe,
integrated GPUs, resizable-BAR), buffers live there and are mapped directly. Otherwise each argument gets a
device-local buffer plus a host-visible staging buffer, copied with ``vkCmdCopyBuffer`` inside the same submission.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import LaunchError
from . import vulkan_coopmat2 as cm2
from . import vulkan_programs as vprog
from . import vulkan_props as vp
from . import vulkan_stats as vstats
from .vulkan_pipeline_cache import read_pipeline_cache, write_pipeline_cache
from .vulkan_programs import Program
from .vulkan_props import API_1_2, API_1_3, UCF, UCF_STYPE
from .vulkan_select import choose_device, create_instance, list_devices, load_vulkan, version_text

_ALIGN = 256

#: VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT (Vulkan 1.3; the `vulkan` package defines it as None)
REQUIRE_FULL_SUBGROUPS = 0x2


@dataclass
class Buffer:
    """One VkBuffer with its own memory; ``view`` is the persistent mapping when host-visible."""

    handle: Any
    memory: Any
    size: int
    view: np.ndarray | None


@dataclass
class _LaunchArgs:
    """A launch's arrays and buffers: param -> host array, device buffer and (without unified memory) staging
    buffer."""

    host: dict[str, np.ndarray]
    bufs: dict[str, Buffer]
    stages: dict[str, Buffer]
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # param -> (offset, bytes) bound


def coopmat_mode() -> str:
    """``IRON_VULKAN_COOPMAT``: "auto" (unset or 1: cooperative matrices where the device has them), "off" (0: the
    scalar fallback of matrix fragments) or "emulate" (their lowering with the matrices emulated in plain SPIR-V, on
    any device: tests)."""
    import os

    value = os.environ.get("IRON_VULKAN_COOPMAT", "1").strip().lower()
    return {"0": "off", "emulate": "emulate"}.get(value, "auto")


class VulkanContext:
    """One logical device on the chosen physical device. Created lazily by the backend, destroyed at exit."""

    def __init__(self) -> None:
        #: one lock for every use of the device from Python threads: the queue (submission), the command buffers, the
        #: descriptor and buffer pools, the program/pipeline caches; ``VulkanQueue.lock`` is the same lock
        self.lock = threading.RLock()
        vk = self.vk = load_vulkan()
        from vulkan import ffi

        self.ffi = ffi
        try:
            self.instance = create_instance(vk)
        except vk.VkError as e:
            raise LaunchError(f"cannot create a Vulkan instance ({type(e).__name__}); is a driver installed?") from None
        self._destroyed = False
        try:
            self.phys = choose_device(list_devices(vk, self.instance))
            self._query_properties()
            self._create_device()
        except BaseException:
            vk.vkDestroyInstance(self.instance, None)
            raise
        self.programs: dict[Any, Program] = {}
        self.pool: dict[tuple[str, int], list[Buffer]] = {}
        self.last_gpu_time_ms: float | None = None

    # -- properties and features ----------------------------------------------------------------------------------

    def _query_properties(self) -> None:
        vk, ffi, pd, api = self.vk, self.ffi, self.phys.handle, self.phys.api
        p2, drv, fc, sub = vp.read_properties(vk, ffi, self.phys)
        self._props_keep = (p2, drv, fc, sub)  # limits/props below are views into this cffi memory
        self.denorm_preserve = vp.denorm_preserve(vk, api, fc)
        self.float_controls = vp.float_controls(api, fc)
        props = p2.properties
        self.limits = props.limits
        self.props = props
        self.timestamp_period_ns = float(props.limits.timestampPeriod)
        self.subgroup_size = int(sub.subgroupSize)
        compute = bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
        ops = sub.supportedOperations if compute else 0
        self.driver = f"{ffi.string(drv.driverName).decode()} {ffi.string(drv.driverInfo).decode()}".strip()

        self.extensions = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
        feats = vp.read_features(vk, ffi, self.phys, self.extensions)
        self.sms = vp.multiprocessors(vk, ffi, self.phys, self.extensions)
        self.has = {
            **vp.supported(vk, api, ops, feats),
            # f32 subnormals kept, not flushed to zero (NVIDIA flushes them unless asked)
            "denorm_preserve": self.denorm_preserve,
            **self.float_controls,
        }
        self._enable = vp.features_to_enable(api, feats)
        # every pipeline runs at the subgroup size its module was compiled for (simd_size() is a constant in it):
        # required at pipeline creation where the device could choose another (sizes vary on AMD and Intel; one size
        # on NVIDIA and lavapipe, which are left alone: a full suite on lavapipe with the flags set hung once in
        # attention, not reproduced)
        sizes = vp.subgroup_size_control(vk, ffi, self.phys, feats.f13)
        self.pin_subgroup = sizes is not None and sizes[0] < sizes[1] and sizes[0] <= self.subgroup_size <= sizes[1]
        self.full_subgroups = self.pin_subgroup and bool(feats.f13.computeFullSubgroups)
        # cooperative matrices (codegen/spirv/coopmat.py) for the fragment dtypes the device multiplies at 16 x 16 x
        # 16; IRON_VULKAN_COOPMAT=0 keeps the scalar fallback (and leaves the extension off the device)
        configs = vp.coopmat_configs(vk, ffi, self.instance, self.phys) if feats.coop is not None else []
        self.coopmat_configs = configs
        self.coopmat = vp.coopmat_dtypes(configs, feats, api) if coopmat_mode() == "auto" else frozenset()
        self.has["cooperative_matrix"] = bool(self.coopmat)
        self.has["cooperative_matrix_bf16"] = "bf16" in self.coopmat
        # VK_NV_cooperative_matrix2 (the std GEMM's module, std/gemm_coopmat2.py; IRON_VULKAN_COOPMAT2=0: off)
        self.coopmat2: dict[str, Any] | None = None
        if self.coopmat and cm2.wanted() and cm2.EXTENSION in self.extensions:
            self.coopmat2 = cm2.query(vk, ffi, self.instance, self.phys)
        self.has["cooperative_matrix2"] = self.coopmat2 is not None
        self.has["pipeline_statistics"] = (vstats.wanted() and vstats.EXTENSION in self.extensions
                                           and self.phys.api >= API_1_2)  # its feature struct rides features2's chain
        self.memory_types, self.heaps = vp.memory_layout(vk, pd)
        dl_hv = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT
        # on a discrete GPU a small host-visible device-local heap is the 256 MiB BAR window: keep staging there
        self.unified = self.phys.type in ("cpu", "integrated") and any((f & dl_hv) == dl_hv
                                                                       for f, _ in self.memory_types)

    def _create_device(self) -> None:
        vk, ffi = self.vk, self.ffi
        f13 = ffi.new("VkPhysicalDeviceVulkan13Features*",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, **self._enable["f13"]})
        f11 = ffi.new("VkPhysicalDeviceVulkan11Features*",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                       "pNext": f13 if self.phys.api >= API_1_3 else ffi.NULL, **self._enable["f11"]})
        f12 = ffi.new("VkPhysicalDeviceVulkan12Features*",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "pNext": f11,
                       **self._enable["f12"]})
        head = f12
        chain = []  # every struct of the pNext chain stays alive until the device exists
        exts = []
        if self._enable["fat"]:
            exts.append("VK_EXT_shader_atomic_float")
            head = ffi.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*",
                           {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
                            "pNext": f12, **self._enable["fat"]})
            chain.append(head)
        if self.has["subgroup_uniform_control_flow"]:
            exts.append(UCF)
            head = ffi.new("VkPhysicalDeviceShaderSubgroupUniformControlFlowFeaturesKHR*",
                           {"sType": getattr(vk, UCF_STYPE), "pNext": head, "shaderSubgroupUniformControlFlow": 1})
            chain.append(head)
        head, coop_structs, coop_exts = vp.coopmat_chain(vk, ffi, head, self.coopmat)
        chain += coop_structs
        exts += coop_exts
        if self.coopmat2 is not None:
            head, structs, names = cm2.chain(ffi, head, self.coopmat2["features"])
            chain += structs
            exts += names
        if self.has["pipeline_statistics"]:  # iron inspect --backend vulkan --resources (IRON_VULKAN_STATS=1)
            head, structs, names = vstats.chain(vk, ffi, head)
            chain += structs
            exts += names
        if "VK_KHR_portability_subset" in self.extensions:  # required by the spec when offered (MoltenVK)
            exts.append("VK_KHR_portability_subset")
        f2 = ffi.new("VkPhysicalDeviceFeatures2*",
                     {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "features": self._enable["core"],
                      "pNext": head if self.phys.api >= API_1_2 else ffi.NULL})
        self._keep = (f13, f11, f12, *chain, f2)
        queue = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.phys.queue_family, queueCount=1,
                                           pQueuePriorities=[1.0])
        info = vk.VkDeviceCreateInfo(pNext=f2, pQueueCreateInfos=[queue], queueCreateInfoCount=1,
                                     enabledExtensionCount=len(exts), ppEnabledExtensionNames=exts or None)
        try:
            self.device = vk.vkCreateDevice(self.phys.handle, info, None)
        except vk.VkError as e:
            raise LaunchError(f"cannot create a Vulkan device on {self.phys.name}: {type(e).__name__}") from None
        dev = self.device
        self.queue = vk.vkGetDeviceQueue(dev, self.phys.queue_family, 0)
        self.cmd_pool = vk.vkCreateCommandPool(dev, vk.VkCommandPoolCreateInfo(
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=self.phys.queue_family), None)
        self.cmd = vk.vkAllocateCommandBuffers(dev, vk.VkCommandBufferAllocateInfo(
            commandPool=self.cmd_pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        self.fence = vk.vkCreateFence(dev, vk.VkFenceCreateInfo(), None)
        self.lost: str | None = None  # why launches are refused after a dispatch that never finished
        self.desc_pool = vk.vkCreateDescriptorPool(dev, vk.VkDescriptorPoolCreateInfo(
            maxSets=4, pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                           descriptorCount=256)]), None)
        self.query_pool = None
        if self.phys.timestamp_bits:
            self.query_pool = vk.vkCreateQueryPool(dev, vk.VkQueryPoolCreateInfo(
                queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=2), None)
        initial = read_pipeline_cache(self.props)
        try:
            self.pipeline_cache = vk.vkCreatePipelineCache(dev, vk.VkPipelineCacheCreateInfo(
                initialDataSize=len(initial), pInitialData=ffi.from_buffer(initial) if initial else None), None)
        except vk.VkError:  # a stale or corrupt file: drivers may reject it; start empty
            self.pipeline_cache = vk.vkCreatePipelineCache(dev, vk.VkPipelineCacheCreateInfo(), None)

    def info(self) -> dict[str, Any]:
        lim = self.limits
        return {
            "name": self.phys.name, "type": self.phys.type, "api_version": version_text(self.phys.api),
            "driver": self.driver, "subgroup_size": self.subgroup_size, "subgroup_size_pinned": self.pin_subgroup,
            "max_group_size": tuple(lim.maxComputeWorkGroupSize[i] for i in range(3)),
            "max_group_invocations": lim.maxComputeWorkGroupInvocations,
            "max_shared_bytes": lim.maxComputeSharedMemorySize,
            "memory_gib": round(sum(s for s, f in self.heaps if f & self.vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) / 2**30,
                                1),
            "unified_memory": self.unified, "timestamps": self.query_pool is not None,
            "features": sorted(k for k, v in self.has.items() if v),
            "cooperative_matrix": sorted(self.coopmat),
            **({"cooperative_matrix2": self.coopmat2} if self.coopmat2 is not None else {}),
            **({"sms": self.sms} if self.sms else {}),
        }

    # -- buffers --------------------------------------------------------------------------------------------------

    def _memory_type(self, bits: int, want: int, avoid: int = 0) -> int:
        for i, (flags, _) in enumerate(self.memory_types):
            if bits & (1 << i) and (flags & want) == want and not flags & avoid:
                return i
        for i, (flags, _) in enumerate(self.memory_types):
            if bits & (1 << i) and (flags & want) == want:
                return i
        raise LaunchError(f"Vulkan device {self.phys.name} has no memory type with flags {want:#x}")

    def _new_buffer(self, kind: str, size: int) -> Buffer:
        vk = self.vk
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        handle = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(self.device, handle)
        hv = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        if kind == "device":
            mt = self._memory_type(req.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        elif kind == "staging":  # cached host memory reads back fast; avoid spending the BAR window on staging
            try:
                mt = self._memory_type(req.memoryTypeBits, hv | vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                       vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
            except LaunchError:
                mt = self._memory_type(req.memoryTypeBits, hv, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        else:  # "unified": device-local and mappable
            mt = self._memory_type(req.memoryTypeBits, hv | vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        try:
            memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(allocationSize=req.size,
                                                                              memoryTypeIndex=mt), None)
        except vk.VkError as e:
            vk.vkDestroyBuffer(self.device, handle, None)
            raise LaunchError(f"Vulkan device {self.phys.name} cannot allocate {size} bytes ({type(e).__name__})") \
                from None
        vk.vkBindBufferMemory(self.device, handle, memory, 0)
        view = None
        if kind != "device":
            view = np.frombuffer(vk.vkMapMemory(self.device, memory, 0, size, 0), dtype=np.uint8)
        return Buffer(handle, memory, size, view)

    def get_buffer(self, kind: str, nbytes: int) -> Buffer:
        size = max(_ALIGN, -(-nbytes // _ALIGN) * _ALIGN)
        with self.lock:
            free = self.pool.get((kind, size))
            return free.pop() if free else self._new_buffer(kind, size)

    def put_buffer(self, kind: str, buf: Buffer) -> None:
        with self.lock:
            self.pool.setdefault((kind, buf.size), []).append(buf)

    # -- programs (vulkan_programs.py) ---------------------------------------------------------------------------

    def check_kernel(self, spk, group: tuple[int, int, int], lengths: tuple[int, ...] = ()) -> None:
        """LaunchError naming the feature and device when the module needs what this device lacks; ``lengths``: the
        launch's lengths of the run-time sized shared arrays (vulkan_shared.py)."""
        vprog.check_kernel(self, spk, group, lengths)

    def program(self, spk) -> Program:
        with self.lock:
            return vprog.build_program(self, spk)

    def pipeline(self, spk, prog: Program, group: tuple[int, int, int], lengths: tuple[int, ...] = ()):
        with self.lock:
            return vprog.build_pipeline(self, spk, prog, group, lengths)

    def _subgroup_pin(self, group: tuple[int, int, int]) -> tuple[Any, int]:
        """(the pNext struct requiring the device's subgroup size, or None; the stage flags): full subgroups too
        where the group's x size is a whole number of them (Vulkan's condition for that flag)."""
        if not self.pin_subgroup:
            return None, 0
        vk = self.vk
        req = self.ffi.new("VkPipelineShaderStageRequiredSubgroupSizeCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
            "requiredSubgroupSize": self.subgroup_size})
        full = self.full_subgroups and group[0] % self.subgroup_size == 0
        return req, REQUIRE_FULL_SUBGROUPS if full else 0

    # -- dispatch -------------------------------------------------------------------------------------------------

    def dispatch(self, spk, host: dict[str, np.ndarray], push: bytes, grid: tuple[int, int, int],
                 group: tuple[int, int, int], repeat: int = 1, bound: dict | None = None,
                 lengths: tuple[int, ...] = ()) -> float | None:
        """Run ``spk`` ``repeat`` times on the NumPy arrays ``host`` (param -> flat array, copied in and, for
        written buffers, back) and the device arrays ``bound`` (param -> (Buffer, offset, bytes), bound in place);
        returns the GPU time per dispatch in ms (timestamp queries), or None; ``lengths``: those of the run-time sized
        shared arrays (vulkan_shared.py). Thread-safe: one launch at a time records into the context's one command
        buffer."""
        with self.lock:
            return self._dispatch(spk, host, push, grid, group, repeat, bound, lengths)

    def _dispatch(self, spk, host, push, grid, group, repeat, bound, lengths=()) -> float | None:
        vk = self.vk
        if self.lost:  # the dispatch that never finished still uses the command buffer, its set and its buffers
            raise LaunchError(self.lost)
        self.check_kernel(spk, group, lengths)
        groups = self._group_counts(grid, group)
        prog = self.program(spk)
        pipe = self.pipeline(spk, prog, group, lengths)
        taken: list[tuple[str, Buffer]] = []
        try:
            args = self._upload(spk, host, taken, bound or {})
            dset = self._descriptor_set(spk, prog, args)
            self._record(spk, prog, pipe, dset, push, args, groups, repeat)
            self._submit_and_wait(spk.entry)
            for name in (b.param for b in spk.buffers if not b.readonly and b.param in host):
                arr = host[name]
                src = args.stages[name] if args.stages else args.bufs[name]
                arr.view(np.uint8)[:] = src.view[: arr.nbytes]
            ms = self._gpu_time(repeat)
            self.last_gpu_time_ms = ms
            return ms
        except vk.VkError as e:
            raise LaunchError(f"Vulkan launch of {spk.entry} failed: {type(e).__name__}") from None
        finally:
            # not after a timeout: the device still runs that dispatch, reading its descriptor set and buffers
            # (resetting them under it crashed the process later: SIGSEGV in CI, stop 35)
            if not self.lost:
                vk.vkResetDescriptorPool(self.device, self.desc_pool, 0)
                for k, buf in taken:
                    self.put_buffer(k, buf)

    def _group_counts(self, grid: tuple[int, int, int], group: tuple[int, int, int]) -> tuple[int, ...]:
        """Groups per axis that cover ``grid``; LaunchError past the device's dispatch limits."""
        groups = tuple(-(-n // g) for n, g in zip(grid, group))
        for i, n in enumerate(groups):
            if n > self.limits.maxComputeWorkGroupCount[i]:
                raise LaunchError(f"grid {grid} needs {n} groups on axis {i}; {self.phys.name} dispatches at most "
                                  f"{self.limits.maxComputeWorkGroupCount[i]}")
        return groups

    def _upload(self, spk, host: dict[str, np.ndarray], taken: list[tuple[str, Buffer]], bound: dict) -> _LaunchArgs:
        """A buffer per argument holding its array: mapped directly (unified memory) or filled through a staging
        buffer, copied at the start of the submission; device arrays (``bound``) as they are. Every buffer taken
        from the pool is added to ``taken``."""
        kind = "unified" if self.unified else "device"
        args = _LaunchArgs(host, {}, {})
        for b in spk.buffers:
            if b.param in bound:
                buf, offset, nbytes = bound[b.param]
                args.bufs[b.param] = buf
                args.ranges[b.param] = (offset, nbytes)
                continue
            arr = host[b.param]
            args.ranges[b.param] = (0, arr.nbytes)
            buf = self.get_buffer(kind, arr.nbytes)
            taken.append((kind, buf))
            args.bufs[b.param] = buf
            if self.unified:
                buf.view[: arr.nbytes] = arr.view(np.uint8)
            else:
                st = self.get_buffer("staging", arr.nbytes)
                taken.append(("staging", st))
                st.view[: arr.nbytes] = arr.view(np.uint8)
                args.stages[b.param] = st
        return args

    def _descriptor_set(self, spk, prog: Program, args: _LaunchArgs):
        """A descriptor set of the launch's buffers (freed by the pool reset after the launch)."""
        vk, dev = self.vk, self.device
        sets = vk.vkAllocateDescriptorSets(dev, vk.VkDescriptorSetAllocateInfo(
            descriptorPool=self.desc_pool, descriptorSetCount=1, pSetLayouts=[prog.set_layout]))
        dset = sets[0]
        if spk.buffers:
            infos = [vk.VkDescriptorBufferInfo(buffer=args.bufs[b.param].handle, offset=args.ranges[b.param][0],
                                               range=max(4, args.ranges[b.param][1])) for b in spk.buffers]
            writes = [vk.VkWriteDescriptorSet(dstSet=dset, dstBinding=b.binding, descriptorCount=1,
                                              descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              pBufferInfo=[info]) for b, info in zip(spk.buffers, infos)]
            vk.vkUpdateDescriptorSets(dev, len(writes), writes, 0, None)
        return dset

    def _record(self, spk, prog: Program, pipe, dset, push: bytes, args: _LaunchArgs, groups: tuple[int, ...],
                repeat: int) -> None:
        """The launch's command buffer: copies in, ``repeat`` timed dispatches, copies out, host visibility."""
        vk, cmd = self.vk, self.cmd
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        for name, st in args.stages.items():
            n = args.host[name].nbytes
            if n:
                vk.vkCmdCopyBuffer(cmd, st.handle, args.bufs[name].handle, 1, [vk.VkBufferCopy(size=n)])
        if args.stages:
            self._barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT
                          | vk.VK_ACCESS_SHADER_WRITE_BIT)
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, prog.pipeline_layout, 0, 1, [dset],
                                   0, None)
        if spk.push_size:
            pdata = self.ffi.new("char[]", push)
            vk.vkCmdPushConstants(cmd, prog.pipeline_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, spk.push_size,
                                  pdata)
        self._record_dispatches(cmd, groups, repeat)
        if args.stages:
            self._barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                          vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_READ_BIT)
            for name in (b.param for b in spk.buffers if not b.readonly and b.param in args.stages):
                n = args.host[name].nbytes
                if n:
                    vk.vkCmdCopyBuffer(cmd, args.bufs[name].handle, args.stages[name].handle, 1,
                                       [vk.VkBufferCopy(size=n)])
        # make device writes visible to the host mapping before the fence signals
        self._barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT | vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      vk.VK_ACCESS_TRANSFER_WRITE_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT,
                      vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)
        vk.vkEndCommandBuffer(cmd)

    def _record_dispatches(self, cmd, groups: tuple[int, ...], repeat: int) -> None:
        """``repeat`` dispatches, each seeing the previous one's writes, between two timestamps (when supported)."""
        vk, qp = self.vk, self.query_pool
        if qp is not None:
            vk.vkCmdResetQueryPool(cmd, qp, 0, 2)
            # BOTTOM_OF_PIPE: written once every earlier command (the staging copies) has finished, so the
            # interval holds the dispatches only (TOP_OF_PIPE may be written while the copies still run)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 0)
        for r in range(repeat):
            if r:  # back-to-back dispatches of the same kernel must see each other's writes
                self._barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                              vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                              vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
            vk.vkCmdDispatch(cmd, *groups)
        if qp is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1)

    def fence_limit(self) -> float:
        """Seconds a wait for a submission may take before its work counts as never finishing: ``IRON_VULKAN_TIMEOUT``
        if set, else 120 on a GPU and 600 on a CPU device. lavapipe compiles a pipeline (LLVM) at its first dispatch,
        inside the wait: cold, attn_prefill's bf16 D 128 variant took 191 s on an AVX2 host before 2026-12-04's
        change to its loops (73 s with AVX-512), so 120 s failed a healthy kernel there."""
        default = "600" if self.phys.type == "cpu" else "120"
        return float(os.environ.get("IRON_VULKAN_TIMEOUT", default))

    def _submit_and_wait(self, entry: str = "kernel") -> None:
        """Submit the recorded command buffer and wait for it, at most ``fence_limit()`` seconds:
        a dispatch that never finishes (an endless loop) is a LaunchError, not a hung process. The device then
        still runs it, so this context refuses every later launch."""
        vk, dev = self.vk, self.device
        if self.lost:
            raise LaunchError(self.lost)
        vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(commandBufferCount=1, pCommandBuffers=[self.cmd])],
                         self.fence)
        limit = self.fence_limit()
        try:
            vk.vkWaitForFences(dev, 1, [self.fence], vk.VK_TRUE, int(limit * 1e9))
        except vk.VkTimeout:
            self.lost = (f"{entry} did not finish within {limit:g} s on Vulkan device {self.phys.name} (an endless "
                         "loop?); the device is still running it, so this process cannot use it again "
                         "(IRON_VULKAN_TIMEOUT sets the limit)")
            raise LaunchError(self.lost) from None
        vk.vkResetFences(dev, 1, [self.fence])

    def _gpu_time(self, repeat: int) -> float | None:
        """Milliseconds per dispatch between the two timestamps of the last submission, or None without them."""
        vk, qp = self.vk, self.query_pool
        if qp is None:
            return None
        out = self.ffi.new("uint64_t[2]")
        vk.vkGetQueryPoolResults(self.device, qp, 0, 2, 16, out, 8,
                                 vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT)
        mask = (1 << self.phys.timestamp_bits) - 1 if self.phys.timestamp_bits < 64 else 2**64 - 1
        ticks = (int(out[1]) - int(out[0])) & mask
        return ticks * self.timestamp_period_ns / 1e6 / repeat

    def _barrier(self, cmd, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
        vk = self.vk
        mb = vk.VkMemoryBarrier(srcAccessMask=src_access, dstAccessMask=dst_access)
        vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, [mb], 0, None, 0, None)

    # -- teardown -------------------------------------------------------------------------------------------------

    def destroy(self) -> None:
        """Release every Vulkan object (idempotent); registered with atexit by the backend. Not on a lost device (a
        dispatch that never finished): waiting for it can crash the process, so its objects go with the process."""
        with self.lock:
            if self._destroyed or self.lost:
                return
            self._destroyed = True
            self._destroy()

    def _destroy(self) -> None:
        vk, dev = self.vk, self.device
        vk.vkDeviceWaitIdle(dev)
        write_pipeline_cache(self)
        for prog in self.programs.values():
            for pipe in prog.pipelines.values():
                vk.vkDestroyPipeline(dev, pipe, None)
            vk.vkDestroyPipelineLayout(dev, prog.pipeline_layout, None)
            vk.vkDestroyDescriptorSetLayout(dev, prog.set_layout, None)
            vk.vkDestroyShaderModule(dev, prog.module, None)
        self.programs.clear()
        for bufs in self.pool.values():
            for buf in bufs:
                if buf.view is not None:
                    vk.vkUnmapMemory(dev, buf.memory)
                vk.vkDestroyBuffer(dev, buf.handle, None)
                vk.vkFreeMemory(dev, buf.memory, None)
        self.pool.clear()
        vk.vkDestroyPipelineCache(dev, self.pipeline_cache, None)
        if self.query_pool is not None:
            vk.vkDestroyQueryPool(dev, self.query_pool, None)
        vk.vkDestroyDescriptorPool(dev, self.desc_pool, None)
        vk.vkDestroyFence(dev, self.fence, None)
        vk.vkDestroyCommandPool(dev, self.cmd_pool, None)
        vk.vkDestroyDevice(dev, None)
        vk.vkDestroyInstance(self.instance, None)
