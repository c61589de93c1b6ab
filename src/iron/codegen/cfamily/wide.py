"""The 64-bit and 8-bit types in the C family (tracker issue 15): wrapping i64 helpers, saturating float -> 64-bit
int conversions, and the table entries a dialect adds for them.

Iron's semantics (``iron.interp.semantics``): i64 ``/`` and ``%`` wrap at INT64_MIN / -1 as i32 does; a float ->
int cast truncates, saturates and sends NaN to 0, which C leaves undefined out of range, so every target without a
saturating instruction (PTX ``cvt.rzi`` is one) gets these helpers.
"""

from __future__ import annotations

import math

from ...ir import types as t
from . import expr as E
from .dialect import CDialect, Snippet, Template
from .expr import Expr

_I64_MIN = "(-9223372036854775807{s} - 1)"
#: the C spellings ``saturating_casts`` needs on CUDA and HIP
C_CTYPES = {"f32": "float", "f64": "double", "i32": "int", "u32": "unsigned", "i64": "long long",
            "u64": "unsigned long long"}


def wrapping_int64_helpers(qualifier: str, i64: str, u64: str, suffix: str) -> dict[str, Snippet]:
    """i64 ``abs``, ``/`` and ``%`` with Iron's wrapping semantics (C leaves INT64_MIN / -1 undefined; x86 traps)."""
    return {
        "abs_i64": Snippet(f"""\
{qualifier} {i64} iron_abs64({i64} x) {{
    return x < 0 ? ({i64})(({u64})0 - ({u64})x) : x;
}}"""),
        "div_i64": Snippet(f"""\
{qualifier} {i64} iron_div64({i64} a, {i64} b) {{
    return b == -1 ? ({i64})(({u64})0 - ({u64})a) : a / b;
}}"""),
        "rem_i64": Snippet(f"""\
{qualifier} {i64} iron_rem64({i64} a, {i64} b) {{
    return b == -1 ? 0 : a % b;
}}"""),
    }


WRAPPING_INT64_MATH = {
    "abs:i64": Template("iron_abs64({})", needs=("abs_i64",)),
    "div:i64": Template("iron_div64({}, {})", needs=("div_i64",)),
    "rem:i64": Template("iron_rem64({}, {})", needs=("rem_i64",)),
}


def saturating_casts(qualifier: str, ctypes: dict[str, str], suffix: str,
                     floats: tuple[str, ...]) -> dict[str, Snippet]:
    """``iron_{f}_to_{int}`` for each float type in ``floats`` and each int type the table has no cast for:
    truncate toward zero, saturate to the integer range, NaN -> 0. ``ctypes`` spells f32/f64/i32/u32/i64/u64."""
    bounds = {"i32": ("2147483648.0", "-2147483648.0", "2147483647", "(-2147483647 - 1)"),
              "u32": ("4294967296.0", "0.0", "4294967295u", "0u"),
              "i64": ("9223372036854775808.0", "-9223372036854775808.0", f"9223372036854775807{suffix}",
                      _I64_MIN.format(s=suffix)),
              "u64": ("18446744073709551616.0", "0.0", f"18446744073709551615u{suffix}", f"0u{suffix}")}
    out = {}
    for f in floats:
        fs = "f" if f == "f32" else ""
        for dst, (top, bottom, hi, lo) in bounds.items():
            if f == "f32" and dst in ("i32", "u32"):
                continue  # each dialect has its own f32 -> 32-bit cast
            ft, it = ctypes[f], ctypes[dst]
            # every bound is a power of two (or 0), exact in f32 and f64; truncation of what remains is in range
            out[f"{f}_to_{dst}"] = Snippet(f"""\
{qualifier} {it} iron_{f}_to_{dst}({ft} x) {{
    return x != x ? ({it})0 : x >= {top}{fs} ? {hi} : x <= {bottom}{fs} ? {lo} : ({it})x;
}}""")
    return out


def saturating_conversions(floats: tuple[str, ...]) -> dict[tuple[str, str], Template]:
    """The ``conversions`` entries that call ``saturating_casts``."""
    return {(f, dst): Template(f"iron_{f}_to_{dst}({{}})", needs=(f"{f}_to_{dst}",))
            for f in floats for dst in ("i32", "u32", "i64", "u64") if not (f == "f32" and dst in ("i32", "u32"))}


#: float math on f64 (the front-end allows these on f64: lower_builtins.F64_MATH, abs, min, max, fma)
C_MATH64 = {"sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "abs": "fabs", "min": "fmin", "max": "fmax",
            "fma": "fma"}


def wide_literal(d: CDialect, value: bool | int | float, st: t.ScalarType) -> Expr | None:
    """An i64/u64 (in the dialect's suffix), i8/u8 or finite f64 literal; None for the other types."""
    if st.is_wide and st.is_int:
        return d.literal_int64(int(value), st.is_signed)
    if st.is_narrow:
        v = int(value) & 0xFF
        v = v - 256 if st.is_signed and v > 127 else v
        return Expr(str(v), E.UNARY if v < 0 else E.PRIMARY)
    if st == t.f64 and math.isfinite(float(value)):
        text = repr(float(value))  # the shortest text that reads back as this double
        return Expr(text if any(c in text for c in ".e") else text + ".0",
                    E.UNARY if text.startswith("-") else E.PRIMARY)
    return None


def wrapping64(d: CDialect, i64: str, u64: str, op: str, a: Expr, b: Expr | None) -> Expr:
    """i64 ``op`` (``-`` alone when ``b`` is None) that wraps: computed on the unsigned type, converted back (signed
    overflow is undefined in C); a shift count ``b`` stays as it is."""
    if b is None:
        inner = E.binary("-", d.literal_int64(0, False), E.cast(u64, a))
    else:
        inner = E.binary(op, E.cast(u64, a), E.cast(u64, b) if op != "<<" else b)
    return E.cast(i64, inner)
