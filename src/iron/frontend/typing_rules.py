"""Type promotion rules of the DSL (documented in docs/dsl.md, section "Types and promotion").

- Literals are *weak*: ``x + 1`` keeps x's type; an int literal meeting a float becomes that float; a float literal
  meeting an int value gives f32. Literal-only expressions are evaluated at compile time in Python.
- Two ints of the same type keep it; otherwise C's usual arithmetic conversions: the wider rank wins (i64/u64 over
  i32/u32), and at equal rank the unsigned type (i32 with u32 gives u32, i64 with u64 gives u64); i64 with u32 gives
  i64. bool counts as i32; i8/u8 are storage types whose values are i32 already.
- Any int with any float gives the float; f32 with f16/bf16 gives f32; f64 with any float gives f64.
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
        if I32_MIN <= value <= I32_MAX:
            return t.i32
        if 0 <= value <= 2**32 - 1:
            return t.u32
        return t.i64 if value <= 2**63 - 1 else t.u64  # past either end const_fits refuses it where it lands
    return t.f32


def compute_type(ty: t.ScalarType, native_half: bool) -> t.ScalarType:
    """The type arithmetic on ``ty`` is done in: f16/bf16 widen to f32 unless native half math is on."""
    if ty.is_half and not native_half:
        return t.f32
    if ty.is_narrow:
        return t.i32
    return ty


def promote(a: t.ScalarType, b: t.ScalarType, native_half: bool) -> t.ScalarType:
    """The common type of two typed operands (C-like usual arithmetic conversions)."""
    if a.is_bool:
        a = t.i32
    if b.is_bool:
        b = t.i32
    a, b = (t.i32 if x.is_narrow else x for x in (a, b))
    if a.is_float or b.is_float:
        if a == b:
            return compute_type(a, native_half)
        if not a.is_float:
            return compute_type(b, native_half)
        if not b.is_float:
            return compute_type(a, native_half)
        if t.f64 in (a, b):
            return t.f64
        return t.f32  # mixed float widths (f32/f16/bf16) meet in f32
    if a == b:
        return a
    if a.bits != b.bits:  # the wider rank wins; i64 holds every u32
        return a if a.bits > b.bits else b
    return a if not a.is_signed else b  # equal rank: C converts to unsigned


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
        lo, hi = t.INT_RANGE[ty.name]
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
