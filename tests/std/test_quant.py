"""std/quant: host quantization (round trip, packing layout) and the dequantizing GEMV/GEMM on every backend, for
4 and 8 bits and groups 32/64/128, against float64 NumPy on the dequantized weights."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import quant as Q
from iron.std import quant_gemm as QM
from iron.std import quant_gemv as QV

from ..frontend.test_kernels import as_dtype

CASES = [(bits, group) for bits in (4, 8) for group in (32, 64, 128)]
IDS = [f"q{b}g{g}" for b, g in CASES]


def _weights(rng, n, k, bits, group, dtype):
    w = rng.standard_normal((n, k)) / np.sqrt(k)
    return Q.quantize(w, bits, group, as_dtype(np.zeros(1), dtype).dtype)


def _deq(p, s, b, bits, group):
    """float64 dequantization written out element by element (independent of quant.unpack's vectorised form)."""
    n, words = p.shape
    per = 32 // bits
    out = np.empty((n, words * per))
    for r in range(n):
        for c in range(words * per):
            q = (int(p[r, c // per]) >> (bits * (c % per))) & ((1 << bits) - 1)
            out[r, c] = float(s[r, c // group]) * q + float(b[r, c // group])
    return out


@pytest.mark.parametrize("bits,group", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_round_trip(bits, group, dtype, rng):
    w = rng.standard_normal((7, 256)) * rng.uniform(0.01, 10)
    p, s, b = Q.quantize(w, bits, group, as_dtype(np.zeros(1), dtype).dtype)
    assert p.dtype == np.uint32 and p.shape == (7, 256 * bits // 32) and s.shape == b.shape == (7, 256 // group)
    d = Q.dequantize(p, s, b, bits, group)
    assert np.array_equal(d, _deq(p, s, b, bits, group))
    sc = np.repeat(s.astype(np.float64), group, axis=1)
    lo = np.repeat(b.astype(np.float64), group, axis=1)
    hi = lo + sc * ((1 << bits) - 1)
    inside = (w >= lo) & (w <= hi)
    assert inside.mean() > 0.9
    assert np.all(np.abs(d - w)[inside] <= sc[inside] / 2 * (1 + 1e-9))
    # outside the representable range only by the rounding of s and b to their dtype: clipped to the nearest end
    edge = np.where(w < lo, lo, hi)
    assert np.array_equal(d[~inside], edge[~inside])
    gmin = w.reshape(7, -1, group).min(-1)
    gmax = w.reshape(7, -1, group).max(-1)
    slack = 2.0 ** -10 if dtype == "f16" else 2.0 ** -7 if dtype == "bf16" else 1e-6
    assert np.all(np.abs(d - w) <= sc / 2 + slack * np.repeat(gmax - gmin + np.abs(gmin), group, axis=1) * 2)


def test_packing_layout():
    q = np.array([[1, 2, 3, 4, 5, 6, 7, 8] * 4, [15, 0, 0, 0, 0, 0, 0, 9] * 4])
    p = Q.pack(q, 4)
    assert p.shape == (2, 4) and p[0, 0] == 0x87654321 and p[1, 0] == 0x9000000F
    assert Q.pack(np.array([[1, 2, 3, 255] * 8]), 8)[0, 0] == 0xFF030201
    assert np.array_equal(Q.unpack(p, 4), q)


def test_refuses_bad_shapes():
    with pytest.raises(ValueError):
        Q.quantize(np.zeros((2, 96)), 4, 64)
    with pytest.raises(ValueError):
        Q.quantize(np.zeros((2, 64)), 3, 64)


@pytest.mark.parametrize("bits,group", CASES, ids=IDS)
def test_gemv(backend, bits, group, rng):
    n, k = 37, 384
    for dtype, tol in (("f32", 2e-5), ("bf16", 3e-2)):
        p, s, b = _weights(rng, n, k, bits, group, dtype)
        x = as_dtype(rng.standard_normal(k), dtype)
        y = as_dtype(np.full(n, np.nan), dtype)
        QV.launch_gemv_q(p, s, b, x, y, bits, group, backend)
        want = _deq(p, s, b, bits, group) @ x.astype(np.float64)
        err = np.abs(y.astype(np.float64) - want)
        assert np.all(err <= tol * (1 + np.abs(want))), f"{dtype}: max err {err.max()}"


def test_gemv_q4_half_x_is_accurate_to_the_output_rounding(backend, rng):
    """4 bits with f16 x: gemv_q_warp subtracts the nibbles' magic bases once a vector (``dot_rows_hi``), so its f32
    chains carry up to 256 |x| beside q x. The outputs must still be the float64 result to within one f16 step (the
    rounding itself takes half); a base of 2^23, as in the exact form's magic numbers, would miss by ~100 steps."""
    n, k = 16, 8192
    p, s, b = _weights(rng, n, k, 4, 64, "f16")
    x = as_dtype(rng.standard_normal(k), "f16")
    y = as_dtype(np.full(n, np.nan), "f16")
    QV.launch_gemv_q(p, s, b, x, y, 4, 64, backend)
    want = _deq(p, s, b, 4, 64) @ x.astype(np.float64)
    step = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    err = np.abs(y.astype(np.float64) - want)
    assert np.all(err <= step + 1e-6), f"max err {err.max()} at a step of {step[err.argmax()]}"


def test_gemv_odd_rows_and_many_steps(backend, rng):
    """Rows not a multiple of ROWS, K past one group's reach (threads loop), a single row."""
    for n, k in ((1, 128), (131, 2048)):
        p, s, b = _weights(rng, n, k, 4, 128, "f16")
        x = as_dtype(rng.standard_normal(k), "f16")
        y = as_dtype(np.full(n, np.nan), "f16")
        QV.launch_gemv_q(p, s, b, x, y, 4, 128, backend)
        want = _deq(p, s, b, 4, 128) @ x.astype(np.float64)
        assert np.all(np.abs(y.astype(np.float64) - want) <= 4e-3 * (1 + np.abs(want)))


def test_gemv_refuses_mismatched_scales():
    p, s, b = _weights(np.random.default_rng(0), 4, 128, 4, 64, "f32")
    x, y = np.zeros(128, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError):
        QV.launch_gemv_q(p, s, b, x, y, 4, 32, "cpu")


@pytest.mark.parametrize("bits,group", [(4, 32), (8, 128)], ids=["q4g32", "q8g128"])
@pytest.mark.parametrize("dtype,tol", [("f32", 2e-5), ("f16", 4e-3)])
def test_gemm(backend, bits, group, dtype, tol, rng):
    m, n, k = 17, 35, 128
    p, s, b = _weights(rng, n, k, bits, group, dtype)
    x = as_dtype(rng.standard_normal((m, k)), dtype)
    y = as_dtype(np.full((m, n), np.nan), dtype)
    QM.launch_gemm_q(x, p, s, b, y, bits, group, backend)
    want = x.astype(np.float64) @ _deq(p, s, b, bits, group).T
    err = np.abs(y.astype(np.float64) - want)
    assert np.all(err <= tol * (1 + np.abs(want))), f"max err {err.max()}"
