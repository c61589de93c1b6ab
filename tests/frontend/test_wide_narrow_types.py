"""Tracker issue 15: the i64/u64/f64 scalars and buffers and the i8/u8 buffers, on every backend of the ``backend``
fixture, against oracles in Python's unbounded ints and floats (outputs poisoned first, edge values first: INT64_MIN
and MAX, 2^32 carries, 255 + 1, -128, doubles no f32 holds). Metal has no double: msl-cpu refuses the f64 kernels
with a located error, as it refuses atomic_add on i64/u64. Refusals that are the same everywhere (f64
transcendentals, the other 64-bit atomics, 64-bit SIMD, 8-bit locals and scalars) are located compile errors."""

from __future__ import annotations

import functools
import math
import operator

import numpy as np
import pytest

import iron
from iron import CompileError, LaunchError

from ..backends.capabilities import caps
from .sources import HEADER, module_from_source
from .wide_kernels import (
    OPS64,
    atomic_add64,
    f64_accumulate,
    f64_ops,
    i64_accumulate,
    i64_ops,
    index64,
    int64_casts,
    narrow_ops,
    narrow_shared,
    u64_ops,
)

N = 256
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _wrap(v: int, bits: int, signed: bool) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


def _c_div(x: int, y: int) -> tuple[int, int]:
    """C's truncating quotient and remainder (sign of the dividend), in unbounded ints."""
    q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
    return q, x - q * y


def _words64(rng, signed: bool) -> np.ndarray:
    """Random 64-bit words of every bit length, the edge values first."""
    dtype = np.int64 if signed else np.uint64
    width = rng.integers(0, 65, N).astype(np.uint64)
    raw = rng.integers(0, 2**64, N, dtype=np.uint64, endpoint=False)
    raw = np.where(width == 64, raw, raw & ((np.uint64(1) << np.minimum(width, 63)) - np.uint64(1)))
    out = raw.view(dtype).copy()
    if signed:
        edges = [I64_MIN, I64_MAX, -1, 0, 1, 2**32 - 1, 2**32, -(2**32), 2**31, -(2**31) - 1, I64_MIN + 1]
    else:
        edges = [0, 2**64 - 1, 1, 2**32 - 1, 2**32, 2**63, 2**63 - 1, 2**31, 0xFFFFFFFF00000000]
    out[: len(edges)] = edges
    return out


def _poison(n: int, dtype) -> np.ndarray:
    return np.full(n * np.dtype(dtype).itemsize, 0xA5, np.uint8).view(dtype)


def _ops64_oracle(x: int, y: int, s: int, i: int, signed: bool) -> list[int]:
    bits = 64
    w = lambda v: _wrap(v, bits, signed)  # noqa: E731
    q, r = _c_div(x, y) if y != 0 else (0, 0)
    if signed and y == -1:
        q, r = -x, 0
    common = [x + y, x - y, x * y, q, r, x << (y & 63), x >> (y & 63), (x & y) ^ (x | s), -x + ~y,
              min(x, y) + 3 * max(x, s), abs(x) if signed else x]
    if signed:
        tail = [(x < y) + 2 * (x == s) + 4 * (x >= 0), x + 2**32, x * 3 + i,
                _wrap(x, 32, True) + (y & 0xFFFFFFFF), x + i]
    else:
        tail = [(x < y) + 2 * (x == s), x + 0xFFFFFFFFFFFF, 2 * x, x & 0xFFFFFFFF, x + _wrap(-1 - i, 64, False)]
    return [w(v) for v in common + tail]


