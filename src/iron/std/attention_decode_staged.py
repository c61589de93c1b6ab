"""Attention decode's staged split kernel (issue 18): K and V tiles pipelined through shared memory by asynchronous
copies, scored and weighed in one pass with an online softmax (as FlashDecoding).

Why: the coalesced kernel (``attention_decode_coalesced``) reached 2855 GB/s of K/V on the H200 (bf16 32 x 8192, 32/8
heads, D 128) against a 4350 GB/s target (torch SDPA ~4150). Its phases run one after another within a group (the
chunk's K rows into registers and the scores, then the softmax's barriers, then V), and the bytes a thread keeps in
flight are bounded by its registers. Here the copies land in shared memory, so a group keeps STAGES - 1 tiles of
K and V in flight while it computes the current one, and no register holds a row waiting for memory.

``attn_decode_split_staged`` takes the arguments of ``attn_decode_split_coalesced`` up to SW (the same grid, groups,
early exit, ``whole`` rule, paged page window and outputs), then LANES, R and STAGES:

1. the chunk is walked in tiles of R rows. Each tile's K and V rows are copied global -> shared by ``async_copy`` in
   VEC-element pieces (16 bytes at the launch's VEC), each thread issuing its share of the R D / VEC pieces of each,
   into a ring of STAGES stages; rows past the chunk are clamped to its last (the copies read valid memory, every
   stage row is written) and weighted 0. Tiles 0 .. STAGES - 2 go first (one ``async_commit`` each, also when
   there is no such tile, so the count of groups stays uniform); then per tile t: ``async_wait(STAGES - 2)`` (tile
   t has landed), one ``barrier()`` (everyone's copies are visible, and everyone has finished tile t - 1, whose
   stage is refilled next), tile t + STAGES - 1 is issued, and tile t is computed: one barrier per tile;
2. the rows are shared as in the coalesced kernel: LANES consecutive lanes of a SIMD group own a row, lane dv its
   vectors dv, dv + LANES, ... (W = D / (LANES VEC) of them), the thread's rows tgk + u TGK (TGK = BLOCK / LANES
   row sets, UK = R / TGK rows each). Its slice of the G query rows is in registers (f32, pre-scaled); the partial
   dots are summed by a butterfly of ``simd_shuffle_xor`` (``lane_sums`` with one row: every lane of a row gets
   its G scores, so no score array and no second barrier are needed);
3. the P V phase uses the same ownership (the thread's rows, its vectors of V), so each thread keeps its own online
   softmax: a running max m_g and sum l_g per head over its rows, the G W VEC accumulators rescaled by
   exp(m_old - m_new) per tile (guarded where both are -inf: a row set with no row yet);
4. at the end the TGK row sets merge (once per split): their (m, l) through shared memory, a common max M_g per
   head, each thread's sums rescaled by exp(m - M_g); the row sets of a SIMD group add by shuffles, then the SIMD
   groups through a small f32 array, GH heads a pass (``merge_heads``). Then the normalised output (``whole``)
   or the split's partial: po the sums in M's scale, pm = M, pl = the sum of the weights, as ``weigh_values``
   writes them and ``attn_decode_combine`` reads them.

Shared memory: 2 STAGES R D elements of K/V, BLOCK / SW x GH x D f32 to merge, 2 TGK G f32 for (m, l), the page
window; ``staged_shared_bytes`` counts it, and ``attention_decode.staged_config`` shrinks STAGES, then R, to fit
32 KiB (what Metal and lavapipe give a group; SPIR-V stores f16/bf16 shared elements as 4-byte words) outside
CUDA (48 KiB there). bf16 D 128 G 4 at R 16, STAGES 3: 24 KiB of stages,
about 29 KiB in all. On the H200 (2026-12-04, bf16 32 x 8192, 32/8 heads, D 128) it lost to the coalesced kernel:
R 16 S 3 581.6 us, R 32 S 2 556.8, BLOCK 256 982.6, against 420.2; ncu: 128 registers, 4 groups per SM, 24 %
achieved occupancy, DRAM 35 %. Copies in flight through shared memory do not pay while registers cap the warps.
"""

from __future__ import annotations

import math

