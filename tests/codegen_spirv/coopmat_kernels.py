"""Kernels for the cooperative-matrix path of the SPIR-V emitter (codegen/spirv/coopmat.py) beyond
tests/frontend/kernels.py's ``frag_gemm``: leading dimensions and offsets that break Vulkan's 16-byte alignment
(the scratch path of ``frag_load``), f16/bf16 targets and edges of ``frag_store``, fragments loaded from shared
memory and stored into it."""

from __future__ import annotations

import iron
from iron import Tensor, constexpr, f32, group_id, kernel

#: matrix fragments take f16/bf16 inputs
H = iron.DTypeVar("H", (iron.f16, iron.bf16))


@kernel
def strided_gemm(A: Tensor[H], B: Tensor[H], C: Tensor[H], off_a: int, lda: int, off_b: int, ldb: int, off_c: int,
                 ldc: int, rows: int, cols: int, K: int, TRANS_A: constexpr, TRANS_B: constexpr):
    """C[off_c + r*ldc + n] = sum_k A(r, k) B(k, n) rounded to H, for r < rows, n < cols: A(r, k) is
    A[off_a + r*lda + k] (TRANS_A: A[off_a + k*lda + r]), B(k, n) is B[off_b + k*ldb + n] (TRANS_B: B[off_b +
    n*ldb + k]). One SIMD group per group, one 16 x 32 tile of C (2 accumulator tiles) per group: groups (tn, tm)."""
    FM, FN, FK = iron.mma_shape(H)
    r0 = group_id(1) * FM
    c0 = group_id(0) * FN * 2
    acc = iron.frag_acc(1, 2)
    for k in range(0, K, FK):
        if TRANS_A:
            a = iron.frag_a(A, off_a + k * lda + r0, lda, True)
        else:
            a = iron.frag_a(A, off_a + r0 * lda + k, lda)
        if TRANS_B:
            b = iron.frag_b(B, off_b + c0 * ldb + k, ldb, True, 2)
        else:
            b = iron.frag_b(B, off_b + k * ldb + c0, ldb, False, 2)
        acc = iron.mma(a, b, acc)
    iron.frag_store(C, off_c + r0 * ldc + c0, ldc, acc, rows - r0, cols - c0)


@kernel
def shared_gemm(A: Tensor[H], B: Tensor[H], C: Tensor[f32], K: int, PAD: constexpr):
    """One 16 x 16 tile of C = A @ B (A 16 x K, B K x 16, row-major) by one SIMD group: each k-step's A and B
    tiles are copied into shared arrays at offset PAD (not a multiple of 8 halves: the scratch path; 0: direct),
    multiplied from there; the accumulator is stored into a shared f32 tile at offset PAD and copied out."""
    FM, FN, FK = iron.mma_shape(H)
    sa = iron.shared(H, FM * FK + PAD)
    sb = iron.shared(H, FK * FN + PAD)
    sc = iron.shared(f32, FM * FN + PAD)
    lane = iron.simd_lane()
    width = iron.simd_size()
    acc = iron.frag_acc()
    for k in range(0, K, FK):
        for e in range(lane, FM * FK, width):
            sa[PAD + e] = A[(e // FK) * K + k + e % FK]
            sb[PAD + e] = B[(k + e // FN) * FN + e % FN]
        iron.barrier()
        acc = iron.mma(iron.frag_a(sa, PAD, FK), iron.frag_b(sb, PAD, FN), acc)
        iron.barrier()
    iron.frag_store(sc, PAD, FN, acc)
    iron.barrier()
    for e in range(lane, FM * FN, width):
        C[e] = sc[PAD + e]


@kernel
def paired_gemm(A: Tensor[H], B: Tensor[H], C: Tensor[f32], K: int, VEC_ROWS: constexpr):
    """shared_gemm with the tiles written both ways into one array: rows below VEC_ROWS of A's and B's tiles by
    16-byte vector copies (``async_copy``, 8 halves), the rest element by element, neighbouring lanes writing the two
    halves of one 32-bit word (on Vulkan such arrays hold halves two to a word: codegen/spirv/pairs.py)."""
    FM, FN, FK = iron.mma_shape(H)
    sa = iron.shared(H, FM * FK)
    sb = iron.shared(H, FK * FN)
    lane = iron.simd_lane()
    width = iron.simd_size()
    acc = iron.frag_acc()
    for k in range(0, K, FK):
        for v in range(lane, VEC_ROWS * 2, width):  # two 8-half vectors a row
            r = v // 2
            c = (v % 2) * 8
            iron.async_copy(sa, r * FK + c, A, r * K + k + c, 8)
            iron.async_copy(sb, r * FN + c, B, (k + r) * FN + c, 8)
        iron.async_commit()
        for e in range(VEC_ROWS * FK + lane, FM * FK, width):
            sa[e] = A[(e // FK) * K + k + e % FK]
            sb[e] = B[(k + e // FN) * FN + e % FN]
        iron.async_wait(0)
        iron.barrier()
        acc = iron.mma(iron.frag_a(sa, 0, FK), iron.frag_b(sb, 0, FN), acc)
        iron.barrier()
    iron.frag_store(C, 0, FN, acc)

