"""Array interop helpers shared by the runtimes."""

from __future__ import annotations

from typing import Any

from ..ir import types as t

_FOREIGN = {"torch.float32": t.f32, "torch.float16": t.f16, "torch.bfloat16": t.bf16, "torch.int32": t.i32,
            "torch.uint32": t.u32}


def foreign_dtype(dtype: Any) -> t.ScalarType | None:
    """The IR type of a non-NumPy dtype object (torch), or None."""
    return _FOREIGN.get(str(dtype))
