"""The float math added through the op table (issue 13): rint, sigmoid, silu, gelu, atan2, pow, copysign, isnan,
isinf -- on every backend and dtype, against float64 NumPy oracles written here (independent of ``iron.ir.mathref``).

Tolerances (on top of the final rounding to the dtype, ``test_kernels.TOLERANCE``):
- rint, copysign, isnan, isinf: exact on every backend.
- sigmoid, silu, atan2, pow: 8 ulp of f32 (``math_fn``), as for exp/log. Vulkan's pow is GLSL ``Pow``, specified
  only as exp2(y * log2(x)): its allowance is that formula's error bound, (3 + 2|y log2 x|) ulp plus log2's 2^-21
  absolute error times |y|, relative to the result.
- gelu: computed as x/2 * (1 + erf(x / sqrt 2)) in f32 on compiled backends, as torch does: 1 + erf cancels for
  x below about -3, where the error is up to an f32 ulp of 1 times |x|/2, so 2^-23 |x| absolute is allowed there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import iron
from iron import Tensor, kernel, program_id

from ..backends.capabilities import caps
from . import kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import (
    F32_UNIT,
    as_dtype,
    assert_close,
    assert_exact,
    f64,
    int_poisoned,
    poisoned,
)

UNARY, BINARY = K.NEW_UNARY_OPS, K.BINARY_OPS


@kernel
def folded(out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = iron.atan2(1.0, -2.0) + iron.pow(2.0, 0.5) * 10.0 + iron.gelu(-1.0) * 100.0 + iron.rint(2.5) * 1000.0


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.5, -3.5, 100.0, -100.0, -90.0, 20.0])

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))


def _gelu(x):
    # through erfc below -1, where 1 + erf would lose the tiny result's digits in float64 too
    return np.where(x < -1, 0.5 * x * _erfc(-x / math.sqrt(2.0)), 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))


ORACLES = {"rint": np.rint, "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "gelu": _gelu,
           "atan2": np.arctan2, "pow": np.power, "copysign": np.copysign}


def _finite_in(dtype: str, values: np.ndarray) -> np.ndarray:
    limit = 60000.0 if dtype == "f16" else 3e38
    return np.clip(values, -limit, limit)


@pytest.mark.parametrize("op", UNARY)
def test_unary_math_ops(backend, op, dtype, rng):
    n = 1500
    x = np.concatenate([SPECIAL, 6 * rng.standard_normal(n), np.round(rng.standard_normal(200) * 8) + 0.5])
    x = as_dtype(_finite_in(dtype, x) if dtype == "f16" else x, dtype)
    out = poisoned(x.size, dtype)
    K.new_unary_math[x.size](x, out, UNARY.index(op), backend=backend)
    with np.errstate(invalid="ignore", over="ignore"):
        want = ORACLES[op](f64(x))
    if op == "rint":
        assert_exact(out, want, "rint")
        return
    ax = np.abs(f64(x))
    extra = np.zeros(x.size)
    if caps(backend).composite_math_in_f32:
        if op == "gelu":
            extra += np.where(f64(x) < 0, 2.0 * F32_UNIT * ax, 0.0)
        if op == "silu":  # sigmoid's subnormal results, for x below -87, carry few bits: times |x|
            extra += 2.0**-148 * ax
    extra += flushed_subnormals(backend, want, ax if op == "silu" else 1.0)
    assert_close(out, want, dtype, math_fn=True, extra=extra, what=op)


def flushed_subnormals(backend: str, want: np.ndarray, scale=1.0) -> np.ndarray:
    """A device without DenormPreserve may flush f32 subnormal results (and intermediates, times ``scale``) to zero:
    lavapipe does."""
    if caps(backend).denorm_preserve:
        return np.zeros(np.shape(want))
    return np.where(np.abs(want) < 2.0**-126 * np.maximum(scale, 1.0), 2.0**-126 * np.maximum(scale, 1.0), 0.0)


def _binary_inputs(op: str, dtype: str, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    sx, sy = np.repeat(SPECIAL, SPECIAL.size), np.tile(SPECIAL, SPECIAL.size)
    if op == "pow":
        base = np.exp(rng.uniform(-4, 4, n)) * rng.choice([1.0, 1.0, -1.0], n)
        expo = rng.uniform(-3, 3, n)
        ints = base < 0  # a negative base needs an integer exponent for a real result
        expo[ints] = np.round(expo[ints] * 2)
        if dtype == "f16":  # keep |result| inside f16's range
            expo = np.clip(expo, -2, 2)
        x, y = np.concatenate([sx, base]), np.concatenate([sy, expo])
    else:
        x, y = np.concatenate([sx, 5 * rng.standard_normal(n)]), np.concatenate([sy, 5 * rng.standard_normal(n)])
    return as_dtype(x, dtype), as_dtype(y, dtype)


@pytest.mark.parametrize("op", BINARY)
def test_binary_math_ops(backend, op, dtype, rng):
    x, y = _binary_inputs(op, dtype, rng, 1500)
    out = poisoned(x.size, dtype)
    K.binary_math[x.size](x, y, out, BINARY.index(op), backend=backend)
    with np.errstate(all="ignore"):
        want = ORACLES[op](f64(x), f64(y))
        big = np.abs(want) > float(np.finfo(np.float32 if dtype != "f16" else np.float16).max)
        want = np.where(big, np.copysign(np.inf, want), want)  # past the dtype's range the rounded result is inf
    if op == "copysign":
        assert_exact(out, want, "copysign")
        return
    ns = SPECIAL.size**2
    # special operands: C's results exactly where they are exact (zeros, infinities, NaN, ones, pi multiples aside)
    exact = ~np.isfinite(want[:ns]) | (want[:ns] == 0) | (np.abs(want[:ns]) == 1)
    assert_exact(out[:ns][exact], want[:ns][exact], f"{op} of special values")
    extra = None
    if op == "pow" and caps(backend).glsl_exp_pow:
        with np.errstate(all="ignore"):
            t = np.abs(f64(y) * np.log2(np.abs(f64(x))))
            extra = np.nan_to_num(((3 + 2 * t) * 2.0**-23 + np.abs(f64(y)) * 2.0**-21) * np.abs(want))
        extra = extra + flushed_subnormals(backend, want)
    assert_close(out, want, dtype, math_fn=True, extra=extra, what=op)


def test_isnan_isinf(backend, dtype, rng):
    x = as_dtype(np.concatenate([SPECIAL, rng.standard_normal(300) * 1e3]), dtype)
    out = int_poisoned(x.size)
    K.float_class[x.size](x, out, backend=backend)
    want = np.isnan(f64(x)).astype(np.int32) + 2 * np.isinf(f64(x)).astype(np.int32)
    assert_exact(out, want, "isnan + 2 * isinf")


def test_constant_operands_fold_to_the_rounded_reference(backend):
    out = poisoned(4, "f32")
    folded[4](out, backend=backend)
    want = np.float32(np.float32(math.atan2(1.0, -2.0)) + np.float32(np.float32(math.sqrt(2.0)) * 10.0)
                      + np.float32(np.float32(-1.0 * 0.5 * math.erfc(1 / math.sqrt(2.0))) * 100.0)
                      + np.float32(2000.0))
    assert "atan2" not in folded.ir(dtype=None) and "pow" not in folded.ir(dtype=None)
    assert_close(out, np.full(4, float(want)), "f32", n_ops=4)


def test_undefined_constant_math_is_a_located_error(tmp_path):
    mod = module_from_source(tmp_path, "undefined_math", HEADER + "def bad(out: iron.Tensor[iron.f32]):\n"
                             "    out[0] = iron.pow(-8.0, 0.5)\n")
    with pytest.raises(iron.CompileError, match=r"pow\(-8.0, 0.5\) is undefined") as e:
        mod.bad.ir(dtype=None)
    assert "undefined_math.py:6" in str(e.value)


@pytest.mark.parametrize("call, message", [("iron.atan2(1.0)", "atan2\\(\\) takes 2 arguments, got 1"),
                                           ("iron.sigmoid(1.0, 2.0)", "sigmoid\\(\\) takes 1 argument, got 2")])
def test_wrong_arity_is_a_located_error(call, message, tmp_path):
    mod = module_from_source(tmp_path, "arity_kernel",
                             HEADER + f"def k(out: iron.Tensor[iron.f32]):\n    out[0] = {call}\n")
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.k.ir(dtype=None)
    assert "arity_kernel.py:6" in str(e.value)
