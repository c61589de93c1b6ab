"""std/attention_decode's fast paths against float64 NumPy: the SIMD-group reductions at every SIMD width (both split
kernels), the sequence that fits in split 0 (normalised by the split kernel, the combine skipped), splits past the
length (never run), and a combine over more splits than one unrolled step; outputs start poisoned with NaN. The
launches without ``path`` run the coalesced split kernel (the only configuration on CPU devices);
test_attention_decode_coalesced.py compares the two kernels case by case."""

from __future__ import annotations

import numpy as np
import pytest

from iron.harness.registry import InputGen
from iron.std import attention_decode as Dc


def _dtype(path: str) -> tuple[type, float]:
    """f32 with its tolerance; f16 for the matrix-unit kernel (it reads half types)."""
    return (np.float16, 2e-3) if path == "mma" else (np.float32, 1e-5)


def _case(rng, shape, lens, dtype=np.float32):
    d = Dc._setup(InputGen(shape, np.dtype(dtype), rng))
    d["lens"] = np.array(lens, np.int32)
    assert np.isnan(d["out"].astype(np.float32)).all()
    return d


@pytest.mark.parametrize("path", Dc.PATHS)
@pytest.mark.parametrize("width", [8, 32, 64])
def test_reductions_at_every_simd_width(width, path, monkeypatch, rng):
    """GQA 4:1; one sequence in split 0 only, one over all 3 splits, one ending inside split 1."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    dtype, tol = _dtype(path)
    d = _case(rng, (3, 48, 8, 2, 64), [5, 48, 20], dtype)
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, "cpu", chunk=16, path=path)
    assert np.allclose(d["out"].astype(np.float64), Dc.oracle(d), rtol=tol, atol=tol)


def test_short_sequences_in_a_long_cache(backend, rng):
    """The model's case: a cache far longer than the lengths (most splits hold nothing), GQA 4:1, f16."""
    d = _case(rng, (2, 256, 8, 2, 64), [40, 3], np.float16)
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend)  # plan_chunk(256): 8 splits of 32
    assert np.allclose(d["out"].astype(np.float64), Dc.oracle(d), rtol=2e-3, atol=2e-3)


def test_combine_over_many_splits(backend, rng):
    """37 splits of 8 (three unrolled combine steps of 16), GQA 2:1; lengths across several steps and one split."""
    d = _case(rng, (3, 296, 4, 2, 32), [296, 131, 8])
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend, chunk=8)
    assert np.allclose(d["out"], Dc.oracle(d), rtol=1e-5, atol=1e-5)


def test_one_split_cache(backend, rng):
    """A cache of one split (NSPLIT 1): the split kernel writes the output, the combine writes nothing."""
    d = _case(rng, (2, 12, 6, 3, 64), [12, 7])
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend)
    assert np.allclose(d["out"], Dc.oracle(d), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("path", Dc.PATHS)
def test_chunk_too_long_to_unroll(backend, path, rng):
    """A chunk of 2048 positions at D 128, GQA 2:1: the per-thread kernel's score loop stays a loop (past the unroll
    budget); the coalesced kernel's always is one. The matrix-unit kernel (f16) has no room for D 128 on lavapipe
    and says so."""
    dtype, tol = _dtype(path)
    d = _case(rng, (1, 2100, 2, 1, 128), [2077], dtype)
    if path == "mma" and backend == "vulkan":
        with pytest.raises(ValueError, match="does not apply"):
            Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend, chunk=2048, path=path)
        return
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend, chunk=2048, path=path)
    assert np.allclose(d["out"].astype(np.float64), Dc.oracle(d), rtol=tol, atol=tol)
