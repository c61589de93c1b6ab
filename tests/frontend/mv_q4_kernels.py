"""Kernels of ``mv_q4`` (tests/frontend/test_mv_q4.py): one SIMD group accumulating ``slabs`` 128-code slabs of a
4-bit quantized W (16 mt rows) times x, the whole 16-column accumulator stored as f32."""

from __future__ import annotations

from iron import kernel
from iron.lang import T, Tensor, constexpr, f32, frag_acc, frag_store, mv_q4, u32


@kernel
def q4_rows(w: Tensor[u32], s: Tensor[T], x: Tensor[T], out: Tensor[f32], wi: int, ldw: int, si: int, lds: int,
            xi: int, slabs: int, MT: constexpr, G: constexpr):
    """out (16 MT x 16) = W[:, :128 slabs] @ x in every column, slab j at w[wi + 16 j], s[si + 128 j / G],
    x[xi + 128 j]."""
    acc = frag_acc(MT, 1)
    for j in range(slabs):
        acc = mv_q4(w, wi + 16 * j, ldw, s, si + 128 * j // G, lds, x, xi + 128 * j, acc, G)
    frag_store(out, 0, 16, acc)
