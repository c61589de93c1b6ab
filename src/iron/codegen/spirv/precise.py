"""f32 ``sin``, ``cos`` and ``%`` computed in double precision, for Vulkan devices with ``shaderFloat64``.

Vulkan only promises 2^-11 absolute error for GLSL.std.450 ``Sin``/``Cos`` (on [-pi, pi]) and the precision of
x - y * trunc(x / y) for ``OpFRem``. NVIDIA's driver is that loose: sin/cos were off by 2e-6 and fmod(-9.26, 3.8e-5)
gave -0.0 where C gives -3.78e-5. Iron's semantics are the correctly rounded result (the interpreter and CUDA
agree), so where the device has 64-bit floats these are computed in double and rounded once to f32:

- ``sin``/``cos``: k = round(x * 2/pi), r = x - k * pi/2 with pi/2 in three parts (fdlibm's Cody-Waite split:
  exact for |k| < 2^20, i.e. |x| < 1.6e6; beyond that the reduction's error is about |x| * 2^-53, which stays below
  an f32 ulp of the result up to |x| = 2^23), then the Taylor series of sin and cos to degree 17/18 on |r| <= pi/4
  (truncation error < 1e-19) and the quadrant's sign. For |x| > 2^23 the device's GLSL Sin/Cos are used (bounded,
  but Vulkan promises no precision there); infinities and NaN give NaN.
- ``fmod``: |x| is reduced by |y| * 2^s in eleven steps whose quotients stay below 2^28, so every product and
  difference is exact in double: the result is exact, as C's fmod is.

Without ``shaderFloat64`` the emitter keeps the GLSL instructions and the documented Vulkan precision.
"""

from __future__ import annotations

import math
import struct

# fdlibm's pio2_1, pio2_2 and pio2_2t: pi/2 in three parts, the first two with 33 significant bits
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624879595063154e-21)
#: beyond this |x| the three-part reduction is no longer accurate enough (a full Payne-Hanek reduction would be);
#: there the device's own GLSL Sin/Cos are used (bounded, precision not promised by Vulkan)
_REDUCE_LIMIT = 8388608.0  # 2^23
_SIN = [(-1) ** i / math.factorial(2 * i + 1) for i in range(9)]  # r, r^3, ..., r^17
_COS = [(-1) ** i / math.factorial(2 * i) for i in range(10)]  # 1, r^2, ..., r^18
_FMOD_STEPS = 11  # (127 + 149) exponent bits of span / 27 bits per step, rounded up


class PreciseMath:
    """Mixin for the SPIR-V emitter (needs ``self.b``, ``self.inst``, ``self.glsl``, ``self.capability``)."""

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
        d = op("OpFConvert", f64, x)
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
        finite = op("OpLogicalNot", boolean, op("OpIsNan", boolean, q))
        q = op("OpConvertFToU", u32, op("OpSelect", f64, finite, q, self.f64c(0.0)))
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

    def fmod64(self, x: int, y: int) -> int:
        """|fmod(x, y)| with the sign of x, exact, for finite x and nonzero finite y (the caller handles the rest)."""
        b, op = self.b, self.inst
        f64, f32, i32, u32 = self._f64(), b.type_float(32), b.type_int(32, True), b.type_int(32, False)
        boolean = b.type_bool()
        ax, ay = self.abs_f32_to_f64(x), self.abs_f32_to_f64(y)
        ey = self._exponent(ay)
        for _ in range(_FMOD_STEPS):
            # d = |y| * 2^s with the quotient |x| / d below 2^28: its product with d (24 bits) is exact
            s = self.glsl("SMax", i32, op("OpISub", i32, op("OpISub", i32, self._exponent(ax), ey), b.const_int(27)),
                          b.const_int(0))
            d = self.glsl("Ldexp", f64, ay, s)
            q = self.glsl("Trunc", f64, op("OpFDiv", f64, ax, d))
            ax = op("OpFSub", f64, ax, op("OpFMul", f64, q, d))
            # the division may round up to the next integer (the difference is then below zero by less than d) or,
            # where the device's f64 division is not correctly rounded, down from an exact integer (it is then d)
            ax = op("OpSelect", f64, op("OpFOrdLessThan", boolean, ax, self.f64c(0.0)), op("OpFAdd", f64, ax, d), ax)
            ax = op("OpSelect", f64, op("OpFOrdGreaterThanEqual", boolean, ax, d), op("OpFSub", f64, ax, d), ax)
        bits = self.abs_f64_to_f32_bits(ax)  # exact: the remainder is a multiple of an f32 ulp below |y|
        sign = op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x80000000))
        return op("OpBitcast", f32, op("OpBitwiseOr", u32, bits, sign))

    # Subnormal f32 values are built from and taken apart into their bits with integer operations: a device that
    # flushes f32 subnormals (NVIDIA's, where DenormPreserve is not honoured) would flush them in OpFConvert.

    def abs_f32_to_f64(self, x: int) -> int:
        """|x| (an f32) as a double, exactly, also for subnormal x: mantissa * 2^-149 (a normal double)."""
        b, op = self.b, self.inst
        f64, u32, boolean = self._f64(), b.type_int(32, False), b.type_bool()
        mag = op("OpBitwiseAnd", u32, op("OpBitcast", u32, x), b.const_uint(0x7FFFFFFF))
        normal = self.glsl("FAbs", f64, op("OpFConvert", f64, x))
        sub = op("OpFMul", f64, op("OpConvertUToF", f64, mag), self.f64c(2.0 ** -149))
        return op("OpSelect", f64, op("OpULessThan", boolean, mag, b.const_uint(0x00800000)), sub, normal)

    def abs_f64_to_f32_bits(self, v: int) -> int:
        """The f32 bits of a non-negative double that is exactly an f32 (subnormal ones too), as u32."""
        b, op = self.b, self.inst
        f32, f64, u32, boolean = b.type_float(32), self._f64(), b.type_int(32, False), b.type_bool()
        normal = op("OpBitcast", u32, op("OpFConvert", f32, v))
        sub = op("OpConvertFToU", u32, op("OpFMul", f64, v, self.f64c(2.0 ** 149)))
        return op("OpSelect", u32, op("OpFOrdLessThan", boolean, v, self.f64c(2.0 ** -126)), sub, normal)

    def _exponent(self, v: int) -> int:
        """The unbiased binary exponent of a positive normal double (as i32), from its high word."""
        b, op = self.b, self.inst
        u32, i32 = b.type_int(32, False), b.type_int(32, True)
        words = op("OpBitcast", b.type_vector(u32, 2), v)
        high = op("OpCompositeExtract", u32, words, 1)
        biased = op("OpBitwiseAnd", u32, op("OpShiftRightLogical", u32, high, b.const_uint(20)), b.const_uint(0x7FF))
        return op("OpISub", i32, op("OpBitcast", i32, biased), b.const_int(1023))
