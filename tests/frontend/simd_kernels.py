"""Kernels of tests/frontend/test_simd_ops.py (issue 15 points 2 and 5); tests/backends/variants.py compiles each
for every compile target."""

from __future__ import annotations

import iron
from iron import T, Tensor, f32, i32, kernel, program_id, u32


@kernel
def shuffles(x: Tensor[T], delta: Tensor[i32], up: Tensor[T], down: Tensor[T], idx: Tensor[T], rel: Tensor[T]):
    i = program_id(0)
    v = x[i]
    up[i] = iron.simd_shuffle_up(v, delta[i])
    down[i] = iron.simd_shuffle_down(v, delta[i])
    idx[i] = iron.simd_shuffle(v, iron.simd_lane() * 3 - 5)  # negative lanes, and lanes past the width
    rel[i] = iron.simd_shuffle_xor(v, 1 + iron.simd_size() // 2)  # lane ^ (w/2 + 1): past a partial group's end


@kernel
def votes(x: Tensor[f32], on: Tensor[i32], bal: Tensor[u32], any_: Tensor[i32], all_: Tensor[i32]):
    i = program_id(0)
    if on[i] != 0:
        c = x[i] > 0.0
        bal[i] = iron.simd_ballot(c)
        any_[i] = iron.where(iron.simd_any(c), 1, 0)
        all_[i] = iron.where(iron.simd_all(c), 1, 0)


@kernel
def prefix_i32(x: Tensor[i32], on: Tensor[i32], incl: Tensor[i32], excl: Tensor[i32]):
    i = program_id(0)
    if on[i] != 0:
        incl[i] = iron.simd_prefix_sum(x[i])
        excl[i] = iron.simd_prefix_exclusive_sum(x[i])


@kernel
def prefix_u32(x: Tensor[u32], on: Tensor[i32], incl: Tensor[u32], excl: Tensor[u32]):
    i = program_id(0)
    if on[i] != 0:
        incl[i] = iron.simd_prefix_sum(x[i])
        excl[i] = iron.simd_prefix_exclusive_sum(x[i])


@kernel
def prefix_float(x: Tensor[T], on: Tensor[i32], incl: Tensor[T], excl: Tensor[T]):
    i = program_id(0)
    if on[i] != 0:
        incl[i] = iron.simd_prefix_sum(x[i])
        excl[i] = iron.simd_prefix_exclusive_sum(x[i])


@kernel
def grid_sizes(out: Tensor[i32]):
    x, y, z = program_id(0), program_id(1), program_id(2)
    flat = (z * iron.num_threads(1) + y) * iron.num_threads(0) + x
    total = iron.num_threads(0) * iron.num_threads(1) * iron.num_threads(2)
    out[flat] = iron.num_threads(0)
    out[total + flat] = iron.num_threads(1)
    out[2 * total + flat] = iron.num_threads(2)


@kernel
def reverse(x: Tensor[f32], y: Tensor[f32]):
    i = program_id(0)
    y[i] = x[iron.num_threads(0) - 1 - i]
