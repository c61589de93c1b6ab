"""The HIP backend (AMD GPUs): HIP C++ from the C-family printer, compiled by hipRTC to a code object, disk-cached,
loaded and launched through the HIP runtime's C API (ctypes over ``libamdhip64.so``; Debian: ``libamdhip64-5``).

What is proven without an AMD GPU, in CI: ``k.source("hip")`` and ``k.compile("hip", target="gfx90a")`` (the
wavefront size, and so the source, follows the target: 64 lanes on gfx9xx, 32 on gfx10xx+), and -- against a fake
``libamdhip64`` that records every call and runs the kernel in Iron's interpreter -- the launch path below: which
code object is loaded, the argument array, the grid, the copies, and that every HIP error becomes an Iron error.

**Not verified on AMD hardware.** Loading (``hipModuleLoadData``) and launching (``hipModuleLaunchKernel``) are
written to the HIP runtime API as documented, but no AMD GPU has run them in this project's CI or on its GPU
machine (an NVIDIA H200). ``probe()`` says why kernels cannot run here (no HIP runtime, no AMD device).

Launch path: iron Arrays of this backend live in ``hipMalloc`` memory (``hip_array.py``) and are passed by pointer,
with no copy and no wait (the null stream orders them; ``synchronize`` and ``.numpy()`` wait). For NumPy arrays: the
device's processor (``gcnArchName`` of
``hipGetDeviceProperties``) picks the compile target; the code object is loaded once per (device, code object hash);
each buffer is copied into a pooled device allocation, the kernel runs on the null stream, the stream is
synchronised, and the buffers the kernel writes are copied back.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import CompileError, ExecutionError, IronError, LaunchError
from ..interp import shared_sizes
from .arrays import check_array_backend, host_array, is_iron_array
from .artifacts import Emitted, write_hip
from .backend import Backend
from .cache import cache_key, cached_binary

_RUNTIME_LIBRARIES = ("libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5")
#: the target ``compile`` uses when none is given and no AMD device is open (``IRON_HIP_TARGET`` overrides): CDNA2
DEFAULT_TARGET = "gfx90a"
_HINT = ("k.source('hip') and k.compile('hip', target='gfx90a') work without a GPU; to run, use a machine with a "
         "ROCm-supported AMD GPU, or another backend (backend='cpu', 'cuda', 'vulkan')")

_p = ctypes.c_void_p
#: argument types of the HIP runtime functions used here (``hipDevice_t`` is an int, every handle a pointer)
_SIGNATURES: dict[str, list[Any]] = {
    "hipInit": [ctypes.c_uint],
    "hipGetDeviceCount": [ctypes.POINTER(ctypes.c_int)],
    "hipSetDevice": [ctypes.c_int],
    "hipGetDeviceProperties": [_p, ctypes.c_int],
    "hipRuntimeGetVersion": [ctypes.POINTER(ctypes.c_int)],
    "hipModuleLoadData": [ctypes.POINTER(_p), _p],
    "hipModuleGetFunction": [ctypes.POINTER(_p), _p, ctypes.c_char_p],
    "hipMalloc": [ctypes.POINTER(_p), ctypes.c_size_t],
    "hipMemcpyHtoD": [_p, _p, ctypes.c_size_t],
    "hipMemcpyDtoH": [_p, _p, ctypes.c_size_t],
    "hipModuleLaunchKernel": [_p, *[ctypes.c_uint] * 7, _p, ctypes.POINTER(_p), ctypes.POINTER(_p)],
    "hipStreamSynchronize": [_p],
}


class DeviceProps(ctypes.Structure):
    """The head of HIP's ``hipDeviceProp_t`` in its original layout (``hipDeviceProp_tR0000``), up to
    ``gcnArchName``: what ``hipGetDeviceProperties`` fills in ROCm 5, and ``hipGetDevicePropertiesR0000`` (kept for
    old binaries) in ROCm 6+, whose own ``hipDeviceProp_t`` is laid out differently. The library writes the whole
    struct (792 bytes in ROCm 5.2), so it is given ``_PROPS_BYTES`` and only this head is read."""

    _fields_ = [
        ("name", ctypes.c_char * 256), ("totalGlobalMem", ctypes.c_size_t), ("sharedMemPerBlock", ctypes.c_size_t),
        ("regsPerBlock", ctypes.c_int), ("warpSize", ctypes.c_int), ("maxThreadsPerBlock", ctypes.c_int),
        ("maxThreadsDim", ctypes.c_int * 3), ("maxGridSize", ctypes.c_int * 3), ("clockRate", ctypes.c_int),
        ("memoryClockRate", ctypes.c_int), ("memoryBusWidth", ctypes.c_int), ("totalConstMem", ctypes.c_size_t),
        ("major", ctypes.c_int), ("minor", ctypes.c_int), ("multiProcessorCount", ctypes.c_int),
        ("l2CacheSize", ctypes.c_int), ("maxThreadsPerMultiProcessor", ctypes.c_int), ("computeMode", ctypes.c_int),
        ("clockInstructionRate", ctypes.c_int), ("arch", ctypes.c_uint), ("concurrentKernels", ctypes.c_int),
        ("pciDomainID", ctypes.c_int), ("pciBusID", ctypes.c_int), ("pciDeviceID", ctypes.c_int),
        ("maxSharedMemoryPerMultiProcessor", ctypes.c_size_t), ("isMultiGpuBoard", ctypes.c_int),
        ("canMapHostMemory", ctypes.c_int), ("gcnArch", ctypes.c_int), ("gcnArchName", ctypes.c_char * 256),
    ]


_PROPS_BYTES = 4096

#: C type of an emitted scalar or grid parameter -> the ctypes type its value is passed as
_C_SCALARS: dict[str, Any] = {"int": ctypes.c_int32, "unsigned": ctypes.c_uint32, "float": ctypes.c_float,
                              "long long": ctypes.c_int64, "unsigned long long": ctypes.c_uint64,
                              "double": ctypes.c_double}


@lru_cache(maxsize=1)
def _load_runtime() -> ctypes.CDLL | str:
    errors = []
    for name in _RUNTIME_LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
            continue
        for fn in ("hipGetErrorString", "hipGetErrorName"):
            getattr(lib, fn).restype = ctypes.c_char_p
            getattr(lib, fn).argtypes = [ctypes.c_int]
        for fn, argtypes in _SIGNATURES.items():
            getattr(lib, fn).argtypes = argtypes
            getattr(lib, fn).restype = ctypes.c_int
        if hasattr(lib, "hipGetDevicePropertiesR0000"):  # ROCm 6+: the old layout under its explicit name
            lib.hipGetDevicePropertiesR0000.argtypes = _SIGNATURES["hipGetDeviceProperties"]
            lib.hipGetDevicePropertiesR0000.restype = ctypes.c_int
        return lib
    return f"no HIP runtime (libamdhip64.so: {errors[-1] if errors else 'not found'}); install ROCm or libamdhip64-5"


def _runtime() -> Any:
    """The HIP runtime library, or why it cannot be loaded (a str). Tests replace this with a fake library."""
    return _load_runtime()


def _error_text(lib, err: int) -> str:
    name = lib.hipGetErrorName(err)
    text = lib.hipGetErrorString(err)
    name = name.decode(errors="replace") if name else f"error {err}"
    text = text.decode(errors="replace") if text else ""
    return name if not text or text == name else f"{name}: {text}"


def _check(lib, err: int, call: str, kernel: str | None = None) -> None:
    """A nonzero HIP return code -> ``LaunchError`` naming the call (and the kernel being launched)."""
    if err != 0:
        about = f" for kernel {kernel}" if kernel else ""
        raise LaunchError(f"HIP: {call} failed{about}: {_error_text(lib, err)}")


def probe() -> str | None:
    """None when an AMD GPU can run HIP kernels here, else why not."""
    lib = _runtime()
    if isinstance(lib, str):
        return lib
    err = lib.hipInit(0)
    if err != 0:
        return f"no AMD GPU or driver (hipInit: {_error_text(lib, err)})"
    count = ctypes.c_int()
    err = lib.hipGetDeviceCount(ctypes.pointer(count))
    if err != 0:
        return f"no AMD GPU (hipGetDeviceCount: {_error_text(lib, err)})"
    if count.value == 0:
        return "no AMD GPU (hipGetDeviceCount found none)"
    return None


def _base_processor(arch: str) -> str:
    """``gfx90a:sramecc+:xnack-`` -> ``gfx90a``. Code objects are compiled for the processor alone: one built with
    no xnack/sramecc setting ("any") loads whichever mode the device runs in."""
    return arch.split(":", 1)[0]


@dataclass(frozen=True)
class HipDevice:
    """The AMD GPU launches go to (``IRON_HIP_DEVICE``, default 0)."""

    index: int
    name: str
    arch: str  # gcnArchName as the runtime reports it, features included
    target: str  # the processor code objects are compiled for
    wavefront: int  # warpSize
    compute_units: int
    memory_bytes: int
    shared_per_group: int


def read_device(lib, index: int) -> HipDevice:
    """Open device ``index`` (``hipSetDevice``) and read its properties."""
    _check(lib, lib.hipSetDevice(index), "hipSetDevice")
    buf = ctypes.create_string_buffer(_PROPS_BYTES)
    get = getattr(lib, "hipGetDevicePropertiesR0000", None) or lib.hipGetDeviceProperties
    _check(lib, get(ctypes.cast(buf, ctypes.c_void_p), index), "hipGetDeviceProperties")
    props = DeviceProps.from_buffer(buf)
    arch = props.gcnArchName.decode(errors="replace")
    target = _base_processor(arch) or os.environ.get("IRON_HIP_TARGET") or DEFAULT_TARGET
    wavefront = _wavefront(target)
    if props.warpSize != wavefront:
        # the emitted source bakes the wavefront in (simd_size(), the lane split, the reduction butterfly)
        raise LaunchError(f"AMD device {index} ({arch}) reports a wavefront of {props.warpSize} lanes, but Iron "
                          f"compiles {target} for {wavefront}; its SIMD ops would be wrong, so it is not used")
    return HipDevice(index, props.name.decode(errors="replace"), arch, target, wavefront, props.multiProcessorCount,
                     props.totalGlobalMem, props.sharedMemPerBlock)


def kernel_arguments(params, pointers: dict[str, int], scalars: dict[str, Any], grid) -> list[Any]:
    """The values of an emitted kernel's parameters, in order, as ctypes objects: buffers as device pointers,
    scalars in the C type of their parameter, then the exact grid sizes. ``hipModuleLaunchKernel`` takes an array of
    their addresses."""
    values: list[Any] = []
    for p in params:
        if p.kind == "buffer":
            values.append(ctypes.c_void_p(pointers[p.source]))
            continue
        ctype = _C_SCALARS.get(p.ctype)
        if ctype is None:
            raise LaunchError(f"the hip launcher cannot pass a '{p.ctype}' parameter ({p.name})")
        values.append(ctype(scalars[p.source] if p.kind == "scalar" else grid[p.axis]))
    return values


class _Pool:
    """Device allocations kept for reuse, by size (rounded up to 256 bytes): ``hipMalloc``/``hipFree`` synchronise
    the device, too slow to do on every launch."""

    def __init__(self) -> None:
        self.free: dict[int, list[int]] = {}

    def get(self, lib, nbytes: int) -> tuple[int, int]:
        size = max(256, -(-nbytes // 256) * 256)
        bucket = self.free.get(size)
        if bucket:
            return bucket.pop(), size
        ptr = ctypes.c_void_p()
        _check(lib, lib.hipMalloc(ctypes.pointer(ptr), size), f"hipMalloc({size})")
        return int(ptr.value or 0), size

    def put(self, ptr: int, size: int) -> None:
        self.free.setdefault(size, []).append(ptr)


class HipBackend(Backend):
    name = "hip"
    writes_artifacts = True
    build_targets = "AMD processors (gfxNNN)"

    def __init__(self) -> None:
        self._device: HipDevice | None = None
        self._pool = _Pool()
        #: (device, code object sha256) -> (module handle, the code object: kept alive while the module is)
        self._modules: dict[tuple[int, str], tuple[int, Any]] = {}
        self._functions: dict[tuple[int, str, str], int] = {}
        #: this instance's part of the per-variant cache key: handles belong to the runtime that loaded them
        self._token = object()

    @property
    def target(self) -> str:
        """The AMD target sources and code objects are for: the open device's processor, else ``IRON_HIP_TARGET``,
        else ``gfx90a``."""
        if self._device is not None:
            return self._device.target
        return os.environ.get("IRON_HIP_TARGET") or DEFAULT_TARGET

    # -- device ---------------------------------------------------------------------------------------------------

    def device(self) -> HipDevice:
        """The AMD GPU launches go to (opened on first use), or a ``LaunchError`` saying why there is none."""
        if self._device is None:
            reason = probe()
            if reason:
                raise LaunchError(f"the hip backend is not available: {reason}", hint=_HINT)
            self._device = self._open()
        return self._device

    def _open(self) -> HipDevice:
        lib = _runtime()
        index = int(os.environ.get("IRON_HIP_DEVICE", "0"))
        count = ctypes.c_int()
        _check(lib, lib.hipGetDeviceCount(ctypes.pointer(count)), "hipGetDeviceCount")
        if not 0 <= index < count.value:
            raise LaunchError(f"IRON_HIP_DEVICE={index}, but there {'is' if count.value == 1 else 'are'} "
                              f"{count.value} AMD GPU{'' if count.value == 1 else 's'} (numbered from 0)")
        return read_device(lib, index)

    def info(self) -> dict[str, Any]:
        """What ``iron device`` shows: the AMD GPU launches go to, or a LaunchError with the reason there is none."""
        dev = self.device()
        version = ctypes.c_int()
        lib = _runtime()
        _check(lib, lib.hipRuntimeGetVersion(ctypes.pointer(version)), "hipRuntimeGetVersion")
        return {"name": dev.name, "arch": dev.arch, "target": dev.target, "wavefront": dev.wavefront,
                "compute_units": dev.compute_units, "memory_gib": round(dev.memory_bytes / 2**30, 1),
                "max_shared_per_group_kib": dev.shared_per_group // 1024, "runtime_version": version.value,
                "verified": "no: the launch path has not run on an AMD GPU in this project's CI"}

    def simd_width(self) -> int:
        """The wavefront size of the target launches compile for (64 on CDNA, 32 on RDNA). With an AMD GPU present
        the device is opened first: a launcher that sizes its groups before its first launch (std/gemm) must get
        the device's width, not the default target's."""
        if self._device is None and probe() is None:
            self._device = self._open()
        return _wavefront(self.target)

    # -- compile --------------------------------------------------------------------------------------------------

    def emitted(self, variant, target: str | None = None):
        """The HIP source of a variant for ``target`` (its wavefront size decides the source)."""
        from ..codegen.cfamily.hip import emit_hip

        wavefront = _wavefront(target or self.target)
        key = ("hip-src", wavefront)
        src = variant.artifacts.get(key)
        if src is None:
            src = variant.artifacts[key] = emit_hip(variant.kernel, wavefront)
        return src

    def source(self, variant, target: str | None = None) -> str:
        return self.emitted(variant, target).source

    def compile(self, variant, target: str | None = None) -> bytes:
        """The code object of a variant for the AMD ``target`` (``gfx90a``, ``gfx1030``, ...); needs hipRTC, not a
        GPU. Disk-cached."""
        from ..codegen import hiprtc

        target = target or self.target
        src = self.emitted(variant, target)
        options = hiprtc.default_options()
        key = cache_key("hip", src.source, target, options, hiprtc.hiprtc_version())
        return cached_binary("hip", key, lambda: hiprtc.compile_hip(src, target=target, options=options))

    # -- ahead-of-time builds -------------------------------------------------------------------------------------

    def artifacts(self, variant, targets=(), metallib: bool = False) -> list[Emitted]:
        """``_wave64.hip`` / ``_wave32.hip`` sources and, per ``--target``, the ``_<target>.hsaco`` code object."""
        return write_hip(variant, tuple(targets), self.compile)

    def check_build_target(self, target: str) -> None:
        """A CompileError unless hipRTC can compile for the AMD processor ``target``."""
        from ..codegen import hiprtc

        try:
            hiprtc.check_target(target)
        except CompileError as e:
            if target.split(":")[0] in hiprtc.AMD_PROCESSORS:
                raise
            raise CompileError(f"{e.message}; --target names {self.build_targets} for --backend hip, e.g. --target "
                               "gfx90a,gfx1030", hint=e.hint) from None

    def function(self, variant) -> tuple[int, Any]:
        """(function handle, emitted source) of a variant on the open device: compiled for its processor, the module
        loaded once per (device, code object)."""
        from ..codegen.nvrtc import fmad_enabled

        dev = self.device()
        key = ("hip-fn", self._token, dev.index, dev.target, fmad_enabled())
        found = variant.artifacts.get(key)
        if found is not None:
            return found
        lib = _runtime()
        src = self.emitted(variant, dev.target)
        code = self.compile(variant, dev.target)
        digest = hashlib.sha256(code).hexdigest()
        fn = self._functions.get((dev.index, digest, src.entry))
        if fn is None:
            module = self._modules.get((dev.index, digest))
            if module is None:
                image = ctypes.create_string_buffer(code, len(code))
                handle = ctypes.c_void_p()
                _check(lib, lib.hipModuleLoadData(ctypes.pointer(handle), ctypes.cast(image, ctypes.c_void_p)),
                       "hipModuleLoadData", src.kernel)
                module = self._modules[(dev.index, digest)] = (int(handle.value or 0), image)
            handle = ctypes.c_void_p()
            _check(lib, lib.hipModuleGetFunction(ctypes.pointer(handle), ctypes.c_void_p(module[0]),
                                                 src.entry.encode()), f"hipModuleGetFunction({src.entry})", src.kernel)
            fn = self._functions[(dev.index, digest, src.entry)] = int(handle.value or 0)
        variant.artifacts[key] = (fn, src)
        return fn, src

    # -- launch ---------------------------------------------------------------------------------------------------

    def is_gpu(self) -> bool:
        return True

    def vendor(self) -> str | None:
        return "amd"

    def array_store(self, nbytes: int):
        from .hip_array import HipStore

        return HipStore(self, nbytes)

    def array_device(self) -> int:
        return self.device().index

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """(address, pooled size) of device memory for an iron Array."""
        return self._pool.get(_runtime(), nbytes)

    def release(self, ptr: int, size: int) -> None:
        self._pool.put(ptr, size)

    def copy_to_device(self, ptr: int, data: np.ndarray) -> None:
        """Device memory at ``ptr`` = ``data``'s bytes, after every queued launch (which may read it)."""
        if data.nbytes:
            lib = _runtime()
            self.synchronize()
            _check(lib, lib.hipMemcpyHtoD(ctypes.c_void_p(ptr), ctypes.c_void_p(data.ctypes.data), data.nbytes),
                   "hipMemcpyHtoD")

    def copy_from_device(self, out: np.ndarray, ptr: int) -> None:
        """``out``'s bytes = device memory at ``ptr``, after every queued launch (which may write it)."""
        if out.nbytes:
            lib = _runtime()
            self.synchronize()
            _check(lib, lib.hipMemcpyDtoH(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(ptr), out.nbytes),
                   "hipMemcpyDtoH")

    def check_array(self, param: str, value: Any, where) -> Any:
        if is_iron_array(value):
            check_array_backend("hip", param, value, where)
            ptr = getattr(value.store, "ptr", None)
            if ptr is None:  # host memory (an array made before the device opened): copied as NumPy arrays are
                return host_array("hip", param, value, where)
            from .hip_array import HipBuffer

            return HipBuffer(ptr + value.offset, value.nbytes)
        if isinstance(value, np.ndarray):
            if not value.flags.c_contiguous:
                raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                                  f"pass np.ascontiguousarray({param})")
            return value
        raise LaunchError(f"argument '{param}' is a {type(value).__module__}.{type(value).__name__}; the hip backend "
                          "takes NumPy arrays", where())

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        name = variant.kernel.name
        if self._device is None:
            reason = probe()
            if reason:
                raise LaunchError(f"cannot launch {name} on the hip backend: {reason}", hint=_HINT)
            self._device = self._open()
        lib = _runtime()
        fn, src = self.function(variant)
        written = {p.source for p in src.params if p.kind == "buffer" and not p.readonly
                   and isinstance(arrays[p.source], np.ndarray)}  # device arrays are written in place
        for p in sorted(written):
            if not arrays[p].flags.writeable:
                raise LaunchError(f"argument '{p}' is read-only but {name} writes to it")
        if src.runtime_shared:  # shared arrays sized by this launch's values, checked before anything is staged
            shared_sizes.lengths(variant.kernel, scalars, 64 * 1024, "HIP", static=src.shared_bytes)
        _check(lib, lib.hipSetDevice(self._device.index), "hipSetDevice", name)  # the current device is per thread
        staged: dict[str, tuple[int, int]] = {}
        on_device = {p: a.ptr for p, a in arrays.items() if not isinstance(a, np.ndarray)}
        try:
            for pname, arr in arrays.items():
                if pname in on_device:
                    continue
                staged[pname] = self._pool.get(lib, arr.nbytes)
                if arr.nbytes:
                    _check(lib, lib.hipMemcpyHtoD(ctypes.c_void_p(staged[pname][0]), ctypes.c_void_p(arr.ctypes.data),
                                                  arr.nbytes), f"hipMemcpyHtoD({pname})", name)
            values = kernel_arguments(src.params, {**{n: ptr for n, (ptr, _) in staged.items()}, **on_device},
                                      scalars, grid)
            argv = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
            blocks = [-(-n // g) for n, g in zip(grid, group)]
            _check(lib, lib.hipModuleLaunchKernel(ctypes.c_void_p(fn), *blocks, *group,
                                                  src.launch_shared_bytes(scalars), None, argv, None),
                   "hipModuleLaunchKernel", name)
            if not staged:  # device arrays alone: queued on the null stream, not waited for
                return
            err = lib.hipStreamSynchronize(None)
            if err != 0:
                raise ExecutionError(f"{name} failed on the AMD GPU (hipStreamSynchronize: {_error_text(lib, err)})")
            for pname in sorted(written):
                arr = arrays[pname]
                if arr.nbytes:
                    _check(lib, lib.hipMemcpyDtoH(ctypes.c_void_p(arr.ctypes.data), ctypes.c_void_p(staged[pname][0]),
                                                  arr.nbytes), f"hipMemcpyDtoH({pname})", name)
        except IronError:
            raise
        except Exception as e:  # a ctypes failure: name the kernel
            raise LaunchError(f"HIP launch of {name} failed: {type(e).__name__}: {e}") from None
        finally:
            for ptr, size in staged.values():
                self._pool.put(ptr, size)

    def synchronize(self) -> None:
        if self._device is not None:
            lib = _runtime()
            _check(lib, lib.hipStreamSynchronize(None), "hipStreamSynchronize")


def _wavefront(target: str) -> int:
    from ..codegen.cfamily.hip import wavefront_of

    try:
        return wavefront_of(target)
    except ValueError as e:
        raise LaunchError(str(e)) from None
