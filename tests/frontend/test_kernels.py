"""Kernels through the whole spine (front-end -> passes -> NumPy interpreter) against float64 NumPy oracles.

Every test draws fresh random inputs (the ``rng`` fixture, seed printed for replay), poisons its outputs (NaN for
float outputs, a sentinel for integer outputs that the kernel overwrites, random contents for accumulators whose
start value is part of the oracle), launches on ``backend=backend`` and compares with an oracle computed in float64 from
the values actually stored in the inputs. T-generic kernels run in f32, f16 and bf16.
"""

from __future__ import annotations

import ast
import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import iron

from ..backends.capabilities import caps
from . import bug_kernels as B
from . import kernels as K

# ---------------------------------------------------------------------------------------------------------------
# Tolerances: the one table. An element passes when got == want (same infinity) or
#     |got - want| <= TOLERANCE[dtype].rel * |want| + TOLERANCE[dtype].abs          (the final rounding)
#                     + MATH_REL * |want|                 when an f32 math function is involved
#                     + n_ops * F32_UNIT * scale          when a chain of n f32 operations accumulates error
# where want is the float64 oracle of the values stored in the inputs. Results that are exactly representable
# (abs, floor, ceil, min, max, copies, shuffles, casts to int, integer arithmetic) are compared with ==.


@dataclass(frozen=True)
class Tol:
    rel: float
    abs: float


TOLERANCE = {
    # f32: the kernel computes in f32; its last operation rounds once, half an ulp: 2^-24 relative. Below the normal
    # range (2^-126) the spacing is 2^-149, so half of it, 2^-150, is the absolute floor.
    "f32": Tol(rel=2**-24, abs=2**-150),
    # f16: computed in f32, rounded to f16 once when stored: half an f16 ulp, 2^-11 relative (11-bit significand).
    # Below f16's normal range (2^-14) the spacing is 2^-24, so half of it, 2^-25, is the absolute floor.
    "f16": Tol(rel=2**-11, abs=2**-25),
    # bf16: computed in f32, rounded to bf16 once when stored: half a bf16 ulp, 2^-8 relative (8-bit significand).
    # bf16 has f32's exponent range, so its subnormal spacing is 2^-133 and the absolute floor 2^-134.
    "bf16": Tol(rel=2**-8, abs=2**-134),
}
# f32 math functions (exp, log, sin, ...): the interpreter evaluates them with NumPy's float32 kernels, measured at
# <= 3.6 ulp from the float64 result; 8 ulp of f32, 2^-20 relative, is allowed on top of the final rounding.
MATH_REL = 2**-20
# One f32 rounding, relative to the magnitude it applies to (Higham's unit roundoff u). A chain of n additions or
# multiplications (sums, dot products, axpy) is within gamma_n ~ n * u times the sum of the absolute values of the
# terms, not of the result: cancellation makes a relative bound on the result meaningless.
F32_UNIT = 2**-24
# One float64 rounding: the oracle's own error and the interpreter's float64 fma before its final rounding.
F64_UNIT = 2**-53

# Backend allowances, where the backend's own specification permits less than the interpreter's exact results (GLSL's
# log/log2/tanh bounds, an unfused Fma, a driver that folds signed zeros, flushed subnormals, no 64-bit floats, less
# shared memory), are data: each backend's row in tests/backends/capabilities.py, asked as ``caps(backend).<name>``.


def assert_exact_but_zero_sign(got, want, what: str = "out"):
    """assert_exact, except that -0.0 and +0.0 count as equal."""
    g, w = f64(np.asarray(got)), np.asarray(want, np.float64)
    assert_exact(np.where(g == 0, 0.0, g), np.where(w == 0, 0.0, w), what)


# Integer outputs cannot hold NaN: they are poisoned with the bit pattern 0xDEADBEEF instead (int_poisoned), and an
# element still holding it where the oracle does not counts as never written.
POISON_BITS = 0xDEADBEEF

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
DTYPES_IR = {"f32": iron.f32, "f16": iron.f16, "bf16": iron.bf16}


# the ``dtype`` fixture (each of DTYPES, as the backend's row allows) is tests/conftest.py's


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def poisoned(n: int, dtype: str) -> np.ndarray:
    return np.full(n, np.nan, dtype=DTYPES[dtype])


def int_poisoned(n: int, dtype=np.int32) -> np.ndarray:
    return np.full(n, POISON_BITS, np.uint32).view(dtype)


