"""std/attention: causal and non-causal GQA prefill, ragged and paged decode, on every backend against float64 NumPy
oracles; outputs start poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest

from iron.harness.registry import InputGen
from iron.std import attention as P
from iron.std import attention_decode as Dc

from ..frontend.test_kernels import as_dtype


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_prefill_gqa(backend, causal, rng):
    n, hq, hkv, d = 23, 4, 2, 64
    q, k, v = (as_dtype(rng.standard_normal(s), "f16") for s in ((n, hq, d), (n, hkv, d), (n, hkv, d)))
    out = np.full((n, hq, d), np.nan, np.float16)
    P.launch_prefill(q, k, v, out, causal, 0.3, backend)
    want = P.oracle({"q": q, "k": k, "v": v}, causal, 0.3)
    assert np.allclose(out.astype(np.float64), want, rtol=4e-3, atol=4e-3)


def test_decode_ragged_many_splits(backend, rng):
    """Lengths that end inside, at and before split boundaries (chunk 16), one of length 1."""
    gen = InputGen((4, 50, 4, 1, 64), np.dtype(np.float32), rng)
    d = Dc._setup(gen)
    d["lens"] = np.array([50, 16, 1, 33], np.int32)
    Dc.launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, backend, chunk=16)
    assert np.allclose(d["out"], Dc.oracle(d), rtol=1e-5, atol=1e-5)


def test_decode_paged_shuffled_table(backend, rng):
    gen = InputGen((3, 45, 4, 2, 64), np.dtype(np.float32), rng)
    d = Dc._setup_paged(gen)
    assert not (d["table"].ravel() == np.arange(d["table"].size)).all()
    Dc.launch_decode_paged(d["q"], d["k"], d["v"], d["table"], d["lens"], d["out"], None, backend, chunk=16)
    assert np.allclose(d["out"], Dc.oracle_paged(d), rtol=1e-5, atol=1e-5)


def test_paged_matches_contiguous_cache(rng):
    """The same cache laid out in pages through a table gives the contiguous kernel's answer."""
    gen = InputGen((2, 32, 2, 2, 64), np.dtype(np.float32), rng)
    d = Dc._setup_paged(gen)
    idx = d["table"].astype(np.int64)
    k = d["k"][idx].reshape(2, -1, 2, 64).copy()
    v = d["v"][idx].reshape(2, -1, 2, 64).copy()
    flat = np.full_like(d["out"], np.nan)
    Dc.launch_decode_paged(d["q"], d["k"], d["v"], d["table"], d["lens"], d["out"], None, "cpu")
    Dc.launch_decode(d["q"], k, v, d["lens"], flat, None, "cpu")
    assert np.allclose(d["out"], flat, rtol=1e-6, atol=1e-6)
