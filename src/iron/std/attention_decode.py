"""Attention decode (issue 18): one query token per sequence over a KV cache, split over the KV length, combined.

Layouts: ``q``/``out`` are (B, HQ, D); the contiguous cache is ``k``/``v`` (B, L_max, HKV, D); the paged cache is
``k``/``v`` (num_pages, PAGE, HKV, D) with a block table (B, max_pages) of i32 page numbers: position j of sequence
b lives at row j % PAGE of page table[b, j // PAGE]. ``lens`` (B,) i32 are the sequence lengths (>= 1). Query head
h reads key/value head h // (HQ // HKV); scale 1/sqrt(D) unless given. f32, f16, bf16; all sums in f32.

Design (split-K decode, as FlashDecoding): ``attn_decode_split`` runs one group per (split, kv head, sequence). The
group takes CHUNK positions of the sequence and all G = HQ // HKV query heads that share the kv head, so each K/V
row is read once for G heads. A group whose split starts at or past the sequence's length returns at once (the cache
shape is fixed across decode steps, the length lives on the device, so most splits of a short sequence are empty).

1. loads: the G query rows, the thread's first K row (D / VEC 16-byte loads) and its first U V vectors are all issued
   before the first barrier (no load crosses one), so a short sequence waits for global memory once; the query
   rows, pre-scaled, go to shared memory (f32);
2. scores: each thread takes whole positions and writes G dot products to a shared score array (unrolled over the
   chunk: in a loop the compiler would hold all G x D query values in registers and spill);
3. per head, the chunk's max m and sum l of exp(s - m) (the scores become the weights in place), each a SIMD-group
   reduction (``simd_max``/``simd_sum``), one slot per SIMD group in shared memory, one barrier;
4. P V: thread t owns the 16-byte vector t % (D / VEC) of V's rows t // (D / VEC), t // (D / VEC) + TG, ... (a SIMD
   group reads whole rows, coalesced), U rows per step (loads in flight together), accumulating G x VEC sums in
   registers, reduced over the TG row sets in shared memory. A sequence that fits in split 0 is normalised and
   written to ``out`` here; otherwise the split's partial (out, m, l) goes to an f32 workspace.

``attn_decode_combine`` merges the splits per (sequence, head, column): out = sum_s e^(m_s - M) o_s /
sum_s e^(m_s - M) l_s, M the max of the m_s, over the ceil(len / CHUNK) splits that hold positions, in one
online-softmax pass that loads U splits' (m, l, o) at once without waiting for ``lens`` (splits past the length are
read and weighted 0); it leaves a sequence of one split alone. The paged cache differs only in the row address
(``PAGED``). Expected on the H200, not measured here: B 32 x L 8192 with CHUNK 256 runs 8192 groups, each reading
128 KiB of bf16 K/V in 16-byte loads.
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
    simd_group,
    simd_lane,
    simd_max,
    simd_sum,
    static_range,
    vload,
    where,
)
from ..runtime import get_backend
from .softmax import scratch_f32

#: the default variant (``iron build``): D 128, 4 query heads per kv head, 64-position chunks, 4-element vectors
D = 128
G = 4
CHUNK = 64
BLOCK = 128
VEC = 4
PAGED = False
SW = 32  # the SIMD width `iron build` assumes (launches pass the backend's)
U = 16  # splits per step of the combine kernel `iron build` compiles (launches pass min(16, splits rounded up))
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
def load_rows(src, dst, table, b, start, j0, step, cnt, hk, dv0, L, MAXP, HKV, D, PAGED, NR, NVEC, VEC):
    """dst[(r * NVEC + w) * VEC ..] = the VEC elements at vector dv0 + w of chunk row j0 + r * step (clamped to the
    chunk's last row, cnt - 1), r < NR, w < NVEC: NR * NVEC independent 16-byte loads, all in flight."""
    for r in static_range(NR):
        row = kv_row(table, b, start + min(j0 + r * step, cnt - 1), hk, L, MAXP, HKV, D, PAGED)
        for w in static_range(NVEC):
            x = vload(src, row + (dv0 + w) * VEC, VEC)
            for e in static_range(VEC):
                dst[(r * NVEC + w) * VEC + e] = x[e]


@func
def score_row(k, kr, sq, sc, mx, table, b, start, jj, cnt, hk, L, MAXP, HKV, D, PAGED, G, CHUNK, BLOCK, NV, VEC):
    """The G scores of chunk row jj from its K row in ``kr`` into sc and the running maxima mx; then the K row this
    thread scores next, jj + BLOCK, into kr."""
    dot = local_array(f32, G)
    for g in static_range(G):
        dot[g] = 0.0
    for e in static_range(D):
        x = kr[e]
        for g in static_range(G):
            dot[g] += x * sq[g * D + e]
    if jj + BLOCK < cnt:
        load_rows(k, kr, table, b, start, jj + BLOCK, BLOCK, cnt, hk, 0, L, MAXP, HKV, D, PAGED, 1, NV, VEC)
    for g in static_range(G):
        sc[g * CHUNK + jj] = dot[g]
        mx[g] = max(mx[g], dot[g])


@func
def reduce_heads(x, red, dst, G, NW, IS_MAX):
    """dst[g] = max (or sum) of x[g] over the group: a SIMD reduction per head, one slot per (head, SIMD group) in
    ``red`` (G * NW), one barrier, then every thread reads the G * NW slots back (unrolled: all loads in flight).
    ``red`` must not be reused by another reduction."""
    for g in static_range(G):
        r = simd_max(x[g]) if IS_MAX else simd_sum(x[g])
        if simd_lane() == 0:
            red[g * NW + simd_group()] = r
    barrier()
    for g in static_range(G):
        r = -math.inf if IS_MAX else 0.0
        for w in static_range(NW):
            r = max(r, red[g * NW + w]) if IS_MAX else r + red[g * NW + w]
        dst[g] = r


@kernel
def attn_decode_split(q: Tensor[T], k: Tensor[T], v: Tensor[T], table: Tensor[i32], lens: Tensor[i32],
                      po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[T], HQ: int, HKV: int, L: int,
                      MAXP: int, NSPLIT: int, scale: float, D: constexpr, G: constexpr, CHUNK: constexpr,
                      BLOCK: constexpr, VEC: constexpr, PAGED: constexpr, SW: constexpr):
    """One split's partial attention for G query heads of one kv head; launch (NSPLIT * BLOCK, HKV, B) threads in
    groups of (BLOCK, 1, 1). Partials: po (B, HQ, NSPLIT, D), pm and pl (B, HQ, NSPLIT); a sequence that fits in
    split 0 gets its output ``out`` (B, HQ, D) here instead. SW is the backend's SIMD width (a constexpr, so that
    the variant's shared arrays and unrolled reductions are sized at compile time, also in `iron build`)."""
    NV = D // VEC
    TG = BLOCK // NV
    NW = BLOCK // SW
    U = max(1, min(8, 256 // (G * VEC)))  # V rows per thread and P V step, their loads in flight together
    sq = shared(f32, G * D)
    sc = shared(f32, G * CHUNK)
    redm = shared(f32, G * NW)
    redl = shared(f32, G * NW)
    acc_s = shared(f32, TG * G * D)
    tid = local_id(0)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    head0 = b * HQ + hk * G
    qr = local_array(T, (G * D + BLOCK - 1) // BLOCK)  # loaded with lens, not after it
    for i0 in static_range(0, G * D, BLOCK):
        if i0 + tid < G * D:
            qr[i0 // BLOCK] = q[head0 * D + i0 + tid]
    n = lens[b]
    start = s * CHUNK
    if start >= n:  # the whole group: nothing of the sequence here; the combine never reads this split
        return
    cnt = min(n - start, CHUNK)
    whole = n <= CHUNK or NSPLIT == 1  # one split holds the sequence: normalise here, the combine skips it
    dv = tid % NV
    tg = tid // NV
    # this thread's first K row and first U V rows go in flight with q's, before the barrier (no load crosses one):
    # a short sequence then waits for global memory once
    kr = local_array(T, D)
    vr = local_array(T, U * VEC)
    load_rows(k, kr, table, b, start, tid, BLOCK, cnt, hk, 0, L, MAXP, HKV, D, PAGED, 1, NV, VEC)
    load_rows(v, vr, table, b, start, tg, TG, cnt, hk, dv, L, MAXP, HKV, D, PAGED, U, 1, VEC)
    for i0 in static_range(0, G * D, BLOCK):
        if i0 + tid < G * D:
            sq[i0 + tid] = qr[i0 // BLOCK] * scale
    barrier()
    # scores and the local max
    mx = local_array(f32, G)
    for g in static_range(G):
        mx[g] = -math.inf
    # unrolled where the unroll budget allows: in a loop the compiler hoists all G x D of sq into registers (spills)
    if (CHUNK + BLOCK - 1) // BLOCK * G * D <= 2048:
        for j0 in static_range(0, CHUNK, BLOCK):
            if j0 + tid < cnt:
                score_row(k, kr, sq, sc, mx, table, b, start, j0 + tid, cnt, hk, L, MAXP, HKV, D, PAGED, G, CHUNK,
                          BLOCK, NV, VEC)
    else:
        for jj in range(tid, cnt, BLOCK):
            score_row(k, kr, sq, sc, mx, table, b, start, jj, cnt, hk, L, MAXP, HKV, D, PAGED, G, CHUNK, BLOCK, NV,
                      VEC)
    stat = local_array(f32, G)
    reduce_heads(mx, redm, stat, G, NW, True)
    # weights in place and the local sum
    tot = local_array(f32, G)
    for g in static_range(G):
        tot[g] = 0.0
    for jj in range(tid, cnt, BLOCK):
        for g in static_range(G):
            p = exp(sc[g * CHUNK + jj] - stat[g])
            sc[g * CHUNK + jj] = p
            tot[g] += p
    den = local_array(f32, G)
    reduce_heads(tot, redl, den, G, NW, False)
    # P V: U rows per step (rows past the chunk are clamped to its last and weighted 0)
    acc = local_array(f32, G * VEC)
    for i in static_range(G * VEC):
        acc[i] = 0.0
    if tg < TG:
        for j0 in range(tg, cnt, TG * U):
            for u in static_range(U):
                jj = j0 + u * TG
                jc = min(jj, cnt - 1)
                for g in static_range(G):
                    p = where(jj < cnt, sc[g * CHUNK + jc], 0.0)
                    for e in static_range(VEC):
                        acc[g * VEC + e] += p * vr[u * VEC + e]
            if j0 + TG * U < cnt:
                load_rows(v, vr, table, b, start, j0 + TG * U, TG, cnt, hk, dv, L, MAXP, HKV, D, PAGED, U, 1, VEC)
        for g in static_range(G):
            for e in static_range(VEC):
                acc_s[(tg * G + g) * D + dv * VEC + e] = acc[g * VEC + e]
    barrier()
    for i0 in static_range(0, G * D, BLOCK):
        i = i0 + tid
        if i < G * D:
            t = 0.0
            for j in static_range(TG):
                t += acc_s[j * G * D + i]
            if whole:
                dg = den[0]
                for g in static_range(1, G):
                    dg = where(i // D == g, den[g], dg)
                out[head0 * D + i] = t / dg
            else:
                po[((head0 + i // D) * NSPLIT + s) * D + i % D] = t
    if tid == 0 and not whole:
        for g in static_range(G):
            pm[(head0 + g) * NSPLIT + s] = stat[g]
            pl[(head0 + g) * NSPLIT + s] = den[g]


@kernel
def attn_decode_combine(po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], lens: Tensor[i32], out: Tensor[T],
                        HQ: int, NSPLIT: int, D: int, CHUNK: int, U: constexpr):
    """out[b, h, d] from the splits' partials; one thread per output element (B * HQ * D threads). Only the splits
    that hold positions (ceil(lens[b] / CHUNK)) count; a sequence with one such split was written by the split
    kernel. One online-softmax pass, U splits per step: their 3 U loads are independent, all in flight."""
    i = program_id(0)
    bh = i // D
    n = lens[bh // HQ]
    mx = -math.inf
    num = 0.0
    den = 0.0
    for s0 in range(0, NSPLIT, U):
        # the loads do not wait for lens: splits past the length (unwritten) are read and weighted 0
        ms = local_array(f32, U)
        ls = local_array(f32, U)
        ov = local_array(f32, U)
        for u in static_range(U):
            sj = bh * NSPLIT + min(s0 + u, NSPLIT - 1)
            ms[u] = pm[sj]
            ls[u] = pl[sj]
            ov[u] = po[sj * D + i % D]
        ns = min((n + CHUNK - 1) // CHUNK, NSPLIT)
        if ns == 1:  # written by the split kernel
            return
        if s0 >= ns:
            break
        m_new = mx
        for u in static_range(U):
            ms[u] = where(s0 + u < ns, ms[u], -math.inf)
            m_new = max(m_new, ms[u])
        alpha = where(mx > -math.inf, exp(mx - m_new), 0.0)
        num *= alpha
        den *= alpha
        for u in static_range(U):
            w = exp(ms[u] - m_new)
            num += where(s0 + u < ns, w * ov[u], 0.0)
            den += where(s0 + u < ns, w * ls[u], 0.0)
        mx = m_new
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
        q, k, v, table, lens, po, pm, pl, out, hq, hkv, cache_len, maxp, nsplit, sc, d, hq // hkv, chunk, block,
        vec, paged, get_backend(backend).simd_width(), backend=backend)
    attn_decode_combine[b * hq * d, 128](po, pm, pl, lens, out, hq, nsplit, d, chunk, min(16, _pow2(nsplit)),
                                         backend=backend)


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
