"""Wrong answers the differential fuzzer (tests/fuzz/runner.py) found on Vulkan (lavapipe), each reduced to a
standalone kernel and run on every backend against a float64 / Python-int oracle.

- Fuzz seeds 704530995, 704531197 (IR kernels) and 704530347 (a source kernel): a float add, sub, mul or div with a
  +0.0 operand the driver knows. lavapipe's gallivm (Mesa 22.3, lp_bld_arit.c: lp_build_mul/lp_build_add/lp_build_div)
  returns 0.0 for x * 0.0 and 0.0 / x and x for x + 0.0 whenever an operand *is* its constant +0.0, although the
  module declares SignedZeroInfNanPreserve and decorates the op NoContraction: inf * 0.0 gave 0 (not NaN), so did
  0.0 / 0.0, and -0.0 + 0.0 gave -0.0. The zero was a literal (``f * (2.0 - 2.0)`` once folded) or one only the
  driver's folding reveals (``simd_shuffle(0, lane)``). The SPIR-V emitter now spells such operations without the
  zero (``codegen/spirv/values.py``: ``zero_safe_product`` and ``with_plus_zero``, for the zeros ``driver_constant``
  finds; products and quotients also for those only NIR's unrolling and forwarding make: driver_constants.py).
- Fuzz seed 704531832 (a source kernel): ``atan2(y, y)`` with y = 1e-40 (a subnormal) gave 1e-10 on Vulkan for
  pi/4. The emitter's atan2 (``codegen/spirv/mathops.py``: ``atan2_finite``) divided min(|x|, |y|) by
  max(max(|x|, |y|), 1e-30), a guard meant for (0, 0) that wrongly scaled every pair below 1e-30 (atan2(1e-35, 1e-35)
  gave 1e-5); both are now scaled by a power of two into the normal range before the division.
- Fuzz seed 704531848 (a source kernel): not an Iron bug. ``copysign(iron.bf16(su), floor(v1))`` stored to f16 gave
  -inf on Vulkan and +inf on the interpreter: v1 = xf[k] + (-2.0 - floor(xf[gid])) was a NaN (both xf NaN), and the
  sign of a computed NaN is not specified (IEEE 754; docs/dsl.md now says so). lavapipe even gives one SPIR-V value
  two signs: +NaN when stored before a ``barrier()``, -NaN when read after it. The source generator's copysign guards
  its second argument against zeros only; it needs ``where(isnan(y) or y == 0.0, 1.0, y)``, as its bitcasts have.
- Fuzz seed 704530750: ``iron.bf16(v)`` of an i32/u32 rounded twice on Vulkan (to f32, then to bf16): 0x40400001
  gave 2^30 where rounding once gives 0x40800000. Iron's casts round once (``iron.interp.semantics``; CUDA, MSL and
  the interpreter do); the emitter now converts to f32 rounding to odd first.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import iron
from iron import Tensor, barrier, copysign, isnan, local_id, program_id, simd_shuffle, where

_X = np.array([1.5, np.inf, -np.inf, np.nan, -2.0, 0.0, -0.0, 3.0], np.float32)


def _assert_ieee(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-exact (zero signs included), except that any NaN matches any NaN."""
    want = want.astype(got.dtype)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))


