"""Array interop helpers shared by the runtimes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import LaunchError
from ..ir import types as t

_FOREIGN = {"torch.float32": t.f32, "torch.float16": t.f16, "torch.bfloat16": t.bf16, "torch.int32": t.i32,
            "torch.uint32": t.u32}


def foreign_dtype(dtype: Any) -> t.ScalarType | None:
    """The IR type of a non-NumPy dtype object (torch), or None."""
    return _FOREIGN.get(str(dtype))


def host_array(backend: str, param: str, value: Any, where) -> np.ndarray:
    """``value`` as a flat view, for the backends that take NumPy arrays (the interpreter, msl-cpu, Metal): anything
    else, or a non-contiguous array, is refused naming the argument."""
    if not isinstance(value, np.ndarray):
        raise LaunchError(f"argument '{param}' is a {type(value).__module__}.{type(value).__name__}; the {backend} "
                          "backend takes NumPy arrays", where(), "convert with .cpu().numpy() or np.asarray")
    if not value.flags.c_contiguous:
        raise LaunchError(f"argument '{param}' is not C-contiguous (strides {value.strides})", where(),
                          f"pass np.ascontiguousarray({param})")
    return value.reshape(-1)


def check_writable(kernel, arrays: dict[str, np.ndarray]) -> None:
    """Refuse a read-only NumPy array for a buffer the kernel writes."""
    for p in kernel.params:
        if p.kind == "buffer" and not p.readonly and not arrays[p.name].flags.writeable:
            raise LaunchError(f"argument '{p.name}' is read-only but {kernel.name} writes to it")


def shares_memory(a: Any, b: Any) -> bool:
    """Whether two (contiguous) array arguments overlap in memory: NumPy arrays by their bounds, device arrays (torch,
    ``__cuda_array_interface__``) by their byte ranges. Arrays of different kinds never do (host and device)."""
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
