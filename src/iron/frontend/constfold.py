"""Compile-time arithmetic on literals and constexprs, with Python's semantics (docs/dsl.md, "Types and promotion").

Ints are Python's, unbounded up to ``MAX_INT_BITS``: a larger one is refused before it is computed, since Python would
spend minutes and gigabytes on ``1 << 10**11`` or ``10**10**10`` (the compiler must not hang). Floats are float64.
What Python refuses (``1 << -1``, ``2.0 ** 10000``, ``1.5 % 0.0``) or turns complex (``(-8.0) ** 0.5``) is a
``ConstError``, which the front-end reports at the expression. ``//`` and ``%`` on ints follow C (they truncate), as
at run time.
"""

from __future__ import annotations

import math

#: the widest int a constant expression may compute, in bits (a float64 ends at 2^1024; u64 masks need 64)
MAX_INT_BITS = 4096

SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "rem": "%", "and": "&", "or": "|",
          "xor": "^", "shl": "<<", "shr": ">>", "pow": "**"}
BITWISE = frozenset({"and", "or", "xor", "shl", "shr"})


class ConstError(Exception):
    """A constant expression Python refuses, or one too large to compute; reported at the expression."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message, self.hint = message, hint


def show(value: object) -> str:
    """A constant as an error message shows it: a huge int by its size, not its 1000 digits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**21:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[:4]}...({len(digits)} digits)"
    return repr(value)


def too_large(what: str) -> ConstError:
    return ConstError(f"{what} is larger than the {MAX_INT_BITS} bits a compile-time integer may have",
                      "constant expressions are evaluated at compile time; no Iron type holds a number this large")


def check_int(value: int, what: str) -> int:
    if abs(value).bit_length() > MAX_INT_BITS:
        raise too_large(what)
    return value


def to_float(value: bool | int | float, ty: object) -> float:
    """``value`` as a float64 on its way to the float type ``ty``; an int past float64's range is refused."""
    try:
        return float(value)
    except OverflowError:
        raise ConstError(f"integer constant {show(value)} is out of range for {ty}",
                         "the largest finite float is about 1.8e308 (f32: 3.4e38)") from None


def c_int_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_int_rem(a: int, b: int) -> int:
    return a - b * c_int_div(a, b)


def fold_binop(name: str, a: bool | int | float, b: bool | int | float) -> bool | int | float:
    """``a <name> b`` on two constants (``name`` as in ``exprs.BINOPS``)."""
    both_int = not isinstance(a, float) and not isinstance(b, float)
    shown = f"{show(a)} {SYMBOL[name]} {show(b)}"
    if name in BITWISE:
        if not both_int:
            raise ConstError(f"`{SYMBOL[name]}` needs integers")
        if name in ("shl", "shr") and b < 0:
            raise ConstError(f"negative shift count in the constant expression {shown}",
                             "Python refuses a negative shift too; shift the other way")
        if name == "shl" and a != 0 and abs(a).bit_length() + b > MAX_INT_BITS:
            raise too_large(shown)
    if name == "pow" and both_int and b > 0 and abs(a) > 1 and (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
        raise too_large(shown)
    try:
        r = _compute(name, a, b, both_int)
    except ZeroDivisionError:
        raise ConstError("division by zero in a constant expression") from None
    except (OverflowError, ValueError) as e:
        reason = "out of range of a float64" if isinstance(e, OverflowError) else str(e)
        raise ConstError(f"the constant expression {shown} cannot be computed: {reason}") from None
    if isinstance(r, complex):
        raise ConstError(f"the constant expression {shown} is a complex number", "kernels compute with real numbers")
    if isinstance(r, bool) and name not in ("and", "or", "xor"):
        r = int(r)
    if isinstance(r, int):
        check_int(r, shown)
    return r


def _compute(name: str, a, b, both_int: bool):
    if name == "add":
        return a + b
    if name == "sub":
        return a - b
    if name == "mul":
        return a * b
    if name == "div":
        return a / b
    if name == "floordiv":
        return c_int_div(int(a), int(b)) if both_int else float(a // b)
    if name == "rem":
        if not both_int and b == 0:
            raise ZeroDivisionError  # math.fmod says "math domain error"; Python's % says division by zero
        return c_int_rem(int(a), int(b)) if both_int else math.fmod(a, b)
    if name == "pow":
        return a**b
    if name == "shl":
        return a << b
    if name == "shr":
        return a >> b
    return {"and": a & b, "or": a | b, "xor": a ^ b}[name]
