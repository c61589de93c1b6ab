"""std/attention_wg: the attention prefill on warpgroup_mma + tile_load + element-wise fragment ops, against the
float64 oracle of std/attention, in every configuration shape (chunks NC, warpgroups WG, stages), causal or not,
with sequences that end inside a block; outputs poisoned first. Backends whose shared memory cannot hold a
configuration refuse it (located) and the case is skipped with that refusal."""

from __future__ import annotations

import math

import numpy as np
import pytest

import iron
from iron.runtime import get_backend
from iron.std import attention as P
from iron.std.attention_wg import attn_prefill_wg, shared_bytes

from ..frontend.test_kernels import as_dtype


def _run(backend, rng, n, hq, hkv, d, cfg, causal, dtype="bf16"):
    nc, wg, stages, pipe = cfg
    q, k, v = (as_dtype(rng.standard_normal(s), dtype) for s in ((n, hq, d), (n, hkv, d), (n, hkv, d)))
    out = np.full((n, hq, d), np.nan, q.dtype)
    g = wg * 4 * get_backend(backend).simd_width()
    grid = (-(-n // (64 * wg)) * g, hq)
    try:
        attn_prefill_wg[grid, (g, 1)](q, k, v, out, n, hq * d, hkv * d, hq, hkv, 1 / math.sqrt(d), d, nc, wg, stages,
                                      causal, pipe, backend=backend)
    except (iron.LaunchError, iron.CompileError) as e:
        if "bytes of shared memory" not in str(e):
            raise
        pytest.skip(f"{backend}: {e.message}")
    want = P.oracle({"q": q, "k": k, "v": v}, causal)
    # P rounded to the input type before P V (as the reference kernels do), sums in f32, the output rounded once
    tol = 2e-2 if dtype == "bf16" else 4e-3
    assert np.allclose(out.astype(np.float64), want, rtol=tol, atol=tol), np.abs(out - want).max()


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_one_chunk_one_warpgroup(backend, causal, rng):
    _run(backend, rng, 70, 2, 1, 64, (1, 1, 2, 0), causal)
    _run(backend, rng, 200, 2, 1, 64, (1, 1, 2, 1), causal)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_one_stage_fits_32_kib(backend, causal, rng):
    """24 KiB of shared memory: runs on msl-cpu too (P's A fragment through the scalar fallback's shuffles)."""
    _run(backend, rng, 150, 2, 2, 64, (1, 1, 1, 0), causal, "f16")


@pytest.mark.parametrize("n, hq, hkv, d, cfg, causal, dtype", [
    (200, 4, 2, 128, (2, 2, 3, 0), True, "bf16"),
    (150, 2, 2, 128, (2, 1, 2, 1), False, "f16"),
    (130, 2, 1, 64, (2, 2, 2, 1), True, "f16"),
    (300, 2, 1, 64, (1, 1, 3, 1), True, "bf16"),
    (64, 1, 1, 64, (1, 2, 2, 0), True, "bf16"),
    (190, 2, 1, 128, (2, 1, 2, 0), True, "bf16"),
    (192, 2, 1, 64, (1, 1, 2, 0), False, "bf16"),  # every block whole: none masked
    (256, 2, 1, 64, (1, 2, 2, 0), True, "f16"),  # causal, n a multiple of the tile: masked on the diagonal only
])
def test_configurations_on_the_interpreter(monkeypatch, n, hq, hkv, d, cfg, causal, dtype, rng):
    """The H200's configurations (up to ~200 KiB of shared memory), with the interpreter's limit raised."""
    monkeypatch.setenv("IRON_CPU_MAX_SHARED", str(shared_bytes(d, cfg[0], cfg[1], cfg[2]) + 4096))
    _run("cpu", rng, n, hq, hkv, d, cfg, causal, dtype)


def test_launch_prefill_takes_it_only_on_sm_90(monkeypatch):
    assert P.wg_config("cpu", 64) is None and P.wg_config("vulkan", 128) is None
    monkeypatch.setattr(P, "get_backend", lambda name: type("B", (), {"arch": "sm_90"})())
    assert P.wg_config("cuda", 128) == P.WG_CONFIGS[128] and P.wg_config("cuda", 96) is None
    monkeypatch.setenv("IRON_ATTN_WG_CFG", "1,2,3,1")
    assert P.wg_config("cuda", 64) == (1, 2, 3, 1)
    monkeypatch.setenv("IRON_ATTN_WG", "0")
    assert P.wg_config("cuda", 64) is None
