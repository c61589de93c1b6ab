"""Kernels of ``mma_q4`` (tests/frontend/test_mma_q4.py): one SIMD group accumulating ``slabs`` 128-element slabs of
A (16 rows, or one vector when lda is 0) times the 4-bit quantized B, stored as f32."""

from __future__ import annotations

from iron import kernel
from iron.lang import T, Tensor, constexpr, f32, frag_acc, frag_store, mma_q4, u32


@kernel
def q4_product(a: Tensor[T], w: Tensor[u32], s: Tensor[T], out: Tensor[f32], ai: int, lda: int, wi: int, ldw: int,
               si: int, lds: int, slabs: int, NT: constexpr, G: constexpr):
    """out (16 x 16 NT) = A[:, :128 slabs] @ B, slab j at a[ai + 128 j], w[wi + 16 j], s[si + 128 j / G]."""
    acc = frag_acc(1, NT)
    for j in range(slabs):
        acc = mma_q4(a, ai + 128 * j, lda, w, wi + 16 * j, ldw, s, si + 128 * j // G, lds, acc, G)
    frag_store(out, 0, 16 * NT, acc)
