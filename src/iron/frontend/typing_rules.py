"""Type promotion rules of the DSL (documented in docs/dsl.md, section "Types and promotion").

- Literals are *weak*: ``x + 1`` keeps x's type; an int literal meeting a float becomes that float; a float literal
  meeting an int value gives f32. Literal-only expressions are evaluated at compile time in Python.
- Two ints of the same type keep it; i32 with u32 gives u32 (C's usual arithmetic conversions); bool counts as i32.
- Any int with any float gives the float; f32 with f16/bf16 gives f32.
- f16 and bf16 are storage types: arithmetic, math and SIMD reductions on them run in f32 and the result is f32,
  rounded back only when stored (or cast). ``@kernel(native_half=True)`` keeps same-type half arithmetic in half.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import types as t

I32_MIN, I32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class Const:
    """A compile-time value (literal, constexpr, or an expression of them); typed when it meets a Value."""

    value: bool | int | float

    @property
    def type(self) -> t.ScalarType:
        return literal_type(self.value)


def literal_type(value: bool | int | float) -> t.ScalarType:
    if isinstance(value, bool):
        return t.bool_
    if isinstance(value, int):
        return t.i32 if value <= I32_MAX else t.u32
    return t.f32


def compute_type(ty: t.ScalarType, native_half: bool) -> t.ScalarType:
    """The type arithmetic on ``ty`` is done in: f16/bf16 widen to f32 unless native half math is on."""
    if ty.is_half and not native_half:
        return t.f32
    return ty


def promote(a: t.ScalarType, b: t.ScalarType, native_half: bool) -> t.ScalarType:
    """The common type of two typed operands (C-like usual arithmetic conversions)."""
    if a.is_bool:
        a = t.i32
    if b.is_bool:
        b = t.i32
    if a.is_float or b.is_float:
        if a == b:
            return compute_type(a, native_half)
        if not a.is_float:
            return compute_type(b, native_half)
        if not b.is_float:
            return compute_type(a, native_half)
        return t.f32  # mixed float widths (f32/f16/bf16) meet in f32
    if a == b:
        return a
    return t.u32  # i32 with u32: C converts to unsigned


def promote_with_literal(a: t.ScalarType, lit: Const, native_half: bool) -> t.ScalarType:
    """The type of ``value op literal``: the literal adapts unless it is a float meeting an int."""
    if isinstance(lit.value, float) and not a.is_float:
        return t.f32
    if a.is_bool and not isinstance(lit.value, bool):
        return t.i32 if isinstance(lit.value, int) else t.f32
    return compute_type(a, native_half)


def const_fits(value: bool | int | float, ty: t.ScalarType) -> bool:
    """Whether a Python constant converts to ``ty`` without changing (ints in range; floats only to floats)."""
    if ty.is_bool:
        return isinstance(value, bool)
    if ty.is_int:
        if isinstance(value, float):
            return False
        lo, hi = (I32_MIN, I32_MAX) if ty == t.i32 else (0, 2**32 - 1)
        return lo <= int(value) <= hi
    return True


def assignable(src: t.ScalarType, dst: t.ScalarType) -> bool:
    """Implicit conversion on assignment/store/argument: any number to a float, ints/bools to ints; never float to
    int or number to bool (those need an explicit ``cast``)."""
    if src == dst:
        return True
    if dst.is_float:
        return True
    if dst.is_int:
        return not src.is_float
    return False
