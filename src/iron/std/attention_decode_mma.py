"""Attention decode's matrix-unit split kernel (issue 18): FlashDecoding's loop on the DSL's matrix fragments.

Why: the coalesced and staged kernels are bound by instruction issue, not by memory. Nsight Compute on the H200
(2026-12-04, bf16 32 x 8192, 32/8 heads, D 128; bench/results/2026-12-04-h200-s14-decode/) read "Compute (SM)
Throughput" 76 % (coalesced) and 83 % (staged) with 0.78-0.84 warps issued per scheduler and cycle, against DRAM
42 % and 35 %: about 20 instructions a thread for each K/V element, where the roofline at 4.3 TB/s allows about 12.
The scalar dot products cost G fused multiply-adds per element of K and again of V, plus the lane sums. Here the
tensor cores take both products (``mma``: mma.sync m16n8k16 on NVIDIA). One mma covers 16 x 16 elements of K (or V)
for all the query heads at once, so the arithmetic a K/V element costs drops from ~2 G scalar instructions to ~1/16.

``attn_decode_split_mma`` takes the arguments of ``attn_decode_split_coalesced`` up to SW (grid (NSPLIT * BLOCK,
HKV, B) with BLOCK = SW: one SIMD group a group, the early exit, the ``whole`` rule, the paged page window and the
outputs), then BN and STAGES:

1. the G query rows of the kv head are the M = 16 rows of an A operand (rows G .. 15 zero), staged once in shared
   memory; the chunk is walked in tiles of BN positions whose K and V rows are copied global -> shared by
   ``async_copy`` (16-byte pieces, rows past the chunk clamped to its last) into a ring of STAGES stages, STAGES - 1
   tiles in flight while one is computed (one ``async_wait`` and one barrier a tile, as the staged kernel);
   shared rows are padded to D + 8 elements, so the 8 rows a matrix load reads start in different banks;
2. per tile, S = Q K^T (16 x BN, f32) by D / 16 ``mma`` k-steps (K read transposed: ``frag_b(..., True)``), scaled to
   base 2 and masked past the chunk (``frag_mask``); the online softmax on the accumulator in registers (running
   row max m and sum l as row fragments, O rescaled by exp2(m_old - m_new)); then O += P V with P straight from the
   accumulator (``frag_to_a``, rounded to the input type as FlashAttention does) by BN / 16 k-steps;
3. at the end, rows g < G: the normalised output (``whole``) or the split's partial (po = O, pm = m in natural log
   units, pl = l), as ``attention_decode_coalesced.weigh_values`` writes them and ``attn_decode_combine`` reads them.

f16/bf16 only (matrix fragments read half types), G <= 16 (one row tile), D <= 256 (16 accumulator tiles); the
launch (``attention_decode.mma_config``) keeps BN a multiple of 16 and STAGES >= 2. On NVIDIA the element-wise
fragment ops run in the mma.sync accumulator registers; elsewhere (HIP, Metal, Vulkan: no lane layout for them)
the fragments take the scalar fallback, correct but slow, so the launch times this kernel on CUDA only
(``attention_decode``'s ``TUNING``); ``path="mma"`` forces it anywhere, for tests. Shared memory: (2 STAGES BN + 16)
(D + 8) elements (``mma_shared_bytes``).

Measured on the H200 (2026-12-05, bf16 32 x 8192, 32/8 heads, D 128; bench/results/2026-12-05-h200-s19-*): 270.7 us
= 3966 GB/s of K/V at BN 16, 2 stages, CHUNK 512 (GPU time; ``iron bench`` 272.5 us, torch SDPA 246-262 us), against
367.5 us for the best scalar kernel. Nsight Compute: DRAM 81 %, L2 92 %, SM 29 %: the kernel now waits on the memory
system, where the scalar ones issued an instruction on ~80 % of cycles.
"""

from __future__ import annotations

import math

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    constexpr,
    f32,
    fast_exp2,
    frag_a,
    frag_acc,
    frag_b,
    frag_mask,
    frag_row_max,
    frag_row_sum,
    frag_rows,
    frag_store,
    frag_to_a,
    group_id,
    i32,
    local_id,
    mma,
    shared,
    static_range,
)
from .attention_decode_coalesced import chunk_pages, kv_row, seq_len
from .gemm import H

#: the variant `iron build` compiles (launches pass their own): head dim 128, 4 query heads, 16-position tiles in 3
#: stages (30 KiB of shared memory: within Metal's 32 KiB)
D = 128
G = 4
CHUNK = 256
BLOCK = 32
VEC = 8
PAGED = False
SW = 32
BN = 16
STAGES = 3
LOG2E = 1.4426950408889634
PAD = 8  # elements of padding after each shared row (16 bytes of f16/bf16)


def mma_shared_bytes(d: int, itemsize: int, bn: int, stages: int, chunk: int, paged: bool) -> int:
    """The kernel's shared memory per group at ``itemsize`` bytes a K/V element (4 for SPIR-V's f16/bf16 words)."""
    return (2 * stages * bn + 16) * (d + PAD) * itemsize + (4 * chunk if paged else 4)