@pytest.mark.parametrize("signed", [True, False], ids=["i64", "u64"])
def test_64bit_int_ops_match_python_ints(backend, rng, signed):
    a, b = _words64(rng, signed), rng.permutation(_words64(rng, signed))
    b[b == 0] = 3  # a zero divisor is an error on the CPU backends, unspecified on GPUs
    b[0] = -1 if signed else b[0]  # INT64_MIN // -1 wraps, INT64_MIN % -1 is 0
    b[:20] = np.where(np.arange(20) % 3 == 1, 64 + 7, b[:20])  # shift counts past 63 are taken mod 64
    s = I64_MIN + 12345 if signed else 2**64 - 99
    out = _poison(OPS64 * N, np.int64 if signed else np.uint64)
    (i64_ops if signed else u64_ops)[N](a, b, s, out, backend=backend)
    want = [v for i in range(N) for v in _ops64_oracle(int(a[i]), int(b[i]), s, i, signed)]
    got = out.tolist()
    for k in range(OPS64):  # one message per operation, naming the first element that differs
        bad = [i for i in range(N) if got[OPS64 * i + k] != want[OPS64 * i + k]]
        assert not bad, (f"op {k}: element {bad[0]}: x={int(a[bad[0]])} y={int(b[bad[0]])} got "
                         f"{got[OPS64 * bad[0] + k]} want {want[OPS64 * bad[0] + k]}")


def _f_to_int(v: float, bits: int, signed: bool) -> int:
    """Iron's float -> int cast: truncate, saturate, NaN -> 0."""
    if math.isnan(v):
        return 0
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(int(v), lo), hi)


def test_64bit_casts(backend, rng):
    a = _words64(rng, True)
    f = (rng.standard_normal(N) * 10.0 ** rng.integers(0, 25, N)).astype(np.float32)
    f[:8] = [np.nan, np.inf, -np.inf, 9.3e18, -9.3e18, 2.0**63, 1.9e19, -0.75]
    w = rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32)
    w[:2] = [-(2**31), -1]
    ints, uints, floats = _poison(3 * N, np.int64), _poison(2 * N, np.uint64), np.full(2 * N, np.nan, np.float32)
    int64_casts[N](a, f, w, ints, uints, floats, backend=backend)
    want_i = [v for i in range(N) for v in (_f_to_int(float(f[i]), 64, True), int(w[i]), int(w[i]) & 0xFFFFFFFF)]
    assert ints.tolist() == want_i
    want_u = [v for i in range(N) for v in (_f_to_int(float(f[i]), 64, False), int(a[i]) & (2**64 - 1))]
    assert uints.tolist() == want_u
    # i64/u64 -> f32 rounds once to nearest even: NumPy's int64 -> float32 conversion does that
    want_f = np.stack([a.astype(np.float32), a.view(np.uint64).astype(np.float32)], axis=1).reshape(-1)
    np.testing.assert_array_equal(floats, want_f)


def test_64bit_indices(backend, rng):
    a = rng.standard_normal(3 * N).astype(np.float32)
    idx = rng.integers(0, 3 * N, N).astype(np.int64)
    uidx = rng.integers(0, 3 * N, N).astype(np.uint64)
    out = np.full(2 * N, np.nan, np.float32)
    index64[N](a, idx, uidx, np.int64(N), out, backend=backend)
    np.testing.assert_array_equal(out[0::2], a[idx])
    np.testing.assert_array_equal(out[1::2], a[uidx] + a[N + np.arange(N)])


def test_8bit_loads_widen_and_stores_wrap(backend, rng):
    a = rng.integers(-128, 128, N).astype(np.int8)
    b = rng.integers(0, 256, N).astype(np.uint8)
    a[:4], b[:4] = [-128, 127, -1, 0], [255, 0, 128, 255]
    f = (rng.standard_normal(N) * 500).astype(np.float32)
    f[:4] = [300.7, -129.5, np.nan, 1e10]
    o8, ou8, o32 = _poison(2 * N, np.int8), _poison(2 * N, np.uint8), _poison(4 * N, np.int32)
    narrow_ops[N](a, b, f, o8, ou8, o32, backend=backend)
    x, y = a.astype(int).tolist(), b.astype(int).tolist()
    want8 = [v for i in range(N) for v in (_wrap(x[i] * 3 + y[i], 8, True),
                                           _wrap(_f_to_int(float(f[i]), 32, True), 8, True))]
    assert o8.tolist() == want8
    assert ou8.tolist() == [v for i in range(N) for v in ((y[i] + 1) & 255, (y[i] + x[i]) & 255)]
    want32 = [v for i in range(N) for v in (x[i] + y[i], (y[i] * 7 & 255) + 1000 * _wrap(y[i] * 7, 8, True),
                                            (x[i] & 255) - (x[i] * 2 & 255), x[i] * y[i])]
    assert o32.tolist() == want32


