"""Iron bugs the source fuzzer (tests/fuzz/source_gen.py) found, each reduced to a standalone case and marked
``xfail(strict=True)``: the fix turns the test into a pass, and strict xfail then fails until the mark is removed."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Tensor, program_id, simd_shuffle_down, simd_shuffle_up, where
from iron.runtime import unavailable_reason

from ...backends.capabilities import caps


@iron.kernel
def shuffle_up(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = simd_shuffle_up(x[i], 1)


@iron.kernel
def shuffle_down(x: Tensor[iron.i32], o: Tensor[iron.i32]):
    i = program_id(0)
    o[i] = simd_shuffle_down(x[i], 2)


@pytest.mark.skipif(unavailable_reason("msl-cpu") is not None, reason="needs msl-cpu")
# fixed: the MSL emitter declared simd_lane_id only when the kernel itself called simd_lane() (fuzz seed 1029)
@pytest.mark.parametrize("kernel, dtype", [(shuffle_up, np.float32), (shuffle_down, np.int32)])
def test_msl_shuffle_up_down_without_simd_lane(kernel, dtype, monkeypatch):
    monkeypatch.setenv("IRON_MSL_CPU_SIMD_WIDTH", "8")
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", "8")
    x = np.arange(16, dtype=dtype)
    want, got = np.zeros(16, dtype), np.zeros(16, dtype)
    kernel[16, 16](x, want, backend="cpu")
    kernel[16, 16](x, got, backend="msl-cpu")
    np.testing.assert_array_equal(got, want)


@iron.kernel
def bool_select(x: Tensor[iron.i32], o: Tensor[iron.i32]):
    i = program_id(0)
    b = x[i] > 0
    c = x[i] < 5
    b = c if c else b  # a select of two bools: Python and the docs' `bool` type say bool; Iron makes it i32
    o[i] = b


# fixed: a select of two bools was typed i32 (fuzz seed 4); now bool, as in Python
def test_select_of_two_bools_is_a_bool():
    x = np.arange(-4, 12, dtype=np.int32)
    o = np.zeros(16, np.int32)
    bool_select[16](x, o, backend="cpu")
    np.testing.assert_array_equal(o, np.where(x < 5, x < 5, x > 0).astype(np.int32))


@iron.func
def _first_match(p):
    for j in range(3):
        if p == j:
            return j  # an early return inside the helper's loop ...
    return p + 1


@iron.kernel
def helper_in_while(x: Tensor[iron.i32], o: Tensor[iron.i32]):
    i = program_id(0)
    n = 0
    while n < _first_match(x[i]):  # ... inlined into a while condition
        n += 1
    o[i] = n


@pytest.mark.parametrize("backend", ["cpu", "vulkan", "msl-cpu"])
def test_helper_with_loop_return_in_while_condition(backend):
    """A @iron.func whose loop returns early, called in a `while` condition, was an internal compiler error (the
    condition region cannot hold the helper's loop and jumps; fuzz seed 2011): such a condition is now evaluated at
    the top of the body (`while True: if not test: break`)."""
    if unavailable_reason(backend):
        pytest.skip(f"{backend} unavailable: {unavailable_reason(backend)}")
    x = np.arange(-2, 14, dtype=np.int32)
    o = np.full(16, -7, np.int32)
    helper_in_while[16](x, o, backend=backend)
    np.testing.assert_array_equal(o, np.where((x >= 0) & (x < 3), x, x + 1).clip(0))


@iron.kernel
def bf16_shared(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    sh = iron.shared(iron.bf16, 16)
    sh[iron.local_id(0)] = x[i]
    iron.barrier()
    v = sh[(i - i) & 15]
    o[i] = v


@pytest.mark.skipif(unavailable_reason("msl-cpu") is not None, reason="needs msl-cpu")
def test_msl_bf16_shared_read_into_local():
    """MSL on the Metal model: a bf16 shared-array element read into a local (`const bfloat v = sh[0];`) did not
    compile (the model's shared arrays are volatile; its bfloat had no construction from `volatile bfloat`; fuzz seed
    2034). Fixed in the model's header."""
    x = np.arange(16, dtype=np.float32) - 2
    want, got = np.zeros(16, np.float32), np.zeros(16, np.float32)
    bf16_shared[16, 16](x, want, backend="cpu")
    bf16_shared[16, 16](x, got, backend="msl-cpu")
    np.testing.assert_array_equal(got, want)


@iron.kernel
def min_max(a: Tensor[iron.f32], b: Tensor[iron.f32], o: Tensor[iron.f32], p: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = max(a[i], b[i])
    p[i] = min(a[i], b[i])


def test_min_max_of_zeros_and_values(backend):
    """Float min/max of +0.0 and -0.0 (equal operands) may return either zero (docs/dsl.md, as CUDA, Vulkan and
    Metal leave it; fuzz seed 100129 saw the interpreter and lavapipe return the second operand, msl-cpu the first):
    the values agree on every backend, and every other pair is exact."""
    a = np.array([0.0, -0.0, 0.0, -0.0, 1.5, -2.0, np.nan, 3.0], np.float32)
    b = np.array([-0.0, 0.0, 0.0, -0.0, -1.5, -1.0, 2.0, np.nan], np.float32)
    o, p = np.full(8, 7.0, np.float32), np.full(8, 7.0, np.float32)
    min_max[8](a, b, o, p, backend=backend)
    np.testing.assert_array_equal(o, np.fmax(a, b))  # +0.0 == -0.0 as values
    np.testing.assert_array_equal(p, np.fmin(a, b))
    assert (o[3], p[3]) == (0.0, 0.0) and np.signbit(o[3]) and np.signbit(p[3])  # two -0.0: -0.0
    assert not np.signbit(o[2]) and not np.signbit(p[2])


@iron.kernel
def bool_where(x: Tensor[iron.i32], o: Tensor[iron.i32]):
    i = program_id(0)
    b = x[i] > 0
    b = where(x[i] < 5, x[i] < 3, b)  # where() of two bools is a bool too
    o[i] = b


def test_where_of_two_bools_is_a_bool(backend):
    x = np.arange(-4, 12, dtype=np.int32)
    o = np.full(16, -1, np.int32)
    bool_where[16](x, o, backend=backend)
    np.testing.assert_array_equal(o, np.where(x < 5, x < 3, x > 0).astype(np.int32))


@iron.kernel
def zero_known_after_folding(u: Tensor[iron.u32], x: Tensor[iron.f32], v: Tensor[iron.f32], a: Tensor[iron.f32]):
    i = program_id(0)
    s = iron.cast(u[i] < u[i], iron.f32) + x[i]  # 0.0 + x, the 0.0 only a constant once `u < u` is folded
    v[i] = s
    a[i] = iron.atan2(abs(s), s)  # the sign of a zero s is 0 against pi here


def test_zero_plus_negative_zero_into_atan2(backend):
    """+0.0 + -0.0 is +0.0 (IEEE 754, round to nearest), so atan2(+0, 0.0 + -0.0) is 0, not pi. Fuzz seed 450045308:
    lavapipe (Mesa 22.3) folds `u < u` to false, the cast to a constant 0.0 and then `0.0 + x` to x, keeping -0.0
    (documented in docs/backends/vulkan.md; the IR shows no constant zero, so the fuzzer's check of the IR cannot skip
    the kernel; the source generator now sends atan2's zero arguments to +0.0)."""
    x = np.array([-0.0, 0.0, 1.5, -2.0, -0.0, 3.0, -0.0, -0.0], np.float32)
    u = np.arange(8, dtype=np.uint32) * 0x11111111
    v, a = np.full(8, np.nan, np.float32), np.full(8, np.nan, np.float32)
    zero_known_after_folding[8](u, x, v, a, backend=backend)
    want = 0.0 + x.astype(np.float64)
    if caps(backend).folds_signed_zero:  # the driver folds 0.0 + x to x: values right, zero signs not (documented)
        np.testing.assert_array_equal(v, want.astype(np.float32))
        return
    np.testing.assert_array_equal(v.view(np.uint32), want.astype(np.float32).view(np.uint32))
    np.testing.assert_allclose(a, np.arctan2(np.abs(want), want), rtol=1e-6, atol=0)


@iron.kernel
def logs(x: Tensor[iron.f32], a: Tensor[iron.f32], b: Tensor[iron.f32]):
    i = program_id(0)
    a[i] = iron.log2(x[i])
    b[i] = iron.log(x[i])


def test_log_of_subnormals(backend):
    """log2/log of f32 subnormals (fuzz seed 964067086: lavapipe's Log2(1.107e-38) gave -126.043 for -126.087):
    within a few ulp of float64, or -inf where a device without DenormPreserve flushed the argument (lavapipe
    reports no DenormPreserve but keeps them); the normal range and the edges unchanged."""
    x = np.array([1e-40, 1.106869e-38, 2.0 ** -149, 1.17e-38, 2.0 ** -126, 1e-30, 0.75, 3.0e5], np.float32)
    a, b = np.full(8, np.nan, np.float32), np.full(8, np.nan, np.float32)
    logs[8](x, a, b, backend=backend)
    x64 = x.astype(np.float64)
    for got, want in ((a, np.log2(x64)), (b, np.log(x64))):
        close = np.isclose(got, want, rtol=4e-7, atol=2e-6)
        flushed = (x < 2.0 ** -126) & (got == -np.inf) & (not caps(backend).denorm_preserve)
        assert (close | flushed).all(), (got, want)
    z, n = np.array([0.0, -1.0], np.float32), np.full(2, 7.0, np.float32)
    logs[2](z, n, np.full(2, 7.0, np.float32), backend=backend)
    assert n[0] == -np.inf and np.isnan(n[1])


@iron.kernel
def powers(x: Tensor[iron.f32], y: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i] = iron.pow(x[i], y[i])


def test_pow_of_subnormals(backend):
    """pow of an f32 subnormal base (fuzz seed 705003498: lavapipe's pow(2.75e-40, -0.03143) gave 15.9 for 17.5, its
    Pow being exp2(y * log2(x)) with a log2 that reads a subnormal as 2^-127 * 1.m): within Pow's bound (that of
    exp2(y * log2(x))) of float64, or C's pow(+-0, y) where a device without DenormPreserve flushed the base."""
    x = np.array([2.75e-40, 1e-40, 2.0 ** -149, 1.1e-38, 1e-40, 2.75e-40, 1e-40, -1e-40, -1e-40, -3e-39], np.float32)
    y = np.array([-0.03143, 0.5, 0.01, -0.5, -0.25, 1.0, -1.0, -1.0, 2.0, 0.5], np.float32)
    o = np.full(x.size, 7.0, np.float32)
    powers[x.size](x, y, o, backend=backend)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want = np.power(x64, y64).astype(np.float32)  # ... 1e-40^-1 overflows to inf, -1e-40^-1 to -inf, NaN last
        flushed_base = np.power(np.copysign(0.0, x64), y64).astype(np.float32)
    bound = (3 + 2 * np.abs(y64 * np.log2(np.abs(x64)))) * 2.0 ** -23 + np.abs(y64) * 2.0 ** -21
    close = np.isclose(o, want, rtol=bound, atol=0) | (np.isnan(o) & np.isnan(want))
    flushed = (o == flushed_base) & (not caps(backend).denorm_preserve)
    assert (close | flushed).all(), (o, want)
    assert want[6] == np.inf and want[7] == -np.inf and want[8] == 0 and np.isnan(want[9])


@iron.kernel
def half_of_shifted_ints(x: Tensor[iron.u32], ou: Tensor[iron.u32], oi: Tensor[iron.i32], of: Tensor[iron.f32]):
    i = program_id(0)
    b = x[i] & 7  # three significant bits, shifted by constants: the compiler knows how few bits each value has
    ou[i] = iron.u32(iron.f16(b << 14))
    oi[i] = iron.i32(iron.f16(-(iron.i32(b) << 14)))
    of[i] = iron.f16(iron.f32(b << 20))


def test_half_of_a_shifted_int_overflows_to_inf(backend, rng):
    """An int with few significant bits past half's range (`(x != 0) << 23`) converts to f16 infinity, which a
    float -> int cast saturates (docs/dsl.md). Fuzz seed 705000177: msl-cpu kept 8388608, as LLVM's instcombine
    (clang 16) takes int -> half as exact when the int has at most 11 significant bits, whatever its magnitude, and
    folds (float)(half)(float)i to (float)i; the MSL emitter now sends values past 65504 to infinity itself."""
    n = 64
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x[:8] = (x[:8] & ~np.uint32(7)) | np.arange(8, dtype=np.uint32)  # every b: 3 << 14 is finite, 4 << 14 is not
    ou, oi, of = np.zeros(n, np.uint32), np.zeros(n, np.int32), np.zeros(n, np.float32)
    half_of_shifted_ints[n](x, ou, oi, of, backend=backend)
    b = (x & 7).astype(np.float64)
    with np.errstate(over="ignore"):
        up, down, wide = (b * 2**14).astype(np.float16), (-b * 2**14).astype(np.float16), (b * 2**20).astype(np.float16)
    np.testing.assert_array_equal(ou, np.where(np.isinf(up), 2**32 - 1, up.astype(np.float64)).astype(np.uint32))
    np.testing.assert_array_equal(oi, np.where(np.isinf(down), -(2**31), down.astype(np.float64)).astype(np.int32))
    np.testing.assert_array_equal(of, wide.astype(np.float32))
    assert np.isinf(wide[1:8]).all() and ou[4] == 2**32 - 1 and ou[3] == 3 << 14


@iron.func
def _zero_from_a_loop(p):
    for j in range(3):
        if j > -5:  # from the first iteration on: a driver that unrolls the loop decides the branch
            return 0.0
    return p


@iron.kernel
def products_of_driver_zeros(x: Tensor[iron.f32], o: Tensor[iron.f32]):
    i = program_id(0)
    o[i * 8] = _zero_from_a_loop(x[i]) * (float("-inf") - x[i])
    for j in range(2):  # j is the constant 0 in the first copy of an unrolled loop
        o[i * 8 + 1 + j] = iron.f32(j) * x[i]
        o[i * 8 + 3 + j] = x[i] / iron.f32(j)
        o[i * 8 + 5 + j] = iron.fma(iron.f32(j), x[i], 1.0)
    o[i * 8 + 7] = 0.0
    o[i * 8 + 7] = o[i * 8 + 7] * x[i]  # the stored 0.0, forwarded to the load


def test_products_with_zeros_only_the_driver_knows(backend, rng):
    """0.0 * inf is NaN and x / 0.0 is +-inf also where the zero is a constant only after the driver's own folding:
    a helper's `return 0.0` from inside a loop, an unrolled loop's index, a store forwarded to a load. Fuzz seed
    705000879: lavapipe gave h(x) * -inf = 0.0 (gallivm folds x * 0.0 to 0.0 once NIR has made the operand its
    constant +0.0, despite SignedZeroInfNanPreserve); the SPIR-V emitter now flips the sign of such operands
    (codegen/spirv/driver_constants.py), so that no +0.0 reaches it."""
    n = 64
    x = (rng.standard_normal(n) * rng.choice([1.0, 1e3, 1e30], n)).astype(np.float32)
    x[:7] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -3.0]
    o = np.full(8 * n, 7.0, np.float32)
    products_of_driver_zeros[n](x, o, backend=backend)
    x64, zero, one = x.astype(np.float64), np.zeros(n), np.ones(n)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        want = [zero * (-np.inf - x64), zero * x64, one * x64, x64 / zero, x64 / one, zero * x64 + 1.0, x64 + 1.0,
                zero * x64]
    np.testing.assert_array_equal(o.reshape(n, 8), np.stack(want, 1).astype(np.float32))
    assert np.isnan(o.reshape(n, 8)[:, 0]).all() and np.isnan(o[[1, 9, 17]]).all() and o[3] == np.inf


@iron.kernel
def products_of_equal_loads(u: Tensor[iron.u32], x: Tensor[iron.f32], o: Tensor[iron.f32], oi: Tensor[iron.i32]):
    i = program_id(0)
    z = iron.cast(u[i] - u[i], iron.f32)  # two loads of one address: 0.0 once the driver merges them
    w = iron.cast(u[(i + 3) & 7] ^ u[(i + 3) & 7], iron.f32)  # ... also at an index computed twice
    o[i * 4] = z * x[i]
    o[i * 4 + 1] = x[i] / z
    o[i * 4 + 2] = w / x[i]
    o[i * 4 + 3] = iron.fma(w, x[i], 1.0)
    oi[i] = iron.isnan(z * x[i])  # the wrong 0.0 reaching an integer, as in the fuzz kernel's branch


def test_products_with_a_difference_of_equal_loads(backend, rng):
    """0.0 * inf is NaN where the 0.0 is `u[i] - u[i]`: two loads in Iron's IR, one value after NIR's CSE, then 0 and
    a constant +0.0 that lavapipe's gallivm multiplies away (fuzz seed 706000716: `cast(xu[gid] - xu[gid], f32) *
    xf[gid]` gave 0.0 for NaN and a branch on it stored where the interpreter did not). driver_constants.py now takes
    two loads of one memory at one index as one value."""
    n = 8
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -3.0, 2.5], np.float32)
    o, oi = np.full(4 * n, 7.0, np.float32), np.full(n, -1, np.int32)
    products_of_equal_loads[n](u, x, o, oi, backend=backend)
    x64, zero, one = x.astype(np.float64), np.zeros(n), np.ones(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = [zero * x64, x64 / zero, zero / x64, zero * x64 + one]
    np.testing.assert_array_equal(o.reshape(n, 4), np.stack(want, 1).astype(np.float32))
    np.testing.assert_array_equal(oi, np.isnan(want[0]).astype(np.int32))
    assert np.isnan(o[[0, 4, 8]]).all() and o[1] == np.inf and oi[:3].tolist() == [1, 1, 1]


@iron.kernel
def min_max_of_nan_bits(u: Tensor[iron.u32], x: Tensor[iron.f32], o: Tensor[iron.f32], acc: Tensor[iron.f32],
                        width: Tensor[iron.i32], su: iron.u32):
    i = program_id(0)
    v = iron.bitcast(u[i], iron.f32)
    s = iron.bitcast(su, iron.f32)  # uniform: one value, not one per thread
    o[i * 6] = iron.simd_min(v)
    o[i * 6 + 1] = iron.simd_max(v)
    o[i * 6 + 2] = min(s, 1.5)
    o[i * 6 + 3] = max(2.5, s)
    o[i * 6 + 4] = min(v, x[i])
    o[i * 6 + 5] = max(x[i], v)
    iron.atomic_max(acc, i % 2, v)
    width[i] = iron.simd_size()


def test_min_max_of_signalling_nans(backend):
    """Float min/max, simd_min/simd_max and f32 atomic_max skip a *signalling* NaN too, as every other NaN (fuzz seed
    706003266: simd_min of bitcast u32 lanes, one of them 0x7fa9eb50, gave 1.68e-12 for 8.50e-14 on the interpreter
    alone): NumPy's scalar and strided fmin/fmax loops call glibc's fminf, which returns NaN for one (IEEE 754-2008's
    minNum), so the interpreter's reductions lost the lanes before it and its uniform min/max gave NaN."""
    snan, neg_snan, qnan = 0x7FA9EB50, 0xFFA00001, 0x7FC00000
    groups = np.array([2.0, 8.5e-14, 0, 1.68e-12, 0, 0, 7.0, 3.6e20], np.float32) * np.arange(1, 9)[:, None]
    u = groups.astype(np.float32).view(np.uint32)  # the smallest value before a signalling NaN, as in the fuzz kernel
    u[:, [2, 4, 5]] = [snan, neg_snan, qnan]
    u[7] = [snan, qnan, neg_snan, snan, snan, qnan, neg_snan, snan]
    u = u.ravel()
    n = u.size  # 64: seven SIMD groups of 8 with values, then one of NaNs only
    x = np.linspace(-3, 3, n).astype(np.float32)
    o, width = np.full(6 * n, 7.0, np.float32), np.zeros(n, np.int32)
    acc = np.array([np.float32(-1), np.uint32(snan).view(np.float32)], np.float32)
    min_max_of_nan_bits[n, n](u, x, o, acc, width, snan, backend=backend)
    o, v, w = o.reshape(n, 6), u.view(np.float32), int(width[0])
    nan = np.isnan(v)
    smallest = np.where(nan, np.inf, v).reshape(-1, w).min(1)
    largest = np.where(nan, -np.inf, v).reshape(-1, w).max(1)
    none = nan.reshape(-1, w).all(1)
    np.testing.assert_array_equal(o[:, 0], np.repeat(np.where(none, np.nan, smallest), w))
    np.testing.assert_array_equal(o[:, 1], np.repeat(np.where(none, np.nan, largest), w))
    assert (o[:, 2] == 1.5).all() and (o[:, 3] == 2.5).all()
    np.testing.assert_array_equal(o[:, 4], np.where(nan, x, np.minimum(v, x)))
    np.testing.assert_array_equal(o[:, 5], np.where(nan, x, np.maximum(v, x)))
    np.testing.assert_array_equal(acc, [np.where(nan, -np.inf, v)[k::2].max() for k in (0, 1)])
    assert w != 8 or o[0, 0] == np.float32(8.5e-14) and np.isnan(o[-1, :2]).all()


@iron.kernel
def after_exit(x: Tensor[iron.f32], y: Tensor[iron.f32], z: Tensor[iron.f32], s: float):
    i = program_id(0)
    b = x[i] > 100.0
    b = iron.isnan(s)  # a variable: every read of it is one SSA value for the driver
    if b:
        return
    y[i] = iron.cast(b, iron.f32) * x[i]
    c = iron.isinf(s)
    if not c:
        z[i] = iron.cast(c, iron.f32) * x[i]


# fixed: after `if b: return` the driver knows b is false, so cast(b, f32) * x was lavapipe's folded 0.0 * x = 0 for
# inf, NaN and -2.0 (fuzz seed 813761036, session 23): driver_constants now counts a branch's condition as a constant
def test_product_with_a_condition_the_branch_decided(backend):
    x = np.array([np.inf, -np.inf, np.nan, -2.0, 3.0, 0.0, -0.0, 1e30], np.float32)
    y, z = np.full(8, 7.0, np.float32), np.full(8, 7.0, np.float32)
    after_exit[8](x, y, z, 1.5, backend=backend)
    with np.errstate(invalid="ignore"):
        want = np.float32(0.0) * x
    for got in (y, z):
        np.testing.assert_array_equal(got, want)
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
