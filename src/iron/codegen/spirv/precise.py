"""Exact f32 ``sin``, ``cos`` (through double precision, on devices with ``shaderFloat64``) and ``%`` (in integer
arithmetic, on every device) for the SPIR-V emitter.

Vulkan only promises 2^-11 absolute error for GLSL.std.450 ``Sin``/``Cos`` (on [-pi, pi]) and the precision of
x - y * trunc(x / y) for ``OpFRem``. NVIDIA's driver is that loose: sin/cos were off by 2e-6 and fmod(-9.26, 3.8e-5)
gave -0.0 where C gives -3.78e-5. Iron's semantics are the correctly rounded result (the interpreter and CUDA
agree), so:

- ``sin``/``cos`` (where the device has 64-bit floats): k = round(x * 2/pi), r = x - k * pi/2 with pi/2 in three
  parts (fdlibm's Cody-Waite split: exact for |k| < 2^20, i.e. |x| < 1.6e6; beyond that the reduction's error is
  about |x| * 2^-53, which stays below an f32 ulp of the result up to |x| = 2^23), then the Taylor series of sin and
  cos to degree 17/18 on |r| <= pi/4 (truncation error < 1e-19) and the quadrant's sign. For |x| > 2^23 the device's
  GLSL Sin/Cos are used (bounded, but Vulkan promises no precision there); infinities and NaN give NaN. The f64
  RoundEven and Floor only ever see |k| < 2^23: lavapipe without AVX-512 computes f64 Trunc/Round/RoundEven as the
  identity from 2^24 on (issue 12), against the spec, and this keeps clear of it. Without ``shaderFloat64`` the
  GLSL instructions and the documented Vulkan precision are kept.
- ``fmod``: the significands are reduced with ``OpUMod``, 8 exponent bits per step (integer operations are exact
  in SPIR-V), and the remainder is rebuilt into f32 bits: exact as C's fmod is, on any conformant device. The
  earlier version reduced in f64 with Trunc and met lavapipe's Trunc above (every quotient past 2^24 gave 0).
"""
from __future__ import annotations

import math
import struct

from .precise_exp import PreciseExp

# fdlibm's pio2_1, pio2_2 and pio2_2t: pi/2 in three parts, the first two with 33 significant bits
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624879595063154e-21)
#: beyond this |x| the three-part reduction is no longer accurate enough (a full Payne-Hanek reduction would be);
#: there the device's own GLSL Sin/Cos are used (bounded, precision not promised by Vulkan)
_REDUCE_LIMIT = 8388608.0  # 2^23
_SIN = [(-1) ** i / math.factorial(2 * i + 1) for i in range(9)]  # r, r^3, ..., r^17
_COS = [(-1) ** i / math.factorial(2 * i) for i in range(10)]  # 1, r^2, ..., r^18
_FMOD_STEPS = 32  # exponent differences up to 253 (254 - 1), reduced 8 bits per step