def test_8bit_and_64bit_shared_arrays(backend, rng):
    a = rng.integers(0, 256, 4 * 64).astype(np.uint8)
    b = rng.integers(-128, 128, 4 * 64).astype(np.int8)
    w = _words64(rng, True)
    a[:2], b[:2] = [255, 249], [-128, 127]
    out, out_i, out_w = _poison(4 * 64, np.uint8), _poison(4 * 64, np.int8), _poison(4 * 64, np.int64)
    narrow_shared[4 * 64, 64](a, b, w, out, out_i, out_w, backend=backend)
    rev = np.arange(4 * 64).reshape(4, 64)[:, ::-1].reshape(-1)
    regs = [((int(v) * 2 & 255) + 200) & 255 for v in a]
    assert out.tolist() == [((int(a[r]) + 7 & 255) + regs[k]) & 255 for k, r in enumerate(rev)]
    assert out_i.tolist() == [_wrap((int(v) - 1) * 2, 8, True) for v in b[rev]]
    assert out_w.tolist() == [_wrap(3 * int(w[r]) + 3 * int(w[k]), 64, True) for k, r in enumerate(rev)]


def _f64_inputs(rng) -> tuple[np.ndarray, np.ndarray]:
    a = rng.standard_normal(N) * 10.0 ** rng.integers(-30, 30, N)
    b = rng.standard_normal(N) * 10.0 ** rng.integers(-30, 30, N)
    # values no f32 holds: beyond its range, below its subnormals, and more digits than it keeps
    a[:10] = [1e300, -1e-310, 1 + 2**-40, 2.0**1000, 16777217.25, -0.0, -0.5, 2.0**52 - 0.5, -(2.0**52) - 1, 3e15 + 0.5]
    b[:10] = [3.0, 1e-300, 1 - 2**-50, -(2.0**-1000), 0.1, 7.0, 0.5, -(2.0**52) + 0.5, 2.0**53, -1e-5]
    return a, b


def _fma(x: float, y: float, z: float) -> float:
    """x * y + z rounded once (exact rationals); the non-finite cases as IEEE gives them."""
    from fractions import Fraction

    if not all(map(math.isfinite, (x, y, z))):
        return x * y + z
    return float(Fraction(x) * Fraction(y) + Fraction(z))


def _f64_refused(backend: str) -> bool:
    return not caps(backend).f64 or not caps(backend).float64


def test_f64_ops(backend, rng):
    a, b = _f64_inputs(rng)
    s = 1.0 / 3.0
    out, low, ints = np.full(12 * N, np.nan), np.full(N, np.nan, np.float32), _poison(N, np.int64)
    if _f64_refused(backend):
        with pytest.raises(CompileError) as e:
            f64_ops[N](a, b, s, out, low, ints, backend=backend)
        assert "f64 is not supported" in e.value.message and "wide_kernels.py:" in str(e.value)
        return
    f64_ops[N](a, b, s, out, low, ints, backend=backend)
    with np.errstate(all="ignore"):
        want = np.stack([a + b * s, a - b, a / b, np.sqrt(np.abs(a)), np.floor(a) + np.ceil(b),
                         np.fmin(a, b) - np.fmax(a, s), [_fma(x, y, s) for x, y in zip(a, b)], a * 0.1,
                         np.floor(a / b), (a > b) + np.arange(N, dtype=np.float64),
                         a.astype(np.float32).astype(np.float64), -a], axis=1)
        unfused = a * b + s
    got = out.reshape(N, 12)
    for k in range(12):
        if k == 6 and not caps(backend).fma_fused:  # GLSL.std.450 Fma may round the product first
            ok = (got[:, k] == want[:, k]) | (got[:, k] == unfused)
            assert ok.all(), f"fma: element {np.flatnonzero(~ok)[0]}"
            continue
        np.testing.assert_array_equal(got[:, k], want[:, k], err_msg=f"op {k}")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(low, a.astype(np.float32))
        assert ints.tolist() == [_f_to_int(float(x * 1e10), 64, True) for x in a]


