"""std/gather: kv_append at decode (a few rows into a long cache, the rest untouched) and rows past the cache
dropped; embedding with out-of-range ids writing zeros; every backend, against NumPy."""

from __future__ import annotations

import numpy as np

from iron.std import gather as G

from ..frontend.test_kernels import as_dtype


def test_kv_append_writes_only_its_rows(backend, rng):
    cache = as_dtype(rng.standard_normal((50, 2, 16)), "bf16")
    before = cache.copy()
    new = as_dtype(rng.standard_normal((4, 2, 16)), "bf16")
    pos = np.array([7, 49, 50, -1], np.int32)  # the last two are outside the cache: dropped
    G.launch_kv_append(new, pos, cache, backend)
    want = before.copy()
    want[7], want[49] = new[0], new[1]
    assert np.array_equal(cache.view(np.uint16), want.view(np.uint16))


def test_embedding_out_of_range_ids_give_zeros(backend, rng):
    table = as_dtype(rng.standard_normal((10, 24)), "f32")
    ids = np.array([3, -1, 10, 9, 0], np.int32)
    out = np.full((5, 24), np.nan, np.float32)
    G.launch_embedding(table, ids, out, backend)
    want = np.stack([table[3], np.zeros(24), np.zeros(24), table[9], table[0]])
    assert np.array_equal(out, want)
