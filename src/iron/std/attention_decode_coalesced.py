"""Attention decode's split phases (issue 18): the helpers both split kernels share, and the coalesced split kernel.

``attn_decode_split_coalesced`` computes what ``attention_decode.attn_decode_split`` computes (one split's partial
attention for the G query heads of one kv head; the same arguments, partials and early exits) with a score phase laid
out like the P V phase. ``attn_decode_split`` gives each thread whole K rows: one warp load instruction touches 32
rows 2 KiB apart (32 L1 wavefronts at bf16 D 128), the next row is fetched only after the current dot product, and
the thread holds a whole K row beside its V vectors (252 registers at bf16 D 128, G 4 with NVRTC 13.5: two groups of
128 threads per SM). Here LANES consecutive lanes share a K row, lane dv holding its W = D / (LANES VEC) vectors dv,
dv + LANES, ... (so one SIMD-group load covers LANES vectors of each of SW / LANES rows, contiguous):

1. the thread's slice of the G query rows (G x W x VEC values, f32, pre-scaled) goes to registers, so the inner
   loop reads no shared memory, and no barrier comes before the scores;
2. the group walks the chunk BLOCK / LANES * UK rows at a time (a loop uniform over the group; rows past the chunk
   are clamped to its last and never written): a thread's UK rows' loads are in flight together, and the next
   step's are issued before this step's lane sums, so they overlap the shuffles;
3. each lane forms its G partial dots of each of its UK rows, and the LANES lanes of a row sum them with
   ``simd_shuffle_xor`` (``lane_sums``): while rows are left to split, reduce-scatter steps (each lane keeps half of
   its rows, adding its partner's copy of that half: one shuffle per two values), then a butterfly over the G values
   left; lanes end with whole scores of different rows and write them to the shared score array;
4. then the phases the per-thread kernel shares: ``chunk_weights`` (max and sum, SIMD-group reductions) and
   ``weigh_values`` (P V, U rows a step, and the output or the split's partial). The first U V rows' loads are
   issued before the first barrier of ``chunk_weights``.

The launch (``attention_decode.coalesced_config``) takes VEC = 4 elements for every dtype by default (8-byte
vectors of f16/bf16: half the query slice, K/V registers and P V accumulators of 16-byte ones) and LANES the
largest power of two dividing D / VEC and the SIMD width (32 at D 128 on NVIDIA, 8 on lavapipe with W = 4), so
the kernel is valid at every SIMD width and head size. NVRTC 13.5, sm_90, bf16 D 128, G 4, CHUNK 256, BLOCK 128: 80
registers with UK = U = 4, no spills (6 groups per SM by registers). On the H200 (2026-12-04, bf16 32 x 8192):
537.8 us at VEC 4, 420.2 us = 2555 GB/s at VEC 8 (SDPA 267.2); ncu at VEC 4: 85 registers, 30 % achieved occupancy.

A paged cache (``PAGED``) first writes the index of each chunk position's K/V row into shared memory
(``page_window``: the block table's loads and the divisions by the page size once per position, all in flight, and a
barrier), so each K/V row's address waits on one shared load rather than on a dependent global load of the block
table and two divisions (H200, bf16 32 x 8192: 2026-12-03, before any window: paged 685 us against contiguous 376,
55 %; 2026-12-05 with a window of page numbers, still dividing per copy: this kernel 42-65 %, the mma one 45-80 %;
with row indices: this kernel 110-120 %, the mma one 94-98 %, bench/results/2026-12-05-h200-s19-decode-paged-argmax).
In P V the coalesced kernel also loads the next step's U V rows into a second register buffer before the step's
arithmetic (``weigh_values``'s AHEAD; 85 registers at the default configuration instead of 80, no spills), where
the per-thread kernel loaded them after it and waited for them at every step; not yet measured either.
"""

from __future__ import annotations

import math

from ..frontend import func, kernel
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
    shared,
    simd_broadcast,
    simd_group,
    simd_lane,
    simd_max,
    simd_shuffle_xor,
    simd_sum,
    static_range,
    vload,
    where,
)

#: the variant `iron build` compiles (launches pass their own): 4-element vectors, 32 lanes a row, 4 rows a step
D = 128
G = 4
CHUNK = 64
BLOCK = 128
VEC = 4
PAGED = False
SW = 32
LANES = 32
UK = 4
U = 4