def as_dtype(values: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(values).astype(DTYPES[dtype])


def assert_close(
    got, want, dtype: str, *, math_fn: bool = False, n_ops: int = 0, scale=None, extra=None, what: str = "out"
):
    """The tolerance table above, applied element by element (``extra``: a further absolute bound per element, for
    errors the table does not model); reports the worst offender."""
    g = f64(got)
    w = np.asarray(want, dtype=np.float64)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != oracle shape {w.shape}"
    unwritten = np.isnan(g) & ~np.isnan(w)
    assert not unwritten.any(), (
        f"{what}: {unwritten.sum()} of {g.size} elements still NaN (never written?), "
        f"first at {np.flatnonzero(unwritten)[0]}"
    )
    tol = TOLERANCE[dtype]
    bound = tol.rel * np.abs(w) + tol.abs
    if math_fn:
        bound = bound + MATH_REL * np.abs(w)
    if n_ops:
        bound = bound + n_ops * F32_UNIT * (np.abs(w) if scale is None else np.asarray(scale, dtype=np.float64))
    if extra is not None:
        bound = bound + np.asarray(extra, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
        ok = (g == w) | (err <= bound) | (np.isnan(g) & np.isnan(w))
    if not ok.all():
        i = int(np.argmax(np.where(ok, -np.inf, err - bound)))
        raise AssertionError(
            f"{what} ({dtype}): {int((~ok).sum())} of {g.size} elements out of tolerance; worst at "
            f"[{i}]: got {g[i]!r}, oracle {w[i]!r}, |err| {err[i]:.3g} > bound {bound[i]:.3g}"
        )


def assert_exact(got, want, what: str = "out"):
    """Bit-for-bit agreement, for results that are exactly representable in the output type: the sign of zero
    counts, and NaN matches NaN only where the oracle is NaN."""
    g = np.asarray(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != oracle shape {w.shape}"
    if g.dtype.kind == "f" or g.dtype == DTYPES["bf16"]:
        g, w = f64(g), w.astype(np.float64)
        unwritten = np.isnan(g) & ~np.isnan(w)
        assert not unwritten.any(), f"{what}: {unwritten.sum()} elements still NaN (never written?)"
        bad = ~(((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w)))
    else:
        unwritten = (g.astype(np.int64) & 0xFFFFFFFF == POISON_BITS) & (w.astype(np.int64) & 0xFFFFFFFF != POISON_BITS)
        assert not unwritten.any(), f"{what}: {unwritten.sum()} elements never written (still 0xDEADBEEF)"
        bad = g != w
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {g.size} elements differ; first at [{i}]: got {g[i]!r}, oracle {w[i]!r}"
        )


# ---------------------------------------------------------------------------------------------------------------
# the seed


def test_seed_exp_exact_grid_of_1000(backend, dtype, rng):
    a = rng.standard_normal(1000).astype(DTYPES[dtype])
    out = np.full_like(a, np.nan)
    K.iron_exp[a.size](a, out, backend=backend)  # 1000 threads: not a multiple of the default group of 256
    assert not np.isnan(f64(out)).any()
    assert_close(out, np.exp(f64(a)), dtype, math_fn=True)


# ---------------------------------------------------------------------------------------------------------------
# math builtins


def _unary_inputs(op: str, n: int, rng) -> np.ndarray:
    """Inputs inside each function's domain, with results finite in f16 (max 65504)."""
    x = rng.standard_normal(n)
    if op == "exp":
        return np.clip(3 * x, -10, 10)
    if op == "exp2":
        return np.clip(4 * x, -14, 15)
    if op in ("log", "log2", "sqrt", "rsqrt"):
        return np.exp(np.clip(3 * x, -9, 9))  # positive, spanning 8 decades
    if op in ("sin", "cos"):
        return 4 * x
    if op in ("tanh", "erf"):
        return 1.5 * x
    return 10 * x  # abs, floor, ceil: both signs, many non-integers


_ERF = np.vectorize(math.erf, otypes=[np.float64])
UNARY_ORACLES = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": lambda v: 1.0 / np.sqrt(v),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "erf": _ERF,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
}
EXACT_UNARY = {"abs", "floor", "ceil"}


@pytest.mark.parametrize("op", K.UNARY_OPS)
def test_unary_math(backend, op, dtype, rng):
    n = 1531
    x = as_dtype(_unary_inputs(op, n, rng), dtype)
    out = poisoned(n, dtype)
    K.unary_math[n](x, out, K.UNARY_OP_CODE[op], backend=backend)
    want = UNARY_ORACLES[op](f64(x))
    if op in EXACT_UNARY:
        assert_exact(out, want)
    elif op in caps(backend).loose_math:
        assert_close(out, want, dtype, math_fn=True, extra=caps(backend).loose_math_err * (1 + np.abs(want)))
    else:
        assert_close(out, want, dtype, math_fn=True)


def test_sin_cos_over_a_wide_range(backend, rng):
    """sin/cos of f32 arguments up to 1e5 in magnitude (where the range reduction matters) and the special values,
    against the correctly rounded float64 results. Vulkan computes them in double where the device has 64-bit
    floats; without them only Vulkan's own precision (2^-11 absolute on [-pi, pi]) is promised, so the test skips."""
    if not caps(backend).float64:
        pytest.skip(f"this {backend} device has no 64-bit floats: GLSL Sin/Cos precision only")
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, np.pi, -np.pi / 2, 1e-30, -1e-7, 1e5, 12345.678],
                       dtype=np.float32)
    mag = np.exp(rng.uniform(np.log(1e-3), np.log(1e5), 4000))
    x = np.concatenate([special, (mag * rng.choice([-1.0, 1.0], mag.size)).astype(np.float32)])
    for op in ("sin", "cos"):
        out = poisoned(x.size, "f32")
        K.unary_math[x.size](x, out, K.UNARY_OP_CODE[op], backend=backend)
        with np.errstate(invalid="ignore"):
            want = UNARY_ORACLES[op](f64(x))
        assert_close(out, want, "f32", math_fn=True)
        if op == "sin":
            assert np.signbit(out[1]) and not np.signbit(out[0]), "sin(-0.0) is -0.0, sin(+0.0) is +0.0"
        # far arguments (past 2^23): Vulkan gives the driver's own Sin/Cos there; every backend stays in [-1, 1]
        huge = np.array([1e10, -1e15, 1e20, 3e38, -3e38], dtype=np.float32)
        far = poisoned(huge.size, "f32")
        K.unary_math[huge.size](huge, far, K.UNARY_OP_CODE[op], backend=backend)
        assert np.isfinite(far).all() and (np.abs(far) <= 1.0).all(), f"{op} of far arguments: {far}"


def test_minmax_fma(backend, dtype, rng):
    n = 2000
    a = as_dtype(rng.standard_normal(n), dtype)
    b = as_dtype(rng.standard_normal(n), dtype)
    c = as_dtype(rng.standard_normal(n), dtype)
    # in half of the elements c is -a*b rounded to T: a*b + c then cancels to the rounding error of the product,
    # which an unfused f32 a*b followed by + c would lose entirely for f32 inputs
    half = n // 2
    c[:half] = as_dtype(-(f64(a[:half]) * f64(b[:half])), dtype)
    lo, hi, fused = poisoned(n, dtype), poisoned(n, dtype), poisoned(n, dtype)
    K.minmax_fma[n](a, b, c, lo, hi, fused, backend=backend)
    A, B, C = f64(a), f64(b), f64(c)
    assert_exact(lo, np.minimum(A, B), "lo")
    assert_exact(hi, np.maximum(np.maximum(A, B), C), "hi")
    # one rounding of the exact a*b+c; the float64 evaluations (the oracle's, and the interpreter's before its final
    # rounding) each add at most F64_UNIT * (|a*b| + |c|)
    unfused = 0.0 if caps(backend).fma_fused else F32_UNIT * np.abs(A * B)  # one more rounding, of the product
    assert_close(fused, A * B + C, dtype, extra=2 * F64_UNIT * (np.abs(A * B) + np.abs(C)) + unfused, what="fused")


def test_where_select(backend, dtype, rng):
    n = 999
    a = as_dtype(rng.standard_normal(n), dtype)
    b = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.where_select[n](a, b, out, backend=backend)
    A, B = f64(a), f64(b)
    assert_close(out, np.where(A > B, A - B, B * 0.5), dtype)


