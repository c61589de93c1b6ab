"""Pure value ops in SPIR-V: arithmetic, comparisons, math, casts -- following ``iron.interp.semantics``.

Registers hold ``bool``, ``i32`` (OpTypeInt 32 1), ``u32`` (OpTypeInt 32 0) and f32; f16/bf16 values are f32 holding
a value exactly representable in the half type (they are storage types), so every op with a half result rounds
its f32 result once (``round_to``), as the interpreter does for ``native_half`` kernels. i8/u8 values are likewise
i32/u32 registers holding a value in the 8-bit range (only 8-bit storage buffers use OpTypeInt 8); i64/u64/f64 are
64-bit registers (capabilities Int64, Float64: the runtime refuses the module on a device without them).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Op
from ..erf import MID_CENTER, MID_HALF_WIDTH, coefficients
from .bits import emit_bits

_FLOAT_BINARY = {"add": "OpFAdd", "sub": "OpFSub", "mul": "OpFMul", "div": "OpFDiv", "rem": "OpFRem"}
_INT_BINARY = {"add": "OpIAdd", "sub": "OpISub", "mul": "OpIMul", "and": "OpBitwiseAnd", "or": "OpBitwiseOr",
               "xor": "OpBitwiseXor"}
_BOOL_BINARY = {"and": "OpLogicalAnd", "or": "OpLogicalOr", "xor": "OpLogicalNotEqual"}
_FLOAT_COMPARE = {"lt": "OpFOrdLessThan", "le": "OpFOrdLessThanEqual", "gt": "OpFOrdGreaterThan",
                  "ge": "OpFOrdGreaterThanEqual", "eq": "OpFOrdEqual", "ne": "OpFUnordNotEqual"}
_SIGNED_COMPARE = {"lt": "OpSLessThan", "le": "OpSLessThanEqual", "gt": "OpSGreaterThan",
                   "ge": "OpSGreaterThanEqual", "eq": "OpIEqual", "ne": "OpINotEqual"}
_UNSIGNED_COMPARE = {"lt": "OpULessThan", "le": "OpULessThanEqual", "gt": "OpUGreaterThan",
                     "ge": "OpUGreaterThanEqual", "eq": "OpIEqual", "ne": "OpINotEqual"}
_GLSL_MATH = {"exp": "Exp", "exp2": "Exp2", "fast_exp": "Exp", "fast_exp2": "Exp2",
              "log": "Log", "log2": "Log2", "sqrt": "Sqrt", "rsqrt": "InverseSqrt",
              "sin": "Sin", "cos": "Cos", "floor": "Floor", "ceil": "Ceil", "fma": "Fma"}
#: the op table's float math the SPIR-V emitter spells (GLSL.std.450, precise.py, mathops.py, or here), and what it
#: declares it cannot: tests/backends checks that together they cover ``ops.FLOAT_MATH``
SPIRV_MATH = frozenset({*("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "floor", "ceil"), "tanh", "erf",
                        "fast_exp", "fast_exp2",
                        *("rint", "atan2", "isnan", "isinf", "copysign", "sigmoid", "silu", "gelu", "pow")})
SPIRV_UNSUPPORTED: frozenset[str] = frozenset()
_INT_MINMAX = {("min", True): "SMin", ("max", True): "SMax", ("min", False): "UMin", ("max", False): "UMax"}


class ValueOps:
    """Mixin for the emitter: needs ``self.b`` (the builder), ``self.inst`` and ``self.value``."""

    # -- helpers ---------------------------------------------------------------------------------------------------

    def reg_type(self, st: t.ScalarType) -> int:
        """The SPIR-V type of a register holding an Iron scalar."""
        if st.is_bool:
            return self.b.type_bool()
        if st.is_wide:
            self.capability("Int64" if st.is_int else "Float64")
            self.features.add("int64" if st.is_int else "float64")
            return self.b.type_int(64, st.is_signed) if st.is_int else self.b.type_float(64)
        if st.is_int:
            return self.b.type_int(32, st.is_signed)
        return self.b.type_float(32)

    def glsl(self, name: str, rtype: int, *args: int) -> int:
        return self.inst("OpExtInst", rtype, self.b.ext_import(), self.b.g.glsl[name], *args)

    def madd(self, a: int, b: int, c: int) -> int:
        """f32 a * b + c as an OpFMul and an OpFAdd left contractable (no NoContraction): the driver may fuse them
        (NVIDIA does) or round twice, so use it only where either is exact or accurate enough. Not GLSL ``Fma``:
        lavapipe runs that as a call to a software fma (attn_prefill's online softmax took 76 s instead of 6)."""
        f32 = self.b.type_float(32)
        return self.inst("OpFAdd", f32, self.inst("OpFMul", f32, a, b, exact=False), c, exact=False)

    def const(self, value: bool | int | float, st: t.ScalarType) -> int:
        if st.is_bool:
            return self.b.const_bool(bool(value))
        if st.is_wide:
            ty = self.reg_type(st)
            if st.is_int:
                v = int(value) % 2**64
                return self.b.constant(ty, v & 0xFFFFFFFF, v >> 32)  # low-order word first
            bits = struct.unpack("<Q", struct.pack("<d", float(value)))[0]
            return self.b.constant(ty, bits & 0xFFFFFFFF, bits >> 32)
        if st.is_int:
            return self.b.const_int(int(value)) if st.is_signed else self.b.const_uint(int(value))
        return self.b.const_float(float(value))

    def f32c(self, value: float) -> int:
        return self.b.const_float(value)

    def round_to(self, x: int, st: t.ScalarType) -> int:
        """An f32 register rounded (once, to nearest even) to the half type ``st``, kept as f32."""
        b = self.b
        f32, u32 = b.type_float(32), b.type_int(32, False)
        if st == t.f16:
            return self.round_f16(x)
        if st != t.bf16:
            return x
        bits = self.inst("OpBitcast", u32, x)
        odd = self.inst("OpBitwiseAnd", u32, self.inst("OpShiftRightLogical", u32, bits, b.const_uint(16)),
                        b.const_uint(1))
        rne = self.inst("OpIAdd", u32, self.inst("OpIAdd", u32, bits, b.const_uint(0x7FFF)), odd)
        keep = b.const_uint(0xFFFF0000)
        rne = self.inst("OpBitwiseAnd", u32, rne, keep)
        quiet = self.inst("OpBitwiseAnd", u32, self.inst("OpBitwiseOr", u32, bits, b.const_uint(0x00400000)), keep)
        nan = self.inst("OpIsNan", b.type_bool(), x)
        return self.inst("OpBitcast", f32, self.inst("OpSelect", u32, nan, quiet, rne))

    def round_f16(self, x: int) -> int:
        """An f32 register rounded to nearest even at f16 precision (subnormals, overflow to inf, NaN kept), kept
        as f32, in integer arithmetic on its bits. An OpFConvert f32 -> f16 -> f32 round trip says the same, but
        NVIDIA's driver did not round there (it is free to pick the conversion's rounding mode, or to drop the pair)."""
        b = self.b
        f32, u32, boolean = b.type_float(32), b.type_int(32, False), b.type_bool()
        op = self.inst
        bits = op("OpBitcast", u32, x)
        sign = op("OpBitwiseAnd", u32, bits, b.const_uint(0x80000000))
        mag = op("OpBitwiseAnd", u32, bits, b.const_uint(0x7FFFFFFF))
        # normal f16 range (|x| >= 2^-14): keep 10 of the 23 mantissa bits, ties to even
        odd = op("OpBitwiseAnd", u32, op("OpShiftRightLogical", u32, mag, b.const_uint(13)), b.const_uint(1))
        normal = op("OpBitwiseAnd", u32, op("OpIAdd", u32, op("OpIAdd", u32, mag, b.const_uint(0x0FFF)), odd),
                    b.const_uint(0xFFFFE000))
        # below 2^-14: a multiple of 2^-24, q = significand >> (126 - exponent) rounded to even
        exponent = op("OpShiftRightLogical", u32, mag, b.const_uint(23))
        sig = op("OpBitwiseOr", u32, op("OpBitwiseAnd", u32, mag, b.const_uint(0x7FFFFF)), b.const_uint(0x800000))
        shift = op("OpExtInst", u32, b.ext_import(), b.g.glsl["UMin"],
                   op("OpISub", u32, b.const_uint(126), op("OpExtInst", u32, b.ext_import(), b.g.glsl["UMin"],
                                                           exponent, b.const_uint(112))), b.const_uint(31))
        q = op("OpShiftRightLogical", u32, sig, shift)
        rest = op("OpBitwiseAnd", u32, sig, op("OpISub", u32, op("OpShiftLeftLogical", u32, b.const_uint(1), shift),
                                               b.const_uint(1)))
        half = op("OpShiftLeftLogical", u32, b.const_uint(1), op("OpISub", u32, shift, b.const_uint(1)))
        q_odd = op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, q, b.const_uint(1)), b.const_uint(0))
        up = op("OpLogicalOr", boolean, op("OpUGreaterThan", boolean, rest, half),
                op("OpLogicalAnd", boolean, op("OpIEqual", boolean, rest, half), q_odd))
        q = op("OpIAdd", u32, q, op("OpSelect", u32, up, b.const_uint(1), b.const_uint(0)))
        tiny = op("OpBitcast", u32, op("OpFMul", f32, op("OpConvertUToF", f32, q), self.f32c(2.0 ** -24)))
        r = op("OpSelect", u32, op("OpULessThan", boolean, mag, b.const_uint(0x38800000)), tiny, normal)
        # 65520 and above round to inf (65504 is the largest f16); NaN stays NaN
        r = op("OpSelect", u32, op("OpUGreaterThanEqual", boolean, mag, b.const_uint(0x477FF000)),
               b.const_uint(0x7F800000), r)
        r = op("OpSelect", u32, op("OpUGreaterThan", boolean, mag, b.const_uint(0x7F800000)), mag, r)
        return op("OpBitcast", f32, op("OpBitwiseOr", u32, r, sign))

    def float_regs(self, rt: t.ScalarType) -> tuple[int, int, int]:
        """(float register type, same-width uint type, the sign bit as that uint) of ``rt``'s registers."""
        b = self.b
        if rt == t.f64:
            return self.reg_type(t.f64), b.type_int(64, False), self.const(1 << 63, t.u64)
        return self.reg_type(t.f32), b.type_int(32, False), b.const_uint(0x80000000)

    def flip_sign(self, v: int, rt: t.ScalarType) -> int:
        """``v`` with its sign bit flipped, on the bits: a driver folds it into a constant operand (+0.0 becomes
        -0.0, which is not gallivm's zero) but has no rule that takes it back to the operand itself."""
        ft, ut, sign = self.float_regs(rt)
        return self.inst("OpBitcast", ft, self.inst("OpBitwiseXor", ut, self.inst("OpBitcast", ut, v), sign))

    def zero_kinds(self, operands: list) -> list[str | None]:
        """Per float operand of a product or quotient: "zero" where it is +0.0 for the driver (``is_plus_zero``),
        "maybe" where the driver's own folding may make it a constant Iron's IR does not know (an unrolled loop's
        index, a promoted variable: driver_constants.py), None where it is a run-time value or another constant."""
        kinds: list[str | None] = []
        for v in operands:
            c = driver_constant(v)
            if c is not None:
                kinds.append("zero" if is_plus_zero(v) else None)
            else:
                kinds.append("maybe" if v.uid in self.driver_constants else None)
        return kinds

    def zero_safe_product(self, code: str, xs: list[int], kinds: list[str | None], rt: t.ScalarType) -> int:
        """IEEE ``mul``/``div`` (``fma``: its two factors) whose operands lavapipe may hold as a constant +0.0
        (``kinds``, from ``zero_kinds``), spelled so that no +0.0 reaches gallivm: lp_build_mul and lp_build_div
        (Mesa's lp_bld_arit.c) return 0.0 for x * 0.0 and 0.0 / x whenever an operand *is* their constant +0.0,
        ignoring SignedZeroInfNanPreserve and NoContraction (inf * 0.0 and 0.0 / 0.0 gave 0.0: fuzz seeds 704530995,
        704531197, 705000879), and x / 0.0 is their undefined value. -0.0 is not that zero: each such operand is
        taken with its sign flipped (a known +0.0 as the constant -0.0) and the result flipped back when an odd
        number were, which is the same product or quotient bit for bit (a NaN's sign is unspecified)."""
        ft = self.float_regs(rt)[0]
        operands, flipped = [], False
        for x, kind in zip(xs, kinds):
            if kind == "zero":
                x = self.const(-0.0, t.f64 if rt == t.f64 else t.f32)
            elif kind == "maybe":
                x = self.flip_sign(x, rt)
            operands.append(x)
            flipped ^= kind is not None
        if code == "fma":
            return self.glsl("Fma", ft, *operands)  # both factors are flipped (see pure): the product is unchanged
        r = self.inst(_FLOAT_BINARY[code], ft, *operands)
        return self.flip_sign(r, rt) if flipped else r

    def with_plus_zero(self, code: str, xs: list[int], plus_zero: list[bool], rt: t.ScalarType) -> int:
        """IEEE ``add``/``sub`` with a constant +0.0 operand, spelled without one: lavapipe's gallivm returns the
        other operand for x + 0.0 whenever an operand is its constant +0.0 (-0.0 + 0.0 and 0.0 - 0.0 gave -0.0: fuzz
        seed 704531197), so a sum is x, except +0.0 for x = -0.0 (selected on the bits). A zero only the driver's
        own folding finds (driver_constants.py) can still cost a sum its zero's sign: spelling every such sum
        around it would take a compare and two selects each."""
        b, op = self.b, self.inst
        wide = rt == t.f64
        ft, ut, sign = self.float_regs(rt)

        def unsigned_zero(v: int) -> int:  # v, with -0.0 made +0.0
            bits = op("OpBitcast", ut, v)
            return op("OpBitcast", ft, op("OpSelect", ut, op("OpIEqual", b.type_bool(), bits, sign),
                                          self.const(0, t.u64 if wide else t.u32), bits))

        x, y = xs
        if code == "add":  # x + +0.0 = x, but -0.0 + +0.0 = +0.0
            return unsigned_zero(y if plus_zero[0] else x) if not all(plus_zero) else x
        if code == "sub" and plus_zero[0]:  # +0.0 - y = -y, but +0.0 - +0.0 = +0.0
            return unsigned_zero(op("OpFNegate", ft, y))
        return op(_FLOAT_BINARY[code], ft, x, y)  # x - +0.0 is x - 0.0 for the driver too (it adds -0.0)

    def int_to_f32_odd(self, x: int, src: t.ScalarType) -> int:
        """A 32-bit int register converted to f32 rounding to odd (the bits below f32's 24 are cut, and the last kept
        bit set when any was not 0), so that rounding it to nearest even at bf16's 8 bits rounds the int once, as the
        interpreter does. OpConvertSToF/UToF round to nearest, and a second rounding to bf16 could then land on
        the other neighbour (0x40400001 gave 2^30, not 0x40800000: fuzz seed 704530750)."""
        b, op = self.b, self.inst
        f32, u32, i32, boolean = b.type_float(32), b.type_int(32, False), b.type_int(32, True), b.type_bool()
        bits = x if not src.is_signed else op("OpBitcast", u32, x)
        if src.is_signed:  # |x| as u32 (|INT32_MIN| = 2^31 fits)
            neg = op("OpSLessThan", boolean, x, b.const_int(0))
            bits = op("OpSelect", u32, neg, op("OpBitcast", u32, op("OpSNegate", i32, x)), bits)
        msb = self.glsl("FindUMsb", i32, bits)  # -1 for 0
        cut = op("OpBitcast", u32, self.glsl("SMax", i32, op("OpISub", i32, msb, b.const_int(23)), b.const_int(0)))
        low = op("OpISub", u32, op("OpShiftLeftLogical", u32, b.const_uint(1), cut), b.const_uint(1))
        kept = op("OpConvertUToF", f32, op("OpBitwiseAnd", u32, bits, op("OpNot", u32, low)))  # exact: <= 24 bits
        sticky = op("OpSelect", u32, op("OpINotEqual", boolean, op("OpBitwiseAnd", u32, bits, low), b.const_uint(0)),
                    b.const_uint(1), b.const_uint(0))
        odd = op("OpBitcast", f32, op("OpBitwiseOr", u32, op("OpBitcast", u32, kept), sticky))
        if not src.is_signed:
            return odd
        return op("OpSelect", f32, neg, op("OpFNegate", f32, odd), odd)

    def rounded(self, x: int, st: t.ScalarType) -> int:
        return self.round_to(x, st) if st.is_half else x

    # -- pure ops --------------------------------------------------------------------------------------------------

    def pure(self, op: Op) -> int:  # noqa: C901 - one flat dispatch over the op table
        code, rt = op.opcode, op.result.type
        xs = [self.value(v) for v in op.operands]
        ty = self.reg_type(rt)
        st = op.operands[0].type if op.operands else rt
        if code in ("add", "sub", "mul", "div", "rem", "min", "max") and rt.is_float:
            c = _const_of(op.operands[1])
            if code == "div" and c is not None and float(c) == 0.0:
                # OpFDiv by zero is undefined in SPIR-V (Mesa drops the store); x * +-inf is exactly IEEE's x / +-0
                inf = self.const(math.copysign(math.inf, float(c)), rt if rt == t.f64 else t.f32)
                kinds = [*self.zero_kinds(op.operands[:1]), None]  # 0.0 * inf: NaN, which lavapipe would make 0.0
                if any(kinds):
                    return self.rounded(self.zero_safe_product("mul", [xs[0], inf], kinds, rt), rt)
                return self.rounded(self.inst("OpFMul", ty, xs[0], inf), rt)
            if code == "rem":
                return self.rounded(self.fmod(xs[0], xs[1], c), rt)
            if code in ("mul", "div"):
                kinds = self.zero_kinds(op.operands)
                if any(kinds):
                    return self.rounded(self.zero_safe_product(code, xs, kinds, rt), rt)
            if code in ("add", "sub"):
                plus_zero = [is_plus_zero(v) for v in op.operands]
                if any(plus_zero):
                    return self.rounded(self.with_plus_zero(code, xs, plus_zero, rt), rt)
            if code in _FLOAT_BINARY:
                return self.rounded(self.inst(_FLOAT_BINARY[code], ty, *xs), rt)
            # NMin/NMax return the non-NaN operand, like C fminf/fmaxf
            return self.glsl("NMin" if code == "min" else "NMax", ty, *xs)
        if code in ("min", "max"):
            return self.glsl(_INT_MINMAX[code, rt.is_signed], ty, *xs)
        if code == "rem" and rt.is_signed:
            return self.srem(xs[0], xs[1], rt)
        if code == "div" and rt.is_signed:
            # OpSDiv is undefined for INT_MIN / -1 (SPIR-V); Iron wraps (INT_MIN): a divisor of -1 negates instead
            minus_one = self.inst("OpIEqual", self.b.type_bool(), xs[1], self.const(-1, rt))
            safe = self.inst("OpSelect", ty, minus_one, self.const(1, rt), xs[1])
            return self.inst("OpSelect", ty, minus_one, self.inst("OpSNegate", ty, xs[0]),
                             self.inst("OpSDiv", ty, xs[0], safe))
        if code in ("div", "rem"):
            name = {("div", True): "OpSDiv", ("div", False): "OpUDiv", ("rem", False): "OpUMod"}[code, rt.is_signed]
            return self.inst(name, ty, *xs)
        if code in ("and", "or", "xor") and rt.is_bool:
            return self.inst(_BOOL_BINARY[code], ty, *xs)
        if code in _INT_BINARY:
            return self.inst(_INT_BINARY[code], ty, *xs)
        if code in ("shl", "shr"):
            # Iron masks shift counts to 0..31 (0..63 on 64-bit ints)
            amount = self.inst("OpBitwiseAnd", ty, xs[1], self.const(rt.bits - 1, rt))
            name = "OpShiftLeftLogical" if code == "shl" else (
                "OpShiftRightArithmetic" if rt.is_signed else "OpShiftRightLogical")
            return self.inst(name, ty, xs[0], amount)
        if code == "neg":
            return self.rounded(self.inst("OpFNegate", ty, xs[0]), rt) if rt.is_float else \
                self.inst("OpSNegate", ty, xs[0])
        if code == "not":
            return self.inst("OpLogicalNot" if rt.is_bool else "OpNot", ty, xs[0])
        if code in _FLOAT_COMPARE:
            return self.compare(code, st, xs[0], xs[1])
        if code == "abs":
            return self.rounded(self.glsl("FAbs", ty, xs[0]), rt) if rt.is_float else self.glsl("SAbs", ty, xs[0])
        if code == "erf":
            return self.rounded(self.erf(xs[0]), rt)
        if code in ("sin", "cos") and self.float64:
            return self.rounded(self.sin_cos64(xs[0], code), rt)
        if code in O.FLOAT_MATH:
            v = self.math_op(code, xs)  # mathops.py
            if v is not None:
                return v if rt.is_bool else self.rounded(v, rt)
        if code in ("floor", "ceil") and rt == t.f64:
            return self.round64(xs[0], code)
        if code == "fma" and any(kinds := self.zero_kinds(op.operands[:2])):
            # a +0.0 factor the driver holds would make fma(0.0, inf, c) c: both factors are flipped (a known +0.0
            # as -0.0), which leaves the product as it was
            return self.rounded(self.zero_safe_product("fma", xs, [k or "maybe" for k in kinds] + [None], rt), rt)
        if code in _GLSL_MATH:
            return self.rounded(self.glsl(_GLSL_MATH[code], ty, *xs), rt)
        if code == "select":
            return self.inst("OpSelect", ty, *xs)
        if code == "cast":
            return self.convert(xs[0], st, rt, op)
        if code in O.INT_BITS or code == "bitcast":
            return emit_bits(self, code, st, rt, xs)
        raise CompileError(f"unsupported op '{code}' on backend spirv", op.loc)

    def round64(self, x: int, code: str) -> int:
        """f64 floor/ceil from x truncated in integer arithmetic (the fraction bits of its significand cleared):
        lavapipe on hosts without AVX-512 rounds f64 as the identity past 2^24 (docs/backends/vulkan.md, issue 12),
        and its compiler turned the earlier exact i64 round trip back into that truncation (seen 2026-12-04 with
        GALLIUM_OVERRIDE_CPU_CAPS=avx: floor(16777218.25) gave 16777218.25). |x| >= 2^52, inf and NaN keep every
        bit; the result takes x's sign, which also makes floor(-0.0) and ceil(-0.5) -0.0."""
        b = self.b
        f64, u64, boolean = self.reg_type(t.f64), self.reg_type(t.u64), b.type_bool()

        def u(v: int) -> int:
            return self.const(v, t.u64)

        bits = self.inst("OpBitcast", u64, x)
        expo = self.inst("OpBitwiseAnd", u64, self.inst("OpShiftRightLogical", u64, bits, u(52)), u(0x7FF))
        tiny = self.inst("OpULessThan", boolean, expo, u(1023))  # |x| < 1: only the sign stays
        whole_already = self.inst("OpUGreaterThanEqual", boolean, expo, u(1075))  # |x| >= 2^52, inf, NaN
        shift = self.inst("OpSelect", u64, self.inst("OpLogicalOr", boolean, tiny, whole_already), u(0),
                          self.inst("OpISub", u64, u(1075), expo))  # fraction bits: 1 .. 52
        frac = self.inst("OpISub", u64, self.inst("OpShiftLeftLogical", u64, u(1), shift), u(1))
        mask = self.inst("OpSelect", u64, tiny, u((1 << 63) - 1), frac)
        whole = self.inst("OpBitcast", f64, self.inst("OpBitwiseAnd", u64, bits, self.inst("OpNot", u64, mask)))
        if code == "floor":
            step = self.inst("OpFOrdGreaterThan", boolean, whole, x)
            r = self.inst("OpSelect", f64, step, self.inst("OpFSub", f64, whole, self.const(1.0, t.f64)), whole)
        else:
            step = self.inst("OpFOrdLessThan", boolean, whole, x)
            r = self.inst("OpSelect", f64, step, self.inst("OpFAdd", f64, whole, self.const(1.0, t.f64)), whole)
        sign = self.inst("OpBitwiseAnd", u64, bits, u(1 << 63))
        return self.inst("OpBitcast", f64, self.inst("OpBitwiseOr", u64, self.inst("OpBitcast", u64, r), sign))

    def srem(self, a: int, b: int, st: t.ScalarType = t.i32) -> int:
        """C's ``a % b`` on i32 (or i64): the remainder of |a| / |b| with the sign of a. Vulkan leaves OpSRem (and
        OpSMod) undefined for negative operands, and NVIDIA's driver gives a positive result for them."""
        bld = self.b
        i32, u32, boolean = self.reg_type(st), bld.type_int(st.bits, False), bld.type_bool()
        zero = self.const(0, st)

        def magnitude(v: int) -> int:  # |v| as u32 (INT_MIN's is 2^31)
            neg = self.inst("OpSLessThan", boolean, v, zero)
            return self.inst("OpBitcast", u32, self.inst("OpSelect", i32, neg, self.inst("OpSNegate", i32, v), v))

        r = self.inst("OpBitcast", i32, self.inst("OpUMod", u32, magnitude(a), magnitude(b)))
        return self.inst("OpSelect", i32, self.inst("OpSLessThan", boolean, a, zero), self.inst("OpSNegate", i32, r), r)

    def fmod(self, x: int, y: int, y_const: bool | int | float | None) -> int:
        """C ``fmod`` on f32 registers, exact on every device: the significands are reduced in integer arithmetic
        (``precise.fmod_bits``). OpFRem is not used: Vulkan gives it only the precision of x - y * trunc(x / y), and
        an earlier exact version through f64 Trunc met lavapipe's f64 Trunc, the identity past 2^24 on hosts without
        AVX-512 (issue 12). The special values are made C's here: NaN for y = 0, infinite x or a NaN, x itself for
        an infinite y and finite x, and a zero result carries the sign of x."""
        b = self.b
        f32, u32, boolean = b.type_float(32), b.type_int(32, False), b.type_bool()
        nan = self.f32c(math.nan)
        if y_const is not None and float(y_const) == 0.0:
            return nan
        r = self.fmod_bits(x, y)
        # the special values are told apart on the bits: a device that flushes f32 subnormals would take a
        # subnormal y (or result) for zero in a float comparison
        exp_mask, abs_mask = b.const_uint(0x7F800000), b.const_uint(0x7FFFFFFF)

        def magnitude(v: int) -> int:
            return self.inst("OpBitwiseAnd", u32, self.inst("OpBitcast", u32, v), abs_mask)

        def is_(test: str, v: int, bound) -> int:
            return self.inst(test, boolean, magnitude(v), bound)

        sign = self.inst("OpBitwiseAnd", u32, self.inst("OpBitcast", u32, x), b.const_uint(0x80000000))
        r = self.inst("OpSelect", f32, is_("OpIEqual", r, b.const_uint(0)), self.inst("OpBitcast", f32, sign), r)
        r = self.inst("OpSelect", f32, is_("OpIEqual", y, exp_mask), x, r)  # y infinite, x finite: x
        undefined = self.inst("OpLogicalOr", boolean, is_("OpIEqual", y, b.const_uint(0)),
                              is_("OpUGreaterThanEqual", x, exp_mask))  # y zero, x infinite or NaN
        undefined = self.inst("OpLogicalOr", boolean, undefined, is_("OpUGreaterThan", y, exp_mask))  # y NaN
        return self.inst("OpSelect", f32, undefined, nan, r)

    def compare(self, code: str, st: t.ScalarType, a: int, b: int) -> int:
        bool_t = self.b.type_bool()
        if st.is_float:
            return self.inst(_FLOAT_COMPARE[code], bool_t, a, b)
        if st.is_bool:
            if code in ("eq", "ne"):
                return self.inst("OpLogicalEqual" if code == "eq" else "OpLogicalNotEqual", bool_t, a, b)
            a, b = (self.convert(x, t.bool_, t.u32, None) for x in (a, b))
            st = t.u32
        table = _SIGNED_COMPARE if st.is_signed else _UNSIGNED_COMPARE
        return self.inst(table[code], bool_t, a, b)

    def convert(self, x: int, src: t.ScalarType, dst: t.ScalarType, op: Op | None) -> int:  # noqa: C901
        """Iron's ``cast``: see ``iron.interp.semantics``."""
        b = self.b
        ty = self.reg_type(dst)
        if src == dst:
            return x
        if src.is_bool:
            return self.inst("OpSelect", ty, x, self.const(1, dst), self.const(0, dst))
        if dst.is_bool:
            if src.is_float:  # NaN is true, as in C
                return self.inst("OpFUnordNotEqual", ty, x, self.const(0.0, t.f64 if src == t.f64 else t.f32))
            return self.inst("OpINotEqual", ty, x, self.const(0, src))
        if src.is_int and dst.is_int:
            return self.int_convert(x, src, dst)
        if src.is_int:
            name = "OpConvertSToF" if src.is_signed else "OpConvertUToF"
            if dst == t.f16 and not src.is_wide:  # exact in f32 below 2^24, and every |x| >= 65520 is inf in f16
                return self.round_f16(self.inst(name, ty, x))
            if dst == t.bf16 and not src.is_wide:  # rounded once: through f32 rounded to odd
                return self.round_to(self.int_to_f32_odd(x, src), dst)
            # i64/u64 -> f32 rounds once, -> halves through that f32 (Iron's definition)
            return self.rounded(self.inst(name, ty, x), dst)
        if dst.is_float:
            if src == t.f64 or dst == t.f64:  # f64 <-> f32 (halves are held as f32): one OpFConvert, then halves
                return self.rounded(self.inst("OpFConvert", ty, x), dst)
            return self.rounded(x, dst)  # halves are exact in f32, so this rounds once
        if dst.is_narrow:  # float -> 8 bits: to i32 (saturating), then wrapped
            return self.int_convert(self.convert(x, src, t.i32, op), t.i32, dst)
        # float -> int: truncate toward zero, saturate, NaN -> 0 (OpConvertFTo* is undefined out of range)
        fst = t.f64 if src == t.f64 else t.f32
        ft = self.reg_type(fst)
        bool_t = b.type_bool()
        lo, hi = t.INT_RANGE[dst.name]
        top = float(hi) + 1.0  # 2^31, 2^32, 2^63, 2^64: exact in both float types
        below = float(np.nextafter(np.array(top, dtype=fst.np_dtype), np.array(0, dtype=fst.np_dtype)))
        safe = self.inst("OpSelect", ft, self.inst("OpIsNan", bool_t, x), self.const(0.0, fst), x)
        safe = self.glsl("FClamp", ft, safe, self.const(float(lo), fst), self.const(below, fst))
        converted = self.inst("OpConvertFToS" if dst.is_signed else "OpConvertFToU", ty, safe)
        over = self.inst("OpFOrdGreaterThanEqual", bool_t, x, self.const(top, fst))
        return self.inst("OpSelect", ty, over, self.const(hi, dst), converted)

    def int_convert(self, x: int, src: t.ScalarType, dst: t.ScalarType) -> int:
        """int -> int, wrapping: registers of another width are sign- or zero-extended (by the source's signedness)
        or truncated; an 8-bit result is the 32-bit value wrapped into the 8-bit range."""
        b = self.b
        ty = self.reg_type(dst)
        sbits, dbits = max(src.bits, 32), max(dst.bits, 32)  # 8-bit values live in 32-bit registers
        if sbits != dbits:
            if src.is_signed and dbits > sbits:
                x = self.inst("OpSConvert", b.type_int(dbits, src.is_signed), x)
            else:  # OpUConvert gives an unsigned result
                x = self.inst("OpUConvert", b.type_int(dbits, False), x)
            src = {(32, True): t.i32, (32, False): t.u32, (64, True): t.i64, (64, False): t.u64}[
                dbits, src.is_signed and dbits > sbits]
        if self.reg_type(src) != ty:
            x = self.inst("OpBitcast", ty, x)
        if dst == t.i8:  # sign-extend the low byte
            left = self.inst("OpShiftLeftLogical", ty, x, b.const_int(24))
            return self.inst("OpShiftRightArithmetic", ty, left, b.const_int(24))
        if dst == t.u8:
            return self.inst("OpBitwiseAnd", ty, x, b.const_uint(0xFF))
        return x

    def erf(self, x: int) -> int:
        """erf in f32 (see ``erf.py``): three ranges computed branch-free and selected."""
        b = self.b
        f32, bool_t = b.type_float(32), b.type_bool()
        p, q = coefficients()

        def horner(coefs: tuple[float, ...], var: int) -> int:  # contractable pairs: lavapipe's Fma is a libm call
            r = self.f32c(coefs[0])
            for c in coefs[1:]:
                r = self.madd(r, var, self.f32c(c))
            return r

        ax = self.glsl("FAbs", f32, x)
        small = self.inst("OpFMul", f32, x, horner(p, self.inst("OpFMul", f32, x, x)))
        cm = self.glsl("FClamp", f32, ax, self.f32c(1.0), self.f32c(4.0))
        tt = self.inst("OpFMul", f32, self.inst("OpFSub", f32, cm, self.f32c(MID_CENTER)),
                       self.f32c(1.0 / MID_HALF_WIDTH))
        decay = self.glsl("Exp", f32, self.inst("OpFNegate", f32, self.inst("OpFMul", f32, cm, cm)))
        mid = self.inst("OpFSub", f32, self.f32c(1.0), self.inst("OpFMul", f32, decay, horner(q, tt)))
        sign = self.glsl("FSign", f32, x)
        mid = self.inst("OpFMul", f32, mid, sign)
        big = self.inst("OpFOrdGreaterThanEqual", bool_t, ax, self.f32c(4.0))
        out = self.inst("OpSelect", f32, big, sign, mid)
        out = self.inst("OpSelect", f32, self.inst("OpFOrdLessThan", bool_t, ax, self.f32c(1.0)), small, out)
        return self.inst("OpSelect", f32, self.inst("OpIsNan", bool_t, x), x, out)


