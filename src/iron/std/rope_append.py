"""RoPE fused with the KV-cache append (issue 18/19): one launch where a decode step had three (``rope`` of q and k,
``kv_append`` of k, ``kv_append`` of v).

``x`` is the fused projection's output, (tokens, HQ + 2 HKV, D): each token's q heads, then its k heads, then its v
heads. For token t at position ``pos[t]`` (its angles: row pos[t] of the f32 ``cos``/``sin`` tables, as
``std/rope``) and cache row ``rows[t]``:

- q heads are rotated into ``q`` (tokens, HQ, D);
- k heads are rotated into ``k_cache[rows[t]]`` (cache (cache_rows, HKV, D));
- v heads are copied into ``v_cache[rows[t]]``.

Out of range (device data, so checked in the kernel, the same on every backend): a cache row outside [0,
cache_rows) is not written (as ``kv_append`` drops it); a position outside the tables, [0, max_pos), reads no angle,
so the token's rotated q and k values are zeros (as ``std/rope``). Nothing is read or written past an array.

Batch 1 passes the same array as ``pos`` and ``rows``; a batch of sequences with one cache each, seen as one (B x
max_len)-row cache, passes positions and b * max_len + position. Both layouts of ``std/rope`` (rotate-half,
interleaved); the same arithmetic (f32, rounded once). Layout: a thread owns one 16-byte vector (and, rotate-half,
its partner D / 2 further) of one head of one token; VEC = 1 is the scalar path (a pair a thread) for head dims or
device offsets that do not allow vectors. A SIMD group spans neighbouring heads, so it diverges only at the q/k and
k/v boundaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, constexpr, f32, i32, local_array, program_id, static_range, vload, vstore, where
from .elementwise import device_offset
from .rope import _itemsize, angle_row, check_tables, load_table, rope_tables

__all__ = ["launch_rope_append", "rope_append"]

#: iron build's default: rotate-half, 4-element vectors (valid in every dtype)
INTERLEAVED = False
VEC = 4


@func
def destination(tok, h, rows, HQ, HKV, D, crows):
    """(which buffer: 0 q, 1 k cache, 2 v cache, 3 none (a cache row outside [0, crows)); the element offset of
    head h's row there)."""
    which = 0
    off = (tok * HQ + h) * D
    if h >= HQ:
        r = rows[tok]
        which = where(r >= 0 and r < crows, where(h >= HQ + HKV, 2, 1), 3)
        off = (r * HKV + h - HQ - where(h >= HQ + HKV, HKV, 0)) * D
    return which, off


@func
def put(q, kc, vc, which, at, vals):
    if which == 0:
        vstore(q, at, vals)
    elif which == 1:
        vstore(kc, at, vals)
    elif which == 2:
        vstore(vc, at, vals)


@func
def put1(q, kc, vc, which, at, val):
    if which == 0:
        q[at] = val
    elif which == 1:
        kc[at] = val
    elif which == 2:
        vc[at] = val


@func
def pair_path(x, q, kc, vc, cos, sin, pos, rows, HQ, HKV, D, crows, npos, INTERLEAVED):
    """VEC = 1: thread i owns pair i % (D / 2) of head row i // (D / 2) (token * heads + head)."""
    i = program_id(0)
    half = D // 2
    heads = HQ + 2 * HKV
    p = i % half
    th = i // half
    tok = th // heads
    h = th % heads
    which, off = destination(tok, h, rows, HQ, HKV, D, crows)
    a = p
    b = p + half
    if INTERLEAVED:
        a = 2 * p
        b = a + 1
    x0 = cast(x[th * D + a], f32)
    x1 = cast(x[th * D + b], f32)
    r0 = x0
    r1 = x1
    if which < 2:
        at, ok = angle_row(pos, tok, 0, npos)
        row = at * half + p
        c = where(ok, cos[row], 0.0)
        s = where(ok, sin[row], 0.0)
        r0 = x0 * c - x1 * s
        r1 = x0 * s + x1 * c
    put1(q, kc, vc, which, off + a, r0)
    put1(q, kc, vc, which, off + b, r1)


@func
def vector_path(x, q, kc, vc, cos, sin, pos, rows, HQ, HKV, D, crows, npos, INTERLEAVED, VEC, DT):
    """A vector of VEC elements (rotate-half: and its partner D / 2 further) of one head of one token a thread."""
    half = D // 2
    P = VEC // (1 + INTERLEAVED)  # pairs a vector holds
    nv = (D // (2 - INTERLEAVED)) // VEC
    heads = HQ + 2 * HKV
    i = program_id(0)
    v = i % nv
    th = i // nv
    tok = th // heads
    h = th % heads
    which, off = destination(tok, h, rows, HQ, HKV, D, crows)
    a = v * VEC
    at, ok = angle_row(pos, tok, 0, npos)
    row = at * half + v * P  # the token's angles for this vector's pairs
    c = local_array(f32, P)
    s = local_array(f32, P)
    if which < 2:
        load_table(cos, row, c, P)
        load_table(sin, row, s, P)
        for j in static_range(P):
            c[j] = where(ok, c[j], 0.0)
            s[j] = where(ok, s[j], 0.0)
    oa = local_array(DT, VEC)
    if INTERLEAVED:
        xi = vload(x, th * D + a, VEC)
        for j in static_range(P):
            x0 = cast(xi[2 * j], f32)
            x1 = cast(xi[2 * j + 1], f32)
            if which >= 2:  # v (or nowhere): a copy
                oa[2 * j] = x0
                oa[2 * j + 1] = x1
            else:
                oa[2 * j] = x0 * c[j] - x1 * s[j]
                oa[2 * j + 1] = x0 * s[j] + x1 * c[j]
        put(q, kc, vc, which, off + a, oa)
    else:
        xa = vload(x, th * D + a, VEC)
        xb = vload(x, th * D + a + half, VEC)
        ob = local_array(DT, VEC)
        for j in static_range(VEC):
            x0 = cast(xa[j], f32)
            x1 = cast(xb[j], f32)
            if which >= 2:
                oa[j] = x0
                ob[j] = x1
            else:
                oa[j] = x0 * c[j] - x1 * s[j]
                ob[j] = x0 * s[j] + x1 * c[j]
        put(q, kc, vc, which, off + a, oa)
        put(q, kc, vc, which, off + a + half, ob)


@kernel
def rope_append(x: Tensor[T], q: Tensor[T], k_cache: Tensor[T], v_cache: Tensor[T], cos: Tensor[f32],
                sin: Tensor[f32], pos: Tensor[i32], rows: Tensor[i32], HQ: int, HKV: int, D: int, crows: int,
                npos: int, INTERLEAVED: constexpr, VEC: constexpr):
    """q = rope(x's q heads); k_cache[rows[t]] = rope(x's k heads); v_cache[rows[t]] = x's v heads (module
    docstring). Launch ``rope_append_grid`` threads."""
    if VEC == 1:
        pair_path(x, q, k_cache, v_cache, cos, sin, pos, rows, HQ, HKV, D, crows, npos, INTERLEAVED)
    else:
        vector_path(x, q, k_cache, v_cache, cos, sin, pos, rows, HQ, HKV, D, crows, npos, INTERLEAVED, VEC, T)


def plan_vec(dim: int, itemsize: int, interleaved: bool, aligned: bool) -> int:
    """16 bytes of elements, halved until the head's span (D / 2 rotate-half, D interleaved) is a multiple; 1 (the
    scalar path) when misaligned or when an interleaved vector would hold no whole pair."""
    span = dim if interleaved else dim // 2
    vec = 16 // itemsize if aligned else 1
    while vec > 1 and span % vec:
        vec //= 2
    return 1 if vec < 2 and interleaved else vec


def rope_append_grid(tokens: int, heads: int, dim: int, interleaved: bool, vec: int) -> int:
    if vec == 1:
        return tokens * heads * (dim // 2)
    return tokens * heads * ((dim if interleaved else dim // 2) // vec)


def launch_rope_append(x: Any, q: Any, k_cache: Any, v_cache: Any, cos: Any, sin: Any, pos: Any, rows: Any,
                       interleaved: bool = False, backend: str | None = None) -> None:
    """x (tokens, HQ + 2 HKV, D) -> q (tokens, HQ, D), k_cache/v_cache (cache_rows, HKV, D) at ``rows``."""
    tokens, heads, dim = x.shape
    hq, hkv = q.shape[1], k_cache.shape[1]
    if heads != hq + 2 * hkv:
        raise ValueError(f"x has {heads} heads a token; q and the caches need {hq} + 2 x {hkv}")
    aligned = not any((device_offset(a) or 0) % 16 for a in (x, q, k_cache, v_cache, cos, sin))
    vec = plan_vec(dim, _itemsize(x), interleaved, aligned)
    n = rope_append_grid(tokens, heads, dim, interleaved, vec)
    if n > 0:
        rope_append[n](x, q, k_cache, v_cache, cos, sin, pos, rows, hq, hkv, dim, int(k_cache.shape[0]),
                       check_tables(cos, sin, dim), interleaved, vec, backend=backend)


# -- registration: shape (tokens, HQ, HKV, D, cache rows) ---------------------------------------------------------


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    tokens, hq, hkv, d, cache = gen.shape
    rows = gen.rng.choice(cache, tokens, replace=False).astype(np.int32)
    cos, sin = rope_tables(cache + 7, d)
    return {"x": gen.random(shape=(tokens, hq + 2 * hkv, d)), "q": gen.poisoned(shape=(tokens, hq, d)),
            "k_cache": gen.random(shape=(cache, hkv, d)), "v_cache": gen.random(shape=(cache, hkv, d)),
            "cos": cos, "sin": sin, "pos": (rows + 7).astype(np.int32), "rows": rows}


def rotate(x: np.ndarray, pos: np.ndarray, interleaved: bool = False, base: float = 10000.0) -> np.ndarray:
    """float64 RoPE of x (tokens, heads, D) at positions pos (tokens,), from the angles themselves."""
    d = x.shape[-1]
    ang = pos.astype(np.float64)[:, None, None] * base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    c, s = np.cos(ang), np.sin(ang)
    x = x.astype(np.float64)
    x0, x1 = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :d // 2], x[..., d // 2:])
    r0, r1 = x0 * c - x1 * s, x0 * s + x1 * c
    if interleaved:
        return np.stack([r0, r1], -1).reshape(x.shape)
    return np.concatenate([r0, r1], -1)


def oracle(d: dict) -> np.ndarray:
    """The q output (the caches: tests/std/test_rope_append.py)."""
    hq = d["q"].shape[1]
    return rotate(d["x"][:, :hq], d["pos"])


def _reference(d: dict) -> np.ndarray:
    """NumPy in f32 from the same tables (the host baseline): q; the caches written as the kernel does."""
    x, hq, hkv = d["x"], d["q"].shape[1], d["k_cache"].shape[1]
    half = x.shape[-1] // 2
    c, s = d["cos"][d["pos"]][:, None, :], d["sin"][d["pos"]][:, None, :]
    qk = x[:, :hq + hkv].astype(np.float32)
    x0, x1 = qk[..., :half], qk[..., half:]
    r = np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], -1).astype(x.dtype)
    d["k_cache"][d["rows"]] = r[:, hq:]
    d["v_cache"][d["rows"]] = x[:, hq + hkv:]
    return r[:, :hq]


def _torch_reference(d: dict):
    """torch's unfused ops: table gathers, the rotation, two indexed copies into the caches."""
    import torch

    x, hq, hkv = d["x"], d["q"].shape[1], d["k_cache"].shape[1]
    half = x.shape[-1] // 2
    idx, rows = d["pos"].long(), d["rows"].long()
    c, s = d["cos"][idx][:, None, :], d["sin"][idx][:, None, :]
    qk = x[:, :hq + hkv].float()
    x0, x1 = qk[..., :half], qk[..., half:]
    r = torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1).to(x.dtype)
    d["k_cache"][rows] = r[:, hq:]
    d["v_cache"][rows] = x[:, hq + hkv:]
    return r[:, :hq]


bench("std/rope/rope_append", setup=_setup,
      launch=lambda d, be: launch_rope_append(d["x"], d["q"], d["k_cache"], d["v_cache"], d["cos"], d["sin"],
                                              d["pos"], d["rows"], False, be),
      output="q", references={"numpy": _reference, "torch": _torch_reference},
      bytes_moved=lambda s, n: 2 * s[0] * (s[1] + 2 * s[2]) * s[3] * n,
      flops=lambda s: 3 * s[0] * (s[1] + s[2]) * s[3],
      device_shapes=[(1, 32, 8, 64, 4096), (8, 32, 8, 128, 32768)])(rope_append)
test_kernel(oracle=oracle, domain="signed", shapes=[(1, 4, 2, 16, 32), (5, 6, 2, 64, 40), (3, 2, 1, 6, 9)],
            tolerance={"f32": (2e-6, 2e-5), "f16": (2e-3, 4e-3), "bf16": (1.6e-2, 1.6e-2)})(rope_append)
