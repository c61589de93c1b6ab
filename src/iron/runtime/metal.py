"""The Metal backend (Apple GPUs): MSL from the C-family printer, run through Metal via PyObjC.

**Not verified on Apple hardware by this project's CI.** The host code below is written to Apple's Metal API
(``pyobjc-framework-Metal``, imported only when a Metal call is made) and is exercised in CI against a fake
``Metal`` module that executes the dispatched kernel on the CPU model of Metal (``tests/runtime_metal``): that
proves the argument bindings, threadgroup memory lengths and dispatch sizes agree with the emitted MSL, not that
Apple's compiler or driver accept them.

Path: ``MTLCreateSystemDefaultDevice`` -> ``newLibraryWithSource:options:error:`` (MSL 3.1, fast math off:
``MTLMathModeSafe`` where the OS has it, else ``fastMathEnabled = NO``) -> ``newFunctionWithName:`` ->
``newComputePipelineStateWithFunction:error:`` (cached per variant) -> shared-storage ``MTLBuffer``s: arrays made by
``shared_array(shape, dtype)`` are NumPy views of a Metal buffer's own memory and are bound with no copy; other
NumPy arrays are copied into a buffer and the written ones copied back ->
one command buffer per launch: ``setBuffer:offset:atIndex:`` for buffers, ``setBytes:length:atIndex:`` for scalars
and the exact-grid sizes, ``setThreadgroupMemoryLength:atIndex:`` for each threadgroup array, then
``dispatchThreadgroups:threadsPerThreadgroup:`` over whole groups (the emitted guard keeps the grid exact; whole
groups keep ``group_size()``/``num_groups()`` the same on every backend, which ``dispatchThreads``' partial edge
groups would not) -> ``commit`` / ``waitUntilCompleted``; ``GPUStartTime``/``GPUEndTime`` time it for the bench.

ABI of the emitted kernel (``KernelSource``): parameter ``i`` of ``params`` is bound at buffer index ``i``; threadgroup
array ``j`` of ``threadgroup`` at threadgroup index ``j`` (length rounded up to 16 bytes).
"""

from __future__ import annotations

import platform
import struct
import weakref
from typing import Any

import numpy as np

from ..errors import CompileError, ExecutionError, LaunchError
from ..interp import shared_sizes
from .arrays import HostStore, check_writable, host_array
from .artifacts import Emitted, write_metal
from .backend import Backend, LaunchRecorder

#: struct format of each scalar C type the MSL takes as ``constant T&``
_PACK = {"int": "<i", "uint": "<I", "float": "<f", "bool": "<?", "long": "<q", "ulong": "<Q"}
NOT_VERIFIED = "not verified on Apple hardware by this project's CI"


def _metal():
    """The PyObjC ``Metal`` module (macOS with pyobjc-framework-Metal), or a LaunchError saying why not."""
    try:
        import Metal  # type: ignore[import-not-found]
    except ImportError as e:
        if platform.system() != "Darwin":
            raise LaunchError(f"backend 'metal' is macOS only (this is {platform.system() or 'an unknown system'}); "
                              "its MSL source is available with k.source('metal'), and backend='msl-cpu' runs it "
                              "on the CPU model of Metal") from None
        raise LaunchError(f"backend 'metal' needs PyObjC's Metal bindings ({e}); pip install pyobjc-framework-Metal"
                          ) from None
    return Metal


def probe() -> str | None:
    """None when Metal could run kernels here, else why not."""
    try:
        metal = _metal()
    except LaunchError as e:
        return e.message
    if metal.MTLCreateSystemDefaultDevice() is None:
        return "no Metal device (MTLCreateSystemDefaultDevice returned nil)"
    return None


def _ns_error(err) -> str:
    if err is None:
        return "unknown error"
    try:
        return str(err.localizedDescription())
    except AttributeError:
        return str(err)


def _language_version(metal, version: str, src) -> Any:
    """MTLLanguageVersion for ``version``; MSL 3.2 where the kernel uses ``fence()`` (``thread_scope_device``
    exists from MSL 3.2, macOS 15), refused with the reason where this macOS's Metal lacks it."""
    if "thread_scope_device" in src.source:
        v32 = getattr(metal, "MTLLanguageVersion3_2", None)
        if v32 is None:
            raise CompileError(f"kernel '{src.kernel}' uses fence(), which Metal offers from MSL 3.2 (macOS 15); "
                               "this Metal has no MTLLanguageVersion3_2")
        return v32
    return metal.MTLLanguageVersion3_1 if version == "3.1" else metal.MTLLanguageVersion3_0