@func
def kv_row(table, b, j, hk, L, MAXP, HKV, D, PAGED):
    """Index of element 0 of position j's row of kv head hk of sequence b: contiguous (B, L, HKV, D); paged, the
    index ``chunk_pages`` left in its window (``table`` is the window ``pg``, MAXP the chunk's first position)."""
    if PAGED:
        return table[j - MAXP]
    return ((b * L + j) * HKV + hk) * D


@func
def seq_len(lens, b, L, MAXP, PAGED):
    """Sequence b's length, lens[b] clamped to the cache's positions (L, or MAXP pages of L when PAGED): a length past
    the cache attends over the whole cache (its rows only, never the next sequence's or past the buffer); lane 0's
    copy, broadcast: the same load in every lane, but only a broadcast tells the emitters it is uniform (loads are
    never taken for uniform), which makes the loops uniform and gives their shuffles the full lane mask."""
    n = simd_broadcast(lens[b], 0)
    if PAGED:
        return min(n, L * MAXP)
    return min(n, L)


@func
def load_query(q, qv, head0, dv, scale, D, G, W, VEC, LANES):
    """qv[(g W + w) VEC + e] = scale times element e of vector dv + w LANES of query row head0 + g (f32): the
    thread's slice of the G query rows, pre-scaled, in registers."""
    for g in static_range(G):
        for w in static_range(W):
            x = vload(q, (head0 + g) * D + (dv + w * LANES) * VEC, VEC)
            for e in static_range(VEC):
                qv[(g * W + w) * VEC + e] = x[e] * scale


@func
def load_rows(src, dst, table, b, start, j0, step, cnt, hk, dv0, L, MAXP, HKV, D, PAGED, NR, NVEC, VEC, VS):
    """dst[(r * NVEC + w) * VEC ..] = the VEC elements at vector dv0 + w * VS of chunk row j0 + r * step (clamped to
    the chunk's last row, cnt - 1), r < NR, w < NVEC: NR * NVEC independent vector loads, all in flight."""
    for r in static_range(NR):
        row = kv_row(table, b, start + min(j0 + r * step, cnt - 1), hk, L, MAXP, HKV, D, PAGED)
        for w in static_range(NVEC):
            x = vload(src, row + (dv0 + w * VS) * VEC, VEC)
            for e in static_range(VEC):
                dst[(r * NVEC + w) * VEC + e] = x[e]


