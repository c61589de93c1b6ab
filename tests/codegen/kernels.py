"""Kernels written for the emitter's golden files: small, stable (unlike the front-end's suite and the std library,
which grow: a golden file of a std kernel changed with every line added above it), and together covering control
flow, atomics, shared memory, barriers, a row reduction and every SIMD-group op."""

from __future__ import annotations

import math

import iron
from iron import (
    T,
    Tensor,
    atomic_add,
    atomic_max,
    barrier,
    cast,
    constexpr,
    exp,
    f32,
    group_id,
    i32,
    local_id,
    program_id,
    shared,
    simd_broadcast,
    simd_lane,
    simd_max,
    simd_shuffle,
    simd_shuffle_xor,
    simd_size,
    simd_sum,
    u32,
)


@iron.kernel
def control_flow(x: Tensor[T], hist: Tensor[i32], peak: Tensor[f32], out: Tensor[T], n: int, limit: float):
    """if/else, a strided for with continue and break, a while, an early return, and atomics."""
    i = program_id(0)
    if i >= n:
        return
    acc = 0.0
    for j in range(i, n, 64):
        v = x[j]
        if v < 0.0:
            continue
        acc += v
        if acc > limit:
            break
    k = cast(acc, i32)
    steps = 0
    while k > 1:
        if k % 2 == 0:
            k = k // 2
        else:
            k = 3 * k + 1
        steps += 1
    atomic_add(hist, steps % 16, 1)
    atomic_max(peak, 0, acc)
    out[i] = acc


@iron.kernel
def warp_tile(x: Tensor[T], out: Tensor[T], total: Tensor[u32], BLOCK: constexpr):
    """Shared arrays (T and u32), barriers, every SIMD-group op, and a shared-memory atomic."""
    tid = local_id(0)
    tile = shared(T, BLOCK)
    count = shared(u32, 1)
    if tid == 0:
        count[0] = 0
    v = x[program_id(0)]
    tile[tid] = v
    barrier()
    s = simd_sum(v)
    m = simd_max(v)
    left = simd_shuffle(v, (simd_lane() + 1) % simd_size())
    pair = simd_shuffle_xor(v, 1)
    first = simd_broadcast(v, 0)
    if s > 0.0:
        atomic_add(count, 0, 1)
    barrier()
    out[program_id(0)] = tile[BLOCK - 1 - tid] + left * pair - first + m
    if tid == 0:
        atomic_add(total, 0, count[0])


@iron.kernel
def unary_exp(a: Tensor[T], out: Tensor[T]):
    """out[i] = exp(a[i]): the smallest kernel, where a dtype's conversions show."""
    idx = program_id(0)
    out[idx] = exp(a[idx])


@iron.kernel
def row_softmax(x: Tensor[T], out: Tensor[T], ncols: int, BLOCK: constexpr):
    """softmax of each row with one group of BLOCK threads: strided passes and shared-memory tree reductions."""
    row = group_id(0)
    tid = local_id(0)
    base = row * ncols
    red = shared(f32, BLOCK)
    m = -math.inf
    for c in range(tid, ncols, BLOCK):
        m = max(m, x[base + c])
    red[tid] = m
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = max(red[tid], red[tid + s])
        barrier()
        s = s // 2
    m = red[0]
    barrier()
    acc = 0.0
    for c in range(tid, ncols, BLOCK):
        acc += exp(x[base + c] - m)
    red[tid] = acc
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = red[tid] + red[tid + s]
        barrier()
        s = s // 2
    inv = 1.0 / red[0]
    for c in range(tid, ncols, BLOCK):
        out[base + c] = exp(x[base + c] - m) * inv