class MetalBackend(Backend):
    name = "metal"
    timer_name = "Metal GPU times"
    writes_artifacts = True
    unverified = "not verified on Apple hardware by this project's CI"

    def __init__(self) -> None:
        self._timer = LaunchRecorder()
        self._device = None
        self._queue = None
        self.last_gpu_seconds: float | None = None
        self._shared: dict[int, tuple[Any, int]] = {}  # start address -> (MTLBuffer, bytes) of shared_array memory

    def shared_array(self, shape, dtype) -> np.ndarray:
        """A NumPy array whose memory is a shared-storage ``MTLBuffer`` (unified memory): kernels use it in place,
        with no copy. Keep the array alive while kernels use it."""
        metal = _metal()
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        nbytes = max(count * dtype.itemsize, 1)
        buf = self.device().newBufferWithLength_options_(nbytes, metal.MTLResourceStorageModeShared)
        if buf is None:
            raise LaunchError(f"Metal could not allocate a shared buffer of {nbytes} bytes")
        owner = np.frombuffer(buf.contents().as_buffer(nbytes), dtype=np.uint8, count=nbytes)
        start = owner.ctypes.data
        # every view of the array keeps `owner` alive (it is their base); the MTLBuffer stays registered, and
        # so allocated, until the last of them is gone
        self._shared[start] = (buf, nbytes)
        weakref.finalize(owner, self._shared.pop, start, None)
        return owner[:count * dtype.itemsize].view(dtype).reshape(shape)

    def _bound(self, arr: np.ndarray) -> tuple[Any, int] | None:
        """(MTLBuffer, offset) when ``arr`` lies inside a ``shared_array`` buffer."""
        addr = arr.ctypes.data
        for start, (buf, nbytes) in self._shared.items():
            if start <= addr and addr + arr.nbytes <= start + nbytes:
                return buf, addr - start
        return None

    # -- device ---------------------------------------------------------------------------------------------------

    def device(self):
        if self._device is None:
            metal = _metal()
            dev = metal.MTLCreateSystemDefaultDevice()
            if dev is None:
                raise LaunchError("backend 'metal': no Metal device (MTLCreateSystemDefaultDevice returned nil)")
            self._device, self._queue = dev, dev.newCommandQueue()
        return self._device

    def info(self) -> dict[str, Any]:
        dev = self.device()
        return {"name": str(dev.name()), "max_threads_per_group": int(dev.maxThreadsPerThreadgroup().width),
                "max_shared_bytes": int(dev.maxThreadgroupMemoryLength()),
                "unified_memory": bool(dev.hasUnifiedMemory()), "simd_width": 32, "verified": NOT_VERIFIED}

    # -- compile --------------------------------------------------------------------------------------------------

    def emitted(self, variant):
        return emitted_msl(variant)

    def source(self, variant, target: str | None = None) -> str:
        return self.emitted(variant).source

    def compile(self, variant, target: str | None = None) -> Any:
        """The compute pipeline state of a variant (cached on it)."""
        version = _version()
        dev = self.device()
        key = ("metal-pipeline", version, dev)  # a pipeline belongs to the device that built it
        pipeline = variant.artifacts.get(key)
        if pipeline is not None:
            return pipeline
        metal = _metal()
        src = self.emitted(variant)
        opts = metal.MTLCompileOptions.alloc().init()
        opts.setLanguageVersion_(_language_version(metal, version, src))
        if hasattr(opts, "setMathMode_") and hasattr(metal, "MTLMathModeSafe"):
            opts.setMathMode_(metal.MTLMathModeSafe)
        else:
            opts.setFastMathEnabled_(False)
        library, err = dev.newLibraryWithSource_options_error_(src.source, opts, None)
        if library is None:
            raise CompileError(f"Metal rejected the MSL of kernel '{src.kernel}': {_ns_error(err)}",
                               hint="this is a bug in Iron's MSL emitter; please report it with `iron inspect "
                                    "--backend metal` output")
        fn = library.newFunctionWithName_(src.entry)
        if fn is None:
            raise CompileError(f"Metal library of kernel '{src.kernel}' has no function '{src.entry}'")
        pipeline, err = dev.newComputePipelineStateWithFunction_error_(fn, None)
        if pipeline is None:
            raise CompileError(f"Metal could not build the pipeline of kernel '{src.kernel}': {_ns_error(err)}")
        variant.artifacts[key] = pipeline
        return pipeline

    # -- launch ---------------------------------------------------------------------------------------------------

    def is_gpu(self) -> bool:
        return True

    def vendor(self) -> str | None:
        return "apple"

    def array_store(self, nbytes: int):
        """An iron Array's memory: a shared-storage MTLBuffer (unified memory, ``shared_array``), which launches bind
        in place, with no copy."""
        return HostStore(nbytes, self.shared_array((max(nbytes, 1),), np.uint8))

    def check_array(self, param: str, value: Any, where) -> np.ndarray:
        return host_array("metal", param, value, where)

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        metal = _metal()
        k = variant.kernel
        check_writable(k, arrays)
        if any(g == 0 for g in grid):
            return
        pipeline = self.compile(variant)
        src = self.emitted(variant)
        threads = group[0] * group[1] * group[2]
        limit = int(pipeline.maxTotalThreadsPerThreadgroup())
        if threads > limit:
            raise LaunchError(f"group of {threads} threads is over the {limit} this Metal pipeline allows for "
                              f"{k.name}", hint="launch with a smaller group")
        dev = self.device()
        readonly = {p.name: p.readonly for p in k.params if p.kind == "buffer"}
        cb = self._queue.commandBuffer()
        enc = cb.computeCommandEncoder()
        enc.setComputePipelineState_(pipeline)
        copies = []
        for i, p in enumerate(src.params):
            if p.kind == "buffer":
                arr = arrays[p.source]
                bound = self._bound(arr)
                if bound is not None:  # a shared_array: its own memory, no copy
                    enc.setBuffer_offset_atIndex_(bound[0], bound[1], i)
                    continue
                buf = dev.newBufferWithBytes_length_options_(arr.tobytes(), max(arr.nbytes, 1),
                                                             metal.MTLResourceStorageModeShared)
                if buf is None:
                    raise LaunchError(f"Metal could not allocate {arr.nbytes} bytes for argument '{p.source}'")
                enc.setBuffer_offset_atIndex_(buf, 0, i)
                if not readonly[p.source]:
                    copies.append((arr, buf))
                continue
            value = grid[p.axis] if p.kind == "grid" else scalars[p.source]
            data = struct.pack(_PACK[p.ctype], value)
            enc.setBytes_length_atIndex_(data, len(data), i)
        if src.runtime_shared:  # threadgroup arrays sized by this launch's values
            shared_sizes.lengths(k, scalars, int(dev.maxThreadgroupMemoryLength()), f"this GPU ({dev.name()})",
                                 static=src.shared_bytes)
        for j, size in enumerate(src.threadgroup_bytes(scalars)):
            enc.setThreadgroupMemoryLength_atIndex_(-(-size // 16) * 16, j)
        groups = [-(-n // g) for n, g in zip(grid, group)]
        enc.dispatchThreadgroups_threadsPerThreadgroup_(metal.MTLSizeMake(*groups), metal.MTLSizeMake(*group))
        enc.endEncoding()
        cb.commit()
        cb.waitUntilCompleted()
        if cb.error() is not None:
            raise ExecutionError(f"kernel {k.name} failed on Metal: {_ns_error(cb.error())}", k.loc)
        self.last_gpu_seconds = float(cb.GPUEndTime()) - float(cb.GPUStartTime())
        self._timer.record(self.last_gpu_seconds)
        for arr, buf in copies:
            view = np.frombuffer(buf.contents().as_buffer(arr.nbytes), dtype=np.uint8)
            arr.view(np.uint8)[...] = view

    def gpu_time(self, fn, repeats: int, before=None) -> float | None:
        """Median GPU seconds of ``fn`` from Metal's command-buffer GPU start/end times (summed over its launches);
        ``before`` runs untimed ahead of each repeat."""
        return self._timer.median(fn, repeats, before)

    # -- ahead-of-time builds -------------------------------------------------------------------------------------

    def artifacts(self, variant, targets=(), metallib: bool = False) -> list[Emitted]:
        """``.metal`` with its binding facts and, with ``metallib``, Apple's compiled ``.metallib``."""
        return write_metal(variant, metallib)


def emitted_msl(variant):
    """The MSL ``KernelSource`` of a variant for the current ``IRON_MSL_VERSION``, cached on it: the one text the
    Metal runtime loads and msl-cpu compiles."""
    from ..codegen import emit_msl

    version = _version()
    src = variant.artifacts.get(("msl", version))
    if src is None:
        src = variant.artifacts[("msl", version)] = emit_msl(variant.kernel, version=version)
    return src


def _version() -> str:
    """The MSL version to emit (``IRON_MSL_VERSION``: 3.1 by default, or 3.0 with bf16 as ushort)."""
    from ..codegen.cfamily.msl import msl_version

    try:
        return msl_version()
    except ValueError as e:
        raise LaunchError(str(e)) from None
