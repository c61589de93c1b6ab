"""What kernel authors import: types (``Tensor``, ``T``, dtypes, ``constexpr``) and builtins."""

from __future__ import annotations

from .builtins import *  # noqa: F403
from .builtins import BUILTINS, Builtin
from .types import (
    FLOAT_DTYPES,
    DTypeVar,
    T,
    Tensor,
    TensorSpec,
    bf16,
    constexpr,
    f16,
    f32,
    f64,
    i8,
    i32,
    i64,
    u8,
    u32,
    u64,
)

globals().update(BUILTINS)

__all__ = ["BUILTINS", "Builtin", "DTypeVar", "FLOAT_DTYPES", "T", "Tensor", "TensorSpec", "bf16", "constexpr", "f16",
           "f32", "f64", "i8", "i32", "i64", "u8", "u32", "u64", *BUILTINS]
