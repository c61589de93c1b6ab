"""f32 ``exp``, ``exp2`` and ``tanh`` for the SPIR-V emitter, from f32 add/sub/mul, integer and select instructions.

GLSL.std.450 ``Exp``/``Exp2`` are only promised 3 + 2|x| ulp and ``Tanh`` inherits that through its exp formula.
lavapipe is that loose: exp was 64 ulp off near 85, exp2 3 ulp, and its tanh cancels near 0 (tanh(1e-30) gave
3e-8, tanh(1.136e-6) 7.5% off). Iron's semantics are the correctly rounded result (the interpreter, msl-cpu and CUDA
are within 2 ulp), so these sequences use only what Vulkan makes exact or correctly rounded for f32: OpFAdd/OpFSub/
OpFMul (decorated NoContraction), NClamp, RoundEven, integer instructions, comparisons and OpSelect, and products
and sums left contractable (``madd``: no NoContraction) where either reading (fused, or a rounded product then a
rounded sum) serves: the steps that must be exact are exact both ways, and the polynomials' steps are far below the
result's last bit. One f32 path serves every device, so results do not depend on ``shaderFloat64`` nor on the
precision of a device's f64 arithmetic.

Cost (issue 16: exp, silu and their kin were bound by this sequence on NVIDIA's Vulkan driver, not by memory): the
argument is clamped by one NClamp and only +inf and NaN are selected after (the core's own rounding gives 0 below
the range); k is rounded by adding 1.5 * 2^23 (where the module declares RoundingModeRTE; else RoundEven, then the
add) and read from the sum's low bits, so no float-to-integer conversion; polynomials are contractable multiply-add
chains. The bf16 ``unary`` kernel at 8 elements a thread lost its 8 conversions and 8 RoundEvens, and 41 SPIR-V
instructions an element beyond relu's became 27 with GLSL Fma (measured on the H200 at c4ceba0), 35 with the
multiply-adds as separate instructions for the driver to fuse (GLSL Fma is a software call on lavapipe).

- ``exp``: t = x * log2(e) + 1.5 * 2^23 (a contractable multiply-add, RNE), k = t - 1.5 * 2^23 = round(x log2 e)
  (exact), r = (x - k * C1) - k * C2 with ln 2 = C1 + C2 (Cody-Waite: C1 = 0.693359375 has 9 significant bits, so k *
  C1 and x - k * C1 are exact for |k| <= 151), |r| <~ ln2/2; exp(r) = 1 + (r + r^2 q(r)) with q of degree 4 fitted
  once at import (Chebyshev; truncation < 1e-10); then times 2^k: k + 64 (x < 0) or k - 64 is added to the exponent
  field (bits(t) << 23 is k << 23; a normal number either way), and one product by 2^-64 or 2^64 rounds the result
  once, subnormal results included. x > 88.7228317 (the largest f32 with a finite result) gives +inf, x below -104 is
  clamped there (exp(-104) < 2^-150 rounds to 0), NaN gives NaN.
- ``exp2``: t = x + 1.5 * 2^23 (RNE), k = t - 1.5 * 2^23 = RoundEven(x), r = x - k (both exact), 2^r = 1 + r Q(r)
  with Q of degree 6 fitted on [-1/2, 1/2], then the same scaling; x >= 128 gives +inf, x < -151 gives 0.
- ``tanh``, on a = |x| (the sign is put back on the bits, so tanh(-0) is -0): a < 0.55: a + a s P(s), s = a^2, P of
  degree 5 (the correction is at most a tenth of a, so its rounding costs little, and tiny x gives x itself: no
  cancellation); else 1 - 2 / (exp(2a) + 1) with the exp above, a clamped to 10 (tanh is 1 in f32 from 9.02 on).
  OpFDiv is only promised 2.5 ulp, so the reciprocal is refined once: d * y0 is split exactly into h + l
  (Veltkamp/Dekker, no fma needed), y = y0 + y0 ((1 - h) - l): about half an ulp whatever the device's division.

Measured on lavapipe over 10 million random arguments per function (2026-12-04, this sequence) and the edge points:
all three within 1 ulp of the correctly rounded result (94-96 % exactly rounded), subnormal results included
(tests/codegen_spirv/test_precise_exp.py checks 2 ulp, one subnormal ulp below 2^-126).
A device that flushes f32 subnormals (NVIDIA without DenormPreserve) gives 0 there.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.polynomial import chebyshev

_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375  # 9 significant bits: k * _LN2_HI is exact in f32 for |k| < 2^15
_LN2_LO = math.log(2.0) - _LN2_HI  # -2.1219444e-4, rounded to f32 where it is emitted
_EXP_HI = 88.72283172607422  # 0x42B17216: the largest f32 whose exp rounds to a finite f32
_EXP_LO = -104.0  # exp(-104) < 2^-150: 0 from here down
_EXP2_HI = 127.99999237060547  # the f32 below 128: 2^x is finite up to here
_EXP2_LO = -151.0  # 2^-151 < 2^-150: 0 from here down
_TANH_SMALL = 0.55  # below: the odd polynomial; above: 1 - 2 / (exp(2|x|) + 1), at least 0.5
_TANH_CLAMP = 10.0  # tanh(10) is 1 in f32 and exp(20) stays finite
_SHIFTER = 12582912.0  # 1.5 * 2^23: an integer k (|k| < 2^22) added to it is exact, held in the low mantissa bits
_SPLIT = 4097.0  # Veltkamp's splitter for f32 (2^12 + 1): halves of 12 significant bits


def _fit(f, degree: int, lo: float, hi: float) -> tuple[float, ...]:
    """Power-basis coefficients (highest degree first, rounded to f32) of f interpolated at Chebyshev points."""
    c = chebyshev.Chebyshev.interpolate(f, degree, domain=[lo, hi]).convert(
        kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1])
    return tuple(float(np.float32(v)) for v in reversed(c.coef))


def _series(r: np.ndarray, terms: list[float]) -> np.ndarray:
    return sum(c * r**i for i, c in enumerate(terms))


@lru_cache(maxsize=1)
def exp_coefficients() -> tuple[float, ...]:
    """q with exp(r) = 1 + r + r^2 q(r) on |r| <= 0.35 (a little past ln2/2: k may round either way)."""
    terms = [1.0 / math.factorial(n + 2) for n in range(16)]  # the series: no cancellation near r = 0
    return _fit(lambda r: _series(r, terms), 4, -0.35, 0.35)


@lru_cache(maxsize=1)
def exp2_coefficients() -> tuple[float, ...]:
    """Q with 2^r = 1 + r Q(r) on |r| <= 1/2."""
    ln2 = math.log(2.0)
    terms = [ln2 ** (n + 1) / math.factorial(n + 1) for n in range(20)]
    return _fit(lambda r: _series(r, terms), 6, -0.5, 0.5)


@lru_cache(maxsize=1)
def tanh_coefficients() -> tuple[float, ...]:
    """P with tanh(x) = x + x s P(s), s = x^2 <= 0.55^2 (the interpolation points stay off s = 0)."""
    def p(s: np.ndarray) -> np.ndarray:
        x = np.sqrt(s)
        return (np.tanh(x) / x - 1.0) / s

    return _fit(p, 5, 0.0, _TANH_SMALL**2)


class PreciseExp:
    """Mixin for the SPIR-V emitter (needs ``self.b``, ``self.inst``, ``self.glsl``, ``self.madd``, ``self.f32c``,
    ``self.rounding_rte``)."""

    def precise_exp(self, code: str, x: int) -> int:
        """f32 ``exp``, ``exp2`` or ``tanh`` (``code``) of an f32 register, NaN, infinities and zeros included."""
        if code == "tanh":
            return self._tanh(x)
        b, op = self.b, self.inst
        f32, boolean = b.type_float(32), b.type_bool()
        hi, lo = (_EXP_HI, _EXP_LO) if code == "exp" else (_EXP2_HI, _EXP2_LO)
        core = self._exp_core if code == "exp" else self._exp2_core
        # clamped first (NClamp: exact; a NaN becomes a bound), so k stays within [-151, 128] in every lane; below
        # ``lo`` the core's own rounding gives 0, above ``hi`` the select gives +inf, NaN gives itself
        y = core(self.glsl("NClamp", f32, x, self.f32c(lo), self.f32c(hi)))
        y = op("OpSelect", f32, op("OpFOrdGreaterThan", boolean, x, self.f32c(hi)), self.f32c(math.inf), y)
        return op("OpSelect", f32, op("OpIsNan", boolean, x), x, y)

    def _poly(self, v: int, coeffs: tuple[float, ...]) -> int:
        """The polynomial by ``madd`` steps (fused or a rounded product and sum: either is accurate
        enough here, the final 1 + p carries the result's one significant rounding)."""
        acc = self.f32c(coeffs[0])
        for c in coeffs[1:]:
            acc = self.madd(acc, v, self.f32c(c))
        return acc

    def _exp_core(self, x: int) -> int:
        """exp(x) for x in [-104, 88.73] (module docstring)."""
        f32 = self.b.type_float(32)
        t, k = self._rounded(x, _LOG2E)
        r = self.madd(k, self.f32c(-_LN2_HI), x)  # exact, fused or not
        r = self.madd(k, self.f32c(-_LN2_LO), r)
        p = self.madd(self.inst("OpFMul", f32, r, r), self._poly(r, exp_coefficients()), r)
        return self._scale(self.inst("OpFAdd", f32, self.f32c(1.0), p), t, x)

    def _exp2_core(self, x: int) -> int:
        """2^x for x in [-151, 128) (module docstring)."""
        f32 = self.b.type_float(32)
        t, k = self._rounded(x)
        r = self.inst("OpFSub", f32, x, k)  # exact
        p = self.inst("OpFMul", f32, r, self._poly(r, exp2_coefficients()))
        return self._scale(self.inst("OpFAdd", f32, self.f32c(1.0), p), t, x)

    def _rounded(self, x: int, scale: float | None = None) -> tuple[int, int]:
        """(t, k): k = x (times ``scale``) rounded to an integer, ties to even, and t = _SHIFTER + k, exact. Where the
        module declares RoundingModeRTE (``rounding_rte``: adds round to nearest even), one add (a ``madd`` with a
        scale, fused or not) rounds and a subtraction gives k back (no RoundEven: NVIDIA runs it in the slow conversion
        pipe); elsewhere an add may round toward zero, so k comes from RoundEven and t from adding it (exact in any
        rounding mode)."""
        f32 = self.b.type_float(32)
        if self.rounding_rte:
            if scale is None:
                t = self.inst("OpFAdd", f32, x, self.f32c(_SHIFTER))
            else:
                t = self.madd(x, self.f32c(scale), self.f32c(_SHIFTER))
            return t, self.inst("OpFSub", f32, t, self.f32c(_SHIFTER))
        v = x if scale is None else self.inst("OpFMul", f32, x, self.f32c(scale))
        k = self.glsl("RoundEven", f32, v)
        return self.inst("OpFAdd", f32, k, self.f32c(_SHIFTER)), k

    def _scale(self, y: int, t: int, x: int) -> int:
        """y * 2^k for y in [0.7, 1.42] and t = _SHIFTER + k, k in [-151, 128] (an integer, negative only where x
        is): bits(t) = bits(_SHIFTER) + k, whose low 9 bits of bits(_SHIFTER) are 0, so bits(t) << 23 = k << 23
        (mod 2^32). The exponent field of y gets k + 64 (x < 0) or k - 64 added (a normal number either way, no
        conversion instruction), then one product by 2^-64 or 2^64 rounds it once: subnormal results included."""
        b, op = self.b, self.inst
        f32, i32 = b.type_float(32), b.type_int(32, True)
        neg = op("OpFOrdLessThan", b.type_bool(), x, self.f32c(0.0))
        shift = op("OpSelect", i32, neg, b.const_int(64 << 23), b.const_int(-(64 << 23)))
        bits = op("OpIAdd", i32, op("OpBitcast", i32, y),
                  op("OpShiftLeftLogical", i32, op("OpBitcast", i32, t), b.const_int(23)))
        y1 = op("OpBitcast", f32, op("OpIAdd", i32, bits, shift))
        return op("OpFMul", f32, y1, op("OpSelect", f32, neg, self.f32c(2.0 ** -64), self.f32c(2.0 ** 64)))

    def _tanh(self, x: int) -> int:
        b, op = self.b, self.inst
        f32, u32, boolean = b.type_float(32), b.type_int(32, False), b.type_bool()
        ax = self.glsl("FAbs", f32, x)
        s = op("OpFMul", f32, ax, ax)
        poly = self._poly(s, tanh_coefficients())
        small = op("OpFAdd", f32, ax, op("OpFMul", f32, op("OpFMul", f32, ax, s), poly))
        # the large branch on min(|x|, 10) (NaN made 0: the select below answers NaN): exp(2a) in [1, e^20]
        a = op("OpSelect", f32, op("OpFOrdLessThan", boolean, ax, self.f32c(_TANH_CLAMP)), ax, self.f32c(_TANH_CLAMP))
        d = op("OpFAdd", f32, self._exp_core(op("OpFMul", f32, a, self.f32c(2.0))), self.f32c(1.0))
        big = op("OpFSub", f32, self.f32c(1.0), op("OpFMul", f32, self.f32c(2.0), self._reciprocal(d)))
        y = op("OpSelect", f32, op("OpFOrdLessThan", boolean, ax, self.f32c(_TANH_SMALL)), small, big)
        # both branches are computed on |x| (so tanh(-0) is -0 without relying on the sign of a zero product)
        sign = op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x80000000))
        y = op("OpBitcast", f32, op("OpBitwiseOr", u32, op("OpBitcast", u32, y), sign))
        return op("OpSelect", f32, op("OpIsNan", boolean, x), x, y)

    def _reciprocal(self, d: int) -> int:
        """1/d for d in [2, 5e8], within about half an ulp: OpFDiv (2.5 ulp in Vulkan) and one Newton step whose
        residual 1 - d * y0 is formed exactly (Dekker's product of the Veltkamp halves)."""
        f32, op = self.b.type_float(32), self.inst
        y0 = op("OpFDiv", f32, self.f32c(1.0), d)

        def split(v: int) -> tuple[int, int]:
            c = op("OpFMul", f32, v, self.f32c(_SPLIT))
            hi = op("OpFSub", f32, c, op("OpFSub", f32, c, v))
            return hi, op("OpFSub", f32, v, hi)

        (dh, dl), (yh, yl) = split(d), split(y0)
        h = op("OpFMul", f32, d, y0)
        l = op("OpFSub", f32, op("OpFMul", f32, dh, yh), h)  # noqa: E741 - Dekker's name for the low part
        l = op("OpFAdd", f32, l, op("OpFMul", f32, dh, yl))
        l = op("OpFAdd", f32, l, op("OpFMul", f32, dl, yh))
        l = op("OpFAdd", f32, l, op("OpFMul", f32, dl, yl))
        residual = op("OpFSub", f32, op("OpFSub", f32, self.f32c(1.0), h), l)  # 1 - h is exact: h is near 1
        return op("OpFAdd", f32, y0, op("OpFMul", f32, y0, residual))