def test_cast_roundtrip(backend, dtype, rng):
    n = 1200
    x = as_dtype(rng.standard_normal(n) * 50, dtype)
    xi = int_poisoned(n)
    xu = int_poisoned(n, np.uint32)
    back = poisoned(n, dtype)
    K.cast_roundtrip[n](x, xi, xu, back, backend=backend)
    X = f64(x)
    t = np.trunc(X * 8)  # cast to i32 truncates toward zero (X * 8 is exact in f32)
    u = np.trunc(np.abs(X))
    assert_exact(xi, t.astype(np.int64), "xi")
    assert_exact(xu, u.astype(np.int64), "xu")
    # cast(t, T) and cast(u, T) each round once to T; their sum is computed in f32 and rounded once more on store
    want = f64(as_dtype(t, dtype)) + f64(as_dtype(u, dtype))
    assert_close(back, want, dtype, what="back")


def test_cast_float_to_int_saturates(backend, dtype, rng):
    """NaN -> 0 and out-of-range values saturate (DESIGN: PTX cvt.rzi.sat semantics on every backend)."""
    finfo_max = float(ml_dtypes.finfo(DTYPES[dtype]).max)
    special = np.array([np.nan, np.inf, -np.inf, finfo_max, -finfo_max, -0.75, 0.75, -0.0])
    x = as_dtype(np.concatenate([special, rng.standard_normal(300) * 1e4]), dtype)
    n = x.size
    xi = int_poisoned(n)
    xu = int_poisoned(n, np.uint32)
    back = poisoned(n, dtype)
    K.cast_roundtrip[n](x, xi, xu, back, backend=backend)
    X = f64(x)
    with np.errstate(invalid="ignore"):
        t = np.clip(np.trunc(np.nan_to_num(X * 8, nan=0.0, posinf=2e40, neginf=-2e40)), -(2**31), 2**31 - 1)
        u = np.clip(np.trunc(np.nan_to_num(np.abs(X), nan=0.0, posinf=2e40)), 0, 2**32 - 1)
    assert_exact(xi, t.astype(np.int64), "xi")
    assert_exact(xu, u.astype(np.int64), "xu")


def test_load_store_builtins(backend, dtype, rng):
    n = 777
    a = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.load_store_reverse[n](a, out, n, backend=backend)
    assert_exact(out, f64(a)[::-1] * 2.0)  # scaling by 2 is exact


def test_axpy_float_scalar(backend, dtype, rng):
    n = 1000
    alpha = float(rng.standard_normal())
    x = as_dtype(rng.standard_normal(n), dtype)
    y = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.axpy[n](alpha, x, y, out, backend=backend)
    a32 = float(np.float32(alpha))  # a float parameter is an f32 inside the kernel
    X, Y = f64(x), f64(y)
    assert_close(out, a32 * X + Y, dtype, n_ops=2, scale=np.abs(a32 * X) + np.abs(Y))


@pytest.mark.parametrize("stride", [7, 2**32 - 3])
def test_scalar_params_int_f32_u32(backend, stride, dtype, rng):
    n, grid = 301, 1000
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(grid, dtype)
    scale = float(rng.uniform(0.5, 2.0))
    offset = int(rng.integers(0, 1000))
    K.scalar_params[grid](x, out, n, scale, stride, offset, backend=backend)
    # i * stride is u32 arithmetic (i32 meets u32): it wraps modulo 2**32 before % n
    j = np.array([((offset + i * stride) % 2**32) % n for i in range(grid)])
    assert_close(out, f64(x)[j] * float(np.float32(scale)), dtype)


@pytest.mark.parametrize(("scale", "bias"), [(1.0, 0.0), (1.0, -0.0), (0.0, 1.5), (-1.0, -0.0)])
def test_ieee_special_values_survive_constant_arithmetic(backend, scale, bias, dtype, rng):
    """-0.0 + 0.0 is +0.0, x * 0.0 is NaN for infinite x and -0.0 for negative x: rewrites like x + 0.0 -> x or
    x * 0.0 -> 0.0 would change these results."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    x = as_dtype(np.concatenate([special, rng.standard_normal(200)]), dtype)
    n = x.size
    scaled, plus, minus = poisoned(n, dtype), poisoned(n, dtype), poisoned(n, dtype)
    # a fresh kernel object: its variant cache cannot hand out another test's variant (see the xfail below)
    iron.kernel(K.ieee_affine.fn)[n](x, scaled, plus, minus, scale, bias, backend=backend)
    v = f64(x)
    folds = caps(backend).folds_signed_zero
    additive = assert_exact_but_zero_sign if folds else assert_exact
    with np.errstate(invalid="ignore"):
        if folds and scale == 0.0:  # the driver folds x * 0.0 to 0.0 even for inf and NaN
            finite = np.isfinite(v)
            additive(f64(scaled)[finite], (v * scale)[finite], "x * SCALE (finite x)")
        else:
            additive(scaled, v * scale, "x * SCALE")
        additive(plus, f64(as_dtype(v + bias, dtype)), "x + BIAS")
        additive(minus, f64(as_dtype(v - bias, dtype)), "x - BIAS")


@pytest.mark.parametrize("divisor", [0.0, -0.0, 4.0])
def test_division_by_a_constant_zero_is_ieee(backend, divisor, dtype, rng):
    """x / +0.0 and x / -0.0 give signed infinities (NaN for 0 and NaN) exactly as NumPy does in float64."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0])
    x = as_dtype(np.concatenate([special, rng.standard_normal(200)]), dtype)
    out = poisoned(x.size, dtype)
    iron.kernel(K.divide_by_constant.fn)[x.size](x, out, divisor, backend=backend)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = f64(as_dtype(f64(x) / divisor, dtype))
    check = assert_exact_but_zero_sign if caps(backend).folds_signed_zero else assert_exact
    check(out, want, f"x / {divisor}")


# ---------------------------------------------------------------------------------------------------------------
# thread indices


