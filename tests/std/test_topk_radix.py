"""std/sample/topk's paths (``launch_topk(..., path=...)``: the radix select, in two launches and one, the selection
rounds, and the filter path on keys and on f32 values, "filterv") on every backend and dtype: exact values and
indices against the float64 oracle (ties by lower index), on random rows, rows drawn from a few values (ties across
chunks and at the threshold), constant rows, -inf and signed zeros, k = 1, 7 and 64 and k equal to a short row's
length, rows of one chunk, several, and not a multiple of the chunk."""

from __future__ import annotations

import numpy as np
import pytest

from iron.frontend.autotune import table_for
from iron.std import topk as K

from ..frontend.test_kernels import as_dtype

PATHS = ["radix", "rounds", "radix1", "filter", "filterv"]


def check(x: np.ndarray, k: int, backend: str, path: str | None, ept: int | None = None) -> object:
    """launch_topk with ``path`` (``ept``: launch_radix with that many elements a thread) against the oracle."""
    values = np.full((x.shape[0], k), np.nan, x.dtype)
    indices = np.full((x.shape[0], k), -1, np.int32)
    if ept is None:
        plan = K.launch_topk(x, values, indices, k, backend, path=path)
    else:
        plan = K.launch_path(x, values, indices, k, path, backend, ept)
    want_v, want_i = K.topk_oracle(x, k)
    bad = np.nonzero((indices != want_i).any(1))[0]
    assert not len(bad), f"{path}: indices differ in rows {bad}: got {indices[bad[0]]}, want {want_i[bad[0]]}"
    assert np.array_equal(values.astype(np.float64), want_v)
    if path != "rounds":  # the logits' own bits: -0.0 stays -0.0 (rounds' simd_max may give either zero)
        own = np.take_along_axis(x, want_i, 1).astype(np.float32)
        assert np.array_equal(np.signbit(values.astype(np.float32)), np.signbit(own))
    return plan


@pytest.mark.parametrize("path,k", [("radix", 1), ("radix", 7), ("radix", 64), ("rounds", 7), ("radix1", 7),
                                    ("radix1", 64), ("filter", 1), ("filter", 7), ("filter", 64), ("filterv", 1),
                                    ("filterv", 64)])
def test_random_rows_two_chunks(backend, dtype, rng, path, k):
    """5000 columns: a full chunk of 4096 and a partial one, merged (16-byte loads). The rounds path (k rounds of a
    barrier each, slow on the CPU devices) at one k here; test_sampling and the registered entry run it too."""
    x = as_dtype(rng.standard_normal((3, 5000)) * 3.0, dtype)
    check(x, k, backend, path)


@pytest.mark.parametrize("path", PATHS)
def test_ties_from_a_few_values(backend, dtype, rng, path):
    """Unaligned rows (scalar loads) of two chunks drawn from four values: the threshold is tied far past k, in
    both chunks and in the merge; a constant row and an all -inf row rank by index alone."""
    x = rng.choice(np.array([-1.0, 0.0, 0.5, 2.0]), size=(4, 4099))
    x[2] = 0.5
    x[3] = -np.inf
    x = as_dtype(x, dtype)
    for k in (7, 64):
        check(x, k, backend, path)


@pytest.mark.parametrize("path", PATHS)
def test_one_chunk_and_whole_chunks(backend, rng, path):
    """A row of exactly one chunk (4096 f32) and of exactly two, values on a coarse grid (ties near the top)."""
    for ncols in (4096, 8192):
        x = as_dtype(np.round(rng.standard_normal((2, ncols)) * 8.0) / 4.0, "f32")
        check(x, 64, backend, path)


@pytest.mark.parametrize("path", PATHS)
def test_short_row_every_element(backend, dtype, rng, path):
    """k equal to the row length (40): every element in order, with -inf, +inf and signed zeros among them."""
    x = rng.standard_normal((3, 40))
    x[0, rng.permutation(40)[:10]] = -np.inf
    x[1, [3, 30]] = np.inf
    x[1, [0, 39]] = -np.inf
    x[2, rng.permutation(40)[:20]] = 0.0
    x[2, rng.permutation(40)[:8]] = -0.0
    x = as_dtype(x, dtype)
    check(x, 40, backend, path)
    check(x, 1, backend, path)


