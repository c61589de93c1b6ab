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

#: descriptor slots (128 bytes each) before the arena starts over
_LIMIT = 4096


class TensorMaps:
    """Descriptors by contents, in slots of one device arena written from one pinned host arena: a new descriptor
    is encoded into the next pinned slot and copied to its device slot on the launch's stream (no wait: the slot is
    never rewritten while work may read it -- a full arena waits for the device once, then starts over)."""

    def __init__(self, device, stream):
        self.device = device
        self.stream = stream  # Iron's own stream (cuda.core): the arena is allocated on it
        self._cache: dict[tuple, int] = {}  # key -> device address of the descriptor
        self._host = self._dev = None
        self._pinned = None
        self._side = None  # a stream for the copies made while Iron's stream is being captured
        self._recorded = False  # a graph holds a pointer into this arena: it is never rewritten
        self._retired: list = []  # such arenas, kept for the graphs (512 KiB each)

    def pointers(self, specs, buffers: dict[str, tuple[int, int]], scalars: dict[str, Any], stream: int,
                 kernel: str) -> list[int]:
        """The device address of each spec's descriptor. ``buffers``: parameter name -> (address, elements);
        ``stream``: the handle of the stream the launch goes to, or None while a graph is being recorded (the
        descriptors are then written through a stream of their own and waited for, and their slots are never
        rewritten: the graph reads them at every replay)."""
        return [self.pointer(spec, *buffers[spec.buffer], scalars, stream, kernel) for spec in specs]

    def pointer(self, spec, address: int, length: int, scalars: dict[str, Any], stream: int, kernel: str) -> int:
        """One descriptor's device address (the fast launcher calls this per launch: a lookup when cached)."""
        rows, cols, ld, bstride = (int(scalars[v]) if kind == "param" else int(v) for kind, v in spec.view)
        key = (spec.elem, address, length, rows, cols, ld, bstride, spec.box, spec.rank)
        ptr = self._cache.get(key)
        if ptr is not None:
            self._recorded |= stream is None
            return ptr
        itemsize = 4 if spec.elem in ("f32", "i32", "u32") else 2
        where = f"{kernel}: tile_load from '{spec.buffer}'"
        if (ld * itemsize) % 16 or (bstride * itemsize) % 16:
            raise LaunchError(f"{where}: the view's ld ({ld}) and batch stride ({bstride}) times {itemsize} bytes "
                              "must be multiples of 16 bytes")
        if address % 16:
            raise LaunchError(f"{where}: the buffer's address is not 16-byte aligned (the copy engine needs it)")
        if rows and cols and (rows - 1) * ld + cols > length:
            raise LaunchError(f"{where}: the view ({rows} x {cols}, ld {ld}) is larger than the buffer "
                              f"({length} elements)")
        batches = max(1, -(-length // bstride)) if bstride else 1
        data = _encode(spec, address, rows, cols, ld, bstride, batches, itemsize)
        ptr = self._cache[key] = self._store(data, stream)
        return ptr

    def _store(self, data: bytes, stream: int) -> int:
        import numpy as np
        from cuda.core import LegacyPinnedMemoryResource

        recording = stream is None
        if recording and self._side is None:
            self._side = self.device.create_stream()
        if self._host is None:  # allocated in stream order (not on Iron's stream while it is being captured)
            order = self._side if recording else self.stream
            dev = self.device.memory_resource.allocate(_LIMIT * 128, stream=order)
            order.sync()  # the copies may go to another stream
            pinned = LegacyPinnedMemoryResource().allocate(_LIMIT * 128)
            self._dev, self._pinned = dev, pinned
            self._host = np.ctypeslib.as_array((ctypes.c_uint8 * (_LIMIT * 128)).from_address(int(pinned.handle)))
        slot = len(self._cache)  # slots are handed out in order; the caller adds this key after
        if slot >= _LIMIT:
            from cuda.bindings import driver

            self._cache.clear()
            slot = 0
            if self._recorded or recording:  # a graph reads this arena (or Iron's stream cannot be waited for)
                self._retired.append((self._dev, self._pinned))  # kept, and a new one written
                self._host, self._recorded = None, False
                return self._store(data, stream)
            driver.cuStreamSynchronize(stream)  # every earlier launch has read its descriptors: start over
        self._host[slot * 128:(slot + 1) * 128] = np.frombuffer(data, dtype=np.uint8)
        from cuda.bindings import driver as d

        dst = int(self._dev.handle) + slot * 128
        if recording:  # not into the graph: written now through a stream of our own, and waited for
            stream, self._recorded = int(self._side.handle), True
        (err,) = d.cuMemcpyHtoDAsync(dst, int(self._pinned.handle) + slot * 128, 128, stream)
        if err == d.CUresult.CUDA_SUCCESS and recording:
            (err,) = d.cuStreamSynchronize(stream)
        if err != d.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"copying a tensor-map descriptor to the device failed ({err.name})")
        return dst


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
