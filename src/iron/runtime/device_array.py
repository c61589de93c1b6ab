"""Device-resident arrays (issue 16): ``iron.asarray``, ``iron.empty``, ``iron.zeros``, ``iron.from_dlpack`` and
``iron.synchronize``.

An :class:`Array` is a C-contiguous block of one backend's memory: a *store* the backend allocates
(:meth:`iron.runtime.backend.Backend.array_store`) plus a byte offset, a shape and an Iron dtype. Kernels launched on
arrays use that memory in place: on Vulkan a device-local buffer bound directly, launches recorded without waiting
(``runtime/vulkan_queue.py``); on CUDA a buffer from the backend's memory resource, handed over by pointer; on the
interpreter and msl-cpu NumPy memory. HIP and Metal keep arrays in host memory for now, copied at each launch as NumPy
arrays are. ``x[a:b]`` (and ``x[i]``) is a view: the same store at another offset. ``x.numpy()`` waits for the work
queued on the backend and copies the array back.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..errors import LaunchError
from ..ir import types as t
from .arrays import HostStore

__all__ = ["Array", "HostStore", "asarray", "empty", "from_dlpack", "synchronize", "zeros"]


class Array:
    """A C-contiguous array in one backend's memory; launches take it in place (see the module docstring)."""

    __slots__ = ("_store", "_offset", "shape", "dtype", "backend", "size", "nbytes", "__weakref__")

    def __init__(self, store: Any, offset: int, shape: tuple[int, ...], dtype: t.ScalarType, backend: str):
        self._store = store
        self._offset = offset
        self.shape = shape
        self.dtype = dtype
        self.backend = backend
        self.size = math.prod(shape)
        self.nbytes = self.size * dtype.itemsize

    def _view(self, offset: int, shape: tuple[int, ...], size: int) -> Array:
        """A view of this array's store, its facts given (launch helpers make several per launch: no re-checks)."""
        view = _NEW(Array)
        view._store, view._offset, view.shape, view.dtype, view.backend = self._store, offset, shape, self.dtype, \
            self.backend
        view.size, view.nbytes = size, size * self.dtype.itemsize
        return view

    # -- facts ---------------------------------------------------------------------------------------------------

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def device(self) -> int:
        return self._store.device

    @property
    def offset(self) -> int:
        """Bytes from the start of the store (non-zero for views)."""
        return self._offset

    @property
    def store(self) -> Any:
        return self._store

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d iron array")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"iron.Array(shape={self.shape}, dtype={self.dtype}, backend='{self.backend}', device={self.device})"

    # -- data ----------------------------------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """A NumPy copy, once the work queued on the backend has finished."""
        raw = self._store.read(self._offset, self.nbytes)
        return raw.view(self.dtype.np_dtype).reshape(self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def host_view(self) -> np.ndarray | None:
        """The live NumPy view of an array kept in host memory (None for device memory)."""
        view = getattr(self._store, "view", None)
        if view is None:
            return None
        return view(self._offset, self.nbytes).view(self.dtype.np_dtype).reshape(self.shape)

    # -- views ---------------------------------------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Array:
        """``x[a:b]`` (step 1) or ``x[i]`` on the first axis: a view of the same memory."""
        if not self.shape:
            raise IndexError("a 0-d iron array cannot be indexed")
        n = self.shape[0]
        per = self.size // n if n else math.prod(self.shape[1:])  # elements of one row
        row = per * self.dtype.itemsize
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"index {int(key)} is out of bounds for axis 0 of size {n}")
            return self._view(self._offset + i * row, self.shape[1:], per)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise IndexError("iron arrays take slices with step 1 only (a view must stay contiguous)")
            stop = max(start, stop)
            return self._view(self._offset + start * row, (stop - start, *self.shape[1:]), (stop - start) * per)
        raise IndexError(f"iron arrays take an int or a slice on the first axis, got {type(key).__name__}; "
                         "copy with .numpy() for other indexing")

    def reshape(self, *shape: Any) -> Array:
        """The same memory seen with another shape (one -1 allowed)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if len(shape) == 1 and shape[0] == -1:  # flattening, the common case in launch helpers
            return self._view(self._offset, (self.size,), self.size)
        dims = [int(d) for d in shape]
        if dims.count(-1) > 1:
            raise ValueError("reshape takes at most one -1")
        if -1 in dims:
            rest = math.prod(d for d in dims if d != -1)
            dims[dims.index(-1)] = self.size // rest if rest else 0
        if math.prod(dims) != self.size or any(d < 0 for d in dims):
            raise ValueError(f"cannot reshape an array of {self.size} elements to {tuple(shape)}")
        return self._view(self._offset, tuple(dims), self.size)

    # -- interchange ---------------------------------------------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        ptr = getattr(self._store, "ptr", None)
        if ptr is None:
            raise AttributeError(f"an iron array on {self.backend} has no __cuda_array_interface__")
        return {"shape": self.shape, "typestr": self.dtype.np_dtype.str, "data": (ptr + self._offset, False),
                "version": 3, "strides": None}

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        view = self.host_view()
        if view is not None:
            return view.__dlpack__(*args, **kwargs)
        export = getattr(self._store, "dlpack", None)
        if export is None:
            raise BufferError(f"an iron array on {self.backend} cannot be exported through DLPack yet; "
                              "copy it with .numpy()")
        return export(self, *args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self.host_view() is not None:
            return (1, 0)  # kDLCPU
        dev = getattr(self._store, "dlpack_device", None)
        if dev is None:
            raise BufferError(f"an iron array on {self.backend} has no DLPack device")
        return dev


# -- construction ------------------------------------------------------------------------------------------------

_NEW = object.__new__

def _dtype(dtype: Any) -> t.ScalarType:
    if isinstance(dtype, t.ScalarType):
        return dtype
    named = {str(ty): ty for ty in t.BUFFER_ELEM_TYPES}
    if isinstance(dtype, str) and dtype in named:
        return named[dtype]
    try:
        ty = t.scalar_type_of_numpy(np.dtype(dtype))
    except TypeError:
        ty = None
    if ty is None:
        raise TypeError(f"iron arrays hold f32, f16, bf16, f64, i32, u32, i64, u64, i8 or u8 values, not {dtype}")
    return ty


def _backend(backend: str | None, device: int | None):
    from . import ALIASES, best_backend, get_backend

    name = backend or os.environ.get("IRON_BACKEND") or best_backend()
    be = get_backend(ALIASES.get(name, name))
    if device is not None and int(device) != be.array_device():
        raise LaunchError(f"the {be.name} backend runs on device {be.array_device()}, not {device}",
                          hint="choose the device with the backend's environment variable (e.g. IRON_CUDA_DEVICE)")
    return be


def empty(shape: Any, dtype: Any = t.f32, backend: str | None = None, device: int | None = None) -> Array:
    """An uninitialised array on ``backend`` (default: ``IRON_BACKEND``, else the best backend present)."""
    dims = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"negative dimension in shape {dims}")
    ty, be = _dtype(dtype), _backend(backend, device)
    nbytes = math.prod(dims) * ty.np_dtype.itemsize
    return Array(be.array_store(nbytes), 0, dims, ty, be.name)


def zeros(shape: Any, dtype: Any = t.f32, backend: str | None = None, device: int | None = None) -> Array:
    x = empty(shape, dtype, backend, device)
    if x.nbytes:
        x.store.write(0, np.zeros(x.nbytes, dtype=np.uint8))
    return x


def asarray(obj: Any, backend: str | None = None, device: int | None = None) -> Array:
    """``obj`` (NumPy, anything ``np.asarray`` takes, another array through DLPack, or an iron Array) as an Array
    on ``backend``; an Array already there is returned as it is."""
    if isinstance(obj, Array):
        if (backend is None or obj.backend == _backend(backend, None).name) and device in (None, obj.device):
            return obj
        obj = obj.numpy()
    elif not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack__"):
        obj = _host_from_dlpack(obj)
    arr = np.ascontiguousarray(obj)
    x = empty(arr.shape, arr.dtype, backend, device)
    if x.nbytes:
        x.store.write(0, arr.reshape(-1).view(np.uint8))
    return x


def from_dlpack(obj: Any, backend: str | None = None) -> Array:
    """An Array from a DLPack producer: a CUDA one becomes a CUDA array over the same memory (no copy, ``obj`` kept
    alive), a host one is copied to ``backend``."""
    dev = obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else 1
    if dev in (2, 3):  # kDLCUDA, kDLCUDAHost
        be = _backend(backend or "cuda", None)
        wrap = getattr(be, "array_from_dlpack", None)
        if wrap is None:
            raise LaunchError(f"a CUDA DLPack array cannot become an array of the {be.name} backend without a copy",
                              hint="copy it to the host first")
        return wrap(obj)
    return asarray(_host_from_dlpack(obj), backend)


def _host_from_dlpack(obj: Any) -> np.ndarray:
    try:
        return np.from_dlpack(obj)
    except (BufferError, TypeError, RuntimeError) as e:
        raise LaunchError(f"cannot read a {type(obj).__name__} through DLPack on the host ({e})",
                          hint="pass a NumPy array, or use iron.from_dlpack for CUDA arrays") from None


def graph(backend: str | None = None) -> Any:
    """``with iron.graph(backend) as g:`` records the launches made inside (not run); ``g.launch()`` replays them
    without waiting. CUDA: a CUDA graph (``iron.cuda.graph``); Vulkan: one command buffer submitted per replay.
    Launches on device arrays only; memory allocated inside lives as long as ``g``; arrays made before must outlive
    it. Other backends refuse with a LaunchError."""
    from . import ALIASES, get_backend

    return get_backend(ALIASES.get(backend, backend) if backend else None).graph()


def synchronize(backend: str | None = None) -> None:
    """Wait for the work queued on ``backend`` (default: every backend this process has used)."""
    from . import _INSTANCES, ALIASES, get_backend

    if backend is not None:
        get_backend(ALIASES.get(backend, backend)).synchronize()
        return
    for be in list(_INSTANCES.values()):
        be.synchronize()
