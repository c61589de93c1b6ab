"""Kernels of ``mv_q4`` (tests/frontend/test_mv_q4.py): one SIMD group accumulating ``slabs`` 128-code slabs of a
4-bit quantized W (16 mt rows) times x, the whole 16-column accumulator stored as f32."""

from __future__ import annotations

from iron import kernel
from iron.lang import (
    T,
    Tensor,
    barrier,
    bf16,
    constexpr,
    f16,
    f32,
    frag_acc,
    frag_store,
    mv_q4,
    shared,
    simd_lane,
    simd_size,
    u32,
)


@kernel
def q4_rows(w: Tensor[u32], s: Tensor[T], x: Tensor[T], out: Tensor[f32], wi: int, ldw: int, si: int, lds: int,
            xi: int, slabs: int, MT: constexpr, G: constexpr):
    """out (16 MT x 16) = W[:, :128 slabs] @ x in every column, slab j at w[wi + 16 j], s[si + 128 j / G],
    x[xi + 128 j]."""
    acc = frag_acc(MT, 1)
    for j in range(slabs):
        acc = mv_q4(w, wi + 16 * j, ldw, s, si + 128 * j // G, lds, x, xi + 128 * j, acc, G)
    frag_store(out, 0, 16, acc)


@kernel
def q4_rows_shared(w: Tensor[u32], s: Tensor[T], x: Tensor[T], out: Tensor[f32], ldw: int, lds: int,
                   MT: constexpr, G: constexpr):
    """As q4_rows for one slab, W's 16 MT rows of 16 words and their scales first copied into shared arrays (row
    strides 20 words and 4 scales: a padded staging layout), then read from there."""
    sw = shared(u32, 16 * MT * 20)
    ss = shared(T, 16 * MT * 4)
    for i in range(simd_lane(), 16 * MT * 16, simd_size()):
        sw[(i // 16) * 20 + i % 16] = w[(i // 16) * ldw + i % 16]
    for i in range(simd_lane(), 16 * MT * (127 // G + 1), simd_size()):
        ss[(i // (127 // G + 1)) * 4 + i % (127 // G + 1)] = s[(i // (127 // G + 1)) * lds + i % (127 // G + 1)]
    barrier()
    acc = mv_q4(sw, 0, 20, ss, 0, 4, x, 0, frag_acc(MT, 1), G)
    frag_store(out, 0, 16, acc)


@kernel
def q4_rows_two_dtypes(w: Tensor[u32], s: Tensor[bf16], x: Tensor[bf16], s2: Tensor[f16], x2: Tensor[f16],
                       out: Tensor[f32]):
    """One slab with bf16 x and scales, then the same words with f16 ones, into one accumulator."""
    acc = mv_q4(w, 0, 16, s, 0, 2, x, 0, frag_acc(1, 1), 64)
    acc = mv_q4(w, 0, 16, s2, 0, 2, x2, 0, acc, 64)
    frag_store(out, 0, 16, acc)