from ..frontend import func, kernel
from ..lang import (
    T,
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    constexpr,
    exp,
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    shared,
    simd_shuffle_xor,
    static_range,
    vload,
    where,
)
from .attention_decode_coalesced import chunk_pages, kv_row, lane_sums, load_query, seq_len

#: the variant `iron build` compiles (launches pass their own): 4-element pieces (16 bytes of f32, 8 of f16/bf16,
#: so one variant serves every dtype), 32 lanes a row, tiles of 8 rows in 3 stages (28 KiB of shared memory at f32)
D = 128
G = 4
CHUNK = 64
BLOCK = 128
VEC = 4
PAGED = False
SW = 32
LANES = 32
R = 8
STAGES = 3
#: f32 elements of the array the SIMD groups' sums merge through (heads per pass: as many as fit, at least one)
MERGE = 1024


def merge_heads_per_pass(g: int, d: int, block: int, simd_width: int) -> int:
    """GH: heads whose BLOCK / SW x D sums the merge array holds at once (at least 1)."""
    return max(1, min(g, MERGE // (block // simd_width * d)))


def staged_shared_bytes(d: int, g: int, itemsize: int, chunk: int, block: int, simd_width: int, lanes: int, r: int,
                        stages: int) -> int:
    """The staged kernel's shared memory per group (the paged variant's page window counted), its K/V stages at
    ``itemsize`` bytes an element."""
    nw = block // simd_width
    merge = nw * merge_heads_per_pass(g, d, block, simd_width) * d
    return 2 * stages * r * d * itemsize + 4 * (merge + 2 * (block // lanes) * g + chunk)


@func
def issue_tile(k, v, ks, vs, table, b, start, t, cnt, hk, L, MAXP, HKV, D, PAGED, BLOCK, VEC, R, STAGES):
    """Start copying tile t's R K and V rows (chunk rows t R ..., clamped to the chunk's last, cnt - 1) into stage
    t % STAGES: piece i (< R D / VEC) of each is row i // (D / VEC), vector i % (D / VEC), so consecutive threads
    copy consecutive 16 bytes of a row."""
    NV = D // VEC
    base = (t % STAGES) * R * D
    for i0 in static_range(0, R * NV, BLOCK):
        i = i0 + local_id(0)
        if i0 + BLOCK <= R * NV or i < R * NV:
            row = kv_row(table, b, start + min(t * R + i // NV, cnt - 1), hk, L, MAXP, HKV, D, PAGED)
            async_copy(ks, base + i * VEC, k, row + (i % NV) * VEC, VEC)
            async_copy(vs, base + i * VEC, v, row + (i % NV) * VEC, VEC)


@func
def tile_row(tgk, u, R, TGK):
    """The tile row of row set tgk's u-th row: tgk + u TGK; where a tile has fewer rows than there are row sets
    (R < TGK: only where shared memory is short), row sets past R read the tile's last row and weigh it 0."""
    if R >= TGK:
        return tgk + u * TGK
    return min(tgk, R - 1)


@func
def row_in_chunk(tgk, u, j0, cnt, R, TGK):
    """Whether row set tgk's u-th row of the tile at chunk row j0 is a position of the chunk (weight 0 otherwise)."""
    if R >= TGK:
        return j0 + tgk + u * TGK < cnt
    return tgk < R and j0 + tgk < cnt


@func
def attend_tile(ks, vs, qv, acc, m, l, base, j0, cnt, dv, tgk, D, G, VEC, LANES, R, UK, TGK):
    """Tile rows tgk + u TGK (u < UK; chunk rows j0 + those) from the stage at ``base``: the G scores (a butterfly
    over the row's LANES lanes), the running max m and sum l, acc rescaled, then the weighted V vectors added."""
    W = D // (LANES * VEC)
    part = local_array(f32, UK * G)
    for u in static_range(UK):
        for g in static_range(G):
            part[u * G + g] = 0.0
        for w in static_range(W):
            kx = vload(ks, base + tile_row(tgk, u, R, TGK) * D + (dv + w * LANES) * VEC, VEC)
            for g in static_range(G):
                for e in static_range(VEC):
                    part[u * G + g] += kx[e] * qv[(g * W + w) * VEC + e]
    lane_sums(part, dv, UK * G, 1, LANES)  # one "row" of UK G values: a full butterfly, every lane gets every sum
    for g in static_range(G):
        mn = m[g]
        for u in static_range(UK):
            mn = max(mn, where(row_in_chunk(tgk, u, j0, cnt, R, TGK), part[u * G + g], -math.inf))
        # a row set with no row yet keeps m = -inf: exp(-inf - -inf) is NaN, its sums are 0 either way
        alpha = where(mn > -math.inf, exp(m[g] - mn), 0.0)
        m[g] = mn
        l[g] *= alpha
        for i in static_range(W * VEC):
            acc[g * W * VEC + i] *= alpha
        for u in static_range(UK):
            p = where(row_in_chunk(tgk, u, j0, cnt, R, TGK), exp(part[u * G + g] - mn), 0.0)
            part[u * G + g] = p
            l[g] += p
    for u in static_range(UK):
        for w in static_range(W):
            vx = vload(vs, base + tile_row(tgk, u, R, TGK) * D + (dv + w * LANES) * VEC, VEC)
            for g in static_range(G):
                for e in static_range(VEC):
                    acc[(g * W + w) * VEC + e] += part[u * G + g] * vx[e]


@func
def common_max(m, l, ms, ls, stat, den, dv, tgk, G, TGK):
    """Per head g: stat[g] = M, the max of the row sets' running maxima, den[g] = the sum of their weights in M's
    scale; then m[g] becomes this thread's factor exp(m[g] - M) (0 for a row set that held no row). One barrier."""
    if dv == 0:
        for g in static_range(G):
            ms[tgk * G + g] = m[g]
            ls[tgk * G + g] = l[g]
    barrier()
    for g in static_range(G):
        mx = -math.inf
        for j in static_range(TGK):
            mx = max(mx, ms[j * G + g])
        tot = 0.0
        for j in static_range(TGK):
            mj = ms[j * G + g]
            tot += where(mj > -math.inf, exp(mj - mx), 0.0) * ls[j * G + g]
        stat[g] = mx
        den[g] = tot
        m[g] = where(m[g] > -math.inf, exp(m[g] - mx), 0.0)


@func
def merge_heads(acc, red, stat, den, po, pm, pl, out, head0, s, whole, dv, NSPLIT, D, G, BLOCK, VEC, SW, LANES):
    """The sums acc (already in the common max's scale), added over the row sets: first within each SIMD group
    (shuffles across the LANES-lane row sets), then over the BLOCK / SW SIMD groups through ``red``, GH heads a
    pass; then the output (``whole``) or the split's partial (po, pm, pl)."""
    W = D // (LANES * VEC)
    NW = BLOCK // SW
    GH = max(1, min(G, MERGE // (NW * D)))
    tid = local_id(0)
    for k in static_range(1, 7):  # masks LANES, 2 LANES, ... SW / 2: the row sets of one SIMD group
        if LANES << (k - 1) < SW:
            for i in static_range(G * W * VEC):
                acc[i] += simd_shuffle_xor(acc[i], LANES << (k - 1))
    for g0 in static_range(0, G, GH):
        if g0 > 0:
            barrier()  # the previous pass has read ``red``
        if tid % SW < LANES:
            for gh in static_range(GH):
                if g0 + gh < G:  # compile-time: the last pass may hold fewer heads
                    for j in static_range(W * VEC):
                        c = (dv + j // VEC * LANES) * VEC + j % VEC
                        red[((tid // SW) * GH + gh) * D + c] = acc[(g0 + gh) * W * VEC + j]
        barrier()
        for i0 in static_range(0, GH * D, BLOCK):
            i = i0 + tid
            g = g0 + i // D
            if i < GH * D and g < G:
                t = 0.0
                for j in static_range(NW):
                    t += red[j * GH * D + i]
                if whole:
                    dg = den[g0]
                    for gg in static_range(1, GH):
                        if g0 + gg < G:
                            dg = where(g == g0 + gg, den[g0 + gg], dg)
                    out[(head0 + g) * D + i % D] = t / dg
                else:
                    po[((head0 + g) * NSPLIT + s) * D + i % D] = t
    if tid == 0 and not whole:
        for g in static_range(G):
            pm[(head0 + g) * NSPLIT + s] = stat[g]
            pl[(head0 + g) * NSPLIT + s] = den[g]


@kernel
def attn_decode_split_staged(q: Tensor[T], k: Tensor[T], v: Tensor[T], table: Tensor[i32], lens: Tensor[i32],
                             po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[T], HQ: int, HKV: int,
                             L: int, MAXP: int, NSPLIT: int, scale: float, D: constexpr, G: constexpr,
                             CHUNK: constexpr, BLOCK: constexpr, VEC: constexpr, PAGED: constexpr, SW: constexpr,
                             LANES: constexpr, R: constexpr, STAGES: constexpr):
    """``attn_decode_split`` through a STAGES-deep ring of R-row K/V tiles in shared memory, one online-softmax pass
    (the module docstring): the same arguments before LANES, grid (NSPLIT * BLOCK, HKV, B) in groups of
    (BLOCK, 1, 1), and results. LANES (a power of two dividing SW and D / VEC) lanes share a row; R a multiple of
    BLOCK / LANES (or a power of two below it: row sets past R idle); STAGES >= 2."""
    W = D // (LANES * VEC)
    TGK = BLOCK // LANES
    UK = max(1, R // TGK)
    ks = shared(T, STAGES * R * D)
    vs = shared(T, STAGES * R * D)
    ms = shared(f32, TGK * G)
    ls = shared(f32, TGK * G)
    red = shared(f32, BLOCK // SW * max(1, min(G, MERGE // (BLOCK // SW * D))) * D)  # merge_heads_per_pass heads
    tid = local_id(0)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    head0 = b * HQ + hk * G
    dv = tid % LANES
    tgk = tid // LANES
    qv = local_array(f32, G * W * VEC)  # the thread's slice of the G query rows, pre-scaled (loaded with lens)
    load_query(q, qv, head0, dv, scale, D, G, W, VEC, LANES)
    n = seq_len(lens, b, L, MAXP, PAGED)  # clamped to the cache; uniform, so the shuffles keep the full lane mask
    start = s * CHUNK
    if start >= n:  # the whole group: nothing of the sequence here; the combine never reads this split
        return
    cnt = min(n - start, CHUNK)
    whole = n <= CHUNK or NSPLIT == 1  # one split holds the sequence: normalise here, the combine skips it
    pg = shared(i32, CHUNK if PAGED else 1)  # paged: the chunk's row indices first (chunk_pages)
    tb, mp = chunk_pages(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK, PAGED)
    ntiles = (cnt + R - 1) // R  # uniform over the group, as the barriers in the loop need
    for t in static_range(STAGES - 1):
        if t < ntiles:
            issue_tile(k, v, ks, vs, pg, tb, start, t, cnt, hk, L, mp, HKV, D, PAGED, BLOCK, VEC, R, STAGES)
        async_commit()  # also without copies: every thread commits one group per tile, so the waits line up
    acc = local_array(f32, G * W * VEC)
    m = local_array(f32, G)
    l = local_array(f32, G)
    for g in static_range(G):
        m[g] = -math.inf
        l[g] = 0.0
        for i in static_range(W * VEC):
            acc[g * W * VEC + i] = 0.0
    for t in range(ntiles):
        async_wait(STAGES - 2)  # this thread's copies of tile t have landed
        barrier()  # everyone's have, and everyone is done with tile t - 1, whose stage is refilled now
        if t + STAGES - 1 < ntiles:
            issue_tile(k, v, ks, vs, pg, tb, start, t + STAGES - 1, cnt, hk, L, mp, HKV, D, PAGED, BLOCK, VEC, R,
                       STAGES)
        async_commit()
        attend_tile(ks, vs, qv, acc, m, l, (t % STAGES) * R * D, t * R, cnt, dv, tgk, D, G, VEC, LANES, R, UK,
                    TGK)
    stat = local_array(f32, G)
    den = local_array(f32, G)
    common_max(m, l, ms, ls, stat, den, dv, tgk, G, TGK)
    for g in static_range(G):
        for i in static_range(W * VEC):
            acc[g * W * VEC + i] *= m[g]
    merge_heads(acc, red, stat, den, po, pm, pl, out, head0, s, whole, dv, NSPLIT, D, G, BLOCK, VEC, SW, LANES)
