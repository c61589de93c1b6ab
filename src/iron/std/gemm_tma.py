"""``gemm_tma``: the warpgroup GEMM (``gemm.gemm_wg``) with its tiles staged by ``tile_load`` -- on NVIDIA sm_90 the
bulk tensor copy engine (TMA), one thread issuing a stage's copies, no copy instructions or addresses in the other
255 threads, zeros past the matrices' edges from the engine itself (no edge path), and no proxy fence before the
barriers (``codegen/cfamily/cuda_tma.py``); elsewhere the group's threads copy the tiles (``codegen/tile_copy.py``).

Why: on the H200 the cp.async copies of gemm_wg cost ~18 % of its time at 4096^3 bf16 (removing them from the
emitted source: 592 -> 722 TF/s) and its proxy fence ~2 % (bench/results/2026-12-02-h200-s4-wg-variants.json).

The view of each operand is (rows, cols, ld, batch stride) of the launch's values, so ``launch`` runs it when the
descriptors can exist: K and N multiples of 8 (16-byte rows) and batch strides too (``tma_ok``).
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    barrier,
    constexpr,
    frag_acc,
    frag_store,
    group_id,
    shared,
    simd_group,
    static_range,
    tile_commit,
    tile_load,
    tile_wait,
    warpgroup_mma,
    warpgroup_wait,
)
from .gemm_tiles import H, tile_origin

__all__ = ["gemm_tma", "tma_ok"]

#: the constexprs `iron build` compiles by default: 64 x 64 tiles, two stages (32 KiB: within Metal's limit)
BM, BN, STAGES = 64, 64, 2
TRANS_B = False


@kernel
def gemm_tma(A: Tensor[H], B: Tensor[H], C: Tensor[H], M: int, N: int, K: int, SA: int, SB: int, SC: int,
             BM: constexpr, BN: constexpr, STAGES: constexpr, TRANS_B: constexpr):
    """C = A @ B (or A @ B^T), as gemm_wg: BM // 64 warpgroups, each 64 rows x BN of C, K slabs of 64 staged STAGES
    deep (STAGES >= 3: STAGES - 2 ahead of the one multiplied and one warpgroup_mma in flight; 2: one ahead, each
    multiply waited for at once). Launch (ceil(N / BN) * G,
    ceil(M / BM), batch) threads in groups of (G, 1), G = BM // 64 * 4 * simd_size()."""
    A_TILE = BM * 64
    B_TILE = 64 * BN
    LAG = 1 if STAGES >= 3 else 0
    AHEAD = STAGES - 1 - LAG
    sa = shared(H, STAGES * A_TILE)
    sb = shared(H, STAGES * B_TILE)
    wg = simd_group() // 4
    m0, n0 = tile_origin(M, N, BM, BN)
    bt = group_id(2)
    ktiles = (K + 63) // 64
    for s in static_range(AHEAD):
        if s < ktiles:
            stage(A, B, sa, sb, s, s * 64, m0, n0, M, N, K, SA, SB, bt, BM, BN, A_TILE, B_TILE, TRANS_B)
    acc = frag_acc(1, BN // 16)
    for kt in range(ktiles):
        cur = kt % STAGES
        tile_wait(cur)
        barrier()  # every warpgroup's multiply of step kt - 1 - LAG is complete (its wait at step kt - 1): the
        # stage it read may be refilled below
        acc = warpgroup_mma(sa, cur * A_TILE + wg * 4096, sb, cur * B_TILE, 64 if TRANS_B else BN, TRANS_B, acc)
        nxt = kt + AHEAD
        if nxt < ktiles:
            stage(A, B, sa, sb, nxt % STAGES, nxt * 64, m0, n0, M, N, K, SA, SB, bt, BM, BN, A_TILE, B_TILE, TRANS_B)
        warpgroup_wait(LAG)
    warpgroup_wait(0)
    r0 = m0 + wg * 64 + (simd_group() % 4) * 16
    c0 = bt * SC
    if r0 < M:
        frag_store(C, c0 + r0 * N + n0, N, acc, M - r0, N - n0)


@func
def stage(A, B, sa, sb, s, k0, m0, n0, M, N, K, SA, SB, bt, BM, BN, A_TILE, B_TILE, TRANS_B):
    """Start the copies of K slab k0 of A and B into stage s and commit them."""
    tile_load(sa, s * A_TILE, 64, A, (M, K, K, SA), (bt, m0, k0), BM, 64, s)
    if TRANS_B:
        tile_load(sb, s * B_TILE, 64, B, (N, K, K, SB), (bt, n0, k0), BN, 64, s)
    else:
        tile_load(sb, s * B_TILE, BN, B, (K, N, N, SB), (bt, k0, n0), 64, BN, s)
    tile_commit(s)


def tma_ok(m: int, n: int, k: int, strides: tuple[int, int, int]) -> bool:
    """Whether the copy engine's descriptors of this product can exist: 16-byte rows and batch strides."""
    return k % 8 == 0 and n % 8 == 0 and all(s % 8 == 0 for s in strides)
