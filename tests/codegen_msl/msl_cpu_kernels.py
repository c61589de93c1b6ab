"""Kernels for the msl-cpu model's own tests (divergent collectives, a skipped barrier)."""

from __future__ import annotations

import iron
from iron import Tensor, barrier, kernel, local_id, program_id, shared, simd_lane, simd_sum


@kernel
def divergent_simd_sum(x: Tensor[iron.f32], out: Tensor[iron.f32], HALF: iron.constexpr):
    """Lanes below HALF sum among themselves (the active lanes); the others keep their own value."""
    i = program_id(0)
    v = x[i]
    if simd_lane() < HALF:
        v = simd_sum(v)
    out[i] = v


@kernel
def skipped_barrier(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    """Thread 0 of each group returns before the barrier the others wait at (allowed: returned threads are not
    waited for)."""
    i = program_id(0)
    tile = shared(iron.f32, 64)
    if local_id(0) == 0:
        return
    tile[local_id(0)] = x[i]
    barrier()
    out[i] = tile[63 - local_id(0)]
