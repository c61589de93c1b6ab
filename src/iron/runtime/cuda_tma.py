"""The bulk tensor copy engine's descriptors (CUtensorMap) for a CUDA launch of a kernel whose tile_loads run on it
(``codegen/cfamily/cuda_tma.py``; ``KernelSource.tensor_maps``).

Each descriptor is made by the driver (``cuTensorMapEncodeTiled`` through cuda-bindings) from the view's values at
this launch -- the buffer's address, (cols, rows[, batches]) with strides (ld[, bstride]) in bytes, the box, the
128-byte swizzle, zeros out of bounds -- and written to device memory once: the kernel gets a pointer to it. They
are cached by their contents (a few per GEMM shape and buffer; the bench rotates a few buffers), so a repeat launch
costs a dictionary lookup. The rules the descriptor needs are checked here first, as a ``LaunchError`` that names
the kernel's parameter (the interpreter checks the same ones as ``ExecutionError``): ld and bstride multiples of
16 bytes, a 16-byte-aligned buffer, a view inside the buffer.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..errors import LaunchError

#: descriptors per process before the cache is cleared (a device allocation of 128 bytes each)
_LIMIT = 4096


class TensorMaps:
    def __init__(self, device):
        self.device = device
        self._cache: dict[tuple, Any] = {}  # key -> device buffer holding the descriptor

    def pointers(self, specs, buffers: dict[str, tuple[int, int]], scalars: dict[str, Any], stream,
                 kernel: str) -> list[int]:
        """The device address of each spec's descriptor. ``buffers``: parameter name -> (address, elements)."""
        return [self._pointer(spec, *buffers[spec.buffer], scalars, stream, kernel) for spec in specs]

    def _pointer(self, spec, address: int, length: int, scalars: dict[str, Any], stream, kernel: str) -> int:
        rows, cols, ld, bstride = (int(scalars[v]) if kind == "param" else int(v) for kind, v in spec.view)
        itemsize = 4 if spec.elem in ("f32", "i32", "u32") else 2
        where = f"{kernel}: tile_load from '{spec.buffer}'"
        if (ld * itemsize) % 16 or (bstride * itemsize) % 16:
            raise LaunchError(f"{where}: the view's ld ({ld}) and batch stride ({bstride}) times {itemsize} bytes "
                              "must be multiples of 16 bytes")
        if address % 16:
            raise LaunchError(f"{where}: the buffer's address is not 16-byte aligned (the copy engine needs it)")
        batches = max(1, -(-length // bstride)) if bstride else 1
        if rows and cols and (rows - 1) * ld + cols > length:
            raise LaunchError(f"{where}: the view ({rows} x {cols}, ld {ld}) is larger than the buffer "
                              f"({length} elements)")
        key = (spec.elem, address, rows, cols, ld, bstride if spec.rank == 3 else 0, batches, spec.box, spec.rank)
        buf = self._cache.get(key)
        if buf is None:
            if len(self._cache) >= _LIMIT:
                self._cache.clear()
            buf = self._cache[key] = _upload(_encode(spec, address, rows, cols, ld, bstride, batches, itemsize),
                                             self.device, stream)
        return int(buf.handle)


def _encode(spec, address: int, rows: int, cols: int, ld: int, bstride: int, batches: int, itemsize: int) -> bytes:
    from cuda.bindings import driver as d

    types = {"bf16": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             "f16": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             "f32": d.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
    dims = [max(cols, 1), max(rows, 1)] + ([batches] if spec.rank == 3 else [])
    strides = [ld * itemsize] + ([max(bstride, rows * ld) * itemsize] if spec.rank == 3 else [])
    box = [spec.box[0], spec.box[1]] + ([1] if spec.rank == 3 else [])
    u64, u32 = d.cuuint64_t, d.cuuint32_t
    err, tmap = d.cuTensorMapEncodeTiled(
        types[spec.elem], spec.rank, address, [u64(x) for x in dims], [u64(x) for x in strides],
        [u32(x) for x in box], [u32(1)] * spec.rank,
        d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != d.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cuTensorMapEncodeTiled failed ({err.name}) for a view of {rows} x {cols} (ld {ld}, "
                          f"batch stride {bstride}) with box {spec.box}")
    return ctypes.string_at(tmap.getPtr(), 128)


def _upload(data: bytes, device, stream):
    """A device buffer holding ``data``, written before any later work on ``stream`` reads it."""
    import numpy as np
    from cuda.core import LegacyPinnedMemoryResource

    buf = device.memory_resource.allocate(len(data), stream=stream)
    pinned = LegacyPinnedMemoryResource().allocate(len(data))
    host = np.ctypeslib.as_array((ctypes.c_uint8 * len(data)).from_address(int(pinned.handle)))
    host[:] = np.frombuffer(data, dtype=np.uint8)
    buf.copy_from(pinned, stream=stream)
    stream.sync()  # the pinned staging buffer is freed on return
    return buf