@func
def page_window(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK):
    """pg[jj] = the index of element 0 of kv head hk's row of chunk position start + jj (jj < cnt), through the
    block table (pages of L positions, table (B, MAXP)), then a barrier. The divisions by the page size and the
    table's loads happen here, once per position and all in flight together, not once per copy of every tile: the
    rows' addresses then wait on one shared load (H200, 2026-12-05: paged decode at 45-80 % of contiguous when each
    copy divided by L and read a page number)."""
    for jj in range(local_id(0), cnt, BLOCK):
        j = start + jj
        page = table[b * MAXP + j // L]
        pg[jj] = ((page * L + j % L) * HKV + hk) * D
    barrier()


@func
def chunk_pages(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK, PAGED):
    """What the split kernels pass ``kv_row`` as (b, MAXP) beside ``pg`` (in table's place) for the chunk: paged, the
    window ``pg`` of the chunk's row indices filled first (``page_window``), then -1 and the chunk's start;
    contiguous, b and MAXP as they are (``pg`` unused). Returns (b, MAXP)."""
    tb = b
    mp = MAXP
    if PAGED:
        page_window(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK)
        tb = -1
        mp = start
    return tb, mp


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


@func
def chunk_weights(sc, mx, redm, redl, stat, den, cnt, G, CHUNK, BLOCK, NW):
    """Per head g: stat[g] = the chunk's max score (from each thread's mx[g]), the scores in ``sc`` become
    exp(s - stat[g]) in place, den[g] = their sum. Two barriers (one per reduction); the first publishes ``sc``."""
    reduce_heads(mx, redm, stat, G, NW, True)
    tot = local_array(f32, G)
    for g in static_range(G):
        tot[g] = 0.0
    for jj in range(local_id(0), cnt, BLOCK):
        for g in static_range(G):
            p = exp(sc[g * CHUNK + jj] - stat[g])
            sc[g * CHUNK + jj] = p
            tot[g] += p
    reduce_heads(tot, redl, den, G, NW, False)


@func
def weigh_values(v, vr, sc, acc_s, stat, den, table, po, pm, pl, out, b, start, cnt, hk, head0, s, whole, L, MAXP,
                 HKV, NSPLIT, D, G, CHUNK, BLOCK, VEC, PAGED, U, AHEAD):
    """P V over the chunk's weights ``sc``: thread t owns vector t % (D / VEC) of V's rows t // (D / VEC) + k TG
    (a SIMD group reads whole rows, coalesced), U rows a step (their loads in flight together; the first U are in
    ``vr``; rows past the chunk are clamped to its last and weighted 0), G x VEC sums in registers, reduced over the
    TG row sets in ``acc_s``. Then the normalised output (``whole``: the sequence fits in this split) or the split's
    partial (po, pm, pl). ``AHEAD``: the next step's U rows go in flight before this step's arithmetic (a second
    register buffer; rows past the chunk clamp to its last), so a step does not wait for its own loads."""
    NV = D // VEC
    TG = BLOCK // NV
    tid = local_id(0)
    dv = tid % NV
    tg = tid // NV
    acc = local_array(f32, G * VEC)
    for i in static_range(G * VEC):
        acc[i] = 0.0
    if tg < TG:
        for j0 in range(tg, cnt, TG * U):
            nxt = local_array(T, U * VEC if AHEAD else 1)
            if AHEAD:
                load_rows(v, nxt, table, b, start, j0 + TG * U, TG, cnt, hk, dv, L, MAXP, HKV, D, PAGED, U, 1, VEC, 1)
            for u in static_range(U):
                jj = j0 + u * TG
                jc = min(jj, cnt - 1)
                for g in static_range(G):
                    p = where(jj < cnt, sc[g * CHUNK + jc], 0.0)
                    for e in static_range(VEC):
                        acc[g * VEC + e] += p * vr[u * VEC + e]
            if AHEAD:
                for i in static_range(U * VEC):
                    vr[i] = nxt[i]
            elif j0 + TG * U < cnt:
                load_rows(v, vr, table, b, start, j0 + TG * U, TG, cnt, hk, dv, L, MAXP, HKV, D, PAGED, U, 1, VEC, 1)
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


@func
def lane_step(x, K, dv, G, UK, LANES):
    """Step K (1, 2, ...) of ``lane_sums``, over lane mask M = LANES >> K (nothing once M < 1). While UK >> K >= 1
    rows are left to split, a reduce-scatter step: of the 2H values x[0 .. 2H) (H = (UK >> K) G, row-major (row,
    head)), the lane keeps x[0 .. H) or x[H .. 2H) by its bit M, adds its partner's copy of that half and gives the
    other (one shuffle for two values), leaving the sums in x[0 .. H). Past that, a butterfly over x[0 .. G)."""
    M = LANES >> K
    if M >= 1:
        if UK >> K >= 1:
            H = (UK >> K) * G
            up = (dv & M) != 0
            for i in static_range(H):
                give = where(up, x[i], x[i + H])
                keep = where(up, x[i + H], x[i])
                x[i] = keep + simd_shuffle_xor(give, M)
        else:
            for g in static_range(G):
                x[g] += simd_shuffle_xor(x[g], M)


@func
def lane_sums(x, dv, G, UK, LANES):
    """x[u * G + g], this lane's part of head g's score of its row u (u < UK), summed over the LANES lanes that share
    the rows (LANES and UK powers of two, LANES up to 64, lanes dv = 0 .. LANES - 1 consecutive in a SIMD group,
    every lane of it here together). Afterwards,
    with RL = max(1, LANES / UK) and UP = max(1, UK / LANES), lane dv holds in x[i] (i < UP G) the sum for row
    (dv // RL) UP + i // G, head i % G; the RL lanes of a row agree."""
    lane_step(x, 1, dv, G, UK, LANES)
    lane_step(x, 2, dv, G, UK, LANES)
    lane_step(x, 3, dv, G, UK, LANES)
    lane_step(x, 4, dv, G, UK, LANES)
    lane_step(x, 5, dv, G, UK, LANES)
    lane_step(x, 6, dv, G, UK, LANES)


@func
def score_rows(k, kr, qv, sc, mx, table, b, start, j0, cnt, hk, dv, tgk, L, MAXP, HKV, D, PAGED, G, CHUNK, BLOCK,
               VEC, LANES, UK):
    """The G scores of chunk rows j0 + tgk + u TGK (u < UK; TGK = BLOCK / LANES row sets), whose vectors are in kr,
    into sc and the running maxima mx; the next step's rows go in flight into kr before the lanes' sums."""
    W = D // VEC // LANES
    TGK = BLOCK // LANES
    part = local_array(f32, UK * G)
    for u in static_range(UK):
        for g in static_range(G):
            t = 0.0
            for w in static_range(W):
                for e in static_range(VEC):
                    t += kr[(u * W + w) * VEC + e] * qv[(g * W + w) * VEC + e]
            part[u * G + g] = t
    if j0 + TGK * UK < cnt:
        load_rows(k, kr, table, b, start, j0 + TGK * UK + tgk, TGK, cnt, hk, dv, L, MAXP, HKV, D, PAGED, UK, W, VEC,
                  LANES)
    lane_sums(part, dv, G, UK, LANES)
    RL = max(1, LANES // UK)
    UP = max(1, UK // LANES)
    if dv % RL == 0:
        for i in static_range(UP * G):
            jj = j0 + tgk + ((dv // RL) * UP + i // G) * TGK
            if jj < cnt:
                sc[(i % G) * CHUNK + jj] = part[i]
                mx[i % G] = max(mx[i % G], part[i])


@kernel
def attn_decode_split_coalesced(q: Tensor[T], k: Tensor[T], v: Tensor[T], table: Tensor[i32], lens: Tensor[i32],
                                po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[T], HQ: int, HKV: int,
                                L: int, MAXP: int, NSPLIT: int, scale: float, D: constexpr, G: constexpr,
                                CHUNK: constexpr, BLOCK: constexpr, VEC: constexpr, PAGED: constexpr, SW: constexpr,
                                LANES: constexpr, UK: constexpr, U: constexpr):
    """``attn_decode_split`` with coalesced K reads (the module docstring): the same arguments before SW, grid
    (NSPLIT * BLOCK, HKV, B) in groups of (BLOCK, 1, 1), and results. LANES lanes (a power of two dividing SW and
    D / VEC) share a K row, each owning D / (LANES VEC) vectors of VEC elements, and score UK rows (a power of two)
    a step; the P V phase takes U rows of VEC-element vectors a step."""
    W = D // (LANES * VEC)
    NV = D // VEC
    TG = BLOCK // NV
    NW = BLOCK // SW
    sc = shared(f32, G * CHUNK)
    redm = shared(f32, G * NW)
    redl = shared(f32, G * NW)
    acc_s = shared(f32, TG * G * D)
    tid = local_id(0)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    head0 = b * HQ + hk * G
    dv = tid % LANES
    tgk = tid // LANES
    # the thread's slice of the G query rows, pre-scaled, in registers (loaded with lens, not after it)
    qv = local_array(f32, G * W * VEC)
    load_query(q, qv, head0, dv, scale, D, G, W, VEC, LANES)
    n = seq_len(lens, b, L, MAXP, PAGED)
    start = s * CHUNK
    if start >= n:  # the whole group: nothing of the sequence here; the combine never reads this split
        return
    cnt = min(n - start, CHUNK)
    whole = n <= CHUNK or NSPLIT == 1  # one split holds the sequence: normalise here, the combine skips it
    # paged: the chunk's row indices in shared memory first; the loads below then index ``pg`` (kv_row's
    # table[j - MAXP] with MAXP = start), contiguous caches ignore it
    pg = shared(i32, CHUNK if PAGED else 1)
    tb, mp = chunk_pages(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK, PAGED)
    kr = local_array(T, UK * W * VEC)
    load_rows(k, kr, pg, tb, start, tgk, BLOCK // LANES, cnt, hk, dv, L, mp, HKV, D, PAGED, UK, W, VEC, LANES)
    mx = local_array(f32, G)
    for g in static_range(G):
        mx[g] = -math.inf
    for j0 in range(0, cnt, BLOCK // LANES * UK):  # uniform over the group: every lane reaches the shuffles
        score_rows(k, kr, qv, sc, mx, pg, tb, start, j0, cnt, hk, dv, tgk, L, mp, HKV, D, PAGED, G, CHUNK, BLOCK,
                   VEC, LANES, UK)
    # the first V rows go in flight before the reductions' barriers
    vr = local_array(T, U * VEC)
    load_rows(v, vr, pg, tb, start, tid // NV, TG, cnt, hk, tid % NV, L, mp, HKV, D, PAGED, U, 1, VEC, 1)
    stat = local_array(f32, G)
    den = local_array(f32, G)
    chunk_weights(sc, mx, redm, redl, stat, den, cnt, G, CHUNK, BLOCK, NW)
    weigh_values(v, vr, sc, acc_s, stat, den, pg, po, pm, pl, out, tb, start, cnt, hk, head0, s, whole, L, mp,
                 HKV, NSPLIT, D, G, CHUNK, BLOCK, VEC, PAGED, U, True)
