"""A minimal CUDA driver-API launcher for the emitter's GPU tests (the real runtime is ``iron.runtime.cuda``).

It loads a cubin, copies NumPy arrays in, launches over an exact grid and copies them back: enough to compare the
emitted code with the interpreter on a GPU, and nothing more (no caching, streams or pools).
"""

from __future__ import annotations

import ctypes

import numpy as np

from iron.codegen import KernelSource

_SCALAR_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "f32": ctypes.c_float, "bool": ctypes.c_bool}


def _check(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        from cuda.bindings import driver

        _, name = driver.cuGetErrorName(err)
        raise RuntimeError(f"CUDA driver error {name.decode() if name else err}")
    return rest[0] if len(rest) == 1 else tuple(rest) if rest else None


class Gpu:
    """The first CUDA device, through its primary context."""

    def __init__(self):
        from cuda.bindings import driver

        self.driver = driver
        _check(driver.cuInit(0))
        self.device = _check(driver.cuDeviceGet(0))
        self.context = _check(driver.cuDevicePrimaryCtxRetain(self.device))
        _check(driver.cuCtxSetCurrent(self.context))
        attr = driver.CUdevice_attribute
        major = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device))
        minor = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device))
        self.arch = f"sm_{major}{minor}"
        self.name = _check(driver.cuDeviceGetName(64, self.device)).split(b"\0")[0].decode()
        self._modules: dict[bytes, object] = {}

    def function(self, cubin: bytes, entry: str):
        module = self._modules.get(cubin)
        if module is None:
            module = self._modules[cubin] = _check(self.driver.cuModuleLoadData(cubin))
        return _check(self.driver.cuModuleGetFunction(module, entry.encode()))

    def run(self, src: KernelSource, cubin: bytes, args: dict[str, object], grid, group, timed: int = 0,
            vector: bool = False, offset: int = 0) -> float:
        """Launch over the exact ``grid`` (threads per axis) in groups of ``group``; buffers in ``args`` (NumPy
        arrays, by Iron parameter name) are copied in and back. Returns the mean ms of ``timed`` extra launches.

        ``vector``: launch the vectorised entry (1-D grids only) by its contract. ``offset``: place every buffer
        that many bytes past a 256-byte boundary (to take the vector entry's unaligned path)."""
        drv = self.driver
        grid = tuple(grid) + (1,) * (3 - len(grid))
        group = tuple(group) + (1,) * (3 - len(group))
        fn = self.function(cubin, src.vector.entry if vector else src.entry)
        threads = (-(-grid[0] // src.vector.width), 1, 1) if vector else grid
        holders, device = [], []
        try:
            for p in src.params:
                if p.kind == "buffer":
                    host = np.ascontiguousarray(args[p.source])
                    base = _check(drv.cuMemAlloc(max(host.nbytes, 4) + offset))
                    ptr = int(base) + offset
                    device.append((base, ptr, host, p.source, p.readonly))
                    if host.nbytes:
                        _check(drv.cuMemcpyHtoD(ptr, host.ctypes.data, host.nbytes))
                    holders.append(ctypes.c_uint64(ptr))
                elif p.kind == "scalar":
                    holders.append(_SCALAR_CTYPES[p.dtype.name](args[p.source].item() if hasattr(args[p.source], "item")
                                                                else args[p.source]))
                else:
                    holders.append(ctypes.c_int32(grid[p.axis]))
            params = np.array([ctypes.addressof(h) for h in holders], dtype=np.uint64)
            blocks = [-(-n // g) for n, g in zip(threads, group)]
            launch = (fn, *blocks, *group, 0, 0, params.ctypes.data, 0)
            if all(blocks):
                _check(drv.cuLaunchKernel(*launch))
            _check(drv.cuCtxSynchronize())
            ms = 0.0
            if timed and all(blocks):
                start, stop = _check(drv.cuEventCreate(0)), _check(drv.cuEventCreate(0))
                _check(drv.cuEventRecord(start, 0))
                for _ in range(timed):
                    _check(drv.cuLaunchKernel(*launch))
                _check(drv.cuEventRecord(stop, 0))
                _check(drv.cuEventSynchronize(stop))
                ms = _check(drv.cuEventElapsedTime(start, stop)) / timed
            for _, ptr, host, name, readonly in device:
                if host.nbytes and not readonly:
                    _check(drv.cuMemcpyDtoH(host.ctypes.data, ptr, host.nbytes))
                args[name] = host
            return ms
        finally:
            for base, *_ in device:
                drv.cuMemFree(base)


def gpu_or_none() -> tuple[Gpu | None, str]:
    """(Gpu, "") when a CUDA device can be used here, else (None, why not)."""
    try:
        from cuda.bindings import driver  # noqa: F401
    except ImportError as e:
        return None, f"cuda-bindings not installed ({e})"
    try:
        return Gpu(), ""
    except Exception as e:  # no driver library, no device, ...
        return None, f"no usable CUDA device ({type(e).__name__}: {e})"
