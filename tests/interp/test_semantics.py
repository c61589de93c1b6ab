"""The pure-op semantics (``iron.interp.semantics``): C-like integers, saturating casts, single roundings."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iron.interp.semantics import const_array, eval_pure
from iron.ir import types as t

I32, U32, F32 = np.int32, np.uint32, np.float32
BF16 = ml_dtypes.bfloat16
# (significand bits with the hidden one, least normal exponent, greatest exponent)
FORMATS = {"f32": (24, -126, 127), "f16": (11, -14, 15), "bf16": (8, -126, 127)}


def rne(q: Fraction, fmt: str) -> float:
    """Reference round-to-nearest-even of an exact rational to an IEEE format, as a Python float."""
    p, emin, emax = FORMATS[fmt]
    if q == 0:
        return 0.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n, r = divmod(a, ulp)
    if r > ulp / 2 or (r == ulp / 2 and n % 2 == 1):
        n += 1
    value = n * ulp
    if value >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, q)
    return math.copysign(float(value), q)


def ev(opcode: str, *args: np.ndarray, rt: t.ScalarType, **attrs) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the definition must not warn, whatever the values
        out = eval_pure(opcode, [np.asarray(a) for a in args], rt, attrs)
    assert isinstance(out, np.ndarray) and out.dtype == rt.np_dtype
    return out


def test_int_div_rem_truncate_toward_zero_like_c():
    a = np.array([7, -7, 7, -7, 0, -(2**31), 5], I32)
    b = np.array([2, 2, -2, -2, 3, -1, 0], I32)
    assert ev("div", a, b, rt=t.i32).tolist() == [3, -3, -3, 3, 0, -(2**31), 0]  # INT_MIN/-1 wraps; /0 gives 0
    assert ev("rem", a, b, rt=t.i32).tolist() == [1, -1, 1, -1, 0, 0, 0]  # sign of the dividend
    assert ev("div", np.array([2**32 - 1], U32), np.array([2], U32), rt=t.u32).tolist() == [2**31 - 1]


def test_float_rem_is_fmod_and_min_max_ignore_nan():
    a = np.array([5.5, -5.5, np.nan, 1.0], F32)
    b = np.array([2.0, 2.0, 1.0, np.nan], F32)
    np.testing.assert_array_equal(ev("rem", a[:2], b[:2], rt=t.f32), [1.5, -1.5])
    np.testing.assert_array_equal(ev("min", a[2:], b[2:], rt=t.f32), [1.0, 1.0])
    np.testing.assert_array_equal(ev("max", a[2:], b[2:], rt=t.f32), [1.0, 1.0])


def test_shifts_mask_the_amount_and_shr_depends_on_signedness():
    a = np.array([-8, -8, 8, 1], I32)
    assert ev("shr", a, np.array([1, 33, -1, 0], I32), rt=t.i32).tolist() == [-4, -4, 0, 1]
    assert ev("shr", np.array([2**32 - 8], U32), np.array([1], U32), rt=t.u32).tolist() == [2**31 - 4]
    assert ev("shl", np.array([-1, 1, 3], I32), np.array([31, 32, 1], I32), rt=t.i32).tolist() == [-(2**31), 1, 6]


def test_integer_overflow_wraps_without_warnings():
    big = np.array(2**31 - 1, I32)
    assert int(ev("add", big, np.array(1, I32), rt=t.i32)) == -(2**31)
    assert int(ev("mul", np.array(65536, I32), np.array(65536, I32), rt=t.i32)) == 0
    assert int(ev("neg", np.array(-(2**31), I32), rt=t.i32)) == -(2**31)
    assert int(ev("abs", np.array(-(2**31), I32), rt=t.i32)) == -(2**31)
    assert int(ev("sub", np.array(0, U32), np.array(1, U32), rt=t.u32)) == 2**32 - 1
    assert int(ev("not", np.array(0, U32), rt=t.u32)) == 2**32 - 1


def test_cast_float_to_int_truncates_saturates_and_maps_nan_to_zero():
    x = np.array([1e10, -1e10, np.nan, -1.9, 2.9, np.inf, -np.inf, -0.5], F32)
    imax, imin = 2**31 - 1, -(2**31)
    assert ev("cast", x, rt=t.i32).tolist() == [imax, imin, 0, -1, 2, imax, imin, 0]
    assert ev("cast", x, rt=t.u32).tolist() == [2**32 - 1, 0, 0, 0, 2, 2**32 - 1, 0, 0]
    h = np.array([65504, -3.5], np.float16)
    assert ev("cast", h, rt=t.i32).tolist() == [65504, -3]


def test_cast_int_to_int_wraps_and_to_bool_tests_nonzero():
    assert ev("cast", np.array([-1, 5], I32), rt=t.u32).tolist() == [2**32 - 1, 5]
    assert ev("cast", np.array([2**31], U32), rt=t.i32).tolist() == [-(2**31)]
    assert ev("cast", np.array([0.0, -0.0, np.nan, 0.1], F32), rt=t.bool_).tolist() == [False, False, True, True]
    assert ev("cast", np.array([True, False]), rt=t.f32).tolist() == [1.0, 0.0]
    assert ev("cast", np.array([True, False]), rt=t.bf16).astype(F32).tolist() == [1.0, 0.0]


@pytest.mark.parametrize(("fmt", "rt"), [("f16", t.f16), ("bf16", t.bf16)])
def test_half_casts_round_ties_to_even(fmt, rt):
    p = FORMATS[fmt][0]
    ulp = 2.0 ** (1 - p)
    # exact ties between 1 and its neighbours go to the even significand; just above a tie goes up
    x = np.array([1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2**-20, -(1 + 3 * ulp / 2)], F32)
    got = ev("cast", x, rt=rt).astype(np.float64).tolist()
    assert got == [1.0, 1 + 2 * ulp, 1 + ulp, -(1 + 2 * ulp)]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["f16", "bf16", "f32"]))
def test_float_casts_round_once(bits, fmt):
    rt = t.SCALAR_TYPES[fmt]
    x = np.array(bits, U32).view(F32)
    if np.isfinite(x):
        assert float(ev("cast", x, rt=rt)) == rne(Fraction(float(x)), fmt)
    i = np.array(bits, U32).view(I32)
    assert float(ev("cast", i, rt=rt)) == rne(Fraction(int(i)), fmt)  # no double rounding through f32
    u = np.array(bits, U32)
    assert float(ev("cast", u, rt=rt)) == rne(Fraction(int(u)), fmt)


def test_const_array_wraps_ints_and_rounds_floats_once():
    assert const_array(-1, t.u32).dtype == np.uint32 and int(const_array(-1, t.u32)) == 2**32 - 1
    assert int(const_array(2**32 - 1, t.i32)) == -1
    assert float(const_array(0.1, t.bf16)) == rne(Fraction(0.1), "bf16")
    v = 1 + 2**-8 + 2**-30  # above a bf16 tie by less than an f32 ulp: rounding through f32 would go down
    assert float(const_array(v, t.bf16)) == 1 + 2**-7
    assert const_array(True, t.bool_).dtype == np.bool_
    assert const_array(float("-inf"), t.f32) == -np.inf


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-(2.0**20), 2.0**20, width=32),
    st.floats(-(2.0**20), 2.0**20, width=32),
    st.floats(-(2.0**40), 2.0**40, width=32),
)
def test_fma_rounds_once(a, b, c):
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    got = ev("fma", np.array(a, F32), np.array(b, F32), np.array(c, F32), rt=t.f32)
    assert float(got) == rne(exact, "f32")


def test_fma_tie_breaking_case():
    # a*b+c lies just above a tie of f32: rounding the float64 sum and then to f32 would round down to even
    a = np.array(1 + 2**-12, F32)
    c = np.array(-(2**-24) - 2**-48, F32)
    exact = Fraction(float(a)) ** 2 + Fraction(float(c))
    assert float(ev("fma", a, a, c, rt=t.f32)) == rne(exact, "f32")


def f32_ulp(x: np.ndarray) -> np.ndarray:
    x = np.abs(x.astype(F32))
    return np.spacing(np.maximum(x, np.finfo(F32).tiny)).astype(np.float64)


def test_erf_within_one_ulp_of_libm():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-5, 5, 20000), rng.standard_normal(5000) * 1e-3, [0.0, 1e-30, 4.0, 10.0]])
    x = x.astype(F32)
    got = ev("erf", x, rt=t.f32).astype(np.float64)
    ref = np.array([math.erf(v) for v in x.astype(np.float64)])
    assert np.all(np.abs(got - ref) <= f32_ulp(ref))
    assert ev("erf", np.array([np.nan, np.inf, -np.inf], F32), rt=t.f32)[1:].tolist() == [1.0, -1.0]
    assert np.isnan(ev("erf", np.array(np.nan, F32), rt=t.f32))


@pytest.mark.parametrize("opcode", ["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh"])
def test_f32_math_close_to_float64(opcode):
    x = np.random.default_rng(1).uniform(0.01, 20, 4096).astype(F32)
    oracle = (lambda v: 1 / np.sqrt(v)) if opcode == "rsqrt" else getattr(np, opcode)
    ref = oracle(x.astype(np.float64))
    got = ev(opcode, x, rt=t.f32).astype(np.float64)
    assert np.all(np.abs(got - ref) <= 0.501 * f32_ulp(ref))  # rounded once from float64


def test_math_special_values():
    x = np.array([0.0, -1.0, np.inf], F32)
    assert ev("rsqrt", x, rt=t.f32).tolist()[::2] == [np.inf, 0.0]
    assert np.isnan(ev("rsqrt", x, rt=t.f32)[1]) and np.isnan(ev("sqrt", x, rt=t.f32)[1])
    assert ev("log", x, rt=t.f32)[0] == -np.inf
    assert ev("floor", np.array([-1.5, 1.5], F32), rt=t.f32).tolist() == [-2.0, 1.0]
    assert ev("ceil", np.array([-1.5, 1.5], F32), rt=t.f32).tolist() == [-1.0, 2.0]


@pytest.mark.parametrize(("fmt", "dtype"), [("f16", np.float16), ("bf16", BF16)])
def test_half_math_rounds_once(fmt, dtype):
    x = np.linspace(-3, 3, 101).astype(dtype)
    rt = t.SCALAR_TYPES[fmt]
    x64 = x.astype(F32).astype(np.float64)
    for opcode, want in [("exp", np.exp(x64)), ("tanh", np.tanh(x64)), ("add", x64 + x64 * 0.5)]:
        args = (x, (x64 * 0.5).astype(dtype)) if opcode == "add" else (x,)
        got = ev(opcode, *args, rt=rt).astype(np.float64).tolist()
        assert got == [rne(Fraction(float(v)), fmt) for v in want]


def test_compare_select_and_bool_ops():
    a = np.array([1.0, np.nan, 3.0], F32)
    b = np.array([2.0, np.nan, 3.0], F32)
    assert ev("lt", a, b, rt=t.bool_).tolist() == [True, False, False]
    assert ev("ne", a, b, rt=t.bool_).tolist() == [True, True, False]  # NaN compares unequal
    assert ev("eq", a, b, rt=t.bool_).tolist() == [False, False, True]
    h = np.array([1.5], BF16)
    assert ev("le", h, h, rt=t.bool_).tolist() == [True]
    c = np.array([True, False, True])
    assert ev("select", c, a, b, rt=t.f32)[[0, 2]].tolist() == [1.0, 3.0]
    assert ev("xor", c, np.array(True), rt=t.bool_).tolist() == [False, True, False]
    assert ev("not", c, rt=t.bool_).tolist() == [False, True, False]


def test_zero_d_inputs_give_zero_d_arrays_and_broadcast():
    out = ev("add", np.array(2, I32), np.array(3, I32), rt=t.i32)
    assert out.shape == () and int(out) == 5
    assert ev("mul", np.array(2.0, F32), np.arange(3, dtype=F32), rt=t.f32).tolist() == [0.0, 2.0, 4.0]


def test_unknown_op_raises():
    with pytest.raises(NotImplementedError, match="frobnicate"):
        eval_pure("frobnicate", [np.array(1, I32)], t.i32, {})
