"""std/rope on every backend against a float64 NumPy oracle written here: both layouts, every dtype, the vector
path (16-byte vectors, narrower ones, several heads a thread, a head count HPT does not divide) and the scalar
fallback (a half row of odd length, an array off a 16-byte boundary), out of place into a poisoned output and in
place, the model's decode (one token, its position in a one-element array) and prompt (positions plus an offset)."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import rope as R

from ..frontend.test_kernels import as_dtype, f64

LAYOUTS = pytest.mark.parametrize("interleaved", [False, True], ids=["rotate_half", "interleaved"])
#: one rounding of the f32 result to the output dtype, on top of a few f32 ulp of the products
TOL = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}


def _oracle(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, pos: np.ndarray, offset: int, interleaved: bool):
    """float64, pair by pair from the layouts' definitions (not the module's oracle)."""
    tokens, heads, dim = x.shape
    half = dim // 2
    xs, out = x.astype(np.float64), np.empty(x.shape)
    for t in range(tokens):
        row = int(pos[t]) + offset
        for i in range(half):
            inside = 0 <= row < cos.shape[0]  # outside the table: no angle, zeros (the module's contract)
            c, s = (float(cos[row, i]), float(sin[row, i])) if inside else (0.0, 0.0)
            a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + half)
            x0, x1 = xs[t, :, a], xs[t, :, b]
            out[t, :, a], out[t, :, b] = x0 * c - x1 * s, x0 * s + x1 * c
    return out


def _check(got, want, dtype: str) -> None:
    g = np.asarray(got).astype(np.float64)
    assert not np.isnan(g).any(), "an element was never written"
    err = np.abs(g - want) / np.maximum(np.abs(want), 1.0)
    assert err.max() <= TOL[dtype], f"worst error {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"


def _case(rng, shape, dtype, max_pos=96):
    cos, sin = R.rope_tables(max_pos, shape[2])
    x = as_dtype(rng.standard_normal(shape), dtype)
    pos = rng.integers(0, max_pos // 2, shape[0]).astype(np.int32)
    return x, cos, sin, pos


@LAYOUTS
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("shape", [(3, 4, 64), (2, 3, 72), (2, 2, 6), (3, 5, 2)],
                         ids=["vec16B", "narrower_vec", "scalar_or_pairs", "one_pair"])
def test_out_of_place_into_poison(backend, interleaved, dtype, shape, rng):
    x, cos, sin, pos = _case(rng, shape, dtype)
    out = as_dtype(np.full(shape, np.nan), dtype)
    keep = x.copy()
    R.launch_rope(x, out, cos, sin, pos, 11, interleaved, backend)
    _check(out, _oracle(keep, cos, sin, pos, 11, interleaved), dtype)
    assert np.array_equal(x.view(np.uint8), keep.view(np.uint8))  # the input is left alone


def test_plan_takes_vectors_where_the_row_allows():
    assert R.plan_rope(1, 32, 64, 2, False) == (8, 1)  # decode q: 4 threads a head
    assert R.plan_rope(1, 32, 64, 2, True) == (8, 1)
    assert R.plan_rope(2, 3, 72, 2, False)[0] == 4  # D/2 = 36: 8-byte vectors
    assert R.plan_rope(2, 3, 72, 2, True)[0] == 8
    assert R.plan_rope(2, 2, 6, 2, False) == (1, 1)  # D/2 = 3: the scalar path
    assert R.plan_rope(2, 2, 6, 2, True)[0] == 2
    assert R.plan_rope(3, 4, 64, 2, False, aligned=False) == (1, 1)
    assert R.plan_rope(4096, 32, 128, 2, False) == (8, 4)  # a long prompt: 4 heads a thread, 8 vectors in flight
    assert R.plan_rope(4096, 32, 128, 2, True) == (8, 8)
    assert R.plan_rope(16384, 8, 128, 4, False) == (4, 4)


@LAYOUTS
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_several_heads_a_thread(backend, interleaved, dtype, rng, monkeypatch):
    """A small MIN_THREADS makes the plan give each thread several heads (q and k as one (T, 40, 64) tensor)."""
    monkeypatch.setattr(R, "MIN_THREADS", 1)
    shape = (5, 40, 64)
    vec, hpt = R.plan_rope(*shape, 4 if dtype == "f32" else 2, interleaved)
    assert hpt > 1
    x, cos, sin, pos = _case(rng, shape, dtype)
    out = as_dtype(np.full(shape, np.nan), dtype)
    R.launch_rope(x, out, cos, sin, pos, 3, interleaved, backend)
    _check(out, _oracle(x, cos, sin, pos, 3, interleaved), dtype)


@LAYOUTS
def test_heads_per_thread_not_dividing_the_heads(backend, interleaved, rng):
    """The kernel itself guards the last thread's missing heads (5 heads, 3 a thread: groups of 3 and 2)."""
    shape, vec, hpt = (3, 5, 32), 8, 3
    x, cos, sin, pos = _case(rng, shape, "bf16")
    out = as_dtype(np.full(shape, np.nan), "bf16")
    n = R.rope_grid(*shape, interleaved, vec, hpt)
    R.rope[n](x, out, cos, sin, pos, shape[1], shape[2], 2, len(cos), interleaved, vec, hpt, backend=backend)
    _check(out, _oracle(x, cos, sin, pos, 2, interleaved), "bf16")


