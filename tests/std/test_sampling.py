"""std/sample/topk and std/sample/sample on every backend: exact indices and values against a float64 NumPy sort
(ties by lower index, long rows, -inf, unaligned rows), and sampled tokens against the float64 rule with the RNG
re-implemented in NumPy uint32 arithmetic (the same seed gives the same tokens on every backend)."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import sampling as S
from iron.std import topk as K

from ..frontend.test_kernels import as_dtype


def ranked(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Written from the definition: sort (-value, index) pairs lexicographically in float64."""
    x64 = x.astype(np.float64)
    idx = np.array([np.lexsort((np.arange(x.shape[1]), -row))[:k] for row in x64])
    return np.take_along_axis(x64, idx, axis=1), idx


def run_topk(x: np.ndarray, k: int, backend: str) -> tuple[np.ndarray, np.ndarray]:
    values = np.full((x.shape[0], k), np.nan, x.dtype)
    indices = np.full((x.shape[0], k), -1, np.int32)
    K.launch_topk(x, values, indices, k, backend)
    return values, indices


def check_topk(x: np.ndarray, k: int, backend: str) -> None:
    values, indices = run_topk(x, k, backend)
    want_v, want_i = ranked(x, k)
    assert np.array_equal(indices, want_i), f"indices differ in rows {np.nonzero((indices != want_i).any(1))[0]}"
    assert np.array_equal(values.astype(np.float64), want_v)


@pytest.mark.parametrize("rows,ncols,k", [(3, 5000, 64), (5, 300, 17), (2, 37, 5), (4, 64, 64)])
def test_topk_with_ties(backend, dtype, rng, rows, ncols, k):
    """Values on a coarse grid: many equal values inside the top k and at its edge (unaligned rows: scalar loads)."""
    x = as_dtype(np.round(rng.standard_normal((rows, ncols)) * 4.0) / 2.0, dtype)
    check_topk(x, k, backend)


def test_topk_long_row(backend, rng):
    """The vocabulary: 128256 columns split over 32 chunks, then merged; ties in bf16."""
    x = as_dtype(rng.standard_normal((2, 128256)) * 3.0, "bf16")
    check_topk(x, 64, backend)


def test_topk_all_equal_and_infinities(backend, rng):
    """All-equal rows rank by index; -inf and +inf rank like numbers (k == ncols: every element, in order)."""
    x = np.zeros((3, 40), np.float32)
    x[1] = rng.standard_normal(40)
    x[1, rng.permutation(40)[:12]] = -np.inf
    x[2, [3, 30]] = np.inf
    x[2, [0, 39]] = -np.inf
    check_topk(x, 40, backend)
    check_topk(x, 1, backend)


def test_topk_refuses_bad_k():
    x = np.zeros((1, 10), np.float32)
    with pytest.raises(ValueError, match="k = 11"):
        K.launch_topk(x, np.zeros((1, 11), np.float32), np.zeros((1, 11), np.int32), 11, "cpu")
    with pytest.raises(ValueError, match="k = 65"):
        K.launch_topk(np.zeros((1, 100), np.float32), np.zeros((1, 65), np.float32), np.zeros((1, 65), np.int32),
                      65, "cpu")


def sample(x: np.ndarray, temperature: float, top_p: float, seed: int, backend: str, top_k: int = 64) -> np.ndarray:
    tokens = np.full(x.shape[0], -1, np.int32)
    S.launch_sample(x, tokens, temperature, top_p, seed, top_k, backend)
    return tokens


@pytest.mark.parametrize("temperature,top_p,top_k", [(0.8, 0.9, 64), (1.0, 0.5, 64), (2.0, 1.0, 17), (0.3, 0.99, 8)])
def test_sample_matches_float64_rule(backend, dtype, rng, temperature, top_p, top_k):
    """Tokens are the float64 rule's (either neighbour where a sum lands within EPS of a boundary)."""
    x = as_dtype(rng.standard_normal((6, 3000)) * 2.0, dtype)
    seed = int(rng.integers(1 << 32))
    tokens = sample(x, temperature, top_p, seed, backend, top_k)
    choices = S.sample_choices(x, temperature, top_p, seed, top_k)
    assert all(int(t) in c for t, c in zip(tokens, choices)), f"got {tokens}, allowed {choices}"


def test_same_seed_same_tokens_everywhere(backend, rng):
    """The backend's tokens equal the interpreter's and the oracle's, for flat logits (many live candidates)."""
    x = as_dtype(rng.standard_normal((16, 1000)) * 0.5, "f32")
    seed = int(rng.integers(1 << 32))
    tokens = sample(x, 1.0, 0.95, seed, backend)
    assert np.array_equal(tokens, sample(x, 1.0, 0.95, seed, "cpu"))
    choices = S.sample_choices(x, 1.0, 0.95, seed)
    assert all(int(t) in c for t, c in zip(tokens, choices))


def test_uniform_bits(backend, rng):
    """Equal logits: 64 equally likely candidates (tokens 0..63) and c_j = j + 1, so the token is floor(64 u) with
    u the NumPy re-implementation's uniform: checks the hash bit for bit (6 bits per row over 64 rows)."""
    x = np.zeros((64, 200), np.float32)
    seed = int(rng.integers(1 << 32))
    u = S.uniform(seed, 64)
    assert np.all((u >= 0.0) & (u < 1.0)) and len(np.unique(u)) > 60
    tokens = sample(x, 1.0, 1.0, seed, backend)
    assert np.array_equal(tokens, np.floor(u * 64.0).astype(np.int32))


def test_different_seeds_differ(backend, rng):
    x = as_dtype(rng.standard_normal((8, 500)) * 0.25, "f32")
    a = sample(x, 1.0, 1.0, 7, backend)
    b = sample(x, 1.0, 1.0, 8, backend)
    assert not np.array_equal(a, b)
    assert np.array_equal(a, sample(x, 1.0, 1.0, 7, backend))


def test_greedy_limits_are_argmax(backend, rng):
    """Temperature 0, top_k = 1 or a tiny top_p: the first maximum, whatever the seed (row 0 has tied maxima);
    temperature 1e-6: the maximum where it is unique (tied maxima would stay equally likely)."""
    x = as_dtype(rng.standard_normal((5, 700)) * 4.0, "f32")
    x[0, [10, 500]] = x[0].max() + 1.0
    want = np.argmax(x, axis=1)
    seed = int(rng.integers(1 << 32))
    for temperature, top_p, top_k in [(0.0, 0.9, 64), (1.0, 1.0, 1), (1.0, 1e-7, 64)]:
        got = sample(x, temperature, top_p, seed, backend, top_k)
        assert np.array_equal(got, want), (temperature, top_p, top_k, got, want)
    assert np.array_equal(sample(x[1:], 1e-6, 0.9, seed, backend), want[1:])
