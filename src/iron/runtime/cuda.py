"""The CUDA backend on NVIDIA's ``cuda.core``: NVRTC compile (disk-cached), module cache, a dedicated non-blocking
stream, a buffer pool with pinned staging for NumPy arrays, CUDA graphs, events for timing.

Arrays: torch CUDA tensors and CuPy (``__cuda_array_interface__``) arrays are used in place, and launches on torch
tensors go to torch's current stream so they order with the surrounding torch work; NumPy arrays are copied in
through pinned buffers and copied back (the launch then synchronises). Nothing here is imported until a CUDA launch
or ``iron device`` asks for it, and compiling (``k.compile("cuda")``) needs no GPU at all.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import IronError, LaunchError
from ..interp import shared_sizes
from . import cuda_align
from .arrays import check_array_backend, is_iron_array
from .artifacts import Emitted, write_cuda
from .backend import Backend
from .cache import cache_key, cached_binary
from .cuda_fast import make_fast_launch


def pdl_enabled() -> bool:
    """Programmatic dependent launch (sm_90+): on unless ``IRON_CUDA_PDL=0``, where cuda.core can ask for it (1.2+;
    ``IRON_CUDA_PDL=1`` with an older one is a LaunchError at launch). Kernels are then emitted waiting for the
    previous grid first and letting the next be scheduled early (``emit_cuda(pdl=True)``; a target before sm_90 gets
    the plain source), and every launch of such a kernel (full path, both fast launchers, graph captures) sets
    programmatic stream serialization, so that on a decode step's chain of small kernels each one's launch and ramp
    overlap the previous one's run. Measured on the H200 (2026-12-03, the 1B-shaped decode step as a CUDA graph, one
    machine, both orders): 1.174 -> 1.081 and 1.099 -> 0.970 ms per step; generate() 974 -> 1074 tokens/s."""
    value = os.environ.get("IRON_CUDA_PDL")
    if value is not None:
        return value == "1"
    return _pdl_supported()


@functools.cache
def _pdl_supported() -> bool:
    """Whether this cuda.core's LaunchConfig takes programmatic_stream_serialization (1.2+)."""
    try:
        from cuda.core import LaunchConfig

        LaunchConfig(grid=1, block=1, programmatic_stream_serialization=True)
    except Exception:  # noqa: BLE001 - not installed, too old (TypeError), or unusable: PDL off
        return False
    return True