@iron.kernel
def with_literal_zero(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    v = x[i]
    z = 2.0 - 2.0  # fuzz seed 704530995: folded to a constant +0.0
    o[i * 8 + 0] = v * z
    o[i * 8 + 1] = z * v
    o[i * 8 + 2] = v + z
    o[i * 8 + 3] = z + v
    o[i * 8 + 4] = z - v
    o[i * 8 + 5] = v - z
    o[i * 8 + 6] = z / v
    o[i * 8 + 7] = v / z


def test_float_ops_with_a_literal_zero(backend):
    """inf * 0.0 and NaN * 0.0 are NaN, -0.0 + 0.0 and 0.0 - 0.0 are +0.0, 0.0 / 0.0 is NaN (IEEE 754; docs/dsl.md:
    `+ - * /` are IEEE on floats). lavapipe gave 0.0, -0.0, -0.0 and 0.0 (fuzz seed 704530995)."""
    o = np.full(64, 7.0, np.float32)
    with_literal_zero[8](_X, o, backend=backend)
    x, z = _X.astype(np.float64), 0.0
    with np.errstate(all="ignore"):
        want = np.stack([x * z, z * x, x + z, z + x, z - x, x - z, z / x, x / z], 1).ravel()
    _assert_ieee(o, want)


@iron.kernel
def zero_product_select(x: Tensor[iron.f32], o: Tensor[iron.i32]):
    i = program_id(0)
    p = abs(x[i] * (2.0 - 2.0))
    o[i] = iron.cast(where(p < 1000000000.0, p, 1.0), iron.i32)


def test_zero_product_reaching_an_int(backend):
    """Fuzz seed 704531197: NaN = |inf * 0.0| fails `< 1e9`, so the select gives 1.0 and the int 1; lavapipe folded
    the product to 0 and stored 0 (an int, so no NaN -> 0 allowance could cover it)."""
    o = np.full(8, -1, np.int32)
    zero_product_select[8](_X, o, backend=backend)
    np.testing.assert_array_equal(o, np.where(np.isfinite(_X), 0, 1).astype(np.int32))


@iron.kernel
def shuffled_zero(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    s = simd_shuffle(iron.u32(i < i), local_id(0) & 7)  # 0 in every lane: a constant once the driver folds it
    z = iron.f32(s)
    o[i * 5 + 0] = x[i] * z
    o[i * 5 + 1] = z + x[i]
    o[i * 5 + 2] = z / x[i]
    o[i * 5 + 3] = z / 0.0
    o[i * 5 + 4] = z * (x[i] / 0.0)


def test_zero_the_driver_reveals(backend):
    """Fuzz seed 704530347: `(xb + sf) * bf16(f16(simd_shuffle(0, lane)))` was 0.0 on lavapipe for xb = inf (NaN in
    IEEE): Iron's IR keeps the shuffle, the driver folds it to 0.0 and then the product."""
    o = np.full(40, 7.0, np.float32)
    shuffled_zero[8, 8](_X, o, backend=backend)
    x = _X.astype(np.float64)
    with np.errstate(all="ignore"):
        want = np.stack([x * 0.0, 0.0 + x, 0.0 / x, 0.0 / (x * 0.0), 0.0 * (x / 0.0)], 1).ravel()
    _assert_ieee(o, want)


@iron.kernel
def int_to_bf16(u: Tensor[iron.u32], s: Tensor[iron.i32], ou: Tensor[iron.bf16], os: Tensor[iron.bf16]):
    i = program_id(0)
    ou[i] = iron.bf16(u[i])
    os[i] = iron.bf16(s[i])


def _bf16_once(values) -> np.ndarray:
    """Python ints rounded once, to nearest even, to bf16's 8 significant bits (exact: no float in between)."""
    out = []
    for v in (int(v) for v in values):
        m = -v if v < 0 else v
        cut = max(m.bit_length() - 8, 0)
        q, r = divmod(m, 1 << cut)
        if cut and (2 * r > 1 << cut or 2 * r == 1 << cut and q & 1):
            q += 1
        out.append(float(q << cut) * (-1.0 if v < 0 else 1.0))
    return np.array(out, np.float64)


def test_int_to_bf16_rounds_once(backend):
    """Fuzz seed 704530750: `iron.bf16(v1)` with v1 = 0x40400008 (3.0's bits + 8) is 0x40800000 rounded once; through
    f32 (0x40400000 + 8 -> 0x40400000 + 0, a tie for bf16) it went to even, 2^30, on Vulkan."""
    u = np.array([0x40400008, 0x40400001, 0x40400000, 0x80800001, 0x01010001, 5, 0xFFFFFFFF, 0], np.uint32)
    s = np.array([0x40400008, -0x40400008, 0x01010001, -0x01010001, -2**31, 7, 2**31 - 1, -5], np.int32)
    ou, os = np.zeros(8, ml_dtypes.bfloat16), np.zeros(8, ml_dtypes.bfloat16)
    int_to_bf16[8](u, s, ou, os, backend=backend)
    np.testing.assert_array_equal(ou.astype(np.float64), _bf16_once(u))
    np.testing.assert_array_equal(os.astype(np.float64), _bf16_once(s))


@iron.kernel
def gelu_of_a_scalar(o: Tensor[iron.f32], s: float):
    i = program_id(0)
    o[i] = iron.gelu(s) + float(i)  # one value for every thread: the interpreter holds it as a 0-d array


def test_gelu_of_a_uniform_value(backend):
    """Fuzz seed 704531284 (a source kernel): gelu of a value uniform across the threads raised TypeError inside the
    interpreter's reference (item assignment into a 0-d array) for arguments below -1; the erfc branch now works on
    one value too."""
    import math

    for s in (-3.0, -0.5, 2.0):
        o = np.full(8, np.nan, np.float32)
        gelu_of_a_scalar[8](o, s, backend=backend)
        want = 0.5 * s * math.erfc(-s / math.sqrt(2.0)) + np.arange(8)
        np.testing.assert_allclose(o, want, rtol=2e-6, atol=1e-7)


@iron.kernel
def atan2_of(y: Tensor[iron.f32], x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = iron.atan2(y[i], x[i])


def test_atan2_of_tiny_and_huge_operands(backend):
    """Fuzz seed 704531832: atan2(1e-40, 1e-40) is pi/4 (C atan2f; docs/dsl.md). Vulkan gave 1e-10: every
    max(|x|, |y|) below 1e-30 was taken as 1e-30. Subnormal, tiny normal and huge pairs, within the 8 ulp
    tests/frontend/test_math_ops.py allows atan2."""
    y = np.array([1e-40, 1e-35, 1e-31, -3e-39, 1e-40, 2e-45, -1e-40, 1e-30, 1e-20, 3e38, 1e38, -5e37, 1e-40, 1.0],
                 np.float32)
    x = np.array([1e-40, 1e-35, 2e-31, 1e-39, -2e-40, -1e-45, 3e-39, -4e-31, 1e-19, -3e38, 3e38, 2e30, 1e20, 1e-40],
                 np.float32)
    o = np.full(len(y), np.nan, np.float32)
    atan2_of[len(y)](y, x, o, backend=backend)
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    np.testing.assert_array_less(np.abs(o - want), 8 * np.abs(np.spacing(want.astype(np.float32))))


@iron.kernel
def sign_of_a_nan_sum(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    v: iron.f32 = x[i] + (-2.0 - x[i + 4])  # a NaN for i < 4 (x[i] or x[i + 4] NaN), of an unspecified sign
    barrier()
    v += 1.0
    o[i * 3 + 0] = copysign(3.0, v)
    o[i * 3 + 1] = copysign(3.0, where(isnan(v), 1.0, v))  # the guard docs/dsl.md advises
    o[i * 3 + 2] = copysign(3.0, x[i])  # a loaded NaN keeps its sign


def test_sign_of_a_computed_nan(backend):
    """Fuzz seed 704531848: copysign of a NaN that arithmetic produced may take either sign (docs/dsl.md), and does
    on lavapipe; copysign of a loaded NaN, or of a computed value guarded with isnan, agrees everywhere."""
    x = np.array([np.nan, -np.nan, 1.0, -np.nan, np.nan, 2.0, np.nan, -np.nan], np.float32)
    o = np.full(12, 7.0, np.float32)
    sign_of_a_nan_sum[4, 4](x, o, backend=backend)
    o = o.reshape(4, 3)
    np.testing.assert_array_equal(np.abs(o[:, 0]), 3.0)
    np.testing.assert_array_equal(o[:, 1], 3.0)
    np.testing.assert_array_equal(o[:, 2], np.copysign(3.0, x[:4]))