@LAYOUTS
@pytest.mark.parametrize("shape", [(3, 2, 64), (2, 3, 6)], ids=["vector", "scalar"])
def test_in_place_with_offset(backend, interleaved, shape, rng):
    x, cos, sin, pos = _case(rng, shape, "f32", max_pos=256)
    want = _oracle(x, cos, sin, pos, 100, interleaved)
    R.launch_rope(x, x, cos, sin, pos, 100, interleaved, backend)
    _check(x, want, "f32")


@pytest.mark.parametrize("tokens", [1, 7], ids=["decode", "prompt"])
def test_model_shapes_on_device_arrays(backend, tokens, rng):
    """As the model calls it: iron arrays, q (T, 32, 64) and k (T, 8, 64) read from views of one buffer (decode:
    q at offset 0 and k right after it, both 16-byte aligned), a one-element position array for one token (offset
    0), the positions 0 .. T-1 plus the start for a prompt."""
    from iron.runtime.device_array import asarray

    cos, sin = R.rope_tables(64, 64)
    start = 0 if tokens == 1 else 20
    flat = as_dtype(rng.standard_normal(tokens * 40 * 64), "bf16")
    pos = np.array([33], np.int32) if tokens == 1 else np.arange(tokens, dtype=np.int32)
    offset = 0 if tokens == 1 else start
    d_flat, d_cos, d_sin = (asarray(a, backend=backend) for a in (flat, cos, sin))
    d_pos = asarray(pos, backend=backend)
    q_pre = d_flat[0:tokens * 32 * 64].reshape(tokens, 32, 64)
    k_pre = d_flat[tokens * 32 * 64:].reshape(tokens, 8, 64)
    for pre, heads in ((q_pre, 32), (k_pre, 8)):
        out = asarray(as_dtype(np.full((tokens, heads, 64), np.nan), "bf16"), backend=backend)
        R.launch_rope(pre, out, d_cos, d_sin, d_pos, offset, False, backend)
        _check(out.numpy(), _oracle(pre.numpy(), cos, sin, pos, offset, False), "bf16")


@LAYOUTS
def test_misaligned_device_view_takes_the_scalar_path(backend, interleaved, rng):
    """x one element past a 16-byte boundary: the vector loads would be misaligned, so the scalar path runs."""
    from iron.runtime.device_array import asarray

    shape = (2, 3, 16)
    cos, sin = R.rope_tables(32, 16)
    flat = as_dtype(rng.standard_normal(1 + 2 * 3 * 16), "bf16")
    pos = rng.integers(0, 16, 2).astype(np.int32)
    x = asarray(flat, backend=backend)[1:].reshape(shape)
    out = asarray(as_dtype(np.full(shape, np.nan), "bf16"), backend=backend)
    assert R.plan_rope(*shape, 2, interleaved, aligned=False) == (1, 1)
    R.launch_rope(x, out, cos, sin, pos, 5, interleaved, backend)
    _check(out.numpy(), _oracle(flat[1:].reshape(shape), cos, sin, pos, 5, interleaved), "bf16")


def test_gpus_time_heads_per_thread_beside_the_plan():
    """CUDA (and a Vulkan GPU) times every heads-per-thread figure that divides the heads and keeps <= MAX_VECTORS
    x vectors a thread, plan_rope's first; backends that time nothing run plan_rope's alone; the scalar path one."""
    assert R.rope_configs(4096, 32, 128, 2, False, True, "cuda") == [
        {"VEC": 8, "HPT": 4}, {"VEC": 8, "HPT": 1}, {"VEC": 8, "HPT": 2}]
    assert R.rope_configs(4096, 32, 128, 2, True, True, "cuda") == [
        {"VEC": 8, "HPT": 8}, {"VEC": 8, "HPT": 1}, {"VEC": 8, "HPT": 2}, {"VEC": 8, "HPT": 4}]
    assert R.rope_configs(5, 3, 128, 2, False, True, "cuda") == [{"VEC": 8, "HPT": 1}]  # 3 heads: 1 divides
    assert R.rope_configs(4096, 32, 128, 2, False, True, "cpu") == [{"VEC": 8, "HPT": 4}]
    assert R.rope_configs(3, 4, 64, 2, False, False, "cuda") == [{"VEC": 1, "HPT": 1}]