def probe() -> str | None:
    """None when a CUDA device can be used here, else why not."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return "cuda-bindings is not installed (pip install 'wh-iron[cuda]')"
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return f"no CUDA driver or device (cuInit: {err.name})"
        err, count = driver.cuDeviceGetCount()
        if int(err) != 0 or count == 0:
            return "no CUDA device"
    except Exception as e:  # libcuda missing: the bindings raise on first use
        return f"no CUDA driver ({type(e).__name__}: {e})"
    return None


@dataclass
class DeviceArg:
    """A buffer argument already on the device (torch / CuPy): its pointer, used in place."""

    ptr: int
    size: int
    nbytes: int
    torch: bool


@dataclass
class HostArg:
    """A NumPy buffer argument: copied to a pooled device buffer before the launch and back after it."""

    array: np.ndarray

    @property
    def size(self) -> int:
        return self.array.size


class _Pool:
    """Free lists of device buffers and pinned host staging buffers, by size (rounded up to 256 bytes)."""

    def __init__(self, device):
        from cuda.core import LegacyPinnedMemoryResource

        self.device = device
        self.pinned_mr = LegacyPinnedMemoryResource()
        self.free: dict[tuple[str, int], list] = {}

    def get(self, kind: str, nbytes: int, stream):
        size = max(256, -(-nbytes // 256) * 256)
        bucket = self.free.get((kind, size))
        if bucket:
            return bucket.pop()
        if kind == "device":
            return self.device.memory_resource.allocate(size, stream=stream)
        return self.pinned_mr.allocate(size)

    def put(self, kind: str, buf) -> None:
        self.free.setdefault((kind, buf.size), []).append(buf)


def _host_view(buf, nbytes: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(int(buf.handle)))


class CudaBackend(Backend):
    name = "cuda"
    timer_name = "CUDA events"
    writes_artifacts = True
    torch_device = True

    def __init__(self) -> None:
        self._dev = None
        self.stream = None
        self.arch = os.environ.get("IRON_CUDA_ARCH", "sm_90")
        self.capture = None  # a GraphBuilder while iron.cuda.graph() is recording
        self.capture_keep: list = []  # device memory made while recording, handed to the graph that uses it
        self._side = None  # a stream for allocations while Iron's stream is being captured
        self._flush = None  # l2_flush's function, made at first use
        self.last_launch: tuple | None = None  # (variant, grid, group) of the last full-path launch
        self._streams: dict[int, Any] = {}
        self._tmaps = None  # the copy engine's descriptors (cuda_tma.TensorMaps), made at the first launch needing one

    # -- device ---------------------------------------------------------------------------------------------------

    def device(self):
        if self._dev is None:
            reason = probe()
            if reason:
                raise LaunchError(f"the cuda backend is not available: {reason}")
            from cuda.core import Device, StreamOptions

            dev = Device(int(os.environ.get("IRON_CUDA_DEVICE", "0")))
            dev.set_current()
            major, minor = dev.compute_capability
            self.arch = os.environ.get("IRON_CUDA_ARCH", f"sm_{major}{minor}")
            self.stream = dev.create_stream(options=StreamOptions(nonblocking=True))
            self.pool = _Pool(dev)
            self._dev = dev
        return self._dev

    def info(self) -> dict[str, Any]:
        """What ``iron device`` shows for the current CUDA device."""
        dev = self.device()
        p = dev.properties
        from cuda.bindings import driver

        err, total = driver.cuDeviceTotalMem(dev.device_id)
        return {
            "name": dev.name, "arch": self.arch, "sms": p.multiprocessor_count,
            "memory_gib": round(total / 2**30, 1) if int(err) == 0 else None,
            "sm_clock_mhz": p.clock_rate // 1000, "memory_clock_mhz": p.memory_clock_rate // 1000,
            "memory_bus_bits": p.global_memory_bus_width, "l2_mib": round(p.l2_cache_size / 2**20, 1),
            "max_shared_per_group_kib": p.max_shared_memory_per_block_optin // 1024,
            "max_threads_per_group": p.max_threads_per_block, "warp_size": p.warp_size,
            "features": ["f16", "bf16", "atomics", "simd-shuffle", "cuda-graphs"],
        }

    def describe(self) -> str:
        info = self.info()
        return (f"{info['name']} ({info['arch']}): {info['sms']} SMs, {info['memory_gib']} GiB, "
                f"{info['sm_clock_mhz']} MHz SM / {info['memory_clock_mhz']} MHz memory, L2 {info['l2_mib']} MiB, "
                f"shared memory {info['max_shared_per_group_kib']} KiB per group, warp {info['warp_size']}; "
                f"features: {', '.join(info['features'])}")

    def simd_width(self) -> int:
        return 32

    # -- compile --------------------------------------------------------------------------------------------------

    def emitted(self, variant, arch: str | None = None):
        """The CUDA source of a variant for ``arch`` (default: this device's): with programmatic dependent launch's
        prologue where it is on and the target has griddepcontrol (sm_90+), so ``compile(target="sm_80")`` works."""
        from ..codegen import emit_cuda
        from ..codegen.cfamily.cuda import pdl_capable

        arch = arch or self.arch
        pdl = pdl_enabled() and pdl_capable(arch)
        key = ("cuda-src", arch, pdl)  # the compile cache key hashes the source, which differs
        src = variant.artifacts.get(key)
        if src is None:
            src = variant.artifacts[key] = emit_cuda(variant.kernel, arch=arch, pdl=pdl)
        return src

    def source(self, variant, target: str | None = None) -> str:
        return self.emitted(variant, target).source

    def compile(self, variant, target: str | None = None) -> bytes:
        """The sm_XX cubin (or compute_XX PTX) of a variant; needs NVRTC, not a GPU. Disk-cached."""
        from ..codegen import nvrtc

        arch = target or self.arch
        src = self.emitted(variant, arch)
        if src.arch is not None and arch in ("sm_90", "sm_90a"):  # wgmma source: the architecture-specific target
            arch = src.arch
        options = nvrtc.default_options()
        key = cache_key(self.name, src.source, arch, options, nvrtc.nvrtc_version())
        return cached_binary("cuda", key, lambda: nvrtc.compile_cuda(src, arch=arch, options=options))

    def function(self, variant):
        """The loaded kernel of a variant (module cache in memory, per arch and FMA setting)."""
        from ..codegen.nvrtc import fmad_enabled

        self.device()
        key = (f"{self.name}-fn", self.arch, fmad_enabled(), pdl_enabled())
        fn = variant.artifacts.get(key)
        if fn is None:
            from cuda.core import ObjectCode

            src = self.emitted(variant)
            code = ObjectCode.from_cubin(self.compile(variant), name=src.entry)
            vector = code.get_kernel(src.vector.entry) if src.vector is not None else None
            kern = code.get_kernel(src.entry)
            if src.dynamic_shared_bytes or src.runtime_shared:
                self._opt_in_shared(kern, src)
            fn = variant.artifacts[key] = (kern, src, vector)
        return fn

    def _opt_in_shared(self, kern, src) -> None:
        """Allow the kernel more than 48 KiB of dynamic shared memory (CUDA requires an explicit opt-in)."""
        limit = self.device().properties.max_shared_memory_per_block_optin
        if src.runtime_shared:  # sized per launch: allow up to the device's limit, each launch checked (launch)
            self._set_max_dynamic(kern, src, limit - src.shared_bytes)
            return
        if src.dynamic_shared_bytes > limit:
            raise LaunchError(f"{src.kernel} needs {src.dynamic_shared_bytes} bytes of shared memory; this GPU gives "
                              f"a group at most {limit}")
        self._set_max_dynamic(kern, src, src.dynamic_shared_bytes)

    def _set_max_dynamic(self, kern, src, nbytes: int) -> None:
        from cuda.bindings import driver

        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        handle = kern.handle
        if isinstance(handle, driver.CUkernel):  # cuda.core loads modules as libraries: set it per device
            (err,) = driver.cuKernelSetAttribute(attr, nbytes, handle, self.device().device_id)
        else:
            (err,) = driver.cuFuncSetAttribute(handle, attr, nbytes)
        if int(err) != 0:
            raise LaunchError(f"cannot give {src.kernel} {nbytes} bytes of shared memory ({err})")

    def geometry(self, variant, grid, group):
        """(kernel, blocks, block) for a launch: elementwise kernels on a 1-D grid take the vectorised entry
        (``width`` consecutive elements per thread, 16-byte accesses), which the memory system needs to reach its
        bandwidth; everything else runs one thread per grid point."""
        kern, src, vector = self.function(variant)
        if vector is not None and grid[1] == 1 and grid[2] == 1 and os.environ.get("IRON_CUDA_VECTORIZE", "1") != "0":
            threads = -(-grid[0] // src.vector.width)
            return vector, (-(-threads // group[0]), 1, 1), (group[0], 1, 1)
        return kern, tuple(-(-g // b) for g, b in zip(grid, group)), tuple(group)

    def launch_stats(self) -> dict[str, Any] | None:
        """Registers, shared memory and occupancy of the kernel last launched through the full path, with its grid:
        ``occupancy_pct`` (threads resident per multiprocessor, of the maximum), ``groups`` and ``processors``."""
        last = self.last_launch
        if last is None:
            return None
        variant, grid, group = last
        kern, blocks, block = self.geometry(variant, grid, group)
        threads = block[0] * block[1] * block[2]
        stats = self.kernel_stats(variant, threads)
        per_sm = stats.get("vector_blocks_per_sm", stats["blocks_per_sm"]) if kern is not self.function(variant)[0] \
            else stats["blocks_per_sm"]
        props = self.device().properties
        stats.update(occupancy_pct=100.0 * per_sm * threads / props.max_threads_per_multiprocessor,
                     groups=blocks[0] * blocks[1] * blocks[2], processors=props.multiprocessor_count)
        return stats

    def kernel_stats(self, variant, group: int) -> dict[str, Any]:
        """Registers, static shared memory and occupancy for the bench."""
        kern, src, vector = self.function(variant)
        attrs = kern.attributes

        def read(name: str) -> int:  # a property in recent cuda.core, a method in older releases
            v = getattr(attrs, name)
            return int(v() if callable(v) else v)

        stats = {"registers": read("num_regs"), "shared_bytes": read("shared_size_bytes"),
                 "local_bytes": read("local_size_bytes"),
                 "blocks_per_sm": kern.occupancy.max_active_blocks_per_multiprocessor(group, 0)}
        if vector is not None:
            attrs = vector.attributes
            stats.update(vector_entry=src.vector.entry, vector_width=src.vector.width,
                         vector_registers=read("num_regs"),
                         vector_blocks_per_sm=vector.occupancy.max_active_blocks_per_multiprocessor(group, 0))
        return stats

    # -- launch ---------------------------------------------------------------------------------------------------

    def check_array(self, param: str, value: Any, where) -> DeviceArg | HostArg:
        mod = type(value).__module__
        if mod.startswith("torch"):
            if not value.is_cuda:
                raise LaunchError(f"argument '{param}' is a torch tensor on {value.device}; the cuda backend takes "
                                  "CUDA tensors or NumPy arrays", where(), f"move it: {param}.cuda()")
            if not value.is_contiguous():
                raise LaunchError(f"argument '{param}' is not contiguous (strides {tuple(value.stride())})", where(),
                                  f"pass {param}.contiguous()")
            self._check_device(param, value.device.index, where)
            return DeviceArg(value.data_ptr(), value.numel(), value.numel() * value.element_size(), True)
        if is_iron_array(value) and value.backend not in ("cuda", "hip-on-cuda"):
            check_array_backend(self.name, param, value, where)
        cai = getattr(value, "__cuda_array_interface__", None)
        if cai is not None:
            self._check_device(param, _device_of(value, int(cai["data"][0])), where)
            itemsize = np.dtype(cai["typestr"]).itemsize
            shape = tuple(cai["shape"])
            strides = cai.get("strides")
            if strides is not None and tuple(strides) != _c_strides(shape, itemsize):
                raise LaunchError(f"argument '{param}' is not C-contiguous (strides {strides})", where(),
                                  "pass a contiguous copy")
            n = math.prod(shape)
            return DeviceArg(int(cai["data"][0]), n, n * itemsize, False)
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                                  f"pass np.ascontiguousarray({param})")
            return HostArg(value)
        raise LaunchError(f"argument '{param}' is a {mod}.{type(value).__name__}; the cuda backend takes torch CUDA "
                          "tensors, CuPy arrays or NumPy arrays", where())

    def _check_device(self, param: str, index: int | None, where) -> None:
        """Refuse an array on another GPU than the one this backend launches on (issue 16: never a wrong answer or a
        fault from a pointer of another device's address space)."""
        mine = self.device().device_id
        if index is not None and index != mine:
            raise LaunchError(f"argument '{param}' is on CUDA device {index}, but the cuda backend launches on device "
                              f"{mine}", where(), f"move it to device {mine}, or set IRON_CUDA_DEVICE={index}")

    def _stream_for(self, torch_args: bool):
        if self.capture is not None:
            return self.capture
        if torch_args:
            import torch

            handle = torch.cuda.current_stream().cuda_stream
            s = self._streams.get(handle)
            if s is None:
                from cuda.core import Stream

                s = self._streams[handle] = Stream.from_handle(handle)
            return s
        return self.stream

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        from cuda.core import launch

        kern, blocks, block = self.geometry(variant, grid, group)
        src = self.emitted(variant)
        self.last_launch = (variant, grid, group)
        host = [(name, a) for name, a in arrays.items() if isinstance(a, HostArg)]
        stream = self._stream_for(any(isinstance(a, DeviceArg) and a.torch for a in arrays.values()))
        if host and self.capture is not None:
            raise LaunchError("NumPy arrays cannot be used inside iron.cuda.graph(): pass device arrays (torch/CuPy)")
        staged, aligned = {}, {}
        try:
            # device views off a 16-byte boundary run through aligned copies (cuda_align)
            aligned = cuda_align.stage(cuda_align.misaligned(arrays, DeviceArg), arrays, self.device(), stream,
                                       self.capture is not None)
            for name, a in host:
                nbytes = a.array.nbytes
                dev_buf = self.pool.get("device", nbytes, stream)
                pin = self.pool.get("pinned", nbytes, stream)
                _host_view(pin, nbytes)[:] = a.array.reshape(-1).view(np.uint8)
                dev_buf.copy_from(pin, stream=stream)
                staged[name] = (dev_buf, pin, nbytes)
            args = []
            moved = {name: int(buf.handle) for name, buf in aligned.items()}
            moved.update({name: int(entry[0].handle) for name, entry in staged.items()})
            tmaps = iter(self._tensor_maps(src, arrays, moved, scalars, stream, variant.kernel.name))
            for p in src.params:
                if p.kind == "buffer":
                    a = arrays[p.source]
                    args.append(np.uint64(moved[p.source] if p.source in moved else a.ptr))
                elif p.kind == "scalar":
                    args.append(scalars[p.source])
                elif p.kind == "tmap":
                    args.append(np.uint64(next(tmaps)))
                else:
                    args.append(np.int32(grid[p.axis]))
            shmem = src.dynamic_shared_bytes
            if src.runtime_shared:  # shared arrays sized by this launch's values (checked against the device)
                limit = self.device().properties.max_shared_memory_per_block_optin
                shared_sizes.lengths(variant.kernel, scalars, limit, f"this GPU ({self.device().name})",
                                     static=src.shared_bytes)
                shmem = src.launch_shared_bytes(scalars)
            launch(stream, launch_config(src, blocks, block, shmem), kern, *args)
            written = {p.source for p in src.params if p.kind == "buffer" and not p.readonly}
            cuda_align.unstage(aligned, arrays, written, stream)
            if staged:
                for name, (dev_buf, pin, _) in staged.items():
                    if name in written:
                        pin.copy_from(dev_buf, stream=stream)
                stream.sync()
                for name, (_, pin, nbytes) in staged.items():
                    if name in written:
                        arr = arrays[name].array
                        arr.reshape(-1).view(np.uint8)[:] = _host_view(pin, nbytes)
        except IronError:
            raise
        except Exception as e:  # a CUDA error (illegal address, launch failure): name the kernel
            raise LaunchError(f"CUDA launch of {variant.kernel.name} failed: {type(e).__name__}: {e}") from None
        finally:
            for dev_buf, pin, _ in staged.values():
                self.pool.put("device", dev_buf)
                self.pool.put("pinned", pin)

    def _tensor_maps(self, src, arrays, moved, scalars, stream, kernel: str) -> list[int]:
        """The copy engine's descriptors of this launch (``cuda_tma``), in parameter order (``moved``: the address
        of each argument that runs through a copy)."""
        if not src.tensor_maps:
            return []
        buffers = {name: (moved[name] if name in moved else a.ptr, a.size)
                   for name, a in arrays.items() if a is not None}
        handle = None if self.capture is not None else int(stream.handle)  # recording: a GraphBuilder, no handle
        return self.tensor_map_cache().pointers(src.tensor_maps, buffers, scalars, handle, kernel)

    def tensor_map_cache(self):
        """The copy engine's descriptors of this backend (``cuda_tma.TensorMaps``), made at first use."""
        if self._tmaps is None:
            from .cuda_tma import TensorMaps

            self._tmaps = TensorMaps(self.device(), self.stream)
        return self._tmaps

    def fast_launcher(self, kfn, variant, args, bound, grid, group, min_sizes):
        """A fast launcher for repeat calls shaped like this one (see ``cuda_fast``), or None."""
        if self.capture is not None or os.environ.get("IRON_CUDA_FAST", "1") == "0":
            return None
        if self.emitted(variant).runtime_shared:  # the shared size follows the scalars: the full path sizes it
            return None
        try:
            return make_fast_launch(self, kfn, variant, args, bound, grid, group, min_sizes)
        except (OSError, AttributeError):  # no libcuda through ctypes, or an unexpected torch: keep the full path
            return None

    def direct_launcher(self, fast, fallback):
        """The compiled launcher's stand-in for ``k[grid]`` (``cuda_launch.c``'s ``direct``); None for the Python
        launcher, which has none."""
        direct = getattr(fast, "direct", None)
        return None if direct is None else direct(fallback)

    def gpu_time(self, fn, repeats: int, before=None) -> float | None:
        """Median GPU seconds of ``fn`` by CUDA events, the host's launch latency kept out (``cuda_timing``);
        ``before`` (e.g. ``l2_flush()``) runs ahead of each repeat, outside the interval.

        The events, the sleep ahead and ``before`` go to the stream the launches go to: torch's current stream is
        Iron's own for the measurement (launches on Iron's arrays go to Iron's stream, on torch tensors to torch's
        current one), ordered after the work queued before on torch's stream, and that stream after it. Events on
        torch's stream alone measured nothing of launches on Iron arrays (a non-blocking stream beside it): the
        autotuner's choices for the model's kernels were arbitrary on the H200 (2026-12-03: a decode step 1.37 or
        1.99 ms from one tree, by the configurations picked)."""
        import torch

        from .cuda_timing import event_seconds

        self.device()
        outer = torch.cuda.current_stream()
        mine = torch.cuda.ExternalStream(int(self.stream.handle))
        mine.wait_stream(outer)
        try:
            with torch.cuda.stream(mine):
                return event_seconds(fn, repeats, before=before)
        finally:
            outer.wait_stream(mine)

    def recording(self) -> bool:
        return self.capture is not None

    def l2_flush(self):
        """A function that queues an L2 eviction (a 256 MiB memset, 5x the H200's L2) on torch's stream, which
        ``gpu_time`` times on: the autotuner's cold timings of kernels that stream their inputs from memory. The
        memset leaves L2 full of its dirty lines, which the timed kernel writes back as it evicts them, so these
        timings can read slow for kernels that stream many bytes (s35, an H100: gemv_q4_xs 64.9 us after it, 58.5
        under Nsight Compute; ``bench/experiments/gemv_q4_configs.py`` with Q4_FLUSH=read evicts by a read)."""
        if self._flush is None:
            try:
                import torch
            except ImportError:  # gpu_time has no events without torch either
                return None
            buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
            self._flush = buf.zero_
        return self._flush

    def graph(self):
        """A CUDA graph capture (``iron.graph``, ``iron.cuda.graph``)."""
        from .cuda_graph import Graph

        return Graph(self)

    def side_stream(self):
        """A second stream of this device (allocations made while Iron's stream is being captured)."""
        if self._side is None:
            self._side = self.device().create_stream()
        return self._side

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.sync()

    def synchronize_all(self) -> None:
        """Wait for this backend's stream and, where torch has initialised CUDA, torch's current stream."""
        self.synchronize()
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.current_stream().synchronize()

    # -- device arrays (runtime/cuda_array.py) ----------------------------------------------------------------------

    def array_store(self, nbytes: int):
        from .cuda_array import CudaStore

        return CudaStore(self, nbytes)

    def array_device(self) -> int:
        return self.device().device_id

    def is_gpu(self) -> bool:
        return True

    def vendor(self) -> str | None:
        return "nvidia"

    def array_from_dlpack(self, obj):
        from .cuda_array import wrap_dlpack

        return wrap_dlpack(self, obj)

    # -- ahead-of-time builds -------------------------------------------------------------------------------------

    def artifacts(self, variant, targets=(), metallib: bool = False) -> list[Emitted]:
        """``.cu``: the CUDA source with its parameters and vector entry."""
        return [write_cuda(variant)]


def launch_config(src, blocks, block, shmem: int):
    """cuda.core's LaunchConfig for a launch of ``src`` (a ``KernelSource``): with programmatic stream serialization
    (cuLaunchKernelEx's CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) where the source waits for the previous
    grid (``src.pdl``, ``pdl_enabled``)."""
    from cuda.core import LaunchConfig

    if not getattr(src, "pdl", False):
        return LaunchConfig(grid=blocks, block=block, shmem_size=shmem)
    try:
        return LaunchConfig(grid=blocks, block=block, shmem_size=shmem, programmatic_stream_serialization=True)
    except TypeError:
        raise LaunchError("IRON_CUDA_PDL=1 needs cuda.core 1.2 or later (LaunchConfig's "
                          "programmatic_stream_serialization)", None,
                          "upgrade cuda-core, or set IRON_CUDA_PDL=0") from None


def _device_of(value: Any, ptr: int) -> int | None:
    """The CUDA device ordinal an array lives on: its own ``device`` (an iron Array's index, CuPy's Device) or, for
    another producer, the driver's answer for its pointer; None where unknown (a null pointer of an empty array)."""
    dev = getattr(value, "device", None)
    if isinstance(dev, int):
        return dev
    if isinstance(getattr(dev, "id", None), int):
        return dev.id
    if not ptr:
        return None
    from cuda.bindings import driver

    err, ordinal = driver.cuPointerGetAttribute(driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    return int(ordinal) if err == driver.CUresult.CUDA_SUCCESS else None


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, acc = [], itemsize
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))
