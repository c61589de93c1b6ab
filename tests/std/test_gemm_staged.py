"""std/gemm_staged: the register-staged GEMM (what std gemm runs on Vulkan) against float64 NumPy on every backend,
outputs poisoned with NaN first: groups wholly inside the matrices (the register path) and edge groups (checked copies),
A @ B and A @ B^T, batched; bf16 and f16 within f32-accumulation error of the rounded output."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from iron.runtime import get_backend
from iron.std import gemm as G
from iron.std.gemm_staged import gemm_rs

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
# (batch, M, N, K): whole tiles (the register path, K a multiple of BK), ragged edges, K not a multiple of 8
SHAPES = [(1, 64, 64, 48), (1, 50, 40, 36), (2, 64, 96, 32), (1, 96, 64, 13)]


def _run(backend, rng, shape, trans_b, dtype, tile=(32, 32, 16, 2, 1)):
    batch, m, n, k = shape
    dt = DTYPES[dtype]
    a = rng.standard_normal((batch, m, k)).astype(dt)
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(dt)
    c = np.full((batch, m, n), np.nan, dt)
    width = get_backend(backend).simd_width()
    bm, bn, bk, wm, wn = tile
    g = wm * wn * width
    strides = (m * k, n * k, m * n) if batch > 1 else (0, 0, 0)
    gemm_rs[(-(-n // bn) * g, -(-m // bm), batch), (g, 1, 1)](a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k,
                                                            *strides, bm, bn, bk, wm, wn, width, trans_b,
                                                            backend=backend)
    b64 = b.astype(np.float64)
    want = a.astype(np.float64) @ (np.swapaxes(b64, -1, -2) if trans_b else b64)
    return c.astype(np.float64), want


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("trans_b", [False, True], ids=["AB", "ABt"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_rs_matches_float64(backend, rng, shape, trans_b, dtype):
    got, want = _run(backend, rng, shape, trans_b, dtype)
    assert np.isfinite(got).all(), f"{np.count_nonzero(~np.isfinite(got))} elements not written"
    eps = 2.0**-8 if dtype == "bf16" else 2.0**-11  # one rounding of the output, plus f32 accumulation
    bound = eps * np.abs(want) + shape[-1] * 2.0**-22 * 4
    assert (np.abs(got - want) <= bound).all(), float(np.max(np.abs(got - want) - bound))


def test_vulkan_std_gemm_runs_the_staged_kernel(monkeypatch):
    """std gemm's launch on Vulkan goes through gemm_rs (and only there)."""
    calls = []
    monkeypatch.setattr(G, "tune", lambda label, configs, run, **kw: calls.append((label, configs)) or configs[0])
    monkeypatch.setattr(G, "get_backend", lambda name: _FakeBackend(name))
    from iron.std import gemm_staged

    launched = []

    class _Launch:
        def __getitem__(self, grid):
            return lambda *args, **kw: launched.append((grid, args))

    monkeypatch.setattr(gemm_staged, "gemm_rs", _Launch())
    a = np.zeros((64, 32), np.float16)
    G.launch(a, np.zeros((32, 48), np.float16), np.zeros((64, 48), np.float16), backend="vulkan")
    assert calls[0][0] == "std/gemm_rs" and launched and launched[0][1][-2] == 8  # SW: the device's width


class _FakeBackend:
    def __init__(self, name):
        self.name = name

    def context(self):
        return type("Ctx", (), {"coopmat": frozenset()})()

    def autotune_tag(self):
        return "auto"

    def simd_width(self):
        return 8

    def vendor(self):
        return "mesa"
