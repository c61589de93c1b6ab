"""Kernels for the MSL matrix-fragment tests (``test_msl_matrix.py``): fragments from threadgroup and device memory,
padded leading dimensions, several k steps, and stores masked at every kind of edge into f32 and 16-bit outputs."""

from __future__ import annotations

import iron
from iron import Tensor, barrier, constexpr, frag_a, frag_acc, frag_b, frag_store, group_size, kernel, local_id, mma
from iron import shared as shared_array

H = iron.DTypeVar("H", (iron.f16, iron.bf16))


@kernel
def frag_edges(A: Tensor[H], B: Tensor[H], C: Tensor[H], C32: Tensor[iron.f32], ldb: int, rows: int, cols: int,
               MT: constexpr, NT: constexpr, KS: constexpr, TRANS_A: constexpr, TRANS_B: constexpr):
    """One SIMD group: C = A @ B for A (16 MT x 16 KS; stored as its transpose when TRANS_A) staged in threadgroup
    memory with a padded leading dimension, B (16 KS x 16 NT; stored as B^T when TRANS_B) read from device memory
    with leading dimension ``ldb``. Only [:rows, :cols] of C (row stride 16 NT) and C32 is written."""
    FM, FN, FK = iron.mma_shape(H)
    A_ROWS = FK * KS if TRANS_A else FM * MT
    A_COLS = FM * MT if TRANS_A else FK * KS
    LDA = A_COLS + 8
    sa = shared_array(H, A_ROWS * LDA)
    for i in range(local_id(0), A_ROWS * A_COLS, group_size(0)):
        sa[(i // A_COLS) * LDA + i % A_COLS] = A[i]
    barrier()
    acc = frag_acc(MT, NT)
    for k in range(0, FK * KS, FK):
        if TRANS_A:
            a = frag_a(sa, k * LDA, LDA, True, MT)
        else:
            a = frag_a(sa, k, LDA, False, MT)
        if TRANS_B:
            b = frag_b(B, k, ldb, True, NT)
        else:
            b = frag_b(B, k * ldb, ldb, False, NT)
        acc = mma(a, b, acc)
    frag_store(C, 0, FN * NT, acc, rows, cols)
    frag_store(C32, 0, FN * NT, acc, rows, cols)
