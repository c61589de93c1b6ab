"""The Vulkan backend: SPIR-V from ``iron.codegen.spirv``, run through the ``vulkan`` PyPI package (cffi over the
system loader), so any Vulkan 1.1+ device runs Iron kernels with no SDK or shader compiler installed.

Arrays are NumPy arrays (C-contiguous), copied in before each launch and, for buffers the kernel writes, copied back
after it (such launches wait), or ``iron.Array``s in device memory (``iron.asarray(x, backend="vulkan")``): a launch
on arrays alone is recorded and not waited for (``vulkan_queue.py``); ``synchronize()`` and ``x.numpy()`` wait.

Device choice: ``IRON_VULKAN_DEVICE`` (an index into the loader's device list, or a case-insensitive substring of
the device name), else discrete GPU > integrated > virtual > CPU.

Timing: every launch records two timestamp queries around its dispatches; ``backend.last_gpu_time_ms`` holds the
GPU time of the last launch (dispatch only, no copies; None where the queue cannot time), and
``backend.time_launch(variant, arrays, scalars, grid, group, repeat=n)`` records ``n`` back-to-back dispatches in one
submission and returns the mean GPU time of one, in ms.

Elementwise kernels on a 1-D grid run through their *lanes module* (``codegen.spirv.lanes_plan``): each invocation
handles 4 consecutive elements (8 for 16-bit buffers), with the loads of all of them in flight at once;
``IRON_VULKAN_VECTORIZE=0`` turns it off, and a kernel whose lanes module is over ``LANES_MAX_WORDS`` keeps the plain
one.

Nothing here touches Vulkan until a launch, ``iron device`` or ``probe()`` asks; ``compile()`` needs no device.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

import numpy as np

from ..errors import CompileError, IronError, LaunchError
from ..ir import types as t
from .arrays import check_array_backend, is_iron_array
from .artifacts import Emitted, write_spirv
from .backend import Backend, LaunchRecorder
from .vulkan_shared import launch_lengths

_PROBE: list[str | None] = []
#: the largest lanes module (in 32-bit words) a launch uses; a kernel whose lanes module is bigger runs its plain one.
#: The lanes module holds the kernel's body 2 x width times (the full path and the tail: 8 or 16 copies), and a
#: driver's compile time grows faster than the module: fuzz seed 707002911 (149 loops after unrolling) has a plain
#: module of 25,292 words, which lavapipe compiled and ran in 1.9 s, and a lanes module of 197,761, which it had not
#: compiled after 150 s (a LaunchError past IRON_VULKAN_TIMEOUT), its LLVM then overflowing its stack and killing
#: the process after about 170 s; the lanes modules of its first 40 and 80 loops, 54,480 and 106,824 words, took
#: 8.4 s and 35 s. The biggest lanes module of a kernel Iron ships or tests is 21,291 words (float_rem in f16).
LANES_MAX_WORDS = 1 << 16
#: PCI vendor ids of the GPUs Iron knows by name
_VENDORS = {0x10DE: "nvidia", 0x1002: "amd", 0x8086: "intel", 0x106B: "apple"}


def probe() -> str | None:
    """None when a Vulkan device with a compute queue can be used here, else why not (cached per process)."""
    if not _PROBE:
        _PROBE.append(_probe())
    return _PROBE[0]


def _probe() -> str | None:
    from .vulkan_select import choose_device, create_instance, list_devices, load_vulkan

    try:
        vk = load_vulkan()
    except LaunchError as e:
        return e.message
    try:
        instance = create_instance(vk)
    except Exception as e:  # VkErrorIncompatibleDriver etc.: a loader without any ICD
        return f"no Vulkan driver (vkCreateInstance: {type(e).__name__})"
    try:
        devices = list_devices(vk, instance)
        if not devices:
            return "no Vulkan device (the loader found no driver/ICD; install e.g. mesa-vulkan-drivers)"
        choose_device(devices)
    except LaunchError as e:
        return e.message
    except Exception as e:
        return f"Vulkan device enumeration failed ({type(e).__name__}: {e})"
    finally:
        vk.vkDestroyInstance(instance, None)
    return None


#: bytes l2_flush overwrites: 5x the H200's 50 MB L2, more than any GPU's last-level cache of 2026
FLUSH_BYTES = 256 << 20


class VulkanBackend(Backend):
    name = "vulkan"
    timer_name = "Vulkan timestamp queries"
    writes_artifacts = True
    #: recordings made while set write a timestamp per dispatch (``g.timings()``; vulkan_record.py): a tool's switch
    profile_recordings = False

    def __init__(self) -> None:
        self._ctx = None
        self._queue = None
        self._timer = LaunchRecorder()
        self._flush = None  # (the buffer, the function) of l2_flush
        self._init_lock = threading.RLock()  # two threads' first launches create one context, one queue

    # -- device ---------------------------------------------------------------------------------------------------

    def context(self):
        """The Vulkan context (instance, device, queue, caches), created on first use and destroyed at exit."""
        ctx = self._ctx
        if ctx is not None:
            return ctx
        with self._init_lock:
            if self._ctx is None:
                reason = probe()
                if reason:
                    raise LaunchError(f"the vulkan backend is not available: {reason}")
                from .vulkan_device import VulkanContext

                self._ctx = VulkanContext()
                atexit.register(self.close)
            return self._ctx

    def close(self) -> None:
        """Destroy every Vulkan object now (also runs at interpreter exit); a later launch starts afresh (arrays made
        before are refused then)."""
        with self._init_lock:
            ctx, self._ctx = self._ctx, None
            queue, self._queue = self._queue, None
            self._flush = None  # its buffer belongs to the context destroyed here
        if ctx is not None:
            with ctx.lock:
                if ctx.lost:  # a dispatch never finished: waiting on or destroying the device can crash the process
                    return  # (seen as SIGSEGV in vkDeviceWaitIdle); its objects are left to the process's exit
                if queue is not None:
                    ctx.vk.vkDeviceWaitIdle(ctx.device)
                    queue.destroy()
                ctx.destroy()

    def queue(self):
        """The device arrays' recording queue (``vulkan_queue.VulkanQueue``), created on first use."""
        queue = self._queue
        if queue is not None:
            return queue
        with self._init_lock:
            if self._queue is None:
                from .vulkan_queue import VulkanQueue

                self._queue = VulkanQueue(self.context())
            return self._queue

    def graph(self):
        """A recording of launches into one replayable command buffer (``iron.graph``; vulkan_record.py)."""
        from .vulkan_record import VulkanGraph

        return VulkanGraph(self)

    def array_store(self, nbytes: int):
        from .vulkan_queue import VulkanStore

        return VulkanStore(self.queue(), nbytes)

    def synchronize(self) -> None:
        if self._queue is not None:
            self._queue.synchronize()

    def is_gpu(self) -> bool:
        return self.context().phys.type in ("discrete", "integrated", "virtual")

    def vendor(self) -> str | None:
        return _VENDORS.get(int(self.context().props.vendorID))

    def copy_gbps(self) -> float | None:
        return self.queue().copy_gbps()

    def autotune_tag(self) -> str:
        """What else than the device decides the code a variant compiles to (autotune keys its choices by it): the
        matrix-fragment path, ``IRON_VULKAN_COOPMAT``."""
        from .vulkan_device import coopmat_mode

        return coopmat_mode()

    def info(self) -> dict[str, Any]:
        """What ``iron device`` shows: name, type, API version, driver, subgroup size, limits, features."""
        return self.context().info()

    def simd_width(self) -> int:
        """The device's subgroup size (what ``simd_size()`` returns in kernels): 8 on lavapipe, 32 on NVIDIA."""
        return self.context().subgroup_size

    @property
    def last_gpu_time_ms(self) -> float | None:
        return None if self._ctx is None else self._ctx.last_gpu_time_ms

    # -- compile --------------------------------------------------------------------------------------------------

    def emitted(self, variant, atomic_float_add: bool = True, uniform_control_flow: bool = False,
                float64: bool = False, denorm_preserve: bool = False, lanes: bool = False, ieee_specials: bool = True,
                rounding_rte: bool = False, simd_width: int = 32, coopmat: frozenset[str] = frozenset(),
                coopmat_emulation: bool = False):
        """The variant's SpirvKernel (emitted once per device-dependent mode, cached in ``variant.artifacts``).
        ``atomic_float_add=False`` lowers f32 atomic_add to a compare-and-swap loop for devices without
        ``shaderBufferFloat32AtomicAdd``; ``uniform_control_flow`` declares SubgroupUniformControlFlowKHR where the
        device has it; ``float64`` computes sin, cos and float % in double where the device has 64-bit floats;
        ``denorm_preserve`` declares DenormPreserve for f32 where the device can keep subnormals; ``lanes``
        asks for the lanes module (None when the kernel has none); ``ieee_specials``/``rounding_rte`` declare the
        float-controls modes the device supports; ``simd_width`` is the device's subgroup size (the fallback of
        matrix fragments is cut for it); ``coopmat`` the fragment dtypes the device multiplies as cooperative
        matrices (``coopmat_emulation``: emulated, for tests); compile/source show the portable form."""
        key = ("spirv", atomic_float_add, uniform_control_flow, float64, denorm_preserve, lanes, ieee_specials,
               rounding_rte, simd_width, coopmat, coopmat_emulation)
        if key in variant.artifacts:
            return variant.artifacts[key]
        try:
            from ..codegen.spirv import emit_spirv, lanes_plan
        except ImportError:
            raise LaunchError("the SPIR-V emitter (iron.codegen.spirv) is not available in this build") from None
        plan = lanes_plan(variant.kernel) if lanes else None
        spk = None if lanes and plan is None else emit_spirv(
            variant.kernel, atomic_float_add=atomic_float_add, uniform_control_flow=uniform_control_flow,
            float64=float64, denorm_preserve=denorm_preserve, lanes=plan, ieee_specials=ieee_specials,
            rounding_rte=rounding_rte, simd_width=simd_width, coopmat=coopmat, coopmat_emulation=coopmat_emulation)
        variant.artifacts[key] = spk
        return spk

    def _device_module(self, variant, grid: tuple[int, int, int] | None = None):
        """The module a launch on ``grid`` runs: the lanes module for a 1-D grid where the kernel has one (and
        ``IRON_VULKAN_VECTORIZE`` is not 0), else the plain one; matrix fragments as cooperative matrices where the
        device has them (``IRON_VULKAN_COOPMAT``: 0 the scalar fallback, ``emulate`` their lowering with the
        matrices emulated, on any device)."""
        import os

        from .vulkan_device import coopmat_mode

        ctx = self.context()
        has = ctx.has
        mode = coopmat_mode()
        coopmat = {"auto": ctx.coopmat, "emulate": frozenset({"f16", "bf16"})}.get(mode, frozenset())
        modes = dict(atomic_float_add=has["atomic_float_add"], float64=has["float64"],
                     uniform_control_flow=has["subgroup_uniform_control_flow"], denorm_preserve=has["denorm_preserve"],
                     ieee_specials=has["ieee_specials"], rounding_rte=has["rounding_rte"],
                     simd_width=ctx.subgroup_size, coopmat=coopmat, coopmat_emulation=mode == "emulate")
        if grid is not None and grid[1] == 1 and grid[2] == 1 and os.environ.get("IRON_VULKAN_VECTORIZE", "1") != "0":
            spk = self.emitted(variant, lanes=True, **modes)
            if spk is not None and len(spk.words) // 4 <= LANES_MAX_WORDS:
                refuse_missing_dtypes(variant.kernel, spk, has, ctx.phys.name)
                return spk
        spk = self.emitted(variant, **modes)
        refuse_missing_dtypes(variant.kernel, spk, has, ctx.phys.name)
        return spk

    def source(self, variant, target: str | None = None) -> str:
        from ..codegen.spirv import disassemble

        return disassemble(self.emitted(variant).words)

    def compile(self, variant, target: str | None = None) -> bytes:
        """The SPIR-V binary (little-endian words) of a variant; needs no Vulkan device."""
        return bytes(self.emitted(variant).words)

    # -- launch ---------------------------------------------------------------------------------------------------

    def check_array(self, param: str, value: Any, where) -> Any:
        if is_iron_array(value):
            check_array_backend("vulkan", param, value, where)
            if self._queue is None or value.store.queue is not self._queue:
                raise LaunchError(f"argument '{param}' was made on a Vulkan context that has been closed", where(),
                                  "make the array again after closing the backend")
            from .vulkan_queue import ArrayArg

            return ArrayArg(value)
        if not isinstance(value, np.ndarray):
            mod = type(value).__module__
            raise LaunchError(f"argument '{param}' is a {mod}.{type(value).__name__}; the vulkan backend takes "
                              "NumPy arrays", where(), "convert with .cpu().numpy() or np.asarray")
        if not value.flags.c_contiguous:
            raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                              f"pass np.ascontiguousarray({param})")
        return value

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        self.run_spirv(self._device_module(variant, grid), arrays, scalars, grid, group)

    def time_launch(self, variant, arrays, scalars, grid, group, repeat: int = 10) -> float | None:
        """Run the variant ``repeat`` times back to back in one submission; the mean GPU ms of one dispatch (None
        where the device has no timestamps). The arrays end up as after ``repeat`` launches."""
        return self.run_spirv(self._device_module(variant, grid), arrays, scalars, grid, group, repeat=repeat)

    def run_spirv(self, spk, arrays: dict[str, np.ndarray], scalars: dict[str, Any], grid: tuple[int, int, int],
                  group: tuple[int, int, int], repeat: int = 1) -> float | None:
        """Run a SpirvKernel on NumPy arrays (by parameter name); returns the GPU ms per dispatch, or None."""
        ctx = self.context()
        host, dev = {}, {}
        for b in spk.buffers:
            arr = arrays.get(b.param)
            if arr is None:
                raise LaunchError(f"{spk.entry}: no array for buffer '{b.param}'")
            if not isinstance(arr, np.ndarray):
                dev[b.param] = arr
                continue
            if not b.readonly and not arr.flags.writeable:
                raise LaunchError(f"argument '{b.param}' is read-only but {spk.entry} writes to it")
            host[b.param] = arr.reshape(-1)
        push = _pack_push(spk, scalars, grid)  # the exact grid, also for a lanes module
        lengths = launch_lengths(spk, scalars)  # of run-time sized shared arrays: one pipeline per lengths
        lanes = getattr(spk, "lanes", 1)
        if lanes > 1:  # a lanes module: one invocation per `lanes` elements of axis 0
            grid = (-(-grid[0] // lanes), grid[1], grid[2])
        timing = self._timer.samples is not None  # inside gpu_time: each launch is dispatched and timed alone
        if dev and not host and repeat == 1 and not timing:  # device arrays alone: recorded, not waited for
            self._queue.enqueue(spk, dev, push, tuple(grid), tuple(group), lengths)
            self._timer.record(None)
            return None
        if dev:
            return self._run_mixed(spk, host, dev, push, grid, group, repeat, lengths)
        try:
            ms = ctx.dispatch(spk, host, push, tuple(grid), tuple(group), repeat=repeat, lengths=lengths)
        except IronError:
            raise
        except Exception as e:  # a Vulkan error the checks above did not foresee: name the kernel, not our frames
            raise LaunchError(f"Vulkan launch of {spk.entry} failed: {type(e).__name__}: {e}") from None
        self._timer.record(None if ms is None else ms * 1e-3)
        return ms

    def fast_launcher(self, kfn, variant, args, bound, grid, group, min_sizes):
        """A launcher for repeat calls on Vulkan arrays shaped like this one (``vulkan_fast``), or None."""
        import os

        if os.environ.get("IRON_VULKAN_FAST", "1") == "0":
            return None
        from .vulkan_fast import make_fast_launch

        return make_fast_launch(self, kfn, variant, args, grid, group, min_sizes)

    def direct_launcher(self, fast, fallback):
        """The compiled launcher's stand-in for ``k[grid]`` (``vulkan_launch.c``'s ``direct``); None for the Python
        launcher, which has none."""
        direct = getattr(fast, "direct", None)
        return None if direct is None else direct(fallback)

    def _run_mixed(self, spk, host, dev, push, grid, group, repeat, lengths=()) -> float | None:
        """A launch on NumPy arrays and device arrays: after the queued work, device arrays bound in place (a
        misaligned view goes through a host copy), NumPy ones copied; waits."""
        q = self._queue
        with q.lock:
            q.synchronize()
            bound, copied = {}, {}
            for name, a in dev.items():
                if a.offset % q.align:
                    copied[name] = host[name] = a.array.numpy().reshape(-1)
                else:
                    bound[name] = (a.buf, a.offset, a.nbytes)
            try:
                ms = self.context().dispatch(spk, host, push, tuple(grid), tuple(group), repeat=repeat, bound=bound,
                                             lengths=lengths)
            except IronError:
                raise
            except Exception as e:
                raise LaunchError(f"Vulkan launch of {spk.entry} failed: {type(e).__name__}: {e}") from None
            for b in spk.buffers:
                if b.param in copied and not b.readonly:
                    a = dev[b.param]
                    a.array.store.write(a.offset, copied[b.param].view(np.uint8))
        self._timer.record(None if ms is None else ms * 1e-3)
        return ms

    def pipeline_statistics(self, variant, group: int) -> list:
        """What the driver made of ``variant``'s pipeline for 1-D groups of ``group`` (the module a 1-D launch runs):
        ``vulkan_stats.Executable`` s; LaunchError where the device offers no statistics (vulkan_stats.py)."""
        from .vulkan_stats import pipeline_statistics

        return pipeline_statistics(self.context(), self._device_module(variant, (group, 1, 1)), (group, 1, 1))

    def gpu_time(self, fn, repeats: int, before=None) -> float | None:
        """Median GPU seconds of ``fn`` from the Vulkan timestamp queries of every dispatch it makes (summed);
        ``before`` (e.g. ``l2_flush()``) runs ahead of each repeat, untimed."""
        return self._timer.median(fn, repeats, before)

    def recording(self) -> bool:
        return self._queue is not None and self._queue.recording is not None

    def l2_flush(self):
        """On a GPU device, a function that overwrites ``FLUSH_BYTES`` of device memory (vkCmdFillBuffer) and waits:
        the autotuner's cold timings of kernels that stream their inputs from memory (the decode step's GEMVs), as
        CUDA's. None on a CPU device (lavapipe), where nothing is tuned."""
        if not self.is_gpu():
            return None
        if self._flush is None:
            store, queue = self.array_store(FLUSH_BYTES), self.queue()

            def flush() -> None:
                queue.fill(store.buf, store.nbytes)
                queue.synchronize()

            self._flush = (store, flush)
        return self._flush[1]

    # -- ahead-of-time builds -------------------------------------------------------------------------------------

    def artifacts(self, variant, targets=(), metallib: bool = False) -> list[Emitted]:
        """``.spv``: the portable SPIR-V module with its bindings, push constants and spec ids."""
        return [write_spirv(variant)]


def _pack_push(spk, scalars: dict[str, Any], grid: tuple[int, int, int]) -> bytes:
    """The push-constant block: Iron scalars by parameter name, and the exact grid sizes by ``SpirvPush.axis`` (never
    by name: a scalar may be called ``iron_n0`` or ``iron_n5``)."""
    import struct

    data = bytearray(spk.push_size)
    codes = {"i32": "<i", "u32": "<I", "f32": "<f", "i64": "<q", "u64": "<Q", "f64": "<d"}
    for p in spk.push:
        axis = getattr(p, "axis", None)
        if axis is not None:
            value = int(grid[axis])
        elif p.name in scalars:
            value = scalars[p.name]
        else:
            raise LaunchError(f"{spk.entry}: no value for push constant '{p.name}'")
        code = codes.get(str(p.dtype))
        if code is None:
            raise LaunchError(f"{spk.entry}: push constant '{p.name}' has unsupported type {p.dtype}")
        struct.pack_into(code, data, p.offset, value.item() if isinstance(value, np.generic) else value)
    return bytes(data)


#: device features the wide and narrow dtypes need (tracker issue 15), and the dtypes that need them
_DTYPE_FEATURES = {"float64": (t.f64,), "int64": (t.i64, t.u64), "int8": (t.i8, t.u8), "storage8": (t.i8, t.u8),
                   "int64_atomics": (t.i64, t.u64), "int64_shared_atomics": (t.i64, t.u64)}


def refuse_missing_dtypes(kernel, spk, has: dict[str, bool], device: str) -> None:
    """A CompileError at the first op using f64, i64/u64 or i8/u8 (an atomic on i64/u64, for the atomics' features)
    when the module needs a feature the device lacks (shaderFloat64, shaderInt64, shaderInt8 /
    storageBuffer8BitAccess, shaderBuffer/SharedInt64Atomics)."""
    for feat, dtypes in _DTYPE_FEATURES.items():
        if feat in spk.features and not has.get(feat, False):
            atomics = feat.startswith("int64_") and feat.endswith("atomics")
            op = next((o for o in kernel.body.walk() if (not atomics or o.opcode.startswith("atomic"))
                       and (any(_uses(v.type, dtypes) for v in o.operands)
                            or o.result is not None and _uses(o.result.type, dtypes))), None)
            what = f"atomic_add on {'/'.join(map(str, dtypes))}" if atomics else "/".join(map(str, dtypes))
            raise CompileError(f"{what} is not supported on Vulkan device {device} (it lacks the '{feat}' feature)",
                               op.loc if op is not None else kernel.loc,
                               "run the kernel on another device or backend, or use 32-bit types")


def _uses(ty, dtypes: tuple[t.ScalarType, ...]) -> bool:
    return ty in dtypes or isinstance(ty, t.BufferType) and ty.elem in dtypes
