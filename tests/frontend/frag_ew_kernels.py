"""Kernels of tests/frontend/test_frag_elementwise.py: element-wise fragment ops (``frag_mask``, ``frag_row_max``,
``frag_row_sum``, ``frag_rows``, arithmetic and math on accumulators). One SIMD group per group computes an
(16 MT) x (16 NT) accumulator S = A @ B (A: 16MT x 16, B: 16 x 16NT, row-major) and writes f(S); the oracles live in
the test."""

from __future__ import annotations

import math

import iron
from iron import Tensor, constexpr, exp, exp2, f32, kernel, static_range
from iron.lang import (
    frag_a,
    frag_acc,
    frag_b,
    frag_mask,
    frag_row_max,
    frag_row_sum,
    frag_rows,
    frag_store,
    frag_to_a,
    mma,
)

H = iron.T


@kernel
def softmax_tile(A: Tensor[H], B: Tensor[H], P: Tensor[f32], L: Tensor[f32], scale: float, row0: int, col0: int,
                 cols: int, MT: constexpr, NT: constexpr, CAUSAL: constexpr):
    """P = softmax over each row of mask(scale * S) in base 2 (P = exp2(s - max) / sum), L[r] = the row sums."""
    s = mma(frag_a(A, 0, 16, False, MT), frag_b(B, 0, 16 * NT, False, NT), frag_acc(MT, NT))
    s = frag_mask(s * scale, row0, col0, cols, CAUSAL, -math.inf)
    m = frag_row_max(s)
    p = exp2(s - m)
    total = frag_row_sum(p)
    frag_store(P, 0, 16 * NT, p / total)
    frag_store(L, 0, 16 * NT, frag_acc(MT, NT) + total)  # the row sums broadcast along the columns


@kernel
def arith_tile(A: Tensor[H], B: Tensor[H], O1: Tensor[f32], O2: Tensor[f32], x: float, MT: constexpr,
               NT: constexpr):
    """O1 = -abs(max(S, x) * 2 - 1.5) + min(S, S * 0.25) / 3; O2 = exp(S * 0.1) - frag_rows(MT, x) + (S - S)."""
    s = mma(frag_a(A, 0, 16, False, MT), frag_b(B, 0, 16 * NT, False, NT), frag_acc(MT, NT))
    o1 = -abs(max(s, x) * 2.0 - frag_rows(MT, 1.5)) + min(s, s * 0.25) / 3.0
    frag_store(O1, 0, 16 * NT, o1)
    frag_store(O2, 0, 16 * NT, exp(s * 0.1) - frag_rows(MT, x) + (s - s))


@kernel
def running_max(A: Tensor[H], B: Tensor[H], O: Tensor[f32], steps: int, MT: constexpr, NT: constexpr):
    """A row fragment carried through a run-time loop: m = max over i < steps of rowmax(S * (i + 1) - i); O = S - m,
    and the row sums l = sum of rowsum(S) * 0.5 accumulated the same way, added."""
    s = mma(frag_a(A, 0, 16, False, MT), frag_b(B, 0, 16 * NT, False, NT), frag_acc(MT, NT))
    m = frag_rows(MT, -math.inf)
    l = frag_rows(MT)
    for i in range(steps):
        m = max(m, frag_row_max(s * (i + 1.0) - i))
        l = l + frag_row_sum(s) * 0.5
    frag_store(O, 0, 16 * NT, s - m + l)


@kernel
def nan_masked_max(A: Tensor[H], B: Tensor[H], O: Tensor[f32], cols: int, fill_bits: iron.u32):
    """O = rowmax(S with columns >= cols set to the float of ``fill_bits``) broadcast: a NaN fill (a signalling one
    too) loses to every value, as float max's does."""
    s = mma(frag_a(A, 0, 16), frag_b(B, 0, 16), frag_acc())
    s = frag_mask(s, 0, 0, cols, False, iron.bitcast(fill_bits, f32))
    frag_store(O, 0, 16, frag_acc() + frag_row_max(s))


@kernel
def per_lane_scale(A: Tensor[H], B: Tensor[H], O: Tensor[f32]):
    """A scalar that differs between the lanes of a SIMD group (refused: the result would depend on the layout)."""
    s = mma(frag_a(A, 0, 16), frag_b(B, 0, 16), frag_acc())
    frag_store(O, 0, 16, s * iron.simd_lane())


@kernel
def p_times_v(A: Tensor[H], B: Tensor[H], V: Tensor[H], O: Tensor[f32], NT: constexpr, NV: constexpr):
    """O = round(exp2(S - rowmax S)) @ V with S = A @ B (16 x 16 NT) and P taken straight from the accumulator by
    frag_to_a, 16 columns (one k-step) at a time; V is (16 NT) x (16 NV), row-major."""
    s = mma(frag_a(A, 0, 16), frag_b(B, 0, 16 * NT, False, NT), frag_acc(1, NT))
    p = exp2(s - frag_row_max(s))
    o = frag_acc(1, NV)
    for kk in static_range(NT):
        o = mma(frag_to_a(p, 16 * kk, H), frag_b(V, 16 * kk * 16 * NV, 16 * NV, False, NV), o)
    frag_store(O, 0, 16 * NV, o)