def test_radix_at_32_elements_a_thread(backend, dtype, rng):
    """The GPU's other radix configuration: chunks of 8192 (two here), ties from a coarse grid."""
    x = as_dtype(np.round(rng.standard_normal((2, 9000)) * 6.0) / 4.0, dtype)
    plan = check(x, 64, backend, "radix", ept=32)
    assert plan.chunk.chunks == 2


def test_one_launch_twice_on_the_same_counters(backend, rng):
    """The one-launch radix path (the last group of each row merges): three chunks a row at 32 elements a thread,
    then again on other rows of the same count (the counters each launch leaves at zero), and i32 and f32 indices."""
    from iron.std import reductions

    for _ in range(2):
        x = as_dtype(rng.standard_normal((3, 20000)), "bf16")
        values = np.full((3, 64), np.nan, x.dtype)
        indices = np.full((3, 64), np.nan, np.float32)
        plan = K.launch_radix(x, values, indices, 64, backend, 32, one=True)
        assert plan.chunk.chunks == 3
        want_v, want_i = K.topk_oracle(x, 64)
        assert np.array_equal(indices, want_i.astype(np.float32)) and np.array_equal(values.astype(np.float64), want_v)
        check(x, 64, backend, "radix1")
    assert all(not np.asarray(c).any() for key, c in reductions._COUNTERS.items() if key[0] == backend and key[3] == 3
               and isinstance(c, np.ndarray))


def test_cpu_devices_run_the_radix_path(backend, rng):
    """Without a tuning table (the interpreter, lavapipe, msl-cpu) the default is the radix path, deterministically;
    a GPU times both, and either may win."""
    x = as_dtype(rng.standard_normal((2, 300)), "f32")
    plan = check(x, 17, backend, None)
    if table_for(K.PATH_TUNING, backend) is None:
        assert isinstance(plan, K.RadixPlan)


def test_refuses_an_unknown_path():
    x = np.zeros((1, 10), np.float32)
    with pytest.raises(ValueError, match="path = 'sort'"):
        K.launch_topk(x, np.zeros((1, 3), np.float32), np.zeros((1, 3), np.int32), 3, "cpu", path="sort")


@pytest.mark.parametrize("width", [4, 8, 32, 64])
def test_radix_at_each_simd_width(width, monkeypatch, rng):
    """The digit scan splits the 256 bins over a SIMD group's lanes (4 bins a lane a round: 16 rounds at width 4,
    1 at 64) and the tie scan has a slot per SIMD group: the interpreter at the narrowest width and those of lavapipe,
    NVIDIA and AMD CDNA."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    x = rng.choice(np.array([-2.0, 0.25, 1.0, 3.0]), size=(2, 1500)).astype(np.float32)
    x[1] += rng.standard_normal(1500).astype(np.float32)
    check(x, 64, "cpu", "radix")


@pytest.mark.parametrize("launch", ["launch_radix", "launch_rounds", "launch_filter"])
@pytest.mark.parametrize("k", [0, 65, 41])
def test_each_path_refuses_a_bad_k(launch, k):
    """Each path's own launcher checks k (65 would overflow the 64 shared slots; 41 > a 40-column row)."""
    x = np.zeros((1, 40), np.float32)
    with pytest.raises(ValueError, match="top-k: k"):
        getattr(K, launch)(x, np.zeros((1, 64), np.float32), np.zeros((1, 64), np.int32), k, "cpu")


