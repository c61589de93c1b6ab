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
