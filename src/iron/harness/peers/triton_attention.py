"""Flash-attention forward in Triton, the fused-attention tutorial's algorithm, over Iron's prefill layout: ``q`` and
the output (tokens, HQ, D), ``k``/``v`` (tokens, HKV, D) of one sequence, addressed through their strides (no
transposes, no copies); query head ``h`` reads key/value head ``h // (HQ // HKV)`` (grouped-query attention).

One program owns BLOCK_M query rows of one head and keeps Q in registers; it walks the key/value blocks of BLOCK_N
tokens: S = Q K^T by ``tl.dot`` (f32), the online softmax in base 2 (``log2(e) * scale`` folded into one multiplier,
``exp2``), the running max m and sum l, the accumulator rescaled by ``exp2(m_old - m_new)`` and P (rounded to the
input type) times V added by ``tl.dot`` into it; O / l is written once. Causal attention runs in the tutorial's two
stages: the blocks wholly left of the diagonal with no mask at all, then the BLOCK_M-wide diagonal band with the
causal mask (which also hides the keys past the end of the sequence). Head dims 64 and 128 (any power of two from 16),
f16/bf16 in, f32 accumulation, output in the output's dtype. Autotuned over tile sizes, warps and pipeline stages,
keyed on (N_CTX, HEAD_DIM, CAUSAL) and the dtypes.

Imports Triton at import time: only :mod:`iron.harness.peers` imports this module, when a row runs the peer.
"""

from __future__ import annotations

import math
from typing import Any

import triton
import triton.language as tl


@triton.jit
def _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, start_m, qk_scale, N_CTX,
                offs_m, offs_n, offs_d, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, STAGE: tl.constexpr):
    """One stage of the key/value walk. STAGE 1: the blocks left of the diagonal band (every key visible and inside
    the sequence: no mask, no bounds); 2: the diagonal band (causal mask; keys past the end hidden by it); 3: every
    key, non-causal (the last block's keys past the end masked)."""
    if STAGE == 1:
        lo, hi = 0, start_m * BLOCK_M
    elif STAGE == 2:
        lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
        lo = tl.multiple_of(lo, BLOCK_M)
    else:
        lo, hi = 0, N_CTX
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        k_ptrs = k_base + keys[None, :] * stride_kn + offs_d[:, None]  # K^T: (HEAD_DIM, BLOCK_N)
        v_ptrs = v_base + keys[:, None] * stride_vn + offs_d[None, :]  # V: (BLOCK_N, HEAD_DIM)
        if STAGE == 1:
            k = tl.load(k_ptrs)
        else:
            k = tl.load(k_ptrs, mask=keys[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        if STAGE == 1:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        else:
            if STAGE == 2:
                visible = offs_m[:, None] >= keys[None, :]
            else:
                visible = keys[None, :] < N_CTX
            qk = qk * qk_scale + tl.where(visible, 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if STAGE == 1:
            v = tl.load(v_ptrs)
        else:
            # masked keys' P is 0, but 0 * (garbage past the end) could be NaN: load zeros there
            v = tl.load(v_ptrs, mask=keys[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_kernel(Q, K, V, Out, sm_scale, N_CTX, GROUP, stride_qm, stride_qh, stride_km, stride_kh, stride_vm,
                     stride_vh, stride_om, stride_oh, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1).to(tl.int64)
    kv_h = off_h // GROUP
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m[:, None] < N_CTX
    q = tl.load(Q + off_h * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :], mask=rows, other=0.0)
    k_base = K + kv_h * stride_kh
    v_base = V + kv_h * stride_vh
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e) folded in: exp(s * scale) = exp2(s * qk_scale)
    if CAUSAL:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, start_m, qk_scale, N_CTX,
                                    offs_m, offs_n, offs_d, BLOCK_M, BLOCK_N, 1)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, start_m, qk_scale, N_CTX,
                                    offs_m, offs_n, offs_d, BLOCK_M, BLOCK_N, 2)
    else:
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, stride_km, stride_vm, start_m, qk_scale, N_CTX,
                                    offs_m, offs_n, offs_d, BLOCK_M, BLOCK_N, 3)
    acc = acc / l_i[:, None]
    tl.store(Out + off_h * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :], acc.to(Out.dtype.element_ty),
             mask=rows)


def _configs() -> list[triton.Config]:
    """BLOCK_M 64/128 x BLOCK_N 32/64 (and 128 for BLOCK_M 128) x 4/8 warps x 2-4 stages; BLOCK_N <= BLOCK_M (the
    causal band is BLOCK_M wide, walked in BLOCK_N steps). Configs over the shared-memory limit are skipped by the
    autotuner."""
    configs = []
    for bm, bn in ((64, 32), (64, 64), (128, 32), (128, 64), (128, 128)):
        for warps in (4, 8):
            if bm == 64 and warps == 8:
                continue  # 64 rows over 8 warps: too little work a warp for the tensor cores
            for stages in (2, 3, 4):
                configs.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages))
    return configs


_attn_fwd = triton.autotune(configs=_configs(), key=["N_CTX", "HEAD_DIM", "CAUSAL"])(_attn_fwd_kernel)


def _check(q: Any, k: Any, v: Any, out: Any) -> tuple[int, int, int, int]:
    n, hq, dim = q.shape
    hkv = k.shape[1]
    if tuple(k.shape) != (n, hkv, dim) or tuple(v.shape) != (n, hkv, dim) or tuple(out.shape) != (n, hq, dim):
        raise ValueError(f"attention peer: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, "
                         f"out {tuple(out.shape)} do not fit")
    if hq % hkv or dim < 16 or dim & (dim - 1):
        raise ValueError(f"attention peer: HQ {hq} must be a multiple of HKV {hkv}, D {dim} a power of two >= 16")
    if any(t.stride(-1) != 1 for t in (q, k, v, out)):
        raise ValueError("attention peer: the head dim must be contiguous")
    return n, hq, hkv, dim


def attention(d: dict[str, Any], *, causal: bool = True, scale: float | None = None, q: str = "q", k: str = "k",
              v: str = "v", config: dict[str, int] | None = None) -> None:
    """``ref_out[:, h, :] = softmax(scale * q[:, h] k[:, h // (HQ // HKV)]^T + causal mask) v[:, h // (HQ // HKV)]``
    for (tokens, HQ, D) q/out and (tokens, HKV, D) k/v; scale 1/sqrt(D) unless given. ``config`` (BLOCK_M, BLOCK_N,
    num_warps, num_stages) runs that one tile shape instead of the autotuned choice."""
    Q, K, V, out = d[q], d[k], d[v], d["ref_out"]
    n, hq, hkv, dim = _check(Q, K, V, out)
    sm_scale = 1.0 / math.sqrt(dim) if scale is None else scale
    args = (Q, K, V, out, sm_scale, n, hq // hkv, Q.stride(0), Q.stride(1), K.stride(0), K.stride(1), V.stride(0),
            V.stride(1), out.stride(0), out.stride(1))
    if config is None:
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_M"]), hq)  # noqa: E731
        _attn_fwd[grid](*args, HEAD_DIM=dim, CAUSAL=causal)
        return
    c = dict(config)
    warps, stages = c.pop("num_warps", 4), c.pop("num_stages", 2)
    _attn_fwd_kernel[(triton.cdiv(n, c["BLOCK_M"]), hq)](*args, HEAD_DIM=dim, CAUSAL=causal, num_warps=warps,
                                                          num_stages=stages, **c)
