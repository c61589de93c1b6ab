"""Kernels for tests/frontend/test_barrier_rule.py (issue 15, bug B1): a barrier after some threads returned."""

from __future__ import annotations

import iron
from iron import Tensor, barrier, kernel, local_id, program_id, shared


@kernel
def uniform_add(out: Tensor[iron.i32], n: int):
    """cuda-samples' pattern: threads past n return, the rest meet at a barrier and read what thread 0 wrote."""
    buf = shared(iron.i32, 1)
    i = program_id(0)
    if i >= n:
        return
    if local_id(0) == 0:
        buf[0] = 7
    barrier()
    out[i] = buf[0]


@kernel
def two_barriers(x: Tensor[iron.f32], out: Tensor[iron.f32], n: int):
    """Returned threads are not waited for at either barrier; the live ones exchange through shared memory."""
    tile = shared(iron.f32, 64)
    i = program_id(0)
    lid = local_id(0)
    if i >= n:
        return
    tile[lid] = x[i]
    barrier()
    v = tile[lid ^ 1] if (i ^ 1) < n else 0.0
    barrier()
    tile[lid] = v * 2.0
    barrier()
    out[i] = tile[lid]