def test_f64_accumulator(backend, rng):
    n = 1000
    a = rng.standard_normal(8 * n).astype(np.float32) * np.float32(1e4)
    a[::7] = np.float32(1e-4)  # small terms an f32 sum would lose
    out = np.full(8, np.nan)
    if _f64_refused(backend):
        with pytest.raises(CompileError, match="f64 is not supported"):
            f64_accumulate[8](a, n, out, backend=backend)
        return
    f64_accumulate[8](a, n, out, backend=backend)
    # left to right in double, as the loop (Python 3.12's sum() of floats compensates: not an oracle here)
    want = [functools.reduce(operator.add, (float(v) for v in a[i * n:(i + 1) * n]), 0.0) for i in range(8)]
    assert out.tolist() == want


def test_i64_accumulator_widens_from_a_literal_start(backend, rng):
    n = 64
    a = rng.integers(-(2**40), 2**40, 4 * n)
    out = _poison(4, np.int64)
    i64_accumulate[4](a, n, out, backend=backend)
    assert out.tolist() == [sum(int(v) for v in a[i * n:(i + 1) * n]) for i in range(4)]
    assert "var<i64>" in str(i64_accumulate.ir())


def _add_chain(initial: int, olds: list[int], adds: list[int], final: int) -> None:
    """The old values of one address serialize the adds: from ``initial``, each thread's old is what the previous
    one left (old + its add, wrapped), ending at ``final``."""
    after = {o: (o + a) % 2**64 for o, a in zip(olds, adds)}
    assert len(after) == len(olds), "two threads saw the same old value"
    cur, seen = initial % 2**64, 0
    while cur in after and seen <= len(olds):
        cur, seen = after[cur], seen + 1
    assert seen == len(olds) and cur == final % 2**64, "the old values do not chain through every thread"


