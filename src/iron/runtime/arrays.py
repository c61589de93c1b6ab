"""Array interop helpers shared by the runtimes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LaunchError
from ..ir import types as t

_FOREIGN = {"torch.float32": t.f32, "torch.float16": t.f16, "torch.bfloat16": t.bf16, "torch.int32": t.i32,
            "torch.uint32": t.u32, "torch.float64": t.f64, "torch.int64": t.i64, "torch.uint64": t.u64,
            "torch.int8": t.i8, "torch.uint8": t.u8}


def foreign_dtype(dtype: Any) -> t.ScalarType | None:
    """The IR type of a non-NumPy dtype object (torch), or None."""
    return _FOREIGN.get(str(dtype))


def host_array(backend: str, param: str, value: Any, where) -> np.ndarray:
    """``value`` as a flat view, for the backends that take NumPy arrays (the interpreter, msl-cpu, Metal): anything
    else, or a non-contiguous array, is refused naming the argument."""
    if is_iron_array(value):
        check_array_backend(backend, param, value, where)
        view = value.host_view()
        if view is None:
            raise LaunchError(f"argument '{param}' lives in {value.backend} device memory", where())
        return view.reshape(-1)
    if not isinstance(value, np.ndarray):
        raise LaunchError(f"argument '{param}' is a {type(value).__module__}.{type(value).__name__}; the {backend} "
                          "backend takes NumPy arrays", where(), "convert with .cpu().numpy() or np.asarray")
    if not value.flags.c_contiguous:
        raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                          f"pass np.ascontiguousarray({param})")
    return value.reshape(-1)


def is_iron_array(value: Any) -> bool:
    """Whether ``value`` is an ``iron.Array`` (runtime/device_array.py; tested by its surface, which imports this)."""
    return hasattr(value, "host_view") and hasattr(value, "store") and isinstance(getattr(value, "backend", None), str)


def check_array_backend(backend: str, param: str, value: Any, where) -> None:
    """LaunchError when an iron Array lives on another backend than the launch's."""
    if value.backend != backend:
        raise LaunchError(f"argument '{param}' is an iron array on {value.backend}; this launch runs on {backend}",
                          where(), f"launch with backend='{value.backend}', or move it: "
                                   f"iron.asarray({param}.numpy(), backend='{backend}')")


def check_writable(kernel, arrays: dict[str, np.ndarray]) -> None:
    """Refuse a read-only NumPy array for a buffer the kernel writes."""
    for p in kernel.params:
        if p.kind == "buffer" and not p.readonly and not arrays[p.name].flags.writeable:
            raise LaunchError(f"argument '{p.name}' is read-only but {kernel.name} writes to it")


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two (contiguous) array arguments overlap in memory: NumPy arrays by their bounds, device arrays (torch,
    ``__cuda_array_interface__``) by their byte ranges. Arrays of different kinds never do (host and device)."""
    if is_iron_array(a) or is_iron_array(b):
        if not (is_iron_array(a) and is_iron_array(b)) or a.store is not b.store:
            return False
        return a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes and a.nbytes > 0 and b.nbytes > 0
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and bool(np.may_share_memory(a, b))
    ra, rb = device_range(a), device_range(b)
    return ra is not None and rb is not None and ra[0] < rb[1] and rb[0] < ra[1]  # empty ranges: None


def device_range(value: Any) -> tuple[int, int] | None:
    """[first byte, end) of a contiguous torch tensor or ``__cuda_array_interface__`` array; None for an empty one
    and anything else."""
    if type(value).__module__.startswith("torch"):
        start, nbytes = value.data_ptr(), value.numel() * value.element_size()
        return (start, start + nbytes) if nbytes else None
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is None:
        return None
    start, n = int(cai["data"][0]), 1
    for d in cai["shape"]:
        n *= int(d)
    return (start, start + n * np.dtype(cai["typestr"]).itemsize) if n else None


class HostStore:
    """An array's memory in host RAM (NumPy), for the backends that run on the host or copy at launch."""

    device = 0

    def __init__(self, nbytes: int, data: np.ndarray | None = None):
        #: the bytes: NumPy's, or memory a backend shares with its device (Metal's shared-storage MTLBuffer)
        self.data = np.empty(max(nbytes, 1), dtype=np.uint8) if data is None else data
        self.nbytes = nbytes

    def write(self, offset: int, data: np.ndarray) -> None:
        self.data[offset: offset + data.nbytes] = data

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        return self.data[offset: offset + nbytes].copy()

    def view(self, offset: int, nbytes: int) -> np.ndarray:
        """The live bytes (what a host backend's launch reads and writes)."""
        return self.data[offset: offset + nbytes]
