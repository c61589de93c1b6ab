"""SPIR-V spellings of the op table's float math that GLSL.std.450 lacks or leaves undefined where C does not.

- ``sigmoid``/``silu``: e = exp(-|x|) (Iron's own, precise_exp.py), 1 / (1 + e) or e / (1 + e) by the sign of x
  (no overflow); ``gelu``: the erf form with the emitter's own erf (GLSL has none).
- ``pow``: GLSL ``Pow`` is undefined for x < 0 and for x = 0 with y <= 0, and its precision is that of
  exp2(y * log2(x)). C's ``powf`` (the interpreter's and CUDA's) defines every case (C99 Annex F): Pow is given
  |x| in its defined domain (a subnormal |x| scaled into the normal range, the scale's power taken off after), and
  the sign for odd integer y, zeros, infinities, NaNs and the ones (x = 1, y = 0, x = -1 with infinite y) are
  selected around it.
- ``copysign`` on the bits; ``isnan``/``isinf`` with ``OpIsNan``/``OpIsInf`` (which float controls require to be
  exact); ``rint`` is ``RoundEven`` (exact for f32).
- ``atan2``: GLSL ``Atan2`` is only promised 4096 ulp (lavapipe's was 300 ulp off at small angles) and is undefined at
  (0, 0), so it is computed here: a = min(|x|, |y|) / max(|x|, |y|) in [0, 1] (both scaled by 2^64 or 2^-64 first
  where the max is outside [2^-64, 2^64], subnormals included: exact, and OpFDiv's precision holds), reduced to
  |t| <= tan(pi/8) by t = (a - 1) / (a + 1) above tan(pi/8), atan(t) = t + t^3 P(t^2) with P fitted once at import
  (Chebyshev, degree 6; 2.8 ulp in f32 with exact division over 2M random points), then the octant: pi/4 +, pi/2 -,
  pi -, and the sign of y. C99 Annex F's zeros and infinities are selected around it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.polynomial import chebyshev

_TAN_PI_8 = math.tan(math.pi / 8)


@lru_cache(maxsize=1)
def atan_coefficients() -> tuple[float, ...]:
    """P with atan(t) = t + t^3 * P(t^2) on |t| <= tan(pi/8), power basis, highest degree first, rounded to f32."""
    def q(u: np.ndarray) -> np.ndarray:
        r = np.sqrt(np.maximum(u, 1e-300))
        return np.where(u > 0, (np.arctan(r) / r - 1.0) / np.maximum(u, 1e-300), -1.0 / 3.0)

    c = chebyshev.Chebyshev.interpolate(q, 6, domain=[0.0, _TAN_PI_8**2]).convert(
        kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1])
    return tuple(float(np.float32(v)) for v in reversed(c.coef))


class MathOps:
    """Mixin for the SPIR-V emitter (needs ``self.b``, ``self.inst``, ``self.glsl``, ``self.f32c``, ``self.erf``)."""

    def math_op(self, code: str, xs: list[int]) -> int | None:
        """The f32 (or bool) register of float math op ``code`` on f32 registers ``xs``; None: not spelled here."""
        b, op = self.b, self.inst
        f32, boolean = b.type_float(32), b.type_bool()
        if code in ("exp", "exp2", "tanh"):
            return self.precise_exp(code, xs[0])  # precise_exp.py: GLSL Exp/Exp2/Tanh are 3 + 2|x| ulp
        if code in ("log", "log2"):
            return self.log_of(code, xs[0])
        if code == "rint":
            return self.glsl("RoundEven", f32, xs[0])
        if code == "atan2":
            return self.atan2(xs[0], xs[1])
        if code in ("isnan", "isinf"):
            return op("OpIsNan" if code == "isnan" else "OpIsInf", boolean, xs[0])
        if code == "copysign":
            u32 = b.type_int(32, False)
            mag = op("OpBitwiseAnd", u32, op("OpBitcast", u32, xs[0]), b.const_uint(0x7FFFFFFF))
            sign = op("OpBitwiseAnd", u32, op("OpBitcast", u32, xs[1]), b.const_uint(0x80000000))
            return op("OpBitcast", f32, op("OpBitwiseOr", u32, mag, sign))
        if code == "sigmoid":
            return self.sigmoid(xs[0])
        if code == "silu":
            return op("OpFMul", f32, xs[0], self.sigmoid(xs[0]))
        if code == "gelu":
            inner = self.erf(op("OpFMul", f32, xs[0], self.f32c(1.0 / math.sqrt(2.0))))
            half_x = op("OpFMul", f32, xs[0], self.f32c(0.5))
            return op("OpFMul", f32, half_x, op("OpFAdd", f32, self.f32c(1.0), inner))
        if code == "pow":
            return self.pow(xs[0], xs[1])
        return None

    def log_of(self, code: str, x: int) -> int:
        """GLSL ``Log``/``Log2``, with subnormal arguments scaled by 2^24 into the normal range first (exact) and 24
        (or 24 ln 2) taken off after: lavapipe's Log2 of a subnormal was 3 % off in value (log2(1.107e-38) gave
        -126.043 for -126.087; fuzz seed 964067086). A device that flushes f32 subnormals sees 0 (-inf) either way."""
        b, op = self.b, self.inst
        f32, boolean = b.type_float(32), b.type_bool()
        tiny = op("OpLogicalAnd", boolean, op("OpFOrdLessThan", boolean, x, self.f32c(2.0 ** -126)),
                  op("OpFOrdGreaterThan", boolean, x, self.f32c(0.0)))
        scaled = op("OpSelect", f32, tiny, op("OpFMul", f32, x, self.f32c(2.0 ** 24)), x)
        r = self.glsl("Log2" if code == "log2" else "Log", f32, scaled)
        shift = 24.0 if code == "log2" else 24.0 * math.log(2.0)
        return op("OpSelect", f32, tiny, op("OpFSub", f32, r, self.f32c(shift)), r)

    def sigmoid(self, x: int) -> int:
        b, op = self.b, self.inst
        f32 = b.type_float(32)
        e = self.precise_exp("exp", op("OpFNegate", f32, self.glsl("FAbs", f32, x)))  # not GLSL Exp (3 + 2|x| ulp)
        s = op("OpFDiv", f32, self.f32c(1.0), op("OpFAdd", f32, self.f32c(1.0), e))
        positive = op("OpFOrdGreaterThanEqual", b.type_bool(), x, self.f32c(0.0))
        return op("OpSelect", f32, positive, s, op("OpFMul", f32, e, s))

    def atan2(self, y: int, x: int) -> int:
        """C's atan2f: GLSL Atan2 where both operands are finite and nonzero (it is undefined at (0, 0)), C99 Annex
        F's zeros and infinities selected around it, the result carrying the sign of y."""
        b, op = self.b, self.inst
        f32, boolean, u32 = b.type_float(32), b.type_bool(), b.type_int(32, False)

        def sel(cond: int, a: int, c: int) -> int:
            return op("OpSelect", f32, cond, a, c)

        def mag_is(v: int, test: str, bits: int) -> int:
            mag = op("OpBitwiseAnd", u32, op("OpBitcast", u32, v), b.const_uint(0x7FFFFFFF))
            return op(test, boolean, mag, b.const_uint(bits))

        y0, x0 = mag_is(y, "OpIEqual", 0), mag_is(x, "OpIEqual", 0)
        yinf, xinf = mag_is(y, "OpIEqual", 0x7F800000), mag_is(x, "OpIEqual", 0x7F800000)
        nan = op("OpLogicalOr", boolean, mag_is(y, "OpUGreaterThan", 0x7F800000),
                 mag_is(x, "OpUGreaterThan", 0x7F800000))
        x_neg = op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x80000000)),
                   b.const_uint(0))
        special = op("OpLogicalOr", boolean, op("OpLogicalOr", boolean, y0, x0), op("OpLogicalOr", boolean, yinf, xinf))
        r = self.atan2_finite(y, x)
        pi, half_pi = self.f32c(math.pi), self.f32c(math.pi / 2)
        m = sel(xinf, sel(x_neg, pi, self.f32c(0.0)), half_pi)  # x infinite (y finite), else x zero
        m = sel(yinf, sel(xinf, sel(x_neg, self.f32c(3 * math.pi / 4), self.f32c(math.pi / 4)), half_pi), m)
        m = sel(y0, sel(x_neg, pi, self.f32c(0.0)), m)
        r = sel(special, self.math_op("copysign", [m, y]), r)
        return sel(nan, self.f32c(math.nan), r)

    def atan2_finite(self, y: int, x: int) -> int:
        """atan2 for finite nonzero operands (the polynomial of the module docstring)."""
        b, op = self.b, self.inst
        f32, boolean = b.type_float(32), b.type_bool()
        ay, ax = self.glsl("FAbs", f32, y), self.glsl("FAbs", f32, x)
        steep = op("OpFOrdGreaterThan", boolean, ay, ax)
        hi, lo = op("OpSelect", f32, steep, ay, ax), op("OpSelect", f32, steep, ax, ay)
        # a = lo / hi, both scaled by a power of two (exact) so that hi is in OpFDiv's 2.5-ulp range [2^-126, 2^126]:
        # times 2^64 where hi < 2^-64 (subnormals included), times 2^-64 where hi > 2^64 (a lo made subnormal by
        # that means a < 2^-126, off by less than a subnormal ulp). Clamping hi to 1e-30 instead gave
        # atan2(1e-40, 1e-40) = 1e-10 (fuzz seed 704531832). hi = 0 (both zero) or inf is a special case, selected
        # away; NMax keeps the division by a normal number there.
        scale = op("OpSelect", f32, op("OpFOrdLessThan", boolean, hi, self.f32c(2.0 ** -64)), self.f32c(2.0 ** 64),
                   op("OpSelect", f32, op("OpFOrdGreaterThan", boolean, hi, self.f32c(2.0 ** 64)),
                      self.f32c(2.0 ** -64), self.f32c(1.0)))
        hi = self.glsl("NMax", f32, op("OpFMul", f32, hi, scale), self.f32c(2.0 ** -126))
        a = op("OpFDiv", f32, op("OpFMul", f32, lo, scale), hi)
        big = op("OpFOrdGreaterThan", boolean, a, self.f32c(_TAN_PI_8))
        one = self.f32c(1.0)
        t = op("OpSelect", f32, big, op("OpFDiv", f32, op("OpFSub", f32, a, one), op("OpFAdd", f32, a, one)), a)
        u = op("OpFMul", f32, t, t)
        coeffs = atan_coefficients()
        p = self.f32c(coeffs[0])
        for c in coeffs[1:]:
            p = op("OpFAdd", f32, op("OpFMul", f32, p, u), self.f32c(c))
        r = op("OpFAdd", f32, t, op("OpFMul", f32, op("OpFMul", f32, t, u), p))
        r = op("OpSelect", f32, big, op("OpFAdd", f32, self.f32c(math.pi / 4), r), r)
        r = op("OpSelect", f32, steep, op("OpFSub", f32, self.f32c(math.pi / 2), r), r)
        x_neg = op("OpFOrdLessThan", boolean, x, self.f32c(0.0))
        r = op("OpSelect", f32, x_neg, op("OpFSub", f32, self.f32c(math.pi), r), r)
        return self.math_op("copysign", [r, y])

    def pow(self, x: int, y: int) -> int:  # noqa: PLR0914 - C99 Annex F's cases, one select each
        """C's powf: GLSL Pow on |x| where it is defined, C's special cases selected around it."""
        b, op = self.b, self.inst
        f32, boolean, i32, u32 = b.type_float(32), b.type_bool(), b.type_int(32, True), b.type_int(32, False)
        inf, zero, one = self.f32c(math.inf), self.f32c(0.0), self.f32c(1.0)

        def sel(cond: int, a: int, c: int) -> int:
            return op("OpSelect", f32, cond, a, c)

        def bits_abs(v: int) -> int:
            return op("OpBitwiseAnd", u32, op("OpBitcast", u32, v), b.const_uint(0x7FFFFFFF))

        ax_bits, ay_bits = bits_abs(x), bits_abs(y)
        inf_bits = b.const_uint(0x7F800000)
        x_zero = op("OpIEqual", boolean, ax_bits, b.const_uint(0))
        x_inf = op("OpIEqual", boolean, ax_bits, inf_bits)
        y_inf = op("OpIEqual", boolean, ay_bits, inf_bits)
        x_nan = op("OpUGreaterThan", boolean, ax_bits, inf_bits)
        y_nan = op("OpUGreaterThan", boolean, ay_bits, inf_bits)
        ax = self.glsl("FAbs", f32, x)
        # Pow only where it is defined: |x| finite and nonzero, y finite
        base = sel(op("OpLogicalOr", boolean, op("OpLogicalOr", boolean, x_zero, x_inf), x_nan), one, ax)
        expo = sel(op("OpLogicalOr", boolean, y_inf, y_nan), zero, y)
        # a subnormal |x| = m 2^-149 is given to Pow as m 2^-125 (normal, exact, built from the bits so that no
        # subnormal operand is left to flush) and 2^(-24 y) multiplied back after (Iron's exp2): lavapipe's Pow is
        # exp2(y * log2(x)) with a log2 that reads a subnormal as 2^-127 * 1.m (pow(2.75e-40, -0.03143) gave 15.9
        # for 17.5: fuzz seed 705003498)
        tiny = op("OpLogicalAnd", boolean, op("OpULessThan", boolean, ax_bits, b.const_uint(0x00800000)),
                  op("OpLogicalNot", boolean, x_zero))
        base = sel(tiny, op("OpFMul", f32, op("OpConvertUToF", f32, ax_bits), self.f32c(2.0 ** -125)), base)
        r = self.glsl("Pow", f32, base, expo)
        r = sel(tiny, op("OpFMul", f32, r, self.precise_exp("exp2", op("OpFMul", f32, expo, self.f32c(-24.0)))), r)
        # y an integer (RoundEven is exact in f32), odd when below 2^24 with its lowest bit set
        y_int = op("OpLogicalAnd", boolean, op("OpFOrdEqual", boolean, self.glsl("RoundEven", f32, expo), y),
                   op("OpLogicalNot", boolean, y_inf))
        small = op("OpULessThan", boolean, ay_bits, b.const_uint(0x4B800000))  # |y| < 2^24
        low_bit = op("OpBitwiseAnd", i32, op("OpConvertFToS", i32, sel(small, expo, zero)), b.const_int(1))
        y_odd = op("OpLogicalAnd", boolean, op("OpLogicalAnd", boolean, y_int, small),
                   op("OpIEqual", boolean, low_bit, b.const_int(1)))
        y_pos = op("OpFOrdGreaterThan", boolean, y, zero)
        y_neg = op("OpFOrdLessThan", boolean, y, zero)
        # magnitudes of the special cases: 0^y, inf^y, |x|^(+-inf)
        big_x = op("OpFOrdGreaterThan", boolean, ax, one)
        r = sel(y_inf, sel(op("OpLogicalEqual", boolean, big_x, y_pos), inf, zero), r)
        r = sel(x_inf, sel(y_pos, inf, zero), r)
        r = sel(x_zero, sel(y_neg, inf, zero), r)
        # the sign: a negative base (-0 included) to an odd integer power
        x_signed = op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, op("OpBitcast", u32, x),
                                                 b.const_uint(0x80000000)), b.const_uint(0))
        r = sel(op("OpLogicalAnd", boolean, x_signed, y_odd), op("OpFNegate", f32, r), r)
        # NaN: a finite negative base to a non-integer power, or a NaN operand
        bad_base = op("OpLogicalAnd", boolean, op("OpFOrdLessThan", boolean, x, zero),
                      op("OpLogicalNot", boolean, x_inf))
        integral = op("OpLogicalOr", boolean, y_int, y_inf)  # C: (-0.5)^inf is 0, not NaN
        bad = op("OpLogicalAnd", boolean, bad_base, op("OpLogicalNot", boolean, integral))
        bad = op("OpLogicalOr", boolean, bad, op("OpLogicalOr", boolean, x_nan, y_nan))
        r = sel(bad, self.f32c(math.nan), r)
        # ones: y = +-0, x = 1, and x = -1 to an infinite power (even over NaN operands)
        minus_one_inf = op("OpLogicalAnd", boolean, op("OpFOrdEqual", boolean, x, self.f32c(-1.0)), y_inf)
        ones = op("OpLogicalOr", boolean, op("OpIEqual", boolean, ay_bits, b.const_uint(0)),
                  op("OpLogicalOr", boolean, op("OpFOrdEqual", boolean, x, one), minus_one_inf))
        return sel(ones, one, r)
