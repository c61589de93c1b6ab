"""Attention prefill (issue 18): causal flash attention with an online softmax and grouped-query heads.

``launch_prefill`` runs ``attention_wg.attn_prefill_wg`` on NVIDIA sm_90 (warpgroup_mma + tile_load, S, P and O in
registers; ``wg_config``) and the portable kernel below everywhere else.

Layout: ``q``/``out`` are (tokens, HQ, D), ``k``/``v`` (tokens, HKV, D), one sequence, row-major; HQ a multiple of
HKV (query head h reads key/value head h // (HQ // HKV)); D is 64 or 128; scale 1/sqrt(D) unless given. Inputs are
f16/bf16 (matrix fragments read half types); sums and the softmax run in f32.

Design (FlashAttention-2's loop, on the DSL's matrix fragments). One group owns BM = 16 * WARPS query rows of one
head; SIMD group w owns 16 of them. The group stages its Q tile once in shared memory, then walks the key/value
blocks of BN tokens (up to its last row when causal):

1. stage K (BN x D) in shared memory; each SIMD group computes S = Q K^T (16 x BN) with ``mma`` over D / 16 steps
   (``frag_b`` reads K transposed) and stores it to an f32 shared scratch;
2. its lanes run the online softmax on its 16 rows, in base 2 (scores pre-multiplied by scale * log2(e), ``exp2``):
   each row is owned by SW / 16 neighbouring lanes (a lane owns 16 / SW rows where the SIMD width is below 16), which
   read their columns as 16-byte ``vload``s, apply the causal and length masks and combine the row max and sum by
   one or two shuffles, not SIMD-wide reductions; P = exp2(S - m) (by ``fast_exp2``, as P is rounded to the input
   type) goes to shared memory (``vstore``), and the running max m and sum l stay with the row's owner, its
   alpha = exp2(m_old - m) shuffled to every lane;
3. stage V in the same shared buffer; PV = P V (16 x D) by ``mma`` over BN / 16 steps, stored to the scratch; each
   lane then updates its slice of O (16 rows x D / simd_size() columns, f32 registers): O = O * alpha + PV.

At the end O / l is written. Where a SIMD group is narrower than 16 lanes (lavapipe: 8), steps 1 and 3 keep their
fragment k-steps as loops and compute P V in 16-column chunks: the scalar fragment fallback unrolled there held 256
accumulators a lane, and lavapipe's LLVM took 191 s (cold, a host without AVX-512) to compile the bf16 D 128 variant,
21 s after this change. Fragments cannot be scaled in place in the DSL (no element-wise ops on fragments), so O
lives in lane registers and every block's PV passes through shared memory: correct on every backend, but the shared
traffic keeps this well below FlashAttention's speed on the H200. Measured there (2026-12-02, bf16, 2048 tokens, 32/8
heads, D 64, causal; Nsight Compute, bench/results/2026-12-02-h200-attn-ncu.txt) before the lane-owned rows: 22 TF/s,
~2,000 instructions per SIMD group per key block (a third of them the per-row SIMD-wide reductions of step 2), 219
registers (2 groups per SM, 12% occupancy), stalls on shared-memory reads. The 430 TF/s target needs O in the
accumulator fragments, i.e. a fragment-scaling builtin.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    constexpr,
    f32,
    fast_exp2,
    frag_a,
    frag_acc,
    frag_b,
    frag_store,
    group_id,
    group_size,
    local_array,
    local_id,
    mma,
    shared,
    simd_group,
    simd_lane,
    simd_shuffle,
    simd_shuffle_xor,
    simd_size,
    static_range,
    vload,
    vstore,
)
from ..runtime import get_backend
from . import attention_wg  # the module, not the kernel: a kernel imported here would be registered twice
from .gemm import H

#: the default variant (``iron build``): head dim 128, 32-token key blocks, 2 SIMD groups (32 query rows), causal
D = 128
BN = 32  # with WARPS = 1: 22 KiB of shared memory, within every backend's 32 KiB
WARPS = 1
CAUSAL = True
SW = 32  # the SIMD width the default build assumes (launches pass the backend's)
VEC = 8  # 16-byte copies of f16/bf16


@func
def stage_rows(src, col0, stride, dst, ld, r0, n, R, D, tid, nth):
    """Copy rows r0 .. r0 + R - 1 (columns col0 .. col0 + D - 1, row stride ``stride``) of ``src`` into ``dst``
    (row stride ld), zeros for rows at or past n; 16-byte asynchronous copies, waited for, then a barrier."""
    per = D // VEC
    for i in range(tid, R * per, nth):
        r = i // per
        c = (i % per) * VEC
        if r0 + r < n:
            async_copy(dst, r * ld + c, src, (r0 + r) * stride + col0 + c, VEC)
        else:
            for e in static_range(VEC):
                dst[r * ld + c + e] = 0.0
    async_commit()
    async_wait(0)
    barrier()


@func
def row_combine(x, LPR, IS_MAX):
    """Max (or sum) of x over the LPR neighbouring lanes that share a row (LPR a power of two up to 8)."""
    if LPR >= 2:
        y = simd_shuffle_xor(x, 1)
        x = max(x, y) if IS_MAX else x + y
    if LPR >= 4:
        y = simd_shuffle_xor(x, 2)
        x = max(x, y) if IS_MAX else x + y
    if LPR >= 8:
        y = simd_shuffle_xor(x, 4)
        x = max(x, y) if IS_MAX else x + y
    return x


@func
def online_softmax(ss, sp, m, l, al, row0, q0, k0, n, scale2, LS, LP, BN, CAUSAL, SW):
    """The online-softmax step of one SIMD group's 16 rows (shared rows row0 ..), in base 2 (``scale2`` = scale *
    log2(e)): P into sp; m and l of this lane's own rows updated; al[r] = alpha of every row r, in every lane.

    Rows are owned by lanes: LPR = SW / 16 neighbouring lanes share a row (each takes BN / LPR columns, combined by
    shuffles), or with SW < 16 each lane owns RPL = 16 / SW rows, so a row's max and sum need no SIMD-wide reduction."""
    LPR = max(1, SW // 16)
    RPL = max(1, 16 // SW)
    RSTEP = SW // LPR  # rows apart of one lane's rows
    CPL = BN // LPR  # columns per lane
    PW = min(VEC, CPL)  # halves per P store
    lane = simd_lane()
    c0 = (lane % LPR) * CPL
    mine = local_array(f32, RPL)
    for i in static_range(RPL):
        r = lane // LPR + i * RSTEP
        qi = q0 + r
        base = (row0 + r) * LS + c0
        sv = local_array(f32, CPL)
        mx = -math.inf
        for j in static_range(CPL // 4):
            v = vload(ss, base + 4 * j, 4)
            for e in static_range(4):
                kj = k0 + c0 + 4 * j + e
                x = v[e] * scale2
                if kj >= n or (CAUSAL and kj > qi):
                    x = -math.inf
                sv[4 * j + e] = x
                mx = max(mx, x)
        mx = row_combine(mx, LPR, True)
        m_new = max(m[i], mx)
        m_use = m_new if m_new > -math.inf else 0.0  # a row with nothing seen yet: exp2(-inf - 0) = 0, not NaN
        tot = 0.0
        pbase = (row0 + r) * LP + c0
        for j in static_range(CPL // PW):
            pv = local_array(H, PW)
            for e in static_range(PW):
                p = fast_exp2(sv[PW * j + e] - m_use)
                pv[e] = p
                tot += p
            vstore(sp, pbase + PW * j, pv)
        tot = row_combine(tot, LPR, False)
        alpha = fast_exp2(m[i] - m_use)
        l[i] = l[i] * alpha + tot
        m[i] = m_new
        mine[i] = alpha
    for r in static_range(16):  # every lane scales its columns of O: alpha of each row from the row's owner
        al[r] = simd_shuffle(mine[r // RSTEP], (r % RSTEP) * LPR)


@kernel
def attn_prefill(q: Tensor[H], k: Tensor[H], v: Tensor[H], out: Tensor[H], n: int, HQ: int, HKV: int, scale: float,
                 D: constexpr, BN: constexpr, WARPS: constexpr, CAUSAL: constexpr, SW: constexpr):
    """out = softmax(scale * Q K^T [causal]) V per query head (GQA); launch (ceil(n / BM) * G, HQ) threads in groups
    of (G, 1), BM = 16 * WARPS, G = WARPS * SW, SW = the backend's simd_size() (a constexpr: it sizes the lanes'
    register slice of O)."""
    BM = 16 * WARPS
    LQ = D + VEC  # padded shared rows
    LP = BN + VEC
    LS = max(BN, D)
    DPL = D // SW  # O columns per lane
    DC = D if SW >= 16 else 16
    sq = shared(H, BM * LQ)
    skv = shared(H, BN * LQ)
    ss = shared(f32, BM * LS)
    sp = shared(H, BM * LP)
    tid = local_id(0)
    nth = group_size(0)
    w = simd_group()
    lane = simd_lane()
    S = simd_size()
    h = group_id(1)
    hk = h // (HQ // HKV)
    q0 = group_id(0) * BM
    row0 = w * 16
    stage_rows(q, h * D, HQ * D, sq, LQ, q0, n, BM, D, tid, nth)
    RPL = max(1, 16 // SW)
    o = local_array(f32, 16 * DPL)
    m = local_array(f32, RPL)  # this lane's own rows (online_softmax)
    l = local_array(f32, RPL)
    al = local_array(f32, 16)
    for i in static_range(RPL):
        m[i] = -math.inf
        l[i] = 0.0
    for r in static_range(16):
        for j in static_range(DPL):
            o[r * DPL + j] = 0.0
    scale2 = scale * 1.4426950408889634  # exp(x) = exp2(x log2(e))
    kend = n
    if CAUSAL:
        kend = min(n, q0 + BM)
    for k0 in range(0, kend, BN):
        barrier()  # every SIMD group is done with the previous V tile and scratch
        stage_rows(k, hk * D, HKV * D, skv, LQ, k0, n, BN, D, tid, nth)
        # the first step's accumulator is a fresh fragment (the interpreter cannot blend a bare zero fragment into a
        # variable set inside a loop)
        acc = mma(frag_a(sq, row0 * LQ, LQ), frag_b(skv, 0, LQ, True, BN // 16), frag_acc(1, BN // 16))
        if SW < 16:  # loops, not unrolled copies, where a lane holds many elements (lavapipe: LLVM's compile time)
            for kk in range(1, D // 16):
                acc = mma(frag_a(sq, row0 * LQ + kk * 16, LQ), frag_b(skv, kk * 16, LQ, True, BN // 16), acc)
        else:
            for kk in static_range(1, D // 16):
                acc = mma(frag_a(sq, row0 * LQ + kk * 16, LQ), frag_b(skv, kk * 16, LQ, True, BN // 16), acc)
        frag_store(ss, row0 * LS, LS, acc, 16, BN)
        barrier()
        online_softmax(ss, sp, m, l, al, row0, q0 + row0, k0, n, scale2, LS, LP, BN, CAUSAL, SW)
        barrier()  # every SIMD group is done with K
        stage_rows(v, hk * D, HKV * D, skv, LQ, k0, n, BN, D, tid, nth)
        for dc in range(0, D, DC):
            pv = mma(frag_a(sp, row0 * LP, LP), frag_b(skv, dc, LQ, False, DC // 16), frag_acc(1, DC // 16))
            if SW < 16:
                for kk in range(1, BN // 16):
                    pv = mma(frag_a(sp, row0 * LP + kk * 16, LP),
                             frag_b(skv, kk * 16 * LQ + dc, LQ, False, DC // 16), pv)
            else:
                for kk in static_range(1, BN // 16):
                    pv = mma(frag_a(sp, row0 * LP + kk * 16, LP),
                             frag_b(skv, kk * 16 * LQ + dc, LQ, False, DC // 16), pv)
            frag_store(ss, row0 * LS + dc, LS, pv, 16, DC)
        barrier()
        for r in static_range(16):
            for j in static_range(DPL):
                o[r * DPL + j] = o[r * DPL + j] * al[r] + ss[(row0 + r) * LS + lane + j * S]
    LPR = max(1, SW // 16)
    RSTEP = SW // LPR
    for r in static_range(16):
        lr = simd_shuffle(l[r // RSTEP], (r % RSTEP) * LPR)  # the row's sum, from its owner
        qi = q0 + row0 + r
        if qi < n:
            inv = 1.0 / lr
            for j in static_range(DPL):
                out[(qi * HQ + h) * D + lane + j * S] = o[r * DPL + j] * inv


#: per backend, the shared memory a group may use and the (BN, WARPS) tiles tried largest first: NVIDIA 64-row query
#: tiles (4 SIMD groups) and 64-token key blocks; HIP's 64 KiB take 2 SIMD groups at D = 128; elsewhere a small tile
#: per head dim that fits 32 KiB (lavapipe holds 16-bit shared elements in 32 bits)
LIMITS = {"cuda": 227 * 1024, "hip-on-cuda": 64 * 1024, "hip": 64 * 1024}
TILES = ((64, 4), (64, 2), (32, 2), (16, 1))
SMALL = {64: (32, 2), 128: (16, 1)}


def shared_bytes(d: int, bn: int, warps: int) -> int:
    """attn_prefill's shared arrays for 16-bit inputs: Q and K/V tiles, the f32 scratch, P."""
    bm = 16 * warps
    return 2 * bm * (d + VEC) + 2 * bn * (d + VEC) + 4 * bm * max(bn, d) + 2 * bm * (bn + VEC)


def pick_tiles(backend: str, d: int) -> tuple[int, int]:
    """(BN, WARPS) for ``backend`` and head dim ``d``: the largest of TILES within its shared limit."""
    limit = LIMITS.get(backend)
    if limit is None:
        return SMALL[min(SMALL, key=lambda x: abs(x - d))]
    return next((t for t in TILES if shared_bytes(d, *t) <= limit), TILES[-1])


#: attn_prefill_wg's (NC, WG, STAGES, PIPE) per head dim on NVIDIA sm_90 (bench/experiments/attn_wg_sweep.py)
WG_CONFIGS = {64: (2, 1, 2, 0), 128: (2, 2, 2, 0)}


def wg_config(backend: str, d: int) -> tuple[int, int, int, int] | None:
    """attn_prefill_wg's configuration where it runs: CUDA on an sm_90 device, head dim 64 or 128, unless
    IRON_ATTN_WG=0; IRON_ATTN_WG_CFG="NC,WG,STAGES,PIPE" overrides the table."""
    if backend != "cuda" or d not in WG_CONFIGS or os.environ.get("IRON_ATTN_WG", "1") == "0" or \
            getattr(get_backend(backend), "arch", "") != "sm_90":
        return None
    env = os.environ.get("IRON_ATTN_WG_CFG")
    return tuple(int(x) for x in env.split(",")) if env else WG_CONFIGS[d]


def launch_prefill(q: Any, k: Any, v: Any, out: Any, causal: bool = True, scale: float | None = None,
                   backend: str | None = None, config: tuple[int, int] | None = None) -> None:
    """out = attention(q, k, v) for (tokens, HQ, D) q/out and (tokens, HKV, D) k/v of one sequence."""
    n, hq, d = q.shape
    hkv = k.shape[1]
    if hq % hkv or d % 16 or tuple(k.shape) != (n, hkv, d) or tuple(v.shape) != (n, hkv, d):
        raise ValueError(f"attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit")
    name = backend or get_backend(None).name
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    wg = wg_config(name, d) if config is None else None
    if wg is not None:  # NVIDIA sm_90: the warpgroup kernel (wgmma, the copy engine, softmax in registers)
        nc, groups, stages, pipe = wg
        g = groups * 128
        grid = (-(-n // (64 * groups)) * g, hq)
        attention_wg.attn_prefill_wg[grid, (g, 1)](q, k, v, out, n, hq * d, hkv * d, hq, hkv, sc, d, nc, groups,
                                                   stages, causal, pipe, backend=backend)
        return
    width = get_backend(name).simd_width()
    bn, warps = config or pick_tiles(name, d)
    g = warps * width
    grid = (-(-n // (16 * warps)) * g, hq)
    attn_prefill[grid, (g, 1)](q, k, v, out, n, hq, hkv, sc, d, bn, warps, causal, width, backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    n, hq, hkv, d = gen.shape
    return {"q": gen.random(shape=(n, hq, d)), "k": gen.random(shape=(n, hkv, d)), "v": gen.random(shape=(n, hkv, d)),
            "out": gen.poisoned(shape=(n, hq, d))}


def oracle(d: dict, causal: bool = True, scale: float | None = None) -> np.ndarray:
    """float64: per query head, softmax(scale * q k^T + mask) v with the shared key/value head, written directly."""
    q, k, v = (d[x].astype(np.float64) for x in ("q", "k", "v"))
    n, hq, dim = q.shape
    rep = hq // k.shape[1]
    sc = 1.0 / np.sqrt(dim) if scale is None else scale
    out = np.empty_like(q)
    for h in range(hq):
        s = sc * q[:, h, :] @ k[:, h // rep, :].T
        if causal:
            s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h, :] = (p / p.sum(axis=1, keepdims=True)) @ v[:, h // rep, :]
    return out


def _torch_prefill(d: dict, causal: bool = True):
    """torch SDPA with enable_gqa over (1, H, tokens, D) views."""
    import torch.nn.functional as F

    q, k, v = (d[x].transpose(0, 1).unsqueeze(0) for x in ("q", "k", "v"))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    return o.squeeze(0).transpose(0, 1).contiguous()


def _flops(shape, causal: bool = True) -> int:
    n, hq, _, dim = shape
    full = 4 * n * n * hq * dim  # Q K^T and P V
    return full // 2 if causal else full


bench("std/attention/prefill", setup=_setup,
      launch=lambda d, be: launch_prefill(d["q"], d["k"], d["v"], d["out"], True, None, be),
      references={"numpy": lambda d: oracle(d).astype(d["q"].dtype), "torch": _torch_prefill,
                  "triton": ("attention", {"causal": True})},
      bytes_moved=lambda shape, itemsize: (2 * shape[0] * shape[1] + 2 * shape[0] * shape[2]) * shape[3] * itemsize,
      flops=_flops, dtypes=("f16", "bf16"),
      device_shapes=[(4096, 32, 8, 128), (4096, 32, 32, 128), (8192, 32, 8, 64)])(attn_prefill)
# f16/bf16: P rounded to the input type before P V, sums in f32; the output rounded once
test_kernel(oracle=oracle, domain="signed", shapes=[(37, 4, 2, 64), (21, 2, 1, 128)],
            tolerance={"f32": (1e-4, 1e-4), "f16": (4e-3, 4e-3), "bf16": (2e-2, 2e-2)})(attn_prefill)
