"""Attention decode (issue 18): one query token per sequence over a KV cache, split over the KV length, combined.

Layouts: ``q``/``out`` are (B, HQ, D); the contiguous cache is ``k``/``v`` (B, L_max, HKV, D); the paged cache is
``k``/``v`` (num_pages, PAGE, HKV, D) with a block table (B, max_pages) of i32 page numbers: position j of sequence
b lives at row j % PAGE of page table[b, j // PAGE]. ``lens`` (B,) i32 are the sequence lengths (>= 1). Query head
h reads key/value head h // (HQ // HKV); scale 1/sqrt(D) unless given. f32, f16, bf16; all sums in f32.

Design (split-K decode, as FlashDecoding): ``attn_decode_split`` runs one group per (split, kv head, sequence). The
group takes CHUNK positions of the sequence and all G = HQ // HKV query heads that share the kv head, so each K/V
row is read once for G heads:

1. the G query rows, pre-scaled, go to shared memory (f32);
2. scores: each thread takes whole positions, reading its K row as D / VEC 16-byte loads (unrolled: all in flight),
   and writes G dot products to a shared score array;
3. per head, the chunk's max m and sum l of exp(s - m) (the scores become the weights in place);
4. P V: thread t owns the 16-byte vector t % (D / VEC) of V's rows t // (D / VEC), t // (D / VEC) + TG, ... (a SIMD
   group reads whole rows, coalesced), accumulating G x VEC sums in registers, reduced over the TG row sets in
   shared memory; the split's partial (out, m, l) goes to an f32 workspace.

``attn_decode_combine`` merges the splits per (sequence, head, column): out = sum_s e^(m_s - M) o_s /
sum_s e^(m_s - M) l_s, M the max of the m_s (splits past a sequence's length have m = -inf, l = 0, o = 0). The paged
cache differs only in the row address (``PAGED``). Expected on the H200, not measured here: B 32 x L 8192 with
CHUNK 256 runs 8192 groups, each reading 512 KiB of K/V in 16-byte loads.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    constexpr,
    exp,
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    program_id,
    shared,
    static_range,
    vload,
)
from .softmax import scratch_f32

#: the default variant (``iron build``): D 128, 4 query heads per kv head, 64-position chunks, 4-element vectors
D = 128
G = 4
CHUNK = 64
BLOCK = 128
VEC = 4
PAGED = False
#: the paged cache's page size (positions per page)
PAGE = 16


@func
def kv_row(table, b, j, hk, L, MAXP, HKV, D, PAGED):
    """Index of element 0 of position j's row of kv head hk of sequence b: contiguous (B, L, HKV, D), or paged
    (pages of L positions, table (B, MAXP))."""
    if PAGED:
        page = table[b * MAXP + j // L]
        return ((page * L + j % L) * HKV + hk) * D
    return ((b * L + j) * HKV + hk) * D


@func
def group_reduce_to(red, dst, off, tid, G, BLOCK, IS_MAX):
    """dst[off + g] = max (or sum) of red[g * BLOCK .. g * BLOCK + BLOCK - 1], by threads 0 .. G - 1, between two
    barriers."""
    barrier()
    if tid < G:
        r = -math.inf if IS_MAX else 0.0
        for i in range(BLOCK):
            x = red[tid * BLOCK + i]
            r = max(r, x) if IS_MAX else r + x
        dst[off + tid] = r
    barrier()


@kernel
def attn_decode_split(q: Tensor[T], k: Tensor[T], v: Tensor[T], table: Tensor[i32], lens: Tensor[i32],
                      po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], HQ: int, HKV: int, L: int, MAXP: int,
                      NSPLIT: int, scale: float, D: constexpr, G: constexpr, CHUNK: constexpr, BLOCK: constexpr,
                      VEC: constexpr, PAGED: constexpr):
    """One split's partial attention for G query heads of one kv head; launch (NSPLIT * BLOCK, HKV, B) threads in
    groups of (BLOCK, 1, 1). Partials: po (B, HQ, NSPLIT, D), pm and pl (B, HQ, NSPLIT)."""
    NV = D // VEC
    TG = BLOCK // NV
    sq = shared(f32, G * D)
    sc = shared(f32, G * CHUNK)
    red = shared(f32, G * BLOCK)
    stat = shared(f32, 2 * G)
    acc_s = shared(f32, TG * G * D)
    tid = local_id(0)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    start = s * CHUNK
    cnt = min(lens[b] - start, CHUNK)
    head0 = b * HQ + hk * G
    for i in range(tid, G * D, BLOCK):
        sq[i] = q[head0 * D + i] * scale
    barrier()
    # scores and the local max
    mx = local_array(f32, G)
    for g in static_range(G):
        mx[g] = -math.inf
    for jj in range(tid, cnt, BLOCK):
        row = kv_row(table, b, start + jj, hk, L, MAXP, HKV, D, PAGED)
        dot = local_array(f32, G)
        for g in static_range(G):
            dot[g] = 0.0
        for dv in static_range(NV):
            kv = vload(k, row + dv * VEC, VEC)
            for g in static_range(G):
                for e in static_range(VEC):
                    dot[g] += kv[e] * sq[g * D + dv * VEC + e]
        for g in static_range(G):
            sc[g * CHUNK + jj] = dot[g]
            mx[g] = max(mx[g], dot[g])
    for g in static_range(G):
        red[g * BLOCK + tid] = mx[g]
    group_reduce_to(red, stat, 0, tid, G, BLOCK, True)
    # weights in place and the local sum
    for g in static_range(G):
        m = stat[g]
        tot = 0.0
        for jj in range(tid, cnt, BLOCK):
            p = exp(sc[g * CHUNK + jj] - m)
            sc[g * CHUNK + jj] = p
            tot += p
        red[g * BLOCK + tid] = tot
    group_reduce_to(red, stat, G, tid, G, BLOCK, False)
    # P V
    dv = tid % NV
    tg = tid // NV
    acc = local_array(f32, G * VEC)
    for i in static_range(G * VEC):
        acc[i] = 0.0
    if tg < TG:
        for jj in range(tg, cnt, TG):
            row = kv_row(table, b, start + jj, hk, L, MAXP, HKV, D, PAGED)
            vv = vload(v, row + dv * VEC, VEC)
            for g in static_range(G):
                p = sc[g * CHUNK + jj]
                for e in static_range(VEC):
                    acc[g * VEC + e] += p * vv[e]
        for g in static_range(G):
            for e in static_range(VEC):
                acc_s[(tg * G + g) * D + dv * VEC + e] = acc[g * VEC + e]
    barrier()
    for i in range(tid, G * D, BLOCK):
        t = 0.0
        for j in range(TG):
            t += acc_s[j * G * D + i]
        po[((head0 + i // D) * NSPLIT + s) * D + i % D] = t
    if tid < G:
        pm[(head0 + tid) * NSPLIT + s] = stat[tid]
        pl[(head0 + tid) * NSPLIT + s] = stat[G + tid]


@kernel
def attn_decode_combine(po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[T], NSPLIT: int, D: int):
    """out[b, h, d] from the splits' partials; one thread per output element (B * HQ * D threads)."""
    i = program_id(0)
    bh = i // D
    mx = -math.inf
    for s in range(NSPLIT):
        mx = max(mx, pm[bh * NSPLIT + s])
    num = 0.0
    den = 0.0
    if mx > -math.inf:
        for s in range(NSPLIT):
            w = exp(pm[bh * NSPLIT + s] - mx)
            num += w * po[(bh * NSPLIT + s) * D + i % D]
            den += w * pl[bh * NSPLIT + s]
    out[i] = num / den if den > 0.0 else 0.0


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan_chunk(lmax: int) -> int:
    """Positions per split: about 8 splits for short caches (16 positions at least), 256 from 1025 positions on."""
    return min(256, max(16, _pow2(-(-lmax // 8))))


def _launch(q, k, v, table, lens, out, cache_len: int, maxp: int, lmax: int, paged: bool, scale, backend, chunk):
    b, hq, d = q.shape
    hkv = k.shape[2]
    if hq % hkv or d % 16 or k.shape[-1] != d or tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"attention decode: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit")
    chunk = chunk or plan_chunk(lmax)
    nsplit = -(-lmax // chunk)
    vec = 16 // q.dtype.itemsize
    block = 128
    po, pm, pl = scratch_f32(q, b * hq * nsplit * d), scratch_f32(q, b * hq * nsplit), scratch_f32(q, b * hq * nsplit)
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    attn_decode_split[(nsplit * block, hkv, b), (block, 1, 1)](
        q, k, v, table, lens, po, pm, pl, hq, hkv, cache_len, maxp, nsplit, sc, d, hq // hkv, chunk, block, vec,
        paged, backend=backend)
    attn_decode_combine[b * hq * d, 128](po, pm, pl, out, nsplit, d, backend=backend)


def launch_decode(q: Any, k: Any, v: Any, lens: Any, out: Any, scale: float | None = None,
                  backend: str | None = None, chunk: int | None = None) -> None:
    """out (B, HQ, D) = attention of q over the first lens[b] positions of the contiguous cache (B, L_max, HKV, D)."""
    lmax = k.shape[1]
    _launch(q, k, v, lens, lens, out, lmax, 0, lmax, False, scale, backend, chunk)


def launch_decode_paged(q: Any, k: Any, v: Any, table: Any, lens: Any, out: Any, scale: float | None = None,
                        backend: str | None = None, chunk: int | None = None) -> None:
    """As launch_decode over the paged cache (num_pages, PAGE, HKV, D) and block table (B, max_pages)."""
    page, maxp = k.shape[1], table.shape[1]
    _launch(q, k, v, table, lens, out, page, maxp, page * maxp, True, scale, backend, chunk)


# --- registration ---------------------------------------------------------------------------------------------------


def _lens(gen: InputGen, b: int, lmax: int) -> np.ndarray:
    """Ragged lengths in [1, lmax] for host shapes (one at lmax); every sequence full for device shapes (>= 1024)."""
    if lmax >= 1024:
        return np.full(b, lmax, np.int32)
    lens = gen.rng.integers(1, lmax + 1, b).astype(np.int32)
    lens[0] = lmax
    return lens


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    b, lmax, hq, hkv, d = gen.shape
    return {"q": gen.random(shape=(b, hq, d)), "k": gen.random(shape=(b, lmax, hkv, d)),
            "v": gen.random(shape=(b, lmax, hkv, d)), "lens": _lens(gen, b, lmax),
            "out": gen.poisoned(shape=(b, hq, d))}


def _setup_paged(gen: InputGen) -> dict[str, np.ndarray]:
    """A shuffled pool with a few spare pages: no sequence's pages are consecutive or in order."""
    b, lmax, hq, hkv, d = gen.shape
    maxp = -(-lmax // PAGE)
    npages = b * maxp + 3
    table = gen.rng.permutation(npages)[: b * maxp].reshape(b, maxp).astype(np.int32)
    return {"q": gen.random(shape=(b, hq, d)), "k": gen.random(shape=(npages, PAGE, hkv, d)),
            "v": gen.random(shape=(npages, PAGE, hkv, d)), "table": table, "lens": _lens(gen, b, lmax),
            "out": gen.poisoned(shape=(b, hq, d))}


def _attend(q: np.ndarray, keys: np.ndarray, vals: np.ndarray, scale: float) -> np.ndarray:
    """float64 softmax(scale q k^T) v of one query row over (n, D) keys and values."""
    s = scale * keys @ q
    p = np.exp(s - s.max())
    return (p / p.sum()) @ vals


def oracle(d: dict, scale: float | None = None) -> np.ndarray:
    """float64, position by position: out[b, h] over k[b, :lens[b], h // (HQ / HKV)]."""
    q, k, v = (d[x].astype(np.float64) for x in ("q", "k", "v"))
    b, hq, dim = q.shape
    rep = hq // k.shape[2]
    sc = 1.0 / np.sqrt(dim) if scale is None else scale
    out = np.empty_like(q)
    for i in range(b):
        n = int(d["lens"][i])
        for h in range(hq):
            out[i, h] = _attend(q[i, h], k[i, :n, h // rep], v[i, :n, h // rep], sc)
    return out


def oracle_paged(d: dict, scale: float | None = None) -> np.ndarray:
    """float64: each position's row looked up through the block table, then as ``oracle``."""
    q, k, v = (d[x].astype(np.float64) for x in ("q", "k", "v"))
    b, hq, dim = q.shape
    page, rep = k.shape[1], hq // k.shape[2]
    sc = 1.0 / np.sqrt(dim) if scale is None else scale
    out = np.empty_like(q)
    for i in range(b):
        pos = np.arange(int(d["lens"][i]))
        pages = d["table"][i][pos // page].astype(np.int64)
        for h in range(hq):
            out[i, h] = _attend(q[i, h], k[pages, pos % page, h // rep], v[pages, pos % page, h // rep], sc)
    return out


def _torch_sdpa(q, k, v, lens):
    """torch SDPA over (B, H, 1, D) queries and (B, HKV, L, D) keys, a padding mask from lens, enable_gqa."""
    import torch
    import torch.nn.functional as F

    mask = torch.arange(k.shape[1], device=k.device)[None, :] < lens.long()[:, None]
    o = F.scaled_dot_product_attention(q.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2),
                                       attn_mask=mask[:, None, None, :], enable_gqa=q.shape[1] != k.shape[2])
    return o.squeeze(2)


def _torch_paged(d: dict):
    """The block table gathered into a contiguous cache (torch indexing), then SDPA."""
    b, maxp = d["table"].shape
    idx = d["table"].long()
    k = d["k"][idx].reshape(b, maxp * d["k"].shape[1], *d["k"].shape[2:])
    v = d["v"][idx].reshape(b, maxp * d["v"].shape[1], *d["v"].shape[2:])
    return _torch_sdpa(d["q"], k, v, d["lens"])


class _Paged:
    """``attn_decode_split`` registered again for the paged cache (the registry keeps one entry per object)."""

    def __init__(self):
        self.fn = attn_decode_split.fn
        self.kernel = attn_decode_split

    def __repr__(self) -> str:
        return "<iron kernel attn_decode_split (paged)>"


def _kv_bytes(shape, itemsize) -> int:
    b, lmax, hq, hkv, d = shape
    return (2 * b * lmax * hkv + 2 * b * hq) * d * itemsize


def _flops(shape) -> int:
    b, lmax, hq, _, d = shape
    return 4 * b * hq * lmax * d


#: f32: sums of D products and of L weights; f16/bf16: the output rounded once
_TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}
_DEVICE = [(32, 8192, 32, 8, 128), (8, 32768, 32, 8, 128), (64, 2048, 32, 4, 64)]

bench("std/attention/decode", setup=_setup,
      launch=lambda d, be: launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, be),
      references={"numpy": lambda d: oracle(d).astype(d["q"].dtype),
                  "torch": lambda d: _torch_sdpa(d["q"], d["k"], d["v"], d["lens"])},
      bytes_moved=_kv_bytes, flops=_flops, device_shapes=_DEVICE)(attn_decode_split)
test_kernel(oracle=oracle, domain="signed", shapes=[(3, 40, 4, 2, 64), (2, 21, 2, 1, 128)],
            tolerance=_TOL)(attn_decode_split)

_paged = _Paged()
bench("std/attention/decode_paged", setup=_setup_paged,
      launch=lambda d, be: launch_decode_paged(d["q"], d["k"], d["v"], d["table"], d["lens"], d["out"], None, be),
      references={"numpy": lambda d: oracle_paged(d).astype(d["q"].dtype), "torch": _torch_paged},
      bytes_moved=_kv_bytes, flops=_flops, device_shapes=_DEVICE)(_paged)
test_kernel(oracle=oracle_paged, domain="signed", shapes=[(3, 40, 4, 2, 64), (2, 21, 2, 1, 128)],
            tolerance=_TOL)(_paged)
