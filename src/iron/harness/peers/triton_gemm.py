"""GEMM in Triton: C = A @ B (or A @ B^T) with ``tl.dot`` on the tensor cores, f16/bf16 inputs accumulated in f32,
stored as C's dtype (f16, bf16 or f32). f32 inputs use full-precision f32 products (``input_precision="ieee"``),
not TF32, as torch's default and Iron's f32 GEMM do.

Each program owns a BLOCK_M x BLOCK_N tile of C and walks K in BLOCK_K steps; Triton pipelines the loads of the
next steps (``num_stages``) into shared memory and, on sm_90, issues wgmma. Programs are ordered in groups of
``GROUP_M`` tile rows so that the programs resident together share their A and B tiles in L2. The tile shape, warps
and stages are autotuned per (M, N, K, dtypes) over a few configurations that suit Hopper and Ampere; edges are
masked, so any M, N, K works.

Imports Triton at import time: only :mod:`iron.harness.peers` imports this module, when a row runs the peer.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


def _config(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=stages,
                         num_warps=warps)


#: a few shapes that cover large square problems (the 128x256 tiles) and smaller or skinny ones; a configuration
#: that does not fit the device's shared memory (f32 with deep pipelines) is skipped by the autotuner
CONFIGS = [
    _config(128, 256, 64, 3, 8),
    _config(256, 128, 64, 3, 8),
    _config(128, 128, 64, 4, 8),
    _config(128, 128, 64, 3, 4),
    _config(64, 256, 64, 4, 4),
    _config(128, 64, 64, 4, 4),
    _config(64, 64, 64, 4, 4),
    _config(128, 128, 32, 3, 8),
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K", "IEEE", "TRANS_B"])
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
          IEEE: tl.constexpr, TRANS_B: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
          BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # grouped order: GROUP_M tile rows are swept column by column, so concurrent programs reuse tiles in L2
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % group_rows
    tile_n = (pid % per_group) // group_rows

    # rows and columns past the edge wrap around (in bounds, never stored) instead of masking every load; the
    # modulo keeps Triton's contiguity analysis, so the loads along a contiguous axis stay vectorised
    rm = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
    if TRANS_B:  # B stored (N, K): load its (BLOCK_N, BLOCK_K) tile as stored and let tl.trans pick the K-major form
        b_ptrs = b_ptr + rn[:, None].to(tl.int64) * stride_bn + rk[None, :] * stride_bk
    else:
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :].to(tl.int64) * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
            if TRANS_B:
                b = tl.load(b_ptrs, mask=rk[None, :] < k_left, other=0.0)
            else:
                b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        if TRANS_B:
            b = tl.trans(b)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    cm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm[:, None].to(tl.int64) * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def gemm(d: dict[str, Any], *, trans_b: bool = False, a: str = "a", b: str = "b") -> None:
    """``ref_out = a @ b`` for ``a`` (M, K) and ``b`` (K, N), or ``a @ b.T`` with ``trans_b`` (``b`` is (N, K)).
    Any strides; f16/bf16/f32 inputs of one dtype, ``ref_out`` of any of the three."""
    lhs, rhs, out = d[a], d[b], d["ref_out"]
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"gemm peer: A is {lhs.dtype} and B is {rhs.dtype}; give both the same dtype")
    M, K = lhs.shape
    N = rhs.shape[0] if trans_b else rhs.shape[1]
    stride_bk, stride_bn = (rhs.stride(1), rhs.stride(0)) if trans_b else (rhs.stride(0), rhs.stride(1))
    ieee = lhs.dtype.itemsize == 4  # f32 inputs: full f32 products, no TF32

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _gemm[grid](lhs, rhs, out, M, N, K, lhs.stride(0), lhs.stride(1), stride_bk, stride_bn, out.stride(0),
                out.stride(1), IEEE=ieee, TRANS_B=trans_b)