@pytest.mark.parametrize("group", [None, 64, 96, 128])
def test_thread_ids_1d_exact_grid(backend, group):
    n = 1000
    outs = [int_poisoned(n) for _ in range(5)]
    launch = K.thread_ids_1d[n] if group is None else K.thread_ids_1d[n, group]
    launch(*outs, backend=backend)
    g = 256 if group is None else group  # DESIGN: the default 1-D group is 256
    i = np.arange(n)
    for name, got, want in zip(
        ["program_id", "local_id", "group_id", "group_size", "num_groups"],
        outs,
        [i, i % g, i // g, np.full(n, g), np.full(n, -(-n // g))],
    ):
        assert_exact(got, want, name)


@pytest.mark.parametrize("group", [(16, 8), (8, 4), None])
def test_thread_ids_2d_grid(backend, group):
    width, height = 37, 23  # not multiples of any group dimension: the grid is exact on both axes
    total = width * height
    out = int_poisoned(10 * total)
    K.thread_ids_2d[(width, height), group](out, width, total, backend=backend)
    gx, gy = group if group is not None else (16, 16)  # default 2-D group 16 x 16 (clipped to the grid)
    y, x = np.divmod(np.arange(total), width)
    want = [
        x,
        y,
        x % gx,
        y % gy,
        x // gx,
        y // gy,
        np.full(total, gx),
        np.full(total, gy),
        np.full(total, -(-width // gx)),
        np.full(total, -(-height // gy)),
    ]
    names = [
        "program_id(0)",
        "program_id(1)",
        "local_id(0)",
        "local_id(1)",
        "group_id(0)",
        "group_id(1)",
        "group_size(0)",
        "group_size(1)",
        "num_groups(0)",
        "num_groups(1)",
    ]
    for k, (name, w) in enumerate(zip(names, want)):
        assert_exact(out[k * total : (k + 1) * total], w, name)


SIMD_WIDTHS = [8, 32, 64]


@pytest.fixture(params=SIMD_WIDTHS)
def simd_width(request, monkeypatch, backend) -> int:
    """A backend that runs at several widths (the interpreter) runs at each; a device only at its own (the others
    skip)."""
    row = caps(backend)
    if row.simd_env is not None:
        assert request.param in row.simd_widths, f"{backend} is not run at SIMD width {request.param}"
        monkeypatch.setenv(row.simd_env, str(request.param))
    elif row.simd_width() != request.param:
        pytest.skip(f"{backend} has SIMD width {row.simd_width()}, not {request.param}")
    return request.param


def test_simd_ids(backend, simd_width):
    n, group = 512, 128
    lane, sg, ss = (int_poisoned(n) for _ in range(3))
    K.simd_ids[n, group](lane, sg, ss, backend=backend)
    local = np.arange(n) % group
    assert_exact(lane, local % simd_width, "simd_lane")
    assert_exact(sg, local // simd_width, "simd_group")
    assert_exact(ss, np.full(n, simd_width), "simd_size")


# ---------------------------------------------------------------------------------------------------------------
# shared memory and barriers


@pytest.mark.parametrize("block", [64, 256])
def test_block_sum_shared_barrier(backend, block, dtype, rng):
    groups = 7
    x = as_dtype(rng.standard_normal(groups * block), dtype)
    out = poisoned(groups, dtype)
    K.block_sum[groups * block, block](x, out, block, backend=backend)
    rows = f64(x).reshape(groups, block)
    # a tree of log2(block) f32 additions per element
    assert_close(out, rows.sum(axis=1), dtype, n_ops=int(math.log2(block)) + 1, scale=np.abs(rows).sum(axis=1))


def test_transpose_through_shared(backend, dtype, rng):
    rows, cols = 48, 80
    x = as_dtype(rng.standard_normal(rows * cols), dtype)
    out = poisoned(rows * cols, dtype)
    K.transpose_tiled[(cols, rows), (K.TILE, K.TILE)](x, out, rows, cols, backend=backend)
    assert_exact(out, f64(x).reshape(rows, cols).T.reshape(-1))


def test_shared_array_over_48_kib(backend, dtype, rng):
    tiles, block, tile = 3, 256, 16384
    row = caps(backend)
    limit = row.max_shared_bytes
    if row.shared_bytes_limit is None and limit is not None and limit < tile * 4:
        pytest.skip(f"this {backend} device gives a group {limit} bytes of shared memory, the kernel needs {tile * 4}")
    x = as_dtype(rng.standard_normal(tiles * tile), dtype)
    out = poisoned(tiles * tile, dtype)
    if row.shared_bytes_limit is not None and row.shared_bytes_limit < tile * 4:  # refused, with the reason
        refusal = rf"{tile * 4} bytes of shared memory, over the {row.shared_bytes_limit // 1024} KiB that \w+ allows"
        with pytest.raises(iron.CompileError, match=refusal):
            K.reverse_tiles[tiles * block, block](x, out, block, tile, backend=backend)
        return
    K.reverse_tiles[tiles * block, block](x, out, block, tile, backend=backend)
    assert_exact(out, f64(x).reshape(tiles, tile)[:, ::-1].reshape(-1))


# ---------------------------------------------------------------------------------------------------------------
# SIMD-group collectives; oracles are written in terms of the SIMD width the interpreter was given


def test_simd_min_max_of_all_nan_lanes_is_nan(backend, simd_width, rng):
    """simd_max/min ignore NaN lanes like fmax/fmin, so a SIMD group of NaNs gives NaN (Vulkan's FMin/FMax leave
    that case undefined; lavapipe gave +-inf until the emitter counted the non-NaN lanes). Found by tests/fuzz."""
    width = simd_width
    n = 4 * width
    x = rng.standard_normal(n).astype(np.float32)
    x[:width] = np.nan  # SIMD group 0: all NaN; group 1: one number among NaNs
    x[width:2 * width] = np.nan
    x[width + 3] = 2.5
    s, mx, mn = (poisoned(n, "f32") for _ in range(3))
    K.simd_reduce[n, 2 * width](x, s, mx, mn, backend=backend)  # groups of two SIMD groups
    assert np.isnan(mx[:width]).all() and np.isnan(mn[:width]).all() and np.isnan(s[:width]).all()
    assert (mx[width:2 * width] == 2.5).all() and (mn[width:2 * width] == 2.5).all()
    lanes = x[2 * width:].astype(np.float64).reshape(-1, width)
    assert_exact(mx[2 * width:], np.repeat(lanes.max(axis=1), width), "simd_max")


def test_simd_min_over_only_nan_active_lanes_is_nan(backend, simd_width, rng):
    n = 4 * simd_width
    x = rng.standard_normal(n).astype(np.float32)
    nan_lanes = rng.random(n) < 0.3
    x[nan_lanes] = np.nan
    positive = np.full(n, -7, np.int32)
    K.simd_min_of_nan_lanes[n, simd_width](x, positive, backend=backend)
    assert (positive[~nan_lanes] == -7).all()  # returned early, wrote nothing
    assert (positive[nan_lanes] == 0).all()  # NaN > 0.0 is false; an inf would give 1


def test_simd_reductions(backend, simd_width, dtype, rng):
    n, group = 512, 128
    x = as_dtype(rng.standard_normal(n), dtype)
    s, mx, mn = poisoned(n, dtype), poisoned(n, dtype), poisoned(n, dtype)
    K.simd_reduce[n, group](x, s, mx, mn, backend=backend)
    lanes = f64(x).reshape(-1, simd_width)  # one row per SIMD group (groups of 128 hold whole SIMD groups)
    per_lane = np.ones((1, simd_width))
    assert_close(
        s,
        (lanes.sum(axis=1, keepdims=True) * per_lane).reshape(-1),
        dtype,
        n_ops=simd_width,
        scale=(np.abs(lanes).sum(axis=1, keepdims=True) * per_lane).reshape(-1),
        what="simd_sum",
    )
    assert_exact(mx, (lanes.max(axis=1, keepdims=True) * per_lane).reshape(-1), "simd_max")
    assert_exact(mn, (lanes.min(axis=1, keepdims=True) * per_lane).reshape(-1), "simd_min")


@pytest.mark.parametrize(("shift", "mask"), [(1, 1), (3, 5)])
def test_simd_exchange(backend, shift, mask, simd_width, dtype, rng):
    n, group = 256, 64
    x = as_dtype(rng.standard_normal(n), dtype)
    rot, swz, bc = poisoned(n, dtype), poisoned(n, dtype), poisoned(n, dtype)
    K.simd_exchange[n, group](x, rot, swz, bc, shift, mask, backend=backend)
    lanes = f64(x).reshape(-1, simd_width)
    lane = np.arange(simd_width)
    assert_exact(rot, lanes[:, (lane + shift) % simd_width].reshape(-1), "simd_shuffle")
    assert_exact(swz, lanes[:, lane ^ mask].reshape(-1), "simd_shuffle_xor")
    assert_exact(bc, np.repeat(lanes[:, simd_width - 1], simd_width), "simd_broadcast")


# ---------------------------------------------------------------------------------------------------------------
# atomics


def test_histogram_i32(backend, dtype, rng):
    n, nbins = 1000, 32
    x = as_dtype(rng.uniform(-3, nbins + 3, n), dtype)
    hist0 = rng.integers(0, 100, nbins).astype(np.int32)  # atomics add to what is there
    hist = hist0.copy()
    K.histogram_i32[n](x, hist, nbins, backend=backend)
    bins = np.clip(np.trunc(f64(x)), 0, nbins - 1).astype(np.int64)
    assert_exact(hist, hist0 + np.bincount(bins, minlength=nbins))


def test_histogram_u32_and_atomic_return_value(backend, dtype, rng):
    n, nbins = 1000, 20
    x = as_dtype(rng.uniform(-3, nbins + 3, n), dtype)
    hist0 = rng.integers(0, 2**31, nbins).astype(np.uint32)
    hist = hist0.copy()
    tickets = int_poisoned(n, np.uint32)
    start = int(rng.integers(0, 2**31))
    counter = np.array([start], np.uint32)
    K.histogram_u32[n, 128](x, hist, tickets, counter, nbins, backend=backend)
    bins = np.minimum(np.trunc(np.maximum(f64(x), 0)), nbins - 1).astype(np.int64)
    assert_exact(hist, hist0.astype(np.int64) + np.bincount(bins, minlength=nbins), "hist")
    # every thread got the counter's value before its own increment: a permutation of start .. start + n - 1
    assert_exact(np.sort(tickets.astype(np.int64)), start + np.arange(n), "tickets")
    assert counter[0] == start + n


def test_atomic_add_float_sum(backend, dtype, rng):
    n, nslots = 1000, 4
    x = as_dtype(rng.standard_normal(n), dtype)
    total0 = rng.standard_normal(nslots).astype(np.float32)
    total = total0.copy()
    K.atomic_sum_f32[n](x, total, nslots, backend=backend)
    X = f64(x).reshape(-1, nslots)
    # each slot receives n / nslots f32 additions in an unspecified order
    assert_close(
        total, f64(total0) + X.sum(axis=0), "f32", n_ops=n // nslots, scale=np.abs(total0) + np.abs(X).sum(axis=0)
    )


def test_atomic_max_i32(backend, rng):
    n, nslots = 1000, 8
    x = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    init = rng.integers(-(2**31), 2**31, nslots).astype(np.int32)
    out = init.copy()
    old = int_poisoned(n)
    K.atomic_max_i32[n](x, out, old, nslots, backend=backend)
    slot = np.arange(n) % nslots
    final = np.maximum(init.astype(np.int64), np.array([x[slot == s].max() for s in range(nslots)]))
    assert_exact(out, final, "out")
    # atomic_max returns the value it replaced: the slot's start value or another thread's x of the same slot,
    # never above the final maximum; and some thread saw each raised maximum below its own value
    for s in range(nslots):
        seen = old[slot == s].astype(np.int64)
        allowed = set(x[slot == s].tolist()) | {int(init[s])}
        assert set(seen.tolist()) <= allowed, f"slot {s}: atomic_max returned values nobody stored"
        assert seen.max() <= final[s]
        if final[s] > init[s]:
            assert (seen < x[slot == s]).any()


def test_atomic_max_float(backend, dtype, rng):
    n, nslots = 1000, 5
    x = as_dtype(rng.standard_normal(n) * 10, dtype)
    init = rng.standard_normal(nslots).astype(np.float32) * 30
    out = init.copy()
    K.atomic_max_f32[n](x, out, nslots, backend=backend)
    X = f64(x).reshape(-1, nslots)
    assert_exact(out, np.maximum(f64(init), X.max(axis=0)))


# ---------------------------------------------------------------------------------------------------------------
# control flow


@pytest.mark.parametrize("k", [4, 7])
def test_static_range_unrolled(backend, k, dtype, rng):
    rows = 300
    x = as_dtype(rng.standard_normal(rows * k), dtype)
    w = as_dtype(rng.standard_normal(k), dtype)
    out, evens = poisoned(rows, dtype), poisoned(rows, dtype)
    K.static_dot[rows](x, w, out, evens, k, backend=backend)
    X, W = f64(x).reshape(rows, k), f64(w)
    assert_close(out, X @ W, dtype, n_ops=k + 1, scale=np.abs(X) @ np.abs(W), what="dot")
    assert_close(evens, X[:, ::2].sum(axis=1), dtype, n_ops=k, scale=np.abs(X[:, ::2]).sum(axis=1), what="evens")
    assert "for " not in K.static_dot.ir(dtype=dtype, K=k), "static_range must be fully unrolled"


@pytest.mark.parametrize("k", [1, 6])
def test_if_on_static_range_index(backend, k, dtype, rng):
    rows = 200
    x = as_dtype(rng.standard_normal(rows * k), dtype)
    out = poisoned(rows, dtype)
    K.static_alternating[rows](x, out, k, backend=backend)
    X = f64(x).reshape(rows, k)
    sign = np.where(np.arange(k) % 2 == 0, 2.0, -1.0)
    assert_close(out, X @ sign, dtype, n_ops=2 * k, scale=np.abs(X) @ np.abs(sign))


def test_if_elif_else(backend, dtype, rng):
    n = 1111
    x = as_dtype(rng.standard_normal(n) * 2, dtype)
    out = poisoned(n, dtype)
    K.piecewise[n](x, out, backend=backend)
    v = f64(x)
    want = np.select([v < -1, v < 0, v < 0.5, v < 1], [-1 - 0.5 * (v + 1), v * v, 2 * v, np.ones_like(v)], v + 0.25)
    assert_close(out, want, dtype, n_ops=3, scale=np.abs(v) + 1.25)


@pytest.mark.parametrize(
    ("start", "stop", "step"), [(0, 20, 1), (3, 20, 4), (19, -1, -1), (18, 0, -3), (5, 2, 1), (2, 5, -1)]
)
def test_range_with_step(backend, start, stop, step, dtype, rng):
    rows, m = 100, 20
    x = as_dtype(rng.standard_normal(rows * m), dtype)
    out = poisoned(rows, dtype)
    K.range_sum[rows](x, out, m, start, stop, step, backend=backend)
    X = f64(x).reshape(rows, m)
    js = list(range(start, stop, step))  # Python's own range is the oracle of which indices are visited
    terms = X[:, js] * (np.array(js, dtype=np.float64) + 1) if js else np.zeros((rows, 0))
    assert_close(out, terms.sum(axis=1), dtype, n_ops=2 * len(js), scale=np.abs(terms).sum(axis=1))


def _collatz(n: int, cap: int) -> int:
    count = 0
    while n != 1 and count != cap:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        count += 1
    return count


@pytest.mark.parametrize("cap", [30, 1000])
def test_while_with_break(backend, cap, rng):
    starts = rng.integers(1, 5000, 600).astype(np.int32)
    starts[0] = 1  # the loop body never runs
    steps = int_poisoned(starts.size)
    K.collatz_steps[starts.size](starts, steps, cap, backend=backend)
    assert_exact(steps, np.array([_collatz(int(s), cap) for s in starts]))


@pytest.mark.parametrize("limit", [20.0, 1e9])
def test_for_with_break_and_continue(backend, limit, dtype, rng):
    rows, m = 257, 16
    # small integers: every partial sum is exact in f32 and every total exact in T (<= 160 < 2^8), so the kernel
    # and the oracle take the same branches
    x = as_dtype(rng.integers(-5, 11, rows * m), dtype)
    total, used = poisoned(rows, dtype), int_poisoned(rows)
    K.break_continue[rows](x, total, used, m, limit, backend=backend)
    want_total, want_used = [], []
    for row in f64(x).reshape(rows, m):
        acc, count = 0.0, 0
        for v in row:
            if v < 0:
                continue
            acc += v
            count += 1
            if acc > limit:
                break
        want_total.append(acc)
        want_used.append(count)
    assert_exact(total, np.array(want_total), "total")
    assert_exact(used, np.array(want_used), "used")


def test_early_return(backend, dtype, rng):
    n = 500
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.early_exit[n + 37, 64](x, out, n, backend=backend)  # 37 threads past the end return before any access
    v = f64(x)
    assert_close(out, np.where(v < 0, -v, np.sqrt(np.abs(v))), dtype, math_fn=True)


def test_iron_func_helpers(backend, dtype, rng):
    n = 1000
    x = as_dtype(rng.standard_normal(n) * 3, dtype)
    out = poisoned(n, dtype)
    K.helpers[n](x, out, backend=backend)
    v = np.clip(f64(x), -2.0, 2.0)
    assert_close(out, v * v * 0.5 + v, dtype, n_ops=3, scale=np.abs(v * v * 0.5) + np.abs(v))


def test_constexpr_specialises(backend, dtype, rng):
    n = 640
    x = as_dtype(rng.standard_normal(n), dtype)
    results = {}
    for scale in (2, 3):
        for square in (False, True):
            out = poisoned(n, dtype)
            K.constexpr_affine[n](x, out, scale, square, backend=backend)
            v = f64(x) * scale
            assert_close(out, v * v if square else v, dtype, n_ops=2, what=f"SCALE={scale} SQUARE={square}")
            results[scale, square] = out
    assert not np.array_equal(f64(results[2, False]), f64(results[3, False]))
    ir2 = K.constexpr_affine.ir(dtype=dtype, SCALE=2, SQUARE=False)
    ir3 = K.constexpr_affine.ir(dtype=dtype, SCALE=3, SQUARE=False)
    assert ir2 != ir3 and "SCALE=2" in ir2 and "SCALE=3" in ir3
    assert K.constexpr_affine.variant(DTYPES_IR[dtype], (2, False)) is not K.constexpr_affine.variant(
        DTYPES_IR[dtype], (3, False)
    )


def _wrap_i32(v: np.ndarray) -> np.ndarray:
    return (v.astype(np.int64) + 2**31) % 2**32 - 2**31


def test_float_rem_is_c_fmod(backend, dtype, rng):
    """Special values (zeros of both signs, infinities, NaN) exactly as C fmod on every backend; ordinary values
    exactly too (fmod is exact; Vulkan reduces the significands in integer arithmetic, on any device)."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.5, -7.25])
    sx, sy = np.repeat(special, special.size), np.tile(special, special.size)
    # quotients far beyond 2^24 (where x - y * trunc(x / y) in f32 loses everything): fmod is still exact
    if dtype == "f16":
        bx, by = np.array([60000.0, -65504.0, 1000.5, 33333.0]), np.array([1e-4, 3e-3, -7e-5, 0.0999])
    else:
        bx, by = np.array([1e30, -3.3e38, 123456.7, 1e10, 2.5e-3]), np.array([3.7, 1.1e-38, 1e-5, -7e-20, 1.3e-37])
    x = as_dtype(np.concatenate([sx, rng.standard_normal(500) * 10, bx]), dtype)
    y = as_dtype(np.concatenate([sy, rng.standard_normal(500), by]), dtype)
    out = poisoned(x.size, dtype)
    K.float_rem[x.size](x, y, out, backend=backend)
    with np.errstate(invalid="ignore"):
        want = f64(as_dtype(np.fmod(f64(x), f64(y)), dtype))
    ns = sx.size
    assert_exact(out[:ns], want[:ns], "fmod of special values")
    assert_exact(out[ns:], want[ns:], "fmod")


def test_float_rem_of_subnormals_is_exact(backend, dtype, rng):
    """fmod with subnormal operands and results, mixed with small and ordinary normals: exact, as C's. (NVIDIA's
    Vulkan driver flushes f32 subnormals; Iron's fmod there works on the bits.)"""
    tiny = 2.0 ** {"f32": -149, "f16": -24, "bf16": -133}[dtype]  # the smallest subnormal of the dtype
    least_normal = 2.0 ** (-14 if dtype == "f16" else -126)
    n = 600

    def pick(kind):
        sign = rng.choice([-1.0, 1.0], n)
        if kind == "sub":
            return sign * rng.integers(1, int(least_normal / tiny), n) * tiny
        if kind == "small":
            return sign * least_normal * rng.uniform(1.0, 64.0, n)
        return sign * rng.uniform(0.5, 100.0, n) * (1.0 if dtype == "f16" else 1e3)

    kinds = [("sub", "sub"), ("small", "sub"), ("normal", "sub"), ("sub", "small"), ("small", "small")]
    x = as_dtype(np.concatenate([pick(a) for a, _ in kinds]), dtype)
    y = as_dtype(np.concatenate([pick(b) for _, b in kinds]), dtype)
    assert (f64(y) != 0).all()
    out = poisoned(x.size, dtype)
    K.float_rem[x.size](x, y, out, backend=backend)
    want = f64(as_dtype(np.fmod(f64(x), f64(y)), dtype))
    assert (np.abs(want) < least_normal).sum() > n  # many results are subnormal themselves
    assert_exact(out, want, "fmod of subnormals")


def test_float_rem_over_every_exponent_pair_is_exact(backend, rng):
    """f32 fmod on random bit patterns with the exponents of x and y drawn over the whole finite range (subnormals
    included), so quotients reach 2^253: exact, as C's. Lavapipe without AVX-512 gave 0 for every quotient past 2^24
    when Vulkan's fmod went through f64 Trunc (issue 12)."""
    n = 4000
    ex, ey = rng.integers(0, 255, n), rng.integers(0, 255, n)  # biased exponents 0 (subnormal) .. 254
    ey[: n // 4] = rng.integers(0, 3, n // 4)  # many tiny divisors: the longest reductions
    ex[: n // 8] = rng.integers(250, 255, n // 8)
    sign = rng.integers(0, 2, (2, n)).astype(np.uint32) << 31
    fx = np.where(ex > 0, rng.integers(0, 1 << 23, n), rng.integers(1, 1 << 23, n))
    fy = np.where(ey > 0, rng.integers(0, 1 << 23, n), rng.integers(1, 1 << 23, n))
    x = (sign[0] | (ex.astype(np.uint32) << 23) | fx.astype(np.uint32)).view(np.float32)
    y = (sign[1] | (ey.astype(np.uint32) << 23) | fy.astype(np.uint32)).view(np.float32)
    out = poisoned(n, "f32")
    K.float_rem[n](x, y, out, backend=backend)
    want = np.fmod(f64(x), f64(y))  # exact in double (fmod is exact), so also the f32 result
    assert (np.abs(f64(x) / f64(y)) > 2.0**24).sum() > n // 2
    assert_exact(out, want, "fmod over every exponent pair")


def test_int_arith_i32_truncates_toward_zero(backend, rng):
    """`//` and `%` on ints follow C (and CUDA, Triton): the quotient truncates toward zero and the remainder takes
    the dividend's sign. Python's floor semantics would give -4 and 1 for -7 // 2 and -7 % 2; Iron gives -3 and -1."""
    n = 2000
    a = rng.integers(-(2**31), 2**31, n).astype(np.int32)
    a[:500] = rng.integers(-100, 100, 500)
    b = rng.integers(-50, 50, n).astype(np.int32)
    b[b == 0] = 7
    b[:3], a[:3] = 2, (-7, 7, -8)
    a[3:6], b[3:6] = (-(2**31), -(2**31), 5), -1  # INT_MIN / -1 wraps to INT_MIN (OpSDiv leaves it undefined)
    q, r, bits = (int_poisoned(n) for _ in range(3))
    K.int_arith_i32[n](a, b, q, r, bits, backend=backend)
    A, B = a.astype(np.int64), b.astype(np.int64)
    want_q = _wrap_i32(np.sign(A) * np.sign(B) * (np.abs(A) // np.abs(B)))
    assert (want_q != A // B).any(), "the data must contain cases where C and Python division differ"
    assert_exact(q, want_q, "a // b")
    assert_exact(r, _wrap_i32(A - B * want_q), "a % b")
    want_bits = ((A & B) ^ (A | 12345)) + (A >> 3) - _wrap_i32(B << 2) + ~A
    assert_exact(bits, _wrap_i32(want_bits), "bit ops")


def test_int_arith_u32(backend, rng):
    n = 2000
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(1, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b[:700] = rng.integers(1, 1000, 700)
    q, r, bits = (int_poisoned(n, np.uint32) for _ in range(3))
    K.int_arith_u32[n](a, b, q, r, bits, backend=backend)
    A, B = [int(v) for v in a], [int(v) for v in b]
    assert_exact(q, np.array([x // y for x, y in zip(A, B)]), "a // b")
    assert_exact(r, np.array([x % y for x, y in zip(A, B)]), "a % b")
    assert_exact(bits, np.array([((x >> 7) + x * y - (y ^ x)) % 2**32 for x, y in zip(A, B)]), "bit ops")


def test_short_circuit_and_guards_load(backend, dtype, rng):
    n, grid = 300, 400
    x = as_dtype(rng.standard_normal(n), dtype)  # only n elements: x[i] for i >= n would be out of bounds
    out = poisoned(grid, dtype)
    K.guarded_and[grid, 64](x, out, n, backend=backend)
    v = np.concatenate([f64(x), np.full(grid - n, -1.0)])
    assert_exact(out, np.where(v > 0, v, -1.0))


def test_conditional_expression_guards_load(backend, dtype, rng):
    n, grid = 300, 400
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(grid, dtype)
    K.guarded_ifexp[grid, 64](x, out, n, backend=backend)
    assert_close(out, np.concatenate([f64(x) * 3.0, np.full(grid - n, 7.0)]), dtype)


def test_augmented_assignment_on_buffers(backend, dtype, rng):
    n = 1000
    x = as_dtype(rng.standard_normal(n), dtype)
    acc0 = as_dtype(rng.standard_normal(n), dtype)
    cnt0 = rng.integers(-1000, 1000, n).astype(np.int32)
    acc, cnt = acc0.copy(), cnt0.copy()
    K.augmented[n](x, acc, cnt, backend=backend)

    def r(v):  # each `acc[i] op= v` stores, so rounds to T, before the next reads it back
        return f64(as_dtype(v, dtype))

    assert_exact(acc, r(r(r(f64(acc0) + f64(x)) * 2.0) - 1.0), "acc")
    assert_exact(cnt, (cnt0.astype(np.int64) + 3) << 1, "cnt")


def test_native_half(backend, dtype, rng):
    n = 4096
    a, b, c = (as_dtype(rng.standard_normal(n), dtype) for _ in range(3))
    native, default = poisoned(n, dtype), poisoned(n, dtype)
    K.native_half_muladd[n](a, b, c, native, backend=backend)
    K.default_muladd[n](a, b, c, default, backend=backend)
    A, B, C = f64(a), f64(b), f64(c)
    # native: the product rounds to T, then the sum rounds to T (each correctly rounded)
    assert_exact(native, f64(as_dtype(f64(as_dtype(A * B, dtype)) + C, dtype)), "native_half")
    assert_close(default, A * B + C, dtype, n_ops=2, scale=np.abs(A * B) + np.abs(C), what="default")
    mul_lines = [ln for ln in K.native_half_muladd.ir(dtype=dtype).splitlines() if " = mul " in ln]
    assert mul_lines and all(ln.split("#")[0].rstrip().endswith(f": {dtype}") for ln in mul_lines), mul_lines
    if dtype != "f32":
        assert not np.array_equal(f64(native), f64(default)), "two roundings must differ from one somewhere"


# ---------------------------------------------------------------------------------------------------------------
# the suite covers what it claims


def _calls_and_forms() -> tuple[set[str], set[str]]:
    """Builtins called and forms used by the conformance kernels: kernels.py and every *_kernels.py beside it."""
    folder = Path(inspect.getsourcefile(K)).parent
    trees = [ast.parse(inspect.getsource(K))] + [ast.parse(p.read_text()) for p in sorted(folder.glob("*_kernels.py"))]
    calls, forms = set(), set()
    for node in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            calls.add(node.func.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            calls.add(node.func.attr)
        if isinstance(node, ast.If) and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            forms.add("elif")
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and getattr(node.iter.func, "id", "") == "range"
            and len(node.iter.args) == 3
        ):
            forms.add("range3")
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
            forms.add("augassign-buffer")
        forms.add(type(node).__name__)
    return calls, forms


def test_kernels_cover_every_builtin_and_form():
    calls, forms = _calls_and_forms()
    missing = set(iron.BUILTINS) - calls
    assert not missing, f"builtins no kernel uses: {sorted(missing)}"
    wanted = {
        "If",
        "elif",
        "For",
        "range3",
        "While",
        "Break",
        "Continue",
        "Return",
        "IfExp",
        "BoolOp",
        "augassign-buffer",
        "Subscript",
    }
    assert wanted <= forms, f"control-flow forms no kernel uses: {sorted(wanted - forms)}"


def test_every_kernel_compiles_for_every_dtype():
    from ..backends.variants import CONSTEXPRS

    constexprs = {name: alternatives[0] for name, alternatives in CONSTEXPRS.items()}
    kernels = {n: k for n, k in vars(K).items() if isinstance(k, iron.KernelFunction)}
    assert len(kernels) >= 25
    for name, k in kernels.items():
        for dt in k.dtypes or (None,):
            text = k.ir(dtype=dt, **constexprs.get(name, {}))
            assert text.startswith(f"kernel @{name}")


# ---------------------------------------------------------------------------------------------------------------
# regression tests for front-end bugs found while writing this suite (fixed)


def test_helper_early_return_in_nested_if(backend, dtype, rng):
    n = 600
    x = as_dtype(rng.standard_normal(n) * 8, dtype)
    out = poisoned(n, dtype)
    B.nested_early_return[n](x, out, backend=backend)
    v = f64(x)
    assert_close(out, np.where(v > 10, 10.0, np.where(v > 0, 2 * v, v)), dtype)


def test_loop_variable_rebinds_an_existing_name(backend):
    n = 5
    out = int_poisoned(3)
    try:
        B.loop_rebinds_variable.ir()
    except iron.CompileError:
        return  # refusing the program is an acceptable fix
    B.loop_rebinds_variable[3](out, n, backend=backend)
    assert_exact(out, np.full(3, n - 1))


def test_helper_returning_an_int_literal_and_a_float(backend, dtype, rng):
    n = 500
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    B.relu_int_literal_return[n](x, out, backend=backend)
    assert_exact(out, np.maximum(f64(x), 0.0))


def test_constexpr_values_equal_in_python_but_distinct_get_their_own_variant(backend):
    k = iron.kernel(K.ieee_affine.fn)
    x = np.array([-0.0, 1.0], np.float32)
    for bias in (0.0, -0.0):
        scaled, plus, minus = (np.full_like(x, np.nan) for _ in range(3))
        k[x.size](x, scaled, plus, minus, 1.0, bias, backend=backend)
        if caps(backend).folds_signed_zero:
            # the driver cannot show the difference; the two variants must still exist (checked on the IR below)
            assert_exact_but_zero_sign(plus, x.astype(np.float64) + bias, f"x + {bias!r}")
        else:
            assert_exact(plus, x.astype(np.float64) + bias, f"x + {bias!r}")
    assert "BIAS=-0.0" in k.ir(SCALE=1.0, BIAS=-0.0)
    c = iron.kernel(K.constexpr_affine.fn)
    c.ir(SCALE=2, SQUARE=True)
    assert "SCALE=2.0" in c.ir(SCALE=2.0, SQUARE=True)


def test_rounding_to_halves_in_registers(backend, rng):
    """Round to nearest even at f16/bf16 precision, held in f32: every f16 boundary (subnormals, ties, overflow to
    inf at 65520) and random values over the whole f32 range. NVIDIA's Vulkan driver did not round an
    f32 -> f16 -> f32 conversion pair (found by test_native_half); Vulkan now rounds with integer operations."""
    steps = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    steps = steps[np.isfinite(steps)]
    mids = ((steps[:-1].astype(np.float64) + steps[1:]) / 2).astype(np.float32)  # ties (exact in f32) and near
    near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 65536, 1e-8, 2.0**-25, -(2.0**-25),
                        2.0**-24 * 1.5, 3e38, 1e-45], dtype=np.float32)
    rand = (rng.standard_normal(20000) * np.exp2(rng.integers(-30, 30, 20000))).astype(np.float32)
    x = np.concatenate([special, steps, near, rand, -near[::7]]).astype(np.float32)
    h, b = np.full_like(x, np.nan), np.full_like(x, np.nan)
    K.round_through_halves[x.size](x, h, b, backend=backend)
    with np.errstate(over="ignore"):  # values past 65520 become inf, as intended
        want_h = x.astype(np.float16).astype(np.float64)
    assert_exact(h, want_h, "f16")
    assert_exact(b, x.astype(DTYPES["bf16"]).astype(np.float64), "bf16")