@pytest.mark.parametrize("hpt", [1, 2, 4])
def test_every_timed_configuration_is_right(backend, hpt, rng):
    """Each heads-per-thread figure autotuning may pick gives the oracle's answer (bf16, rotate-half, 4 heads)."""
    x = as_dtype(rng.standard_normal((6, 4, 64)), "bf16")
    cos, sin = R.rope_tables(40, 64)
    pos = rng.integers(0, 30, 6).astype(np.int32)
    out = as_dtype(np.full(x.shape, np.nan), "bf16")
    n = R.rope_grid(6, 4, 64, False, 8, hpt)
    R.rope[n](x, out, cos, sin, pos, 4, 64, 3, len(cos), False, 8, hpt, backend=backend)
    want = R.oracle({"x": x, "cos": cos, "sin": sin, "pos": pos}, 3, False)
    assert np.allclose(f64(out), want, rtol=8e-3, atol=8e-3)


@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in_place"])
def test_tuned_launches_rotate_once(backend, in_place, monkeypatch, rng):
    """With tuning on (every heads-per-thread figure timed, as on a GPU), the result is one rotation: in place the
    timed runs go to a scratch array, not to x (each would rotate x again). tokens = 0 launches and times nothing."""
    from iron.frontend import autotune

    monkeypatch.setitem(R.ROPE_TUNING, backend, (1, 2, 4))
    monkeypatch.setattr(autotune, "_MEMORY", {})
    monkeypatch.setattr(autotune, "_QUICK", {})
    monkeypatch.setenv("IRON_CACHE_DIR", str(__import__("tempfile").mkdtemp()))
    x = as_dtype(rng.standard_normal((3, 4, 64)), "f32")
    cos, sin = R.rope_tables(40, 64)
    pos = rng.integers(0, 30, 3).astype(np.int32)
    want = R.oracle({"x": x, "cos": cos, "sin": sin, "pos": pos}, 5, False)
    out = x if in_place else np.full_like(x, np.nan)
    cfg = R.launch_rope(x, out, cos, sin, pos, 5, False, backend)
    assert cfg in R.rope_configs(3, 4, 64, 4, False, True, backend)
    assert np.allclose(f64(out), want, rtol=1e-5, atol=1e-5)
    calls = []
    monkeypatch.setattr(R, "tune", lambda *a, **k: calls.append(a))
    empty = np.zeros((0, 4, 64), np.float32)
    assert R.launch_rope(empty, empty, cos, sin, pos[:0], 0, False, backend) == R.rope_configs(
        0, 4, 64, 4, False, True, backend)[0] and not calls


@LAYOUTS
@pytest.mark.parametrize("shape", [(6, 4, 64), (6, 3, 6)], ids=["vectors", "scalar"])
@pytest.mark.parametrize("in_place", [False, True], ids=["out", "in_place"])
def test_positions_outside_the_table_give_zeros(backend, interleaved, shape, in_place, rng):
    """Positions (plus the offset) below 0 or at/after the table's end read no angle and give zeros, never a read
    past the table; the other tokens are rotated as usual."""
    x, cos, sin, _ = _case(rng, shape, "f32", max_pos=20)
    pos = np.array([0, 17, 18, -3, 40, 5], np.int32)  # + offset 2: 2, 19 inside; 20, -1, 42 outside; 7 inside
    want = _oracle(x, cos, sin, pos, 2, interleaved)
    assert (want[2:5] == 0).all() and (want[[0, 1, 5]] != 0).any()
    out = x.copy() if in_place else as_dtype(np.full(shape, np.nan), "f32")
    R.launch_rope(out if in_place else x, out, cos, sin, pos, 2, interleaved, backend)
    _check(out, want, "f32")


def test_tables_of_the_wrong_shape_are_refused(rng):
    x, cos, sin, pos = _case(rng, (2, 2, 8), "f32")
    for c, s in ((cos[:, :3], sin[:, :3]), (cos[:0], sin[:0]), (cos, sin[:5])):
        with pytest.raises(ValueError, match="RoPE tables"):
            R.launch_rope(x, np.empty_like(x), c, s, pos, 0, False, "cpu")
