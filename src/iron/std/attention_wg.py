"""``attn_prefill_wg``: attention prefill on the warpgroup matrix multiply (issue 18's FlashAttention-class kernel).

FlashAttention-2's loop written with tile-level constructs: ``tile_load`` stages Q once and K/V blocks STAGES deep
(the bulk tensor copy engine on NVIDIA sm_90, zeros past the sequence), ``warpgroup_mma`` computes S = Q K^T and
O += P V (wgmma on sm_90), and the online softmax runs on the accumulators in registers with the element-wise
fragment ops (``frag_mask``, ``frag_row_max``, ``frag_row_sum``, ``exp2``, row broadcasts): O never leaves the
accumulator, and P is the A operand of P V straight from the registers (warpgroup_mma with a fragment A).

One group is WG warpgroups; warpgroup w owns 64 query rows of one head (SIMD group 4w + i: rows 16i ..), all of
them sharing the K/V blocks of BN = 64 * NC tokens. S is NC accumulators of 64 columns (one per 64-token chunk:
warpgroup_mma's A operand is 64 x 64), each the sum of D / 64 calls over the head dim.
Shapes as ``attention.attn_prefill``: q/out (tokens, HQ, D), k/v (tokens, HKV, D); D 64 or 128; f16/bf16.
"""

from __future__ import annotations

import math

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    barrier,
    constexpr,
    fast_exp2,
    frag_acc,
    frag_mask,
    frag_row_max,
    frag_row_sum,
    frag_rows,
    frag_store,
    group_id,
    num_groups,
    shared,
    simd_group,
    static_range,
    tile_commit,
    tile_load,
    tile_wait,
    warpgroup_mma,
    warpgroup_wait,
)
from .gemm import H

__all__ = ["attn_prefill_wg", "shared_bytes"]

#: the constexprs `iron build` compiles by default: head dim 64, one 64-token chunk, one warpgroup, one stage (24 KiB)
D, NC, WG, STAGES, CAUSAL, PIPE = 64, 1, 1, 1, True, 0
Q_STAGE = 7  # the tile_load stage of the Q tile (K/V blocks use 0 .. STAGES - 1)


