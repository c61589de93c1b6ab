"""GEMM for targets without asynchronous copies (Vulkan): the global latency hidden by staging through registers.

``gemm`` (gemm.py) overlaps the copy of tile k + 1 with the matrix work on tile k through ``async_copy``; where the
target has no asynchronous copy (SPIR-V: the copy is done at once, emit.py) every K step waited for its loads with
nothing to overlap them: 94 TF/s at 4096^3 bf16 on the H200's Vulkan driver (bench/results/2026-12-02-h200-vulkan-
gemm-128.json), 16% of the CUDA kernel. ``gemm_rs`` is the classic prefetch instead: a group whose tiles lie wholly
inside aligned matrices loads tile k + 1 into registers (16-byte ``vload``s), multiplies tile k from shared memory,
then stores the registers into the other shared stage; one ``barrier`` per step. Edge groups take ``gemm``'s checked
copies (``load_tiles``), done at once. Launch as ``gemm`` with STAGES fixed at 2 and SW the SIMD width (the count of
copies per thread is a compile-time number: NTH = WM * WN * SW threads).
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
    local_array,
    local_id,
    shared,
    simd_group,
    static_range,
    vload,
    vstore,
)
from .gemm_tiles import VEC, H, is_inside, load_tiles, multiply, tile_origin


@func
def fetch(src, src0, regs, r0, c0, cols, CC, J, tid, NTH):
    """This thread's J 16-byte vectors of the R x CC tile at (r0, c0) of ``src[src0:]`` (row length ``cols``) into
    ``regs`` (vector j from chunk tid + j * NTH; chunks run along the rows)."""
    per_row = CC // VEC
    for j in static_range(J):
        v = tid + j * NTH
        w = vload(src, src0 + (r0 + v // per_row) * cols + c0 + (v % per_row) * VEC, VEC)
        for e in static_range(VEC):
            regs[j * VEC + e] = w[e]


@func
def put(dst, base, regs, ld, CC, J, tid, NTH):
    """The vectors ``fetch`` read, into the shared tile at ``dst[base:]`` (row stride ld)."""
    per_row = CC // VEC
    for j in static_range(J):
        v = tid + j * NTH
        w = local_array(H, VEC)
        for e in static_range(VEC):
            w[e] = regs[j * VEC + e]
        vstore(dst, base + (v // per_row) * ld + (v % per_row) * VEC, w)


@kernel
def gemm_rs(A: Tensor[H], B: Tensor[H], C: Tensor[H], M: int, N: int, K: int, SA: int, SB: int, SC: int,
            BM: constexpr, BN: constexpr, BK: constexpr, WM: constexpr, WN: constexpr, SW: constexpr,
            TRANS_B: constexpr):
    """C = A @ B (TRANS_B: A @ B^T), row-major, as ``gemm`` (same grid, group and batch strides) with two shared
    stages filled through registers. SW: the SIMD width the launch runs at."""
    MT = BM // WM // 16
    NT = BN // WN // 16
    LDA = BK + VEC
    A_TILE = BM * LDA
    LDB = BK + VEC if TRANS_B else BN + VEC
    B_TILE = (BN if TRANS_B else BK) * LDB
    NTH = WM * WN * SW
    JA = BM * BK // VEC // NTH
    JB = BK * BN // VEC // NTH
    sa = shared(H, 2 * A_TILE)
    sb = shared(H, 2 * B_TILE)
    tid = local_id(0)
    nthreads = group_size(0)
    warp = simd_group()
    wm = warp // WN
    wn = warp % WN
    m0, n0 = tile_origin(M, N, BM, BN)
    a0, b0, c0 = group_id(2) * SA, group_id(2) * SB, group_id(2) * SC
    ktiles = (K + BK - 1) // BK
    acc = frag_acc(MT, NT)
    inside = is_inside(m0, n0, M, N, K, a0, b0, BM, BN, BK, nthreads, NTH) and JA * NTH * VEC == BM * BK and \
        JB * NTH * VEC == BK * BN
    if inside:
        ra = local_array(H, JA * VEC)
        rb = local_array(H, JB * VEC)
        fetch_tiles(A, a0, B, b0, ra, rb, 0, m0, n0, N, K, BM, BN, BK, JA, JB, TRANS_B, tid, NTH)
        put_tiles(sa, sb, ra, rb, 0, LDA, LDB, A_TILE, B_TILE, BN, BK, JA, JB, TRANS_B, tid, NTH)
        for kt in range(ktiles):
            barrier()  # tile kt is in shared memory; every group finished with the stage tile kt + 1 goes to
            if kt + 1 < ktiles:
                fetch_tiles(A, a0, B, b0, ra, rb, (kt + 1) * BK, m0, n0, N, K, BM, BN, BK, JA, JB, TRANS_B, tid, NTH)
            cur = kt % 2
            acc = multiply(sa, sb, acc, cur * A_TILE, cur * B_TILE, LDA, LDB, wm, wn, MT, NT, BK, TRANS_B)
            if kt + 1 < ktiles:
                put_tiles(sa, sb, ra, rb, 1 - cur, LDA, LDB, A_TILE, B_TILE, BN, BK, JA, JB, TRANS_B, tid, NTH)
    else:
        for kt in range(ktiles):
            barrier()  # the previous step's fragments are read: the stage may be refilled
            load_tiles(A, a0, B, b0, sa, sb, 0, kt * BK, m0, n0, M, N, K, LDA, LDB, A_TILE, B_TILE, BM, BN, BK,
                       TRANS_B, tid, nthreads)
            async_commit()
            async_wait(0)
            barrier()
            acc = multiply(sa, sb, acc, 0, 0, LDA, LDB, wm, wn, MT, NT, BK, TRANS_B)
    r0 = m0 + wm * MT * 16
    col = n0 + wn * NT * 16
    if r0 < M and col < N:
        frag_store(C, c0 + r0 * N + col, N, acc, M - r0, N - col)


@func
def fetch_tiles(A, a0, B, b0, ra, rb, k0, m0, n0, N, K, BM, BN, BK, JA, JB, TRANS_B, tid, NTH):
    """This thread's vectors of the A and B tiles at k0 into registers."""
    fetch(A, a0, ra, m0, k0, K, BK, JA, tid, NTH)
    if TRANS_B:
        fetch(B, b0, rb, n0, k0, K, BK, JB, tid, NTH)
    else:
        fetch(B, b0, rb, k0, n0, N, BN, JB, tid, NTH)


@func
def put_tiles(sa, sb, ra, rb, buf, LDA, LDB, A_TILE, B_TILE, BN, BK, JA, JB, TRANS_B, tid, NTH):
    """The registers of ``fetch_tiles`` into shared stage ``buf``."""
    put(sa, buf * A_TILE, ra, LDA, BK, JA, tid, NTH)
    if TRANS_B:
        put(sb, buf * B_TILE, rb, LDB, BK, JB, tid, NTH)
    else:
        put(sb, buf * B_TILE, rb, LDB, BN, JB, tid, NTH)


#: the constexprs `iron build` compiles by default (a 64 x 64 tile of 4 SIMD groups of 32)
BM, BN, BK, WM, WN, SW = 64, 64, 32, 2, 2, 32
TRANS_B = False
