"""std/gather on every backend against NumPy: embedding (out-of-range ids write zeros) and kv_append (rows at
positions outside the cache dropped, the rest of the cache untouched), bit-exact, in every dtype, on row lengths that
take 16-byte vectors, narrower ones and the scalar fallback, with several vectors a thread, and on device views off a
16-byte boundary."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import gather as G

from ..frontend.test_kernels import as_dtype

DTYPES = pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
#: (tokens or rows, row length): 16-byte vectors in every dtype, 8-byte ones (bf16: 4 elements), 2 elements, scalar
ROWS = pytest.mark.parametrize("n,length", [(37, 64), (6, 12), (5, 6), (5, 3)],
                               ids=["vec16B", "narrower_vec", "pairs", "scalar"])


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8)


def _embedding_oracle(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    t64 = table.astype(np.float64)
    return np.stack([t64[i] if 0 <= i < table.shape[0] else np.zeros(table.shape[1]) for i in ids])


@DTYPES
@ROWS
def test_embedding(backend, dtype, n, length, rng):
    vocab = 50
    table = as_dtype(rng.standard_normal((vocab, length)), dtype)
    ids = rng.integers(-4, vocab + 4, n).astype(np.int32)
    ids[:3] = [-1, vocab, vocab - 1]  # padding ids on both sides, and the last row
    out = as_dtype(np.full((n, length), np.nan), dtype)
    G.launch_embedding(table, ids, out, backend)
    want = _embedding_oracle(table, ids)
    assert np.array_equal(out.astype(np.float64), want)


def test_embedding_out_of_range_ids_give_zeros(backend, rng):
    table = as_dtype(rng.standard_normal((10, 24)), "f32")
    ids = np.array([3, -1, 10, 9, 0], np.int32)
    out = np.full((5, 24), np.nan, np.float32)
    G.launch_embedding(table, ids, out, backend)
    want = np.stack([table[3], np.zeros(24), np.zeros(24), table[9], table[0]])
    assert np.array_equal(out, want)


@DTYPES
@ROWS
def test_kv_append(backend, dtype, n, length, rng):
    max_len = n + 3
    cache = as_dtype(rng.standard_normal((max_len, 1, length)), dtype)
    before = cache.copy()
    new = as_dtype(rng.standard_normal((n, 1, length)), dtype)
    pos = (rng.permutation(max_len + 4)[:n] - 2).astype(np.int32)  # some at -2, -1, max_len, max_len + 1
    pos[:2] = [-1, max_len]
    G.launch_kv_append(new, pos, cache, backend)
    want = before.copy()
    for r, p in enumerate(pos):
        if 0 <= p < max_len:
            want[p] = new[r]
    assert np.array_equal(_bits(cache), _bits(want))


def test_kv_append_writes_only_its_rows(backend, rng):
    cache = as_dtype(rng.standard_normal((50, 2, 16)), "bf16")
    before = cache.copy()
    new = as_dtype(rng.standard_normal((4, 2, 16)), "bf16")
    pos = np.array([7, 49, 50, -1], np.int32)  # the last two are outside the cache: dropped
    G.launch_kv_append(new, pos, cache, backend)
    want = before.copy()
    want[7], want[49] = new[0], new[1]
    assert np.array_equal(cache.view(np.uint16), want.view(np.uint16))


def test_plan_takes_vectors_where_the_row_allows():
    f32, bf16 = np.zeros(1, np.float32), as_dtype(np.zeros(1), "bf16")
    assert G.plan_rows(1, 2048, bf16, bf16) == (8, 1)  # a decode token's embedding: 256 threads of 16 bytes
    assert G.plan_rows(4096, 4096, bf16, bf16) == (8, 4)  # a long prompt: 4 vectors a thread
    assert G.plan_rows(8, 12, bf16, bf16) == (4, 1)
    assert G.plan_rows(8, 12, f32, f32) == (4, 1)
    assert G.plan_rows(8, 6, f32, f32) == (2, 1)
    assert G.plan_rows(8, 3, bf16, bf16) == (1, 1)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_several_vectors_a_thread(backend, dtype, rng, monkeypatch):
    """A small MIN_THREADS makes each thread move MAX_PER vectors; the vector count is not a multiple of it."""
    monkeypatch.setattr(G, "MIN_THREADS", 1)
    table = as_dtype(rng.standard_normal((40, 24)), dtype)
    ids = rng.integers(-2, 42, 13).astype(np.int32)
    assert G.plan_rows(13, 24, table, table)[1] == G.MAX_PER
    out = as_dtype(np.full((13, 24), np.nan), dtype)
    G.launch_embedding(table, ids, out, backend)
    assert np.array_equal(out.astype(np.float64), _embedding_oracle(table, ids))
    cache = as_dtype(np.full((20, 3, 8), np.nan), dtype)
    new = as_dtype(rng.standard_normal((13, 3, 8)), dtype)
    pos = (rng.permutation(22)[:13] - 1).astype(np.int32)
    G.launch_kv_append(new, pos, cache, backend)
    for r, p in enumerate(pos):
        if 0 <= p < 20:
            assert np.array_equal(_bits(cache[p]), _bits(new[r]))
    written = {int(p) for p in pos if 0 <= p < 20}
    assert all(np.isnan(cache[p].astype(np.float32)).all() for p in range(20) if p not in written)


def test_misaligned_device_views_take_the_scalar_path(backend, rng):
    """Tables, outputs and caches one element past a 16-byte boundary: vectors would be misaligned."""
    from iron.runtime.device_array import asarray

    flat = as_dtype(rng.standard_normal(1 + 9 * 16), "bf16")
    table = asarray(flat, backend=backend)[1:].reshape(9, 16)
    ids = np.array([4, 9, 0, -3, 8], np.int32)
    out_buf = asarray(as_dtype(np.full(1 + 5 * 16, np.nan), "bf16"), backend=backend)
    out = out_buf[1:].reshape(5, 16)
    assert G.plan_rows(5, 16, table, out) == (1, 1)
    G.launch_embedding(table, asarray(ids, backend=backend), out, backend)
    assert np.array_equal(out.numpy().astype(np.float64), _embedding_oracle(flat[1:].reshape(9, 16), ids))
    assert np.isnan(out_buf.numpy()[0].astype(np.float32))  # the element before the view is untouched

    cache_host = as_dtype(rng.standard_normal(1 + 6 * 16), "bf16")
    cache_buf = asarray(cache_host, backend=backend)
    new = as_dtype(rng.standard_normal((3, 16)), "bf16")
    pos = np.array([5, 6, 2], np.int32)
    G.launch_kv_append(new, pos, cache_buf[1:].reshape(6, 16), backend)
    want = cache_host.copy()
    want[1:].reshape(6, 16)[[5, 2]] = new[[0, 2]]
    assert np.array_equal(_bits(cache_buf.numpy()), _bits(want))
