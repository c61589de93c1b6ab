"""Device arrays on CUDA (issue 16): an ``iron.Array``'s memory is a buffer of the backend's device memory resource
(cuda.core's stream-ordered pool, the one NumPy launches stage through), passed to kernels by pointer through
``__cuda_array_interface__`` like a CuPy array. Copies in and out go through pinned staging on the backend's stream
and wait for it. ``iron.from_dlpack`` wraps a CUDA DLPack producer's memory (torch, CuPy, JAX) without a copy,
keeping the producer alive, through cuda.core's ``StridedMemoryView``.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..errors import LaunchError


class CudaStore:
    """Device memory of one iron Array on CUDA (``ptr``: its device address)."""

    def __init__(self, backend, nbytes: int, owner: Any = None, ptr: int | None = None):
        dev = backend.device()
        self.backend = backend
        self.nbytes = nbytes
        self.device = dev.device_id
        self.owner = owner  # a foreign producer whose memory this is (from_dlpack), kept alive
        if ptr is None:
            if backend.capture is None:
                self.buf = dev.memory_resource.allocate(max(nbytes, 256), stream=backend.stream)
            else:  # inside iron.cuda.graph(): memory the graph's launches use, made now and kept by the graph
                side = backend.side_stream()
                self.buf = dev.memory_resource.allocate(max(nbytes, 256), stream=side)
                side.sync()
                backend.capture_keep.append(self)
            ptr = int(self.buf.handle)
        self.ptr = ptr

    @property
    def dlpack_device(self) -> tuple[int, int]:
        return (2, self.device)  # kDLCUDA

    def dlpack(self, array, stream: Any = None, max_version: Any = None, dl_device: Any = None,
               copy: Any = None) -> Any:
        """A DLPack capsule of ``array`` (issue 16). The consumer's ``stream`` sees every launch queued before: Iron
        waits for its own stream first, unless the consumer passes -1 (it will synchronise itself)."""
        from .dlpack import CUDA, capsule

        if dl_device is not None and tuple(dl_device) != (CUDA, self.device):
            raise BufferError(f"this array is on CUDA device {self.device}; it cannot be exported to {dl_device} "
                              "(copy it with .numpy())")
        if copy:
            raise BufferError("DLPack export of a CUDA array shares its memory; copy=True is not supported")
        if stream != -1:
            self.backend.synchronize()
        return capsule(self.ptr + array.offset, array.shape, array.dtype.np_dtype, (CUDA, self.device), array)

    def write(self, offset: int, data: np.ndarray) -> None:
        self._copy(data, offset, to_device=True)

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, np.uint8)
        self._copy(out, offset, to_device=False)
        return out

    def _copy(self, host: np.ndarray, offset: int, to_device: bool) -> None:
        from cuda.bindings import driver

        n = host.nbytes
        if not n:
            return
        be = self.backend
        stream = be.stream
        be.synchronize_all()  # torch's stream and ours: the copy follows every queued launch
        pin = be.pool.get("pinned", n, stream)
        try:
            if to_device:
                _host_view(pin, n)[:] = host
                (err,) = driver.cuMemcpyHtoDAsync(self.ptr + offset, int(pin.handle), n, stream.handle)
            else:
                (err,) = driver.cuMemcpyDtoHAsync(int(pin.handle), self.ptr + offset, n, stream.handle)
            if int(err):
                raise LaunchError(f"CUDA copy of {n} bytes failed ({err})")
            stream.sync()
            if not to_device:
                host[:] = _host_view(pin, n)
        finally:
            be.pool.put("pinned", pin)


def wrap_dlpack(backend, obj: Any):
    """An iron Array over a CUDA DLPack producer's memory (C-contiguous only)."""
    from cuda.core.utils import StridedMemoryView

    from ..ir import types as t
    from .device_array import Array

    view = StridedMemoryView(obj, stream_ptr=-1)
    ty = t.scalar_type_of_numpy(np.dtype(view.dtype))
    if ty is None:
        raise LaunchError(f"iron arrays hold f32, f16, bf16, f64, i32, u32, i64, u64, i8 or u8 values, not "
                          f"{view.dtype}")
    shape = tuple(int(d) for d in view.shape)
    strides = view.strides
    c = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        c[i] = c[i + 1] * shape[i + 1]
    if strides is not None and tuple(strides) != tuple(c):
        raise LaunchError(f"a DLPack array with strides {tuple(strides)} is not C-contiguous",
                          hint="pass a contiguous copy")
    if int(view.device_id) != backend.device().device_id:
        raise LaunchError(f"the DLPack array is on CUDA device {view.device_id}; the cuda backend runs on device "
                          f"{backend.device().device_id}", hint="set IRON_CUDA_DEVICE")
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(view.dtype).itemsize
    store = CudaStore(backend, nbytes, owner=obj, ptr=int(view.ptr))
    return Array(store, 0, shape, ty, backend.name)


def _host_view(buf, nbytes: int) -> np.ndarray:
    """The bytes of a pinned host buffer."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(int(buf.handle)))
