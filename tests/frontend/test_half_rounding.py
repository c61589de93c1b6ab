"""Rounding to f16/bf16 is exact to nearest even on every backend: bit-exact against NumPy/ml_dtypes on inputs dense
in ties and near-ties, subnormals, overflow, infinities and NaNs, for a scalar store, the std cast's 16-byte stores,
and an explicitly rounded intermediate (a device that drops an f32 -> half -> f32 pair fails it).

Why SPIR-V rounds halves in integer arithmetic (codegen/spirv/values.py ``round_to``): on the H200 (2026-12-04,
NVIDIA 580.159.04) a module declaring RoundingModeRTE for 16 bits and rounding by OpFConvert failed this test:
OpFConvert f32 -> bf16 (SPV_KHR_bfloat16) truncated (a NaN with only low payload bits became inf), and the driver
folded f32 -> f16 -> f32 pairs away (the intermediate case, 26 % of values off by an ulp); f16 stores did round to
nearest even (bench/results/2026-12-04-h200-s16-hwconvert)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import iron
from iron import Tensor, bf16, cast, f16, f32, program_id
from iron.std import elementwise

T = iron.T
HALVES = {"bf16": (bf16, ml_dtypes.bfloat16), "f16": (f16, np.float16)}


@iron.kernel
def store_scalar(a: Tensor[f32], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        out[i] = cast(a[i], T)


@iron.kernel
def chained(a: Tensor[T], b: Tensor[T], d: Tensor[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        p = cast(a[i] * b[i], T)  # rounded to T (the product of two halves is exact in f32), held as f32
        out[i] = p * d[i]


def _tricky_f32(rng: np.random.Generator, n: int, name: str) -> np.ndarray:
    """f32 values: random bits (every exponent, NaN and inf among them), exact ties and their neighbours at the half
    type's precision, and its subnormal and overflow ranges."""
    bits = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    drop = 16 if name == "bf16" else 13  # mantissa bits the half type drops (normal range)
    tie = np.uint32(1 << (drop - 1))
    quarter = n // 4
    bits[:quarter] = (bits[:quarter] & ~np.uint32((1 << drop) - 1)) | tie  # exact ties
    bits[quarter:2 * quarter] ^= rng.integers(0, 2, quarter, dtype=np.uint32) * tie  # near ties
    x = bits.view(np.float32).copy()
    third = 2 * quarter + quarter // 2
    if name == "f16":  # subnormal f16 range (multiples of 2^-24, ties at odd multiples of 2^-25), around 65504
        x[2 * quarter:third] = (rng.integers(-2**12, 2**12, third - 2 * quarter) * 2.0**-25).astype(np.float32)
        x[third:3 * quarter] = rng.uniform(-70000, 70000, 3 * quarter - third).astype(np.float32)
    x[:8] = [np.inf, -np.inf, np.nan, -0.0, 0.0, 3.4028235e38, -3.4028235e38, 1e-45]
    return x


def _same_bits(got: np.ndarray, want: np.ndarray, where: str) -> None:
    g, w = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{where}: NaN where none is due, or none where one is"
    bad = np.flatnonzero(g[~nan].view(np.uint32) != w[~nan].view(np.uint32))
    if bad.size:
        i = bad[0]
        raise AssertionError(f"{where}: {bad.size} of {g[~nan].size} differ, first {g[~nan][i]!r} for "
                             f"{w[~nan][i]!r}")


@pytest.mark.parametrize("name", sorted(HALVES))
def test_round_on_store(backend, name):
    dt, npt = HALVES[name]
    n = 1 << 14
    x = _tricky_f32(np.random.default_rng(), n, name)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(npt)
    out = np.full(n, 7, npt)  # poisoned
    store_scalar[n](x, out, n, backend=backend)
    _same_bits(out, want, f"scalar store of f32 to {name} on {backend}")
    out = np.full(n, 7, npt)
    elementwise.launch_cast(x, out, backend=backend)  # 16-byte stores of rounded registers
    _same_bits(out, want, f"std cast f32 -> {name} on {backend}")


@pytest.mark.parametrize("name", sorted(HALVES))
def test_intermediate_rounding(backend, name):
    dt, npt = HALVES[name]
    rng = np.random.default_rng()
    n = 1 << 14
    a, b, d = (rng.standard_normal(n).astype(np.float32).astype(npt) for _ in range(3))
    out = np.full(n, 7, npt)
    chained[n](a, b, d, out, n, backend=backend)
    f64 = np.float64
    p = (a.astype(f64) * b.astype(f64)).astype(np.float32).astype(npt)  # exact in f32, then rounded once
    want = (p.astype(f64) * d.astype(f64)).astype(np.float32).astype(npt)
    _same_bits(out, want, f"{name} product rounded, then multiplied, on {backend}")