@func
def load_kv(k, v, sk, sv, blk, st, n, kld, hk, D, BN):
    """Start the copies of key/value block ``blk`` into stage ``st`` and commit them."""
    for d in static_range(D // 64):  # K as D / 64 slabs of BN x 64 (B^T of S = Q K^T: 64-element rows)
        tile_load(sk, st * BN * D + d * BN * 64, 64, k, (n, kld, kld, 0), (0, blk * BN, hk * D + 64 * d), BN, 64, st)
    tile_load(sv, st * BN * D, D, v, (n, kld, kld, 0), (0, blk * BN, hk * D), BN, D, st)  # V: BN x D, rows of D
    tile_commit(st)


@func
def scores(sq, sk, qi, kbase, c, D, BN):
    """S chunk c (16 x 64 per SIMD group): the sum over the head dim's 64-wide slabs of Q K^T."""
    s = frag_acc(1, 4)
    for d in static_range(D // 64):
        s = warpgroup_mma(sq, qi + d * 4096, sk, kbase + d * BN * 64 + c * 4096, 64, True, s)
    return s


@func
def softmax_pv(s0, s1, m, l, o, sv, vbase, row0, k0, n, scale2, D, NC, CAUSAL, MASK):
    """The online softmax of one block's scores (chunks s0, s1) in registers, O rescaled, then O += P V issued with
    P straight from the registers (warpgroup_mma's fragment A, rounded to the input type). Returns (o, m, l).
    MASK = False for a block every row of the tile sees whole (no key past the sequence or the diagonal): the mask's
    compares and selects per score are skipped, the results the same."""
    x0 = s0 * scale2
    if MASK:
        x0 = frag_mask(x0, row0, k0, n, CAUSAL, -math.inf)
    mx = frag_row_max(x0)
    x1 = x0
    if NC == 2:
        x1 = s1 * scale2
        if MASK:
            x1 = frag_mask(x1, row0, k0 + 64, n, CAUSAL, -math.inf)
        mx = max(mx, frag_row_max(x1))
    m_new = max(m, mx)
    alpha = fast_exp2(m - m_new)
    p0 = fast_exp2(x0 - m_new)
    tot = frag_row_sum(p0)
    o_new = warpgroup_mma(p0, 0, sv, vbase, D, False, o * alpha)
    if NC == 2:
        p1 = fast_exp2(x1 - m_new)
        tot = tot + frag_row_sum(p1)
        o_new = warpgroup_mma(p1, 0, sv, vbase + 64 * D, D, False, o_new)
    return o_new, m_new, l * alpha + tot


@func
def refill(k, v, sk, sv, j, nblk, n, kld, hk, D, BN, STAGES):
    """In the step of block j: the stage of block j - 1 is free; start block j - 1 + STAGES into it."""
    nxt = j - 1 + STAGES
    if nxt < nblk:
        load_kv(k, v, sk, sv, nxt, nxt % STAGES, n, kld, hk, D, BN)


@kernel
def attn_prefill_wg(q: Tensor[H], k: Tensor[H], v: Tensor[H], out: Tensor[H], n: int, qld: int, kld: int,
                    HQ: int, HKV: int, scale: float, D: constexpr, NC: constexpr, WG: constexpr,
                    STAGES: constexpr, CAUSAL: constexpr, PIPE: constexpr):
    """out = softmax(scale * Q K^T [causal]) V per query head (GQA). qld = HQ * D, kld = HKV * D (the row strides
    of q and k/v). Launch (ceil(n / (64 WG)) * G, HQ) threads in groups of (G, 1), G = WG * 4 * simd_size();
    STAGES >= 2 (block j + 1's keys arrive while block j's values are still read).

    PIPE = 1: software-pipelined as FlashAttention-3 within a warpgroup: the scores of block j + 1 are issued before the
    softmax of block j, so the tensor cores work while the lanes run the softmax. Two sets of score accumulators
    (a, b) alternate, the loop unrolled by two. PIPE = 0: one block at a time (fewer registers)."""
    BN = 64 * NC
    BM = 64 * WG
    sq = shared(H, BM * D)  # per warpgroup D / 64 slabs of 64 x 64
    sk = shared(H, STAGES * BN * D)
    sv = shared(H, STAGES * BN * D)
    w = simd_group()
    wg = w // 4
    r16 = (w % 4) * 16  # this SIMD group's rows within its warpgroup's 64
    h = group_id(1)
    hk = h // (HQ // HKV)
    tile = group_id(0)
    if CAUSAL:  # the last query tiles have the most key blocks: start them first (a shorter tail of the last wave)
        tile = num_groups(0) - 1 - tile
    q0 = tile * BM
    row0 = q0 + wg * 64 + r16  # this SIMD group's first query row
    for d in static_range(D // 64):
        for g in static_range(WG):
            tile_load(sq, (g * (D // 64) + d) * 4096, 64, q, (n, qld, qld, 0), (0, q0 + g * 64, h * D + 64 * d), 64,
                      64, Q_STAGE)
    tile_commit(Q_STAGE)
    kend = n
    if CAUSAL:
        kend = min(n, q0 + BM)
    nblk = (kend + BN - 1) // BN
    nfree = n // BN  # blocks before nfree need no mask: every key is in the sequence and (causal) before the tile
    if CAUSAL:
        nfree = min(n, q0 + 1) // BN
    for s in static_range(STAGES - 1):
        if s < nblk:
            load_kv(k, v, sk, sv, s, s, n, kld, hk, D, BN)
    scale2 = scale * 1.4426950408889634  # exp(x) = exp2(x log2(e))
    qi = wg * (D // 64) * 4096
    m = frag_rows(1, -math.inf)
    l = frag_rows(1, 0.0)
    o = frag_acc(1, D // 16)
    tile_wait(Q_STAGE)
    if PIPE == 0:  # one block at a time: issue its scores, wait, softmax, P V
        for j in range(nblk):
            st = j % STAGES
            barrier()  # every warpgroup is done with block j - 1: its stage and P may be overwritten
            nxt = j + STAGES - 1
            if nxt < nblk:
                load_kv(k, v, sk, sv, nxt, nxt % STAGES, n, kld, hk, D, BN)
            tile_wait(st)
            c0 = scores(sq, sk, qi, st * BN * D, 0, D, BN)
            c1 = frag_acc(1, 4)  # unused with one chunk (not a copy of c0: its registers are still being written)
            if NC == 2:
                c1 = scores(sq, sk, qi, st * BN * D, 1, D, BN)
            warpgroup_wait(0)
            if j < nfree:
                o, m, l = softmax_pv(c0, c1, m, l, o, sv, st * BN * D, row0, j * BN, n, scale2, D, NC, CAUSAL, False)
            else:
                o, m, l = softmax_pv(c0, c1, m, l, o, sv, st * BN * D, row0, j * BN, n, scale2, D, NC, CAUSAL, True)
            warpgroup_wait(0)
        if row0 < n:
            frag_store(out, row0 * qld + h * D, qld, o / l, n - row0, D)
        return
    tile_wait(0)
    a0 = scores(sq, sk, qi, 0, 0, D, BN)
    a1 = frag_acc(1, 4)
    if NC == 2:
        a1 = scores(sq, sk, qi, 0, 1, D, BN)
    b0 = frag_acc(1, 4)
    b1 = frag_acc(1, 4)
    for j in range(0, nblk, 2):
        warpgroup_wait(0)  # block j's scores and block j - 1's P V are complete
        barrier()  # in every warpgroup: block j - 1's stage and P are free
        refill(k, v, sk, sv, j, nblk, n, kld, hk, D, BN, STAGES)
        if j + 1 < nblk:
            st = (j + 1) % STAGES
            tile_wait(st)
            b0 = scores(sq, sk, qi, st * BN * D, 0, D, BN)
            if NC == 2:
                b1 = scores(sq, sk, qi, st * BN * D, 1, D, BN)
        o, m, l = softmax_pv(a0, a1, m, l, o, sv, (j % STAGES) * BN * D, row0, j * BN, n, scale2, D, NC, CAUSAL,
                             True)
        if j + 1 < nblk:
            warpgroup_wait(0)
            barrier()
            refill(k, v, sk, sv, j + 1, nblk, n, kld, hk, D, BN, STAGES)
            if j + 2 < nblk:
                st = (j + 2) % STAGES
                tile_wait(st)
                a0 = scores(sq, sk, qi, st * BN * D, 0, D, BN)
                if NC == 2:
                    a1 = scores(sq, sk, qi, st * BN * D, 1, D, BN)
            o, m, l = softmax_pv(b0, b1, m, l, o, sv, ((j + 1) % STAGES) * BN * D, row0, (j + 1) * BN, n, scale2,
                                 D, NC, CAUSAL, True)
    warpgroup_wait(0)
    if row0 < n:
        frag_store(out, row0 * qld + h * D, qld, o / l, n - row0, D)


def shared_bytes(d: int, nc: int, wg: int, stages: int) -> int:
    """attn_prefill_wg's shared arrays (16-bit inputs): Q, the K and V stages."""
    bn, bm = 64 * nc, 64 * wg
    return 2 * (bm * d + 2 * stages * bn * d)