@func
def issue_kv(k, v, ks, vs, table, b, start, t, cnt, hk, L, MAXP, HKV, D, PAGED, BLOCK, VEC, BN, STAGES):
    """Start copying tile t's BN K and V rows (chunk rows t BN ..., clamped to the chunk's last, cnt - 1) into stage
    t % STAGES (rows D + PAD apart); consecutive threads copy consecutive VEC-element pieces of a row."""
    NV = D // VEC
    LD = D + PAD
    base = (t % STAGES) * BN * LD
    for i0 in static_range(0, BN * NV, BLOCK):
        i = i0 + local_id(0)
        if i0 + BLOCK <= BN * NV or i < BN * NV:
            row = kv_row(table, b, start + min(t * BN + i // NV, cnt - 1), hk, L, MAXP, HKV, D, PAGED)
            j = base + (i // NV) * LD + (i % NV) * VEC
            async_copy(ks, j, k, row + (i % NV) * VEC, VEC)
            async_copy(vs, j, v, row + (i % NV) * VEC, VEC)


@func
def stage_query(q, qs, head0, D, G, BLOCK, VEC):
    """The G query rows into rows 0 .. G - 1 of qs (asynchronous copies, in the first tile's commit group), zeros in
    rows G .. 15 (ordinary stores: visible after the first tile's barrier)."""
    NV = D // VEC
    LD = D + PAD
    for i in range(local_id(0), 16 * NV, BLOCK):
        r = i // NV
        c = (i % NV) * VEC
        if r < G:
            async_copy(qs, r * LD + c, q, (head0 + r) * D + c, VEC)
        else:
            for e in static_range(VEC):
                qs[r * LD + c + e] = 0.0


@func
def attend(qs, ks, vs, o, m, l, base, col0, cnt, scale2, D, BN):
    """One tile: S = Q K^T from the stage at ``base``, masked past the chunk, the online softmax, O += P V.
    Returns (o, m, l)."""
    LD = D + PAD
    s = frag_acc(1, BN // 16)
    for kk in static_range(D // 16):
        s = mma(frag_a(qs, 16 * kk, LD), frag_b(ks, base + 16 * kk, LD, True, BN // 16), s)
    s = frag_mask(s * scale2, 0, col0, cnt, False, -math.inf)
    m_new = max(m, frag_row_max(s))  # finite: every tile holds a position of the chunk
    p = fast_exp2(s - m_new)
    alpha = fast_exp2(m - m_new)
    l = l * alpha + frag_row_sum(p)
    o = o * alpha
    for kk in static_range(BN // 16):
        o = mma(frag_to_a(p, 16 * kk, H), frag_b(vs, base + 16 * kk * LD, LD, False, D // 16), o)
    return o, m_new, l


@kernel
def attn_decode_split_mma(q: Tensor[H], k: Tensor[H], v: Tensor[H], table: Tensor[i32], lens: Tensor[i32],
                          po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[H], HQ: int, HKV: int,
                          L: int, MAXP: int, NSPLIT: int, scale: float, D: constexpr, G: constexpr,
                          CHUNK: constexpr, BLOCK: constexpr, VEC: constexpr, PAGED: constexpr, SW: constexpr,
                          BN: constexpr, STAGES: constexpr):
    """``attn_decode_split`` on matrix fragments (the module docstring): the same arguments before BN, grid
    (NSPLIT * BLOCK, HKV, B) in groups of BLOCK = SW threads (one SIMD group), and results. BN a multiple of 16,
    STAGES >= 2, G <= 16, D a multiple of 16, f16/bf16."""
    LD = D + PAD
    qs = shared(H, 16 * LD)
    ks = shared(H, STAGES * BN * LD)
    vs = shared(H, STAGES * BN * LD)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    head0 = b * HQ + hk * G
    n = seq_len(lens, b, L, MAXP, PAGED)  # clamped to the cache; uniform over the group
    start = s * CHUNK
    if start >= n:  # the whole group: nothing of the sequence here; the combine never reads this split
        return
    cnt = min(n - start, CHUNK)
    whole = n <= CHUNK or NSPLIT == 1  # one split holds the sequence: normalise here, the combine skips it
    stage_query(q, qs, head0, D, G, BLOCK, VEC)  # first: the query's copies overlap the paged window's loads
    pg = shared(i32, CHUNK if PAGED else 1)  # paged: the chunk's row indices first (chunk_pages)
    tb, mp = chunk_pages(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK, PAGED)
    ntiles = (cnt + BN - 1) // BN  # uniform over the group, as the barriers in the loop need
    for t in static_range(STAGES - 1):
        if t < ntiles:
            issue_kv(k, v, ks, vs, pg, tb, start, t, cnt, hk, L, mp, HKV, D, PAGED, BLOCK, VEC, BN, STAGES)
        async_commit()  # also without copies: one group per tile, so the waits line up
    o = frag_acc(1, D // 16)
    m = frag_rows(1, -math.inf)
    l = frag_rows(1, 0.0)
    scale2 = scale * LOG2E
    for t in range(ntiles):
        async_wait(STAGES - 2)  # this thread's copies of tile t (and the query rows) have landed
        barrier()  # everyone's have, and everyone is done with tile t - 1, whose stage is refilled now
        if t + STAGES - 1 < ntiles:
            issue_kv(k, v, ks, vs, pg, tb, start, t + STAGES - 1, cnt, hk, L, mp, HKV, D, PAGED, BLOCK, VEC, BN,
                     STAGES)
        async_commit()
        o, m, l = attend(qs, ks, vs, o, m, l, (t % STAGES) * BN * LD, t * BN, cnt, scale2, D, BN)
    if whole:
        frag_store(out, head0 * D, D, o / l, G, D)
    else:
        frag_store(po, (head0 * NSPLIT + s) * D, NSPLIT * D, o, G, D)
        frag_store(pm, head0 * NSPLIT + s, NSPLIT, frag_acc() + m / LOG2E, G, 1)
        frag_store(pl, head0 * NSPLIT + s, NSPLIT, frag_acc() + l, G, 1)