#: ops whose result is their first operand when that is one constant in every lane (Mesa folds them so)
_UNIFORM_OF_CONSTANT = frozenset({"simd_shuffle", "simd_shuffle_xor", "simd_broadcast", "simd_shuffle_up",
                                  "simd_shuffle_down", "simd_min", "simd_max"})
#: pure ops of constants a driver folds (the raw IR keeps them; Iron's fold pass removes them in optimised IR)
_FOLDABLE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "neg": np.negative, "cast": lambda a: a,
             "abs": np.abs, "min": np.minimum, "max": np.maximum}
#: an int compared with itself
_SELF_COMPARE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}


def driver_constant(v, depth: int = 0) -> bool | int | float | None:
    """The constant a driver's own folding makes of ``v`` (None: none known), beyond Iron's fold pass: pure ops of
    constants (what the raw IR still holds), SIMD exchanges and min/max of a constant (``simd_shuffle(0, lane)``:
    fuzz seed 704530347), an int compared with itself."""
    owner = v.owner
    code = getattr(owner, "opcode", None)
    if code is None or depth > 32:
        return None
    if code == "const":
        return owner.attrs["value"]
    if code in _UNIFORM_OF_CONSTANT:
        return driver_constant(owner.operands[0], depth + 1)
    if code in _SELF_COMPARE and len(owner.operands) == 2 and owner.operands[0] is owner.operands[1] \
            and not owner.operands[0].type.is_float:
        return _SELF_COMPARE[code]
    fn = _FOLDABLE.get(code)
    if fn is None or owner.result is None or not owner.operands:
        return None
    args = [driver_constant(x, depth + 1) for x in owner.operands]
    if any(a is None for a in args):
        return None
    try:  # in the result's dtype, as the driver folds (ints wrap, floats round)
        with np.errstate(all="ignore"):
            arrays = [np.asarray(a, dtype=x.type.np_dtype) for a, x in zip(args, owner.operands)]
            return np.asarray(fn(*arrays)).astype(owner.result.type.np_dtype).item()
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):  # not a constant this knows how to fold
        return None


def is_plus_zero(v) -> bool:
    """Whether ``v`` is +0.0 for the driver (a literal, or a value its folding makes one)."""
    if not v.type.is_float:
        return False
    c = driver_constant(v)
    return c is not None and float(c) == 0.0 and math.copysign(1.0, float(c)) > 0


def _const_of(v) -> bool | int | float | None:
    owner = v.owner
    return owner.attrs["value"] if isinstance(owner, Op) and owner.opcode == "const" else None
