"""Types that kernel authors write in signatures: dtypes, ``Tensor[...]``, ``T`` and ``constexpr``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.types import SCALAR_TYPES, ScalarType, bf16, f16, f32, f64, i8, i32, i64, u8, u32, u64

DType = ScalarType

#: The dtypes one ``T``-generic kernel is compiled for, one variant each.
FLOAT_DTYPES: tuple[ScalarType, ...] = (f32, f16, bf16)


class DTypeVar:
    """A dtype variable: a kernel whose parameters use ``Tensor[T]`` gets one variant per float dtype."""

    def __init__(self, name: str, choices: tuple[ScalarType, ...] = FLOAT_DTYPES):
        self.name = name
        self.choices = choices

    def __repr__(self) -> str:
        return self.name


T = DTypeVar("T")


@dataclass(frozen=True)
class TensorSpec:
    """What ``Tensor[x]`` evaluates to: a buffer parameter whose element type is a dtype or ``T``."""

    dtype: ScalarType | DTypeVar

    def __repr__(self) -> str:
        return f"Tensor[{self.dtype!r}]"

    # ``Tensor[T] | None``: an optional buffer (a launch may pass None), read by frontend/signature.py. Spelled as
    # ``typing.Optional`` so that both spellings, and ``Optional[Tensor[T]]``, are one annotation
    def __or__(self, other: object) -> object:
        if other is None:
            return Optional[self]  # noqa: UP045 - `self | None` is what this method defines
        return NotImplemented

    def __ror__(self, other: object) -> object:
        return self.__or__(other)


class Tensor:
    """Annotation for a buffer parameter: ``Tensor[T]``, ``Tensor[iron.f32]``, ``Tensor[iron.i32]``...

    At launch it accepts a C-contiguous NumPy array (any shape, used flat) or a device array of the backend.
    """

    def __class_getitem__(cls, dtype: ScalarType | DTypeVar) -> TensorSpec:
        if not isinstance(dtype, (ScalarType, DTypeVar)) or (isinstance(dtype, ScalarType) and dtype.is_bool):
            raise TypeError(f"Tensor[...] takes a dtype (iron.f32, iron.f16, iron.bf16, iron.f64, iron.i32, iron.u32, "
                            f"iron.i64, iron.u64, iron.i8, iron.u8) or iron.T, "
                            f"not {dtype!r}")
        return TensorSpec(dtype)

    def __init__(self) -> None:
        raise TypeError("Tensor is an annotation: write `x: iron.Tensor[iron.T]` in a kernel's signature")


class constexpr:
    """Annotation for a compile-time parameter: each distinct value compiles (and caches) its own variant."""

    def __init__(self) -> None:
        raise TypeError("constexpr is an annotation: write `BLOCK: iron.constexpr` in a kernel's signature")


__all__ = ["DType", "DTypeVar", "FLOAT_DTYPES", "SCALAR_TYPES", "T", "Tensor", "TensorSpec", "bf16", "constexpr", "f16",
           "f32", "f64", "i8", "i32", "i64", "u8", "u32", "u64"]
