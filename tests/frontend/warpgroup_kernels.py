"""Kernels for tests/frontend/test_warpgroup.py: warpgroup_mma used right, and the mistakes the interpreter catches
(a stage refilled before the wait that frees it, an accumulator read before its wait). One group is one warpgroup
(4 SIMD groups) at any SIMD width."""

from __future__ import annotations

from iron import (
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    bf16,
    constexpr,
    f32,
    frag_acc,
    frag_store,
    group_size,
    local_id,
    shared,
    simd_group,
    warpgroup_mma,
    warpgroup_wait,
)
from iron import kernel as iron_kernel


@iron_kernel
def one_slab(A: Tensor[bf16], B: Tensor[bf16], C: Tensor[f32], NB: constexpr, TRANS_B: constexpr, WAIT: constexpr):
    """C (64 x NB) = A (64 x 64) @ B (64 x NB, or NB x 64 with TRANS_B) by one warpgroup, 16 rows per SIMD group.
    WAIT False stores the accumulator with the call still in flight."""
    tid = local_id(0)
    step = group_size(0)
    sa = shared(bf16, 64 * 64)
    sb = shared(bf16, 64 * NB)
    for i in range(tid, 64 * 64, step):
        sa[i] = A[i]
    for i in range(tid, 64 * NB, step):
        sb[i] = B[i]
    barrier()
    acc = warpgroup_mma(sa, 0, sb, 0, 64 if TRANS_B else NB, TRANS_B, frag_acc(1, NB // 16))
    if WAIT:
        warpgroup_wait(0)
    frag_store(C, simd_group() * 16 * NB, NB, acc)


@iron_kernel
def early_refill(A: Tensor[bf16], B: Tensor[bf16], C: Tensor[f32]):
    """Starts the product of the tiles, then refills the A tile before waiting: a race on the hardware."""
    tid = local_id(0)
    step = group_size(0)
    sa = shared(bf16, 64 * 64)
    sb = shared(bf16, 64 * 64)
    for i in range(tid, 64 * 64, step):
        sa[i] = A[i]
        sb[i] = B[i]
    barrier()
    acc = warpgroup_mma(sa, 0, sb, 0, 64, False, frag_acc(1, 4))
    for i in range(tid * 8, 64 * 64, step * 8):
        async_copy(sa, i, A, 64 * 64 + i, 8)
    async_commit()
    async_wait(0)
    warpgroup_wait(0)
    frag_store(C, simd_group() * 16 * 64, 64, acc)


@iron_kernel
def runtime_ldb(A: Tensor[bf16], B: Tensor[bf16], C: Tensor[f32], ldb: int):
    """B's row length known only at run time: valid, but the sm_90 path needs it at compile time (expanded)."""
    tid = local_id(0)
    sa = shared(bf16, 64 * 64)
    sb = shared(bf16, 64 * 64)
    for i in range(tid, 64 * 64, group_size(0)):
        sa[i] = A[i]
        sb[i] = B[i]
    barrier()
    acc = warpgroup_mma(sa, 0, sb, 0, ldb, False, frag_acc(1, 4))
    warpgroup_wait(0)
    frag_store(C, simd_group() * 16 * 64, 64, acc)