@pytest.mark.parametrize("path", ["filter", "filterv"])
@pytest.mark.parametrize("width", [4, 8, 32, 64])
def test_filter_at_each_simd_width(width, path, monkeypatch, rng):
    """The filter path's bound takes each SIMD group's ceil(k / groups)-th largest thread maximum: 1st of 4 lanes at
    width 4 (64 groups) to the 16th of 64; random rows (the filter and the rank), a row of four values (more
    candidates than CAP: select_best) and k = 1 and 64, in five chunks of 4096 f32 (an odd list in the merge)."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    x = rng.standard_normal((3, 5 * 4096 - 100)).astype(np.float32)
    x[1] = rng.choice(np.array([-2.0, 0.25, 1.0, 3.0]), size=x.shape[1])
    for k in (1, 64):
        plan = check(x, k, "cpu", path)
        assert plan.chunk.chunks == 5


@pytest.mark.parametrize("vals", [False, True])
def test_filter_lists_and_counters(backend, rng, vals):
    """Chunks of 16 bf16 elements a thread (4096), 3, 9 and 16 lists a row (merge rounds with odd lists; 16 is
    MAX_LISTS), each launched twice on the same counters, with f32 indices; a row of 17 chunks at 64 a thread is
    refused by name."""
    for chunks in (3, 9, 16):
        x = as_dtype(rng.standard_normal((2, chunks * 4096 - 8)) * 4.0, "bf16")
        for _ in range(2):
            values = np.full((2, 64), np.nan, x.dtype)
            indices = np.full((2, 64), np.nan, np.float32)
            plan = K.launch_filter(x, values, indices, 64, backend, vals=vals)
            want_v, want_i = K.topk_oracle(x, 64)
            assert plan.chunk.chunks == chunks
            assert np.array_equal(indices, want_i.astype(np.float32))
            assert np.array_equal(values.astype(np.float64), want_v)
    x = np.zeros((1, 16 * 16384 + 8), np.float32)
    with pytest.raises(ValueError, match="filter path takes rows of at most 16 chunks"):
        K.launch_filter(x, np.zeros((1, 4), np.float32), np.zeros((1, 4), np.int32), 4, backend)


@pytest.mark.parametrize("path", ["filter", "filterv"])
def test_filter_f16_at_32_and_64_elements_a_thread(backend, rng, path):
    """f16 at 32 a thread (8192 positions: the composite key's 13 free bits exactly) and a row of 17 chunks of 8192,
    which doubles to 64 a thread (16384 positions: no composite, the two-comparison rank), with ties."""
    x = as_dtype(np.round(rng.standard_normal((2, 3 * 8192 - 24)) * 16.0) / 8.0, "f16")
    plan = check(x, 64, backend, path, ept=32)
    assert plan.chunk.per * plan.chunk.vec == 32
    x = as_dtype(np.round(rng.standard_normal((1, 17 * 8192)) * 16.0) / 8.0, "f16")
    plan = check(x, 33, backend, path)
    assert plan.chunk.per * plan.chunk.vec == 64 and plan.chunk.chunks == 9


def test_filter_on_values_with_infinities_and_signed_zeros(backend, rng):
    """The value-compared filter path where the bound is -inf (rows mostly -inf: every element a candidate, so
    select_best on keys made from the values, padding past the row after the real -inf) and with -0.0 beside +0.0
    (equal as floats and as keys: ranked by column)."""
    x = np.full((3, 2 * 4096 + 300), -np.inf, np.float32)
    x[0, rng.choice(x.shape[1], 20, replace=False)] = rng.standard_normal(20)
    x[1, :] = rng.choice(np.array([-0.0, 0.0, -1.0], np.float32), size=x.shape[1])
    x[2, rng.choice(x.shape[1], 100, replace=False)] = 5.0
    for k in (1, 64):
        check(x, k, backend, "filterv", ept=16)


@pytest.mark.parametrize("path", ["filter", "filterv"])
def test_filter_bound_at_zero_with_cap_candidates(backend, rng, path):
    """Negative rows with a signed zero every 16th column (f32, 16 a thread): every SIMD group's bound is a zero, so
    each chunk of 4096 has exactly CAP (256) candidates, all zeros of either sign: the rank path (not select_best)
    orders them by column, the chunks' lists merge by column."""
    x = -np.abs(rng.standard_normal((2, 2 * 4096))).astype(np.float32) - 0.5
    x[:, 0::16] = rng.choice(np.array([-0.0, 0.0], np.float32), size=(2, 2 * 4096 // 16))
    for k in (1, 64):
        check(x, k, backend, path, ept=16)
