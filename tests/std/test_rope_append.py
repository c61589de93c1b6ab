"""std/rope_append (RoPE fused with the KV-cache append) on every backend: q rotated, k rotated into its cache row,
v copied into its row, every other cache row untouched; both layouts, the vector and scalar paths (head dims and
device offsets that allow no vectors), against float64 RoPE from the angles; and the same result as the three
launches it replaces (std/rope + two std/gather kv_append)."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.ir import types as t
from iron.std.gather import launch_kv_append
from iron.std.rope import launch_rope, rope_tables
from iron.std.rope_append import launch_rope_append, plan_vec, rotate

TOL = {"f32": 2e-5, "f16": 4e-3, "bf16": 1.6e-2}


def _case(rng, dtype, tokens, hq, hkv, d, cache):
    np_dtype = t.SCALAR_TYPES[dtype].np_dtype
    x = rng.standard_normal((tokens, hq + 2 * hkv, d)).astype(np_dtype)
    kc = rng.standard_normal((cache, hkv, d)).astype(np_dtype)
    vc = rng.standard_normal((cache, hkv, d)).astype(np_dtype)
    rows = rng.choice(cache, tokens, replace=False).astype(np.int32)
    pos = (rows * 3 + 1).astype(np.int32)
    cos, sin = rope_tables(3 * cache + 2, d)
    q = np.full((tokens, hq, d), np.nan, np_dtype)
    return x, q, kc, vc, cos, sin, pos, rows


def _check(got, want, dtype, what):
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= TOL[dtype] * (1 + np.abs(want))).all(), f"{what}: max err {err.max()}"


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape", [(1, 4, 2, 16, 20), (6, 3, 1, 64, 9), (2, 2, 2, 6, 5)])
def test_q_k_v_land_where_they_belong(backend, rng, dtype, interleaved, shape):
    tokens, hq, hkv, d, cache = shape
    x, q, kc, vc, cos, sin, pos, rows = _case(rng, dtype, *shape)
    k_before, v_before = kc.copy(), vc.copy()
    launch_rope_append(x, q, kc, vc, cos, sin, pos, rows, interleaved, backend)
    _check(q, rotate(x[:, :hq], pos, interleaved), dtype, "q")
    _check(kc[rows], rotate(x[:, hq:hq + hkv], pos, interleaved), dtype, "k")
    np.testing.assert_array_equal(vc[rows], x[:, hq + hkv:])  # a copy: exact
    others = np.setdiff1d(np.arange(cache), rows)
    np.testing.assert_array_equal(kc[others], k_before[others])
    np.testing.assert_array_equal(vc[others], v_before[others])


def test_equals_the_three_launches_it_replaces(backend, rng):
    tokens, hq, hkv, d, cache = 3, 4, 2, 32, 12
    x, q, kc, vc, cos, sin, pos, rows = _case(rng, "bf16", tokens, hq, hkv, d, cache)
    kc2, vc2 = kc.copy(), vc.copy()
    launch_rope_append(x, q, kc, vc, cos, sin, pos, rows, False, backend)
    qk = np.full((tokens, hq + hkv, d), np.nan, x.dtype)
    launch_rope(np.ascontiguousarray(x[:, :hq + hkv]), qk, cos, sin, pos, 0, False, backend)
    launch_kv_append(np.ascontiguousarray(qk[:, hq:]), rows, kc2, backend)
    launch_kv_append(np.ascontiguousarray(x[:, hq + hkv:]), rows, vc2, backend)
    np.testing.assert_array_equal(q, qk[:, :hq])
    np.testing.assert_array_equal(kc, kc2)
    np.testing.assert_array_equal(vc, vc2)


def test_unaligned_device_views_take_the_scalar_path(backend, rng):
    """A view 2 elements into its buffer cannot take 16-byte vectors: the scalar path, same answer."""
    tokens, hq, hkv, d, cache = 2, 2, 1, 16, 6
    x, q, kc, vc, cos, sin, pos, rows = _case(rng, "f32", tokens, hq, hkv, d, cache)
    big = np.concatenate([np.zeros(2, np.float32), x.reshape(-1)])
    dx = iron.asarray(big, backend=backend)[2:].reshape(x.shape)
    dq = iron.asarray(q, backend=backend)
    dk, dv = iron.asarray(kc, backend=backend), iron.asarray(vc, backend=backend)
    args = [iron.asarray(a, backend=backend) for a in (cos, sin, pos, rows)]
    launch_rope_append(dx, dq, dk, dv, *args, False, backend)
    _check(dq.numpy(), rotate(x[:, :hq], pos), "f32", "q")
    _check(dk.numpy()[rows], rotate(x[:, hq:hq + hkv], pos), "f32", "k")
    assert plan_vec(d, 4, False, aligned=False) == 1


def test_head_count_mismatch_is_refused(backend, rng):
    x, q, kc, vc, cos, sin, pos, rows = _case(rng, "f32", 1, 4, 2, 16, 4)
    with pytest.raises(ValueError, match="heads a token"):
        launch_rope_append(x[:, :7], q, kc, vc, cos, sin, pos, rows, False, backend)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("d", [64, 6], ids=["vectors", "scalar"])
def test_rows_and_positions_out_of_range(backend, rng, interleaved, d):
    """Device data checked in the kernel: tokens whose cache row is outside [0, cache_rows) write no cache row (the
    others are untouched), tokens whose position is outside the tables get zeros for q and k; nothing is read or
    written past an array."""
    tokens, hq, hkv, cache = 5, 2, 1, 8
    x, q, kc, vc, cos, sin, _, _ = _case(rng, "f32", tokens, hq, hkv, d, cache)
    rows = np.array([3, -1, 8, 5, 1], np.int32)  # rows 1 and 2 fall outside the 8-row cache
    npos = len(cos)
    pos = np.array([2, 4, 6, npos, -2], np.int32)  # tokens 3 and 4 have no angle
    k_before, v_before = kc.copy(), vc.copy()
    launch_rope_append(x, q, kc, vc, cos, sin, pos, rows, interleaved, backend)
    want_q = rotate(x[:, :hq], np.clip(pos, 0, npos - 1), interleaved)
    want_q[3:] = 0.0
    _check(q, want_q, "f32", "q")
    want_k = rotate(x[:, hq:hq + hkv], np.clip(pos, 0, npos - 1), interleaved)
    want_k[3:] = 0.0
    for tok in (0, 3, 4):  # the tokens with a cache row
        _check(kc[rows[tok]], want_k[tok], "f32", f"k of token {tok}")
        np.testing.assert_array_equal(vc[rows[tok]], x[tok, hq + hkv:])
    untouched = np.setdiff1d(np.arange(cache), rows[[0, 3, 4]])
    np.testing.assert_array_equal(kc[untouched], k_before[untouched])
    np.testing.assert_array_equal(vc[untouched], v_before[untouched])
