"""``gemm_wgp``: ``gemm_wg`` (warpgroup_mma, 128-byte-swizzled K slabs, async copies STAGES deep) on a persistent grid.

One group per multiprocessor walks the tiles ``group_id(0), group_id(0) + P, ...`` (P groups on axis 0, in Triton's
grouped order, so the tiles in flight together share A rows and B columns in L2). The copy pipeline runs over the
group's whole sequence of (tile, K step) pairs: the first slabs of the next tile are in flight while the last
multiplies of this tile finish and its accumulators are stored, and no group is launched per tile. Why: on the H200
gemm_wg spends a tile's start waiting for its first slabs and its end storing with the tensor cores idle, one group
per multiprocessor (192 KiB of shared memory), about 5 % of a 4096^3 product with 64 K steps per tile.

Measured slower than gemm_wg on the H200 (2026-12-02, 128 x 256 x 4 bf16: 484 vs 572 TF/s at 4096^3, 530 vs 634 at
8192^3, bench/results/2026-12-02-h200-s3-wg-sweep.json), so ``gemm.launch`` does not tune over it: the store of a
tile still stalls the tensor cores, and the loop nest costs more than the launches it saves. Next: split the group
into a producer warpgroup (copies) and consumers (multiply, store), so a tile's store overlaps the next tile's
multiplies (CUTLASS's warp-specialized persistent kernels).
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    async_commit,
    async_wait,
    barrier,
    constexpr,
    frag_acc,
    frag_store,
    group_id,
    group_size,
    local_id,
    num_threads,
    shared,
    simd_group,
    static_range,
    warpgroup_mma,
    warpgroup_wait,
)
from .gemm_tiles import H, is_inside, load_inside, load_tiles, tile_at

__all__ = ["gemm_wgp"]

#: the constexprs `iron build` compiles by default: 64 x 64 tiles, two stages (32 KiB: within Metal's limit)
BM, BN, STAGES, DEEP, TRANS_B = 64, 64, 2, 0, False


@func
def load_slab(A, a0, B, b0, sa, sb, step, k0, m0, n0, inside, M, N, K, LDB, A_TILE, B_TILE, BM, BN, STAGES, TRANS_B,
              tid, nthreads, NTH):
    """Issue the copies of the K slab at k0 of the tile at (m0, n0) into stage step % STAGES."""
    buf = step % STAGES
    if inside:
        load_inside(A, a0, B, b0, sa, sb, buf, k0, m0, n0, N, K, 64, LDB, A_TILE, B_TILE, BM, BN, 64, TRANS_B,
                    tid, NTH)
    else:
        load_tiles(A, a0, B, b0, sa, sb, buf, k0, m0, n0, M, N, K, 64, LDB, A_TILE, B_TILE, BM, BN, 64, TRANS_B,
                   tid, nthreads)


@func
def advance(lt, lk, lm, ln, lin, first, nprog, ktiles, M, N, K, a0, b0, BM, BN, nthreads, NTH):
    """The copy side's next (tile ordinal, slab, tile origin, inside) after slab lk of tile lt."""
    lk += 1
    if lk == ktiles:
        lk = 0
        lt += 1
        lm, ln = tile_at(first + lt * nprog, M, N, BM, BN)
        lin = is_inside(lm, ln, M, N, K, a0, b0, BM, BN, 64, nthreads, NTH)
    return lt, lk, lm, ln, lin


@kernel
def gemm_wgp(A: Tensor[H], B: Tensor[H], C: Tensor[H], M: int, N: int, K: int, SA: int, SB: int, SC: int,
             BM: constexpr, BN: constexpr, STAGES: constexpr, DEEP: constexpr, TRANS_B: constexpr):
    """C = A @ B (or A @ B^T) as gemm_wg, persistent: launch (P * G, 1, batch) threads in groups of (G, 1, 1),
    G = BM // 64 * 4 * simd_size(), P at most the number of tiles (one per multiprocessor). DEEP as in gemm_wg."""
    A_TILE = BM * 64
    B_TILE = 64 * BN
    LDB = 64 if TRANS_B else BN
    LAG = 1 if STAGES >= 3 else 0
    AHEAD = STAGES - 1 - LAG + (LAG if DEEP else 0)
    NTH = BM // 64 * 128
    sa = shared(H, STAGES * A_TILE)
    sb = shared(H, STAGES * B_TILE)
    tid = local_id(0)
    nthreads = group_size(0)
    wg = simd_group() // 4
    a0, b0, c0 = group_id(2) * SA, group_id(2) * SB, group_id(2) * SC
    ktiles = (K + 63) // 64
    tiles = ((M + BM - 1) // BM) * ((N + BN - 1) // BN)
    nprog = num_threads(0) // nthreads
    first = group_id(0)
    mine = (tiles - first + nprog - 1) // nprog
    # the copy side walks the same (tile, K slab) sequence AHEAD steps early, tracked by counters (no division
    # per step): lt the ordinal of the tile it copies (lt < mine), lk its slab, (lm, ln, lin) the tile's origin
    # and whether it lies inside
    lt = 0
    lk = 0
    lm, ln = tile_at(first, M, N, BM, BN)
    lin = is_inside(lm, ln, M, N, K, a0, b0, BM, BN, 64, nthreads, NTH)
    for s in static_range(AHEAD):
        if lt < mine:
            load_slab(A, a0, B, b0, sa, sb, s, lk * 64, lm, ln, lin, M, N, K, LDB, A_TILE, B_TILE, BM, BN, STAGES,
                      TRANS_B, tid, nthreads, NTH)
            lt, lk, lm, ln, lin = advance(lt, lk, lm, ln, lin, first, nprog, ktiles, M, N, K, a0, b0, BM, BN,
                                          nthreads, NTH)
        async_commit()
    step = 0
    for i in range(mine):
        m0, n0 = tile_at(first + i * nprog, M, N, BM, BN)
        acc = frag_acc(1, BN // 16)
        for _kt in range(ktiles):
            async_wait(AHEAD - 1)
            barrier()
            cur = step % STAGES
            acc = warpgroup_mma(sa, cur * A_TILE + wg * 4096, sb, cur * B_TILE, LDB, TRANS_B, acc)
            if DEEP and LAG:  # the stage of the previous step is refilled: wait for every warpgroup's multiply
                warpgroup_wait(LAG)
                barrier()
            if lt < mine:
                load_slab(A, a0, B, b0, sa, sb, step + AHEAD, lk * 64, lm, ln, lin, M, N, K, LDB, A_TILE, B_TILE,
                          BM, BN, STAGES, TRANS_B, tid, nthreads, NTH)
                lt, lk, lm, ln, lin = advance(lt, lk, lm, ln, lin, first, nprog, ktiles, M, N, K, a0, b0, BM, BN,
                                          nthreads, NTH)
            async_commit()
            if not (DEEP and LAG):
                warpgroup_wait(LAG)
            step += 1
        warpgroup_wait(0)
        r0 = m0 + wg * 64 + (simd_group() % 4) * 16
        if r0 < M:
            frag_store(C, c0 + r0 * N + n0, N, acc, M - r0, N - n0)
