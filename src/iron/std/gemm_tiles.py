"""The tile machinery the std GEMMs share (gemm.py, gemm_staged.py): the fragment dtype variable, the launch order
of tiles (Triton's grouped order), and the staging of A and B tiles into shared memory (checked copies for edge
groups, unchecked 16-byte copies for groups wholly inside aligned matrices)."""

from __future__ import annotations

from ..frontend import func
from ..lang import DTypeVar, async_copy, bf16, f16, frag_a, frag_b, group_id, mma, static_range

VEC = 8  # 16-byte vectors of f16/bf16
#: the input dtypes of matrix fragments: the kernel's variants
H = DTypeVar("H", (f16, bf16))


@func
def stage(src, src0, dst, base, r0, c0, rows, cols, ld, R, CC, tid, nthreads):
    """Start copying the R x CC tile at (r0, c0) of the row-major rows x cols matrix at ``src[src0:]`` into
    ``dst[base:]``
    (row stride ld), by the whole group: asynchronous 16-byte copies where a vector lies inside and is aligned,
    element copies (zeros outside the matrix) else."""
    per_row = CC // VEC
    for v in range(tid, R * per_row, nthreads):
        r = v // per_row
        c = (v % per_row) * VEC
        gr = r0 + r
        gc = c0 + c
        d = base + r * ld + c
        if gr < rows and gc + VEC <= cols and cols % VEC == 0 and src0 % VEC == 0:
            async_copy(dst, d, src, src0 + gr * cols + gc, VEC)
        else:
            for e in static_range(VEC):
                if gr < rows and gc + e < cols:
                    dst[d + e] = src[src0 + gr * cols + gc + e]
                else:
                    dst[d + e] = 0.0


@func
def load_tiles(A, a0, B, b0, sa, sb, buf, k0, m0, n0, M, N, K, LDA, LDB, A_TILE, B_TILE, BM, BN, BK, TRANS_B, tid,
               nthreads):
    """Issue the copies of the A and B tiles at k0 (of the matrices at A[a0:], B[b0:]) into stage buffer ``buf``."""
    stage(A, a0, sa, buf * A_TILE, m0, k0, M, K, LDA, BM, BK, tid, nthreads)
    if TRANS_B:
        stage(B, b0, sb, buf * B_TILE, n0, k0, N, K, LDB, BN, BK, tid, nthreads)
    else:
        stage(B, b0, sb, buf * B_TILE, k0, n0, K, N, LDB, BK, BN, tid, nthreads)


#: groups of GROUP_M tile rows run column by column (Triton's grouped order): the A rows and B columns a wave of
#: groups reads stay in L2 together
GROUP_M = 8


@func
def tile_origin(M, N, BM, BN):
    """(m0, n0) of this group's tile of C: the launch order (group_id(0) fastest, then group_id(1)) walks GROUP_M tile
    rows at a time, down each column of tiles before the next."""
    return tile_at(group_id(1) * ((N + BN - 1) // BN) + group_id(0), M, N, BM, BN)


@func
def tile_at(pid, M, N, BM, BN):
    """(m0, n0) of tile number ``pid`` in that order."""
    gm = (M + BM - 1) // BM
    gn = (N + BN - 1) // BN
    first = pid // (GROUP_M * gn) * GROUP_M
    rows = min(gm - first, GROUP_M)
    within = pid % (GROUP_M * gn)
    return (first + within % rows) * BM, within // rows * BN


@func
def stage_inside(src, src0, dst, base, r0, c0, cols, ld, R, CC, tid, NTH):
    """``stage`` for a tile wholly inside an aligned matrix, by exactly NTH threads: 16-byte asynchronous copies
    only, unrolled (each thread's copies are a compile-time count apart), no per-copy checks."""
    per_row = CC // VEC
    for j in static_range(R * per_row // NTH):
        copy_chunk(src, src0, dst, base, r0, c0, cols, ld, per_row, tid + j * NTH)
    for v in range(tid + R * per_row // NTH * NTH, R * per_row, NTH):  # the rest where NTH does not divide
        copy_chunk(src, src0, dst, base, r0, c0, cols, ld, per_row, v)


@func
def copy_chunk(src, src0, dst, base, r0, c0, cols, ld, per_row, v):
    r = v // per_row
    c = (v % per_row) * VEC
    async_copy(dst, base + r * ld + c, src, src0 + (r0 + r) * cols + c0 + c, VEC)


@func
def load_inside(A, a0, B, b0, sa, sb, buf, k0, m0, n0, N, K, LDA, LDB, A_TILE, B_TILE, BM, BN, BK, TRANS_B, tid,
                NTH):
    """``load_tiles`` for a group whose tiles lie inside aligned matrices (``stage_inside``)."""
    stage_inside(A, a0, sa, buf * A_TILE, m0, k0, K, LDA, BM, BK, tid, NTH)
    if TRANS_B:
        stage_inside(B, b0, sb, buf * B_TILE, n0, k0, K, LDB, BN, BK, tid, NTH)
    else:
        stage_inside(B, b0, sb, buf * B_TILE, k0, n0, N, LDB, BK, BN, tid, NTH)


@func
def is_inside(m0, n0, M, N, K, a0, b0, BM, BN, BK, nthreads, NTH):
    """Whether every tile of this group lies inside aligned matrices and the group has NTH threads."""
    return (m0 + BM <= M and n0 + BN <= N and K % BK == 0 and K % VEC == 0 and N % VEC == 0 and a0 % VEC == 0
            and b0 % VEC == 0 and nthreads == NTH)


@func
def multiply(sa, sb, acc, abase, bbase, LDA, LDB, wm, wn, MT, NT, BK, TRANS_B):
    """acc += this SIMD group's share of the staged tiles' product."""
    for kk in static_range(BK // 16):
        a = frag_a(sa, abase + (wm * MT * 16) * LDA + kk * 16, LDA, False, MT)
        if TRANS_B:
            b = frag_b(sb, bbase + (wn * NT * 16) * LDB + kk * 16, LDB, True, NT)
        else:
            b = frag_b(sb, bbase + (kk * 16) * LDB + wn * NT * 16, LDB, False, NT)
        acc = mma(a, b, acc)
    return acc