class PreciseMath(PreciseExp):
    """Mixin for the SPIR-V emitter, with exp/exp2/tanh from ``precise_exp.py`` (needs ``self.b``, ``self.inst``,
    ``self.glsl``, ``self.capability``)."""

    def f64c(self, value: float) -> int:
        lo, hi = struct.unpack("<II", struct.pack("<d", value))
        return self.b.constant(self._f64(), lo, hi)

    def _f64(self) -> int:
        self.capability("Float64")
        self.features.add("float64")
        return self.b.type_float(64)

    def sin_cos64(self, x: int, which: str) -> int:
        """f32 sin(x) or cos(x) (``which``), through double precision."""
        b, op = self.b, self.inst
        f64, f32, u32, boolean = self._f64(), b.type_float(32), b.type_int(32, False), b.type_bool()
        # only |x| <= 2^23 takes this path (the selects below); feeding the f64 code 0 otherwise keeps every value
        # in it finite and |k| below 2^24: f64 RoundEven past 2^24, inf or NaN, and OpConvertFToU of an out-of-range
        # q, would be undefined (and lavapipe's f64 RoundEven is wrong past 2^24, issue 12)
        near = op("OpULessThanEqual", boolean, op("OpBitwiseAnd", u32, op("OpBitcast", u32, x),
                                                  b.const_uint(0x7FFFFFFF)), b.const_uint(0x4B000000))
        d = op("OpFConvert", f64, op("OpSelect", f32, near, x, self.f32c(0.0)))
        k = self.glsl("RoundEven", f64, op("OpFMul", f64, d, self.f64c(2 / math.pi)))
        r = d
        for part in _PIO2:
            r = op("OpFSub", f64, r, op("OpFMul", f64, k, self.f64c(part)))
        r2 = op("OpFMul", f64, r, r)
        sin_r = self._horner(r2, _SIN)
        sin_r = op("OpFMul", f64, sin_r, r)
        cos_r = self._horner(r2, _COS)
        # quadrant of k (0..3), exactly: k - 4 * floor(k / 4); cos(x) = sin(x + pi/2) is one quadrant on
        quarter = self.glsl("Floor", f64, op("OpFMul", f64, k, self.f64c(0.25)))
        q = op("OpFSub", f64, k, op("OpFMul", f64, quarter, self.f64c(4.0)))
        q = op("OpConvertFToU", u32, q)
        if which == "cos":
            q = op("OpIAdd", u32, q, b.const_uint(1))
        odd = op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, q, b.const_uint(1)), b.const_uint(0))
        neg = op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, q, b.const_uint(2)), b.const_uint(0))
        v = op("OpSelect", f64, odd, cos_r, sin_r)
        v = op("OpSelect", f64, neg, op("OpFNegate", f64, v), v)
        out = op("OpFConvert", f32, v)
        if which == "sin":  # sin(-0) is -0 (the reduction turned it into +0)
            out = op("OpSelect", f32, op("OpFOrdEqual", boolean, x, self.f32c(0.0)), x, out)
        mag = self.glsl("FAbs", f32, x)
        far = self.glsl("Sin" if which == "sin" else "Cos", f32, x)
        out = op("OpSelect", f32, op("OpFOrdLessThanEqual", boolean, mag, self.f32c(_REDUCE_LIMIT)), out, far)
        # NaN for infinities and NaN, decided in f32 (no f64 NaN/inf semantics are relied on)
        finite = op("OpFOrdLessThan", boolean, mag, self.f32c(math.inf))
        return op("OpSelect", f32, finite, out, self.f32c(math.nan))

    def _horner(self, r2: int, coeffs: list[float]) -> int:
        f64 = self._f64()
        acc = self.f64c(coeffs[-1])
        for c in reversed(coeffs[:-1]):
            acc = self.inst("OpFAdd", f64, self.inst("OpFMul", f64, acc, r2), self.f64c(c))
        return acc

    def fmod_bits(self, x: int, y: int) -> int:
        """fmod(x, y) for finite x and nonzero finite y (the caller handles the rest), exact, in integer arithmetic
        alone: the significands are reduced with OpUMod, 8 exponent bits per step, so no floating-point instruction's
        precision (nor a driver's rounding of it) is relied on."""
        b, op = self.b, self.inst
        f32, u32, boolean = b.type_float(32), b.type_int(32, False), b.type_bool()
        ax = op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x7FFFFFFF))
        ay = op("OpBitwiseAnd", u32, op("OpBitcast", u32, y), b.const_uint(0x7FFFFFFF))
        mx, ex = self._significand(ax)
        my, ey = self._significand(ay)
        # y = +-0 is answered by the caller, but every lane runs this: OpUMod by 0 is undefined behaviour in SPIR-V
        my = op("OpSelect", u32, op("OpIEqual", boolean, my, b.const_uint(0)), b.const_uint(1), my)
        # |x| = mx * 2^(ex - 150) and |y| = my * 2^(ey - 150), mx and my below 2^24: (mx << k) % my stays exact in
        # 32 bits for k <= 8, and 32 steps of 8 span any exponent difference (at most 253)
        diff = op("OpISub", u32, ex, op("OpSelect", u32, op("OpULessThan", boolean, ex, ey), ex, ey))
        for _ in range(_FMOD_STEPS):
            k = self.glsl("UMin", u32, diff, b.const_uint(8))
            mx = op("OpUMod", u32, op("OpShiftLeftLogical", u32, mx, k), my)
            diff = op("OpISub", u32, diff, k)
        # the remainder mx * 2^(ey - 150), normalised (or left subnormal) back into f32 bits; exact, as it is < |y|
        shift = op("OpISub", u32, b.const_uint(23), self.glsl("FindUMsb", u32, mx))
        shift = self.glsl("UMin", u32, shift, op("OpISub", u32, ey, b.const_uint(1)))
        bits = op("OpIAdd", u32, op("OpShiftLeftLogical", u32, op("OpISub", u32, ey, op("OpIAdd", u32, shift,
                                                                                            b.const_uint(1))),
                                    b.const_uint(23)), op("OpShiftLeftLogical", u32, mx, shift))
        bits = op("OpSelect", u32, op("OpIEqual", boolean, mx, b.const_uint(0)), b.const_uint(0), bits)
        bits = op("OpSelect", u32, op("OpULessThan", boolean, ax, ay), ax, bits)  # |x| < |y|: x itself
        sign = op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x80000000))
        return op("OpBitcast", f32, op("OpBitwiseOr", u32, bits, sign))

    def _significand(self, magnitude: int) -> tuple[int, int]:
        """(significand, biased exponent) of a finite non-negative f32 given as bits: value = s * 2^(e - 150), with
        the hidden bit in s for normal numbers and e = 1 for subnormal ones (so both read alike)."""
        b, op = self.b, self.inst
        u32, boolean = b.type_int(32, False), b.type_bool()
        e = op("OpShiftRightLogical", u32, magnitude, b.const_uint(23))
        frac = op("OpBitwiseAnd", u32, magnitude, b.const_uint(0x007FFFFF))
        normal = op("OpINotEqual", boolean, e, b.const_uint(0))
        s = op("OpSelect", u32, normal, op("OpBitwiseOr", u32, frac, b.const_uint(0x00800000)), frac)
        return s, op("OpSelect", u32, normal, e, b.const_uint(1))