def test_64bit_atomic_add(backend, rng):
    n, groups = 256, 4
    v = rng.integers(-(2**62), 2**62, n) * 2 + 1  # odd: no two partial sums of one address collide in practice
    v[:4] = [I64_MAX, I64_MAX, I64_MIN + 1, -1]  # the sums wrap
    u = v.view(np.uint64).copy()
    t0 = np.array([I64_MIN, -1, 0, 2**40], np.int64)
    t, tu = t0.copy(), t0.view(np.uint64).copy()
    old, oldu, sums = _poison(n, np.int64), _poison(n, np.uint64), _poison(4 * groups, np.int64)
    if not caps(backend).atomic64:
        with pytest.raises(CompileError) as e:
            atomic_add64[n, n // groups](v, u, t, tu, old, oldu, sums, backend=backend)
        assert "atomic_add" in e.value.message and "wide_kernels.py:" in str(e.value)
        return
    atomic_add64[n, n // groups](v, u, t, tu, old, oldu, sums, backend=backend)
    for a in range(4):
        adds = [int(x) for x in v[a::4]]
        want = _wrap(int(t0[a]) + sum(adds), 64, True)
        assert int(t[a]) == want and int(tu[a]) == want % 2**64
        _add_chain(int(t0[a]), [int(o) % 2**64 for o in old[a::4]], adds, want)
        _add_chain(int(t0[a]), [int(o) for o in oldu[a::4]], adds, want)
    per_group = n // groups
    want_sums = [_wrap(j + sum(int(x) for x in v[g * per_group:(g + 1) * per_group][j::4]), 64, True)
                 for g in range(groups) for j in range(4)]
    assert sums.tolist() == want_sums


def test_f64_refused_on_metal_names_the_line():
    with pytest.raises(CompileError) as e:
        f64_accumulate.source("metal")
    assert "f64 is not supported on Metal" in e.value.message
    assert "wide_kernels.py:" in str(e.value) and "acc" in str(e.value)


def test_vulkan_without_the_feature_refuses_located():
    """A device without shaderFloat64 / shaderInt64 / 8-bit storage: the module is refused at the first use."""
    from types import SimpleNamespace

    from iron.runtime.vulkan import refuse_missing_dtypes

    kernel = f64_ops.variant(None, ()).kernel
    spk = SimpleNamespace(features=frozenset({"float64", "int64"}))
    with pytest.raises(CompileError) as e:
        refuse_missing_dtypes(kernel, spk, {"int64": True}, "test-device")
    assert "f64 is not supported on Vulkan device test-device" in e.value.message
    assert "wide_kernels.py:" in str(e.value)
    refuse_missing_dtypes(kernel, spk, {"int64": True, "float64": True}, "test-device")


def test_launch_checks_64bit_scalars_and_arrays():
    a = np.zeros(4, np.int64)
    out = np.zeros(4 * OPS64, np.int64)
    with pytest.raises(LaunchError, match="does not fit in i64"):
        i64_ops[4](a, a, 2**63, out, backend="cpu")
    with pytest.raises(LaunchError, match="expects i64"):
        i64_ops[4](a.astype(np.int32), a, 1, out, backend="cpu")
    i64_ops[4](a, a + 1, np.int64(-(2**63)), out, backend="cpu")
    assert out[:3].tolist() == [1, -1, 0]


def test_device_arrays_take_the_new_dtypes():
    for dt in (iron.i64, iron.u64, iron.f64, iron.i8, iron.u8, "int8", np.uint64):
        x = iron.zeros(5, dt, backend="cpu")
        assert x.numpy().tolist() == [0] * 5


@pytest.mark.parametrize("body, message", [
    ("def k(a: iron.Tensor[iron.f64]):\n    a[0] = iron.exp(a[1])\n", "exp() on f64 is not supported"),
    ("def k(a: iron.Tensor[iron.f64]):\n    a[0] = a[1] % a[2]\n", "`%` on f64 is not supported"),
    ("def k(a: iron.Tensor[iron.i64]):\n    iron.atomic_max(a, 0, 1)\n", "atomic_max on a buffer of i64"),
    ("def k(a: iron.Tensor[iron.u8]):\n    iron.atomic_add(a, 0, 1)\n", "atomic_add on a buffer of u8"),
    ("def k(a: iron.Tensor[iron.i64]):\n    a[0] = iron.simd_sum(a[1])\n", "simd_sum on i64 is not supported"),
    ("def k(a: iron.Tensor[iron.i32]):\n    x: iron.i8 = 3\n    a[0] = x\n", "a local cannot be i8"),
    ("def k(a: iron.Tensor[iron.i32], s: iron.u8):\n    a[0] = s\n", "scalar parameter 's' cannot be u8"),
    ("def k(a: iron.Tensor[iron.i64]):\n    a[0] = iron.bitcast(a[1], iron.f64)\n", "bitcast"),
    ("def k(a: iron.Tensor[iron.u8]):\n    x = iron.vload(a, 0, 4)\n", "vload of u8 elements is not supported"),
    ("def k(a: iron.Tensor[iron.i64]):\n    for j in range(a[0]):\n        a[1] = j\n", "cannot be a loop bound"),
    ("def k(a: iron.Tensor[iron.u8]):\n    s = iron.shared(iron.u8, 64)\n    iron.async_copy(s, 0, a, 0, 16)\n",
     "async_copy of u8 elements is not supported"),
])
def test_refusals_are_located(tmp_path, body, message):
    with pytest.raises(CompileError) as e:
        mod = module_from_source(tmp_path, "refused", HEADER + body)
        mod.k.ir()
    assert message in e.value.message
    assert "refused.py:" in str(e.value)


def test_float_literal_start_widens_to_f64(tmp_path):
    body = ("def k(a: iron.Tensor[iron.f64], n: int, out: iron.Tensor[iron.f64]):\n    acc = 0.0\n"
            "    for j in range(n):\n        acc += a[j]\n    out[0] = acc\n")
    mod = module_from_source(tmp_path, "widen64", HEADER + body)
    assert "var<f64>" in str(mod.k.ir())
    a = np.array([1e-20, 1.0, -1.0, 3e-20])
    out = np.zeros(1)
    mod.k[1](a, 4, out, backend="cpu")
    assert out[0] == (1e-20 + 1.0 - 1.0) + 3e-20
