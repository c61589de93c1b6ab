"""f32 GEMM without matrix units: C = A @ B (or A @ B^T), row-major, any M, N, K, batched; plain FFMA.

Design (the classic register-tiled SGEMM). One group of NT = (BM / TM) * (BN / TN) threads computes a BM x BN tile
of C; each thread owns a TM x TN block of it in an f32 ``local_array`` (64 accumulators for 8 x 8), indexed only by
``static_range`` indices so it stays in registers. Per step of BK along K the group stages A's BM x BK tile in shared
memory *transposed* (k-major, ``sa[k * LDA + m]``) and B's BK x BN tile k-major too (``sb[k * LDB + n]``), so that for
each k a thread reads its TM values of A and TN values of B as TM / 4 + TN / 4 16-byte ``vload``s and does TM * TN
outer-product ``fma``s (explicit: NVRTC runs with ``--fmad=false``). A thread's rows are TM / 4 runs of 4 rows,
BM / (TM / 4) apart (its columns likewise), so each 16-byte read and each 16-byte store of C is contiguous across
threads. 32 consecutive threads form a 4 x 8 block of the thread grid: per k a warp reads 64 distinct bytes of A and
128 of B per ``vload`` (one shared-memory wavefront each, broadcasts to the rest), and its C stores are 128-byte rows.

Pipeline: two shared buffers, one barrier per BK step. While buffer ``kt % 2`` is multiplied, tile kt + 1 is on its
way: B (when stored K x N) by ``async_copy`` (cp.async) straight into the other buffer; A (and B stored N x K) by
global loads into registers, issued before the multiply and written transposed into the other buffer after it
(shared rows padded by 4 floats, LDA = BM + 4, so a warp's transposed stores hit distinct banks for BK = 8).

Edges: ``VEC`` (a constexpr, 4 when K and N are multiples of 4, else 1) picks 16-byte global accesses, where a
vector is wholly inside or outside the matrix (one predicate, zeros outside), or element accesses. Keeping the
element fallback out of the 16-byte variant matters: with both in one kernel ptxas used 145 registers instead of
128, one 256-thread group per SM instead of two (Iron has no ``__launch_bounds__`` to ask for fewer).

Expected on the H200 (not measured here: no GPU). Read from the sm_90 SASS of the default (128 x 128 x 8, 8 x 8 per
thread, 256 threads; NVRTC 13.5): 128 registers (124 for A @ B^T), no spills, 16.6 KiB of shared memory, so two
groups (16 warps) per SM; the main loop is 512 FFMA + 32 LDS.128 + ~70 other instructions per BK step, 84% FFMA
issue slots (BK = 16: 88%). Hopper issues one warp instruction per SMSP per clock and does one warp-FFMA per SMSP per
clock, so the FFMA share bounds the speed: 0.84 x 67 TF/s (peak at boost clock) = 56 TF/s; barrier waits and the
clock under power load take it to an expected 45-52 TF/s at 4096^3 (torch/cuBLAS: 51). Not the limit: shared memory
(4 wavefronts per warp per k for 64 warp-FFMAs, 25% of its bandwidth), L2 (the group reads (BM + BN) * 4 bytes per
k for 2 * BM * BN flops, 32 flop/byte: 4.4 GB through L2 at 4096^3, ~1.5 TB/s at 45 TF/s) and DRAM (~0.3 GB).
Autotuning also tries BK = 16 (half the barriers; 151 registers for A @ B^T), 8 x 16 per thread on 128 x 256 (128
FFMA per 6 LDS.128, but 213-255 registers: one group per SM) and smaller tiles for shapes with few 128 x 128 tiles.
Measured (bench/results/2026-12-02-h200-s5-gemm-f32.json): autotuning chose 128 x 256 8 x 16, 44.3 TF/s at 4096^3
and 44.5 at 8192^3 (torch/cuBLAS 51); its SASS reads 1024 FFMA of 1155 instructions per BK step (88.7%).

Pipelined configurations (two constexpr switches; read from the sm_90 SASS, NVRTC 13.5, *not yet measured on the
GPU*). ``UNROLL2`` runs two BK steps per kt-loop iteration, stage 0 then stage 1, so every shared offset of both
stages is an immediate and the loop control, the stage index arithmetic and some address set-up are paid once per
two steps. ``PREFETCH`` keeps two sets of the per-k fragments: each k reads k + 1's ``vload``s before its own fmas,
and the last k of a tile is multiplied after the barrier, behind the reads of the next tile's k = 0 (ptxas already
hoists shared reads within a tile by itself; what it cannot do is move them across the barrier, after which every
warp of a one-group SM waited out its first LDS.128's latency). Per BK step, FFMA / all instructions in the kt loop,
registers, A @ B (A @ B^T); no spills or local memory anywhere (VEC = 1 too: 209-231 registers):
    128 x 256 x 8, 8 x 16       before 1024 / 1155 = 88.7%, 213 (1024 / 1140 = 89.8%, 255)
      UNROLL2 + PREFETCH               1024 / 1112.5 = 92.0%, 211 (1024 / 1112 = 92.1%, 245)
      UNROLL2                          1024 / 1112 = 92.1%, 207 (1024 / 1111.5 = 92.1%, 214)
      PREFETCH                         1024 / 1140 = 89.8%, 211 (1024 / 1141 = 89.7%, 229)
    128 x 128 x 8, 8 x 8        before  512 / 606 = 84.5%, 128 (512 / 588 = 87.1%, 124)
      UNROLL2                           512 / 577.5 = 88.7%, 122 (512 / 573.5 = 89.3%, 129: one group per SM)
      (PREFETCH: 143-149 registers, one group per SM; not in the list)
At the measured 44.3 TF/s the FFMA share alone predicts 44.3 x 92.0 / 88.7 = 46 TF/s for 128 x 256 unrolled (the
88 non-FFMA instructions left per step, 131 before: 48 LDS.128, 6 padding ``@!PT LDS`` beside the cp.asyncs and ~34
for the tile fetch, the transposed stores, the wait and the barrier). The unrolled 128 x 256 loop is ~35 KiB of code
(2225 instructions) against ~18 KiB before; the PREFETCH-only configuration keeps the old size, should the larger
loop miss the instruction cache. BK = 16 with UNROLL2 unrolls past Iron's 4096 static iterations at 128 x 256, and
at 128 x 128 takes 157-168 registers for 90%: below 128 x 256 unrolled. Next, if these land short: the tile fetch
(per-thread global offsets and predicates are recomputed every step, constants reloaded by LDC under pressure).

Index arithmetic is 32-bit: each matrix, and batch x stride, must stay below 2^31 elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    constexpr,
    f32,
    fma,
    group_id,
    local_array,
    local_id,
    shared,
    static_range,
    vload,
    vstore,
)
from ..runtime import get_backend

PAD = 4  # floats of padding per transposed shared row (keeps 16-byte alignment, spreads a warp's stores over banks)


@func
def thread_origin(tid, TX):
    """(tm, tn): this thread's place in the (BM / TM) x (BN / TN) thread grid. 32 consecutive threads (a warp on
    NVIDIA; any SIMD width is correct) form a 4 x 8 block of it, so a warp's shared reads touch few distinct
    addresses."""
    w = tid // 32
    lane = tid % 32
    WX = TX // 8
    return (w // WX) * 4 + lane // 8, (w % WX) * 8 + lane % 8


@func
def fetch_rows(src, regs, off, r0, c0, rows, cols, R, BK, VEC, tid, NT):
    """regs <- this thread's vectors of the R x BK tile at (r0, c0) of the row-major rows x cols matrix at src[off:]:
    vector v = tid + i * NT is row v // (BK / 4), columns (v % (BK / 4)) * 4 + 0..3; zeros outside the matrix.
    VEC = 4: one 16-byte load per vector (cols and off multiples of 4, so a vector is wholly in or out)."""
    Q = BK // 4
    for i in static_range(R * Q // NT):
        v = tid + i * NT
        gr = r0 + v // Q
        gc = c0 + (v % Q) * 4
        if VEC == 4:
            if gr < rows and gc < cols:
                x = vload(src, off + gr * cols + gc, 4)
                for j in static_range(4):
                    regs[i * 4 + j] = x[j]
            else:
                for j in static_range(4):
                    regs[i * 4 + j] = 0.0
        else:
            for j in static_range(4):
                if gr < rows and gc + j < cols:
                    regs[i * 4 + j] = src[off + gr * cols + gc + j]
                else:
                    regs[i * 4 + j] = 0.0


@func
def store_transposed(dst, regs, base, LD, R, BK, tid, NT):
    """dst[base + k * LD + r] = element (r, k) of the tile ``fetch_rows`` put in regs (the k-major layout)."""
    Q = BK // 4
    for i in static_range(R * Q // NT):
        v = tid + i * NT
        r = v // Q
        c = (v % Q) * 4
        for j in static_range(4):
            dst[base + (c + j) * LD + r] = regs[i * 4 + j]


@func
def copy_rows(src, dst, off, base, r0, c0, rows, cols, R, CC, LD, VEC, tid, NT):
    """Start copying the R x CC tile at (r0, c0) of the row-major rows x cols matrix at src[off:] into
    dst[base + r * LD + c] unchanged, by async copies of VEC elements (16 bytes, or one f32); zeros outside."""
    Q = CC // 4
    for i in static_range(R * Q // NT):
        v = tid + i * NT
        r = v // Q
        c = (v % Q) * 4
        gr = r0 + r
        gc = c0 + c
        d = base + r * LD + c
        for e in static_range(0, 4, VEC):
            if gr < rows and gc + e < cols:
                async_copy(dst, d + e, src, off + gr * cols + gc + e, VEC)
            else:
                for j in static_range(VEC):
                    dst[d + e + j] = 0.0


@func
def load_fragments(sa, sb, abase, bbase, a, b, f, k, tm, tn, LDA, LDB, TM, TN, TY, TX):
    """a[f * TM:][:TM], b[f * TN:][:TN] <- this thread's TM values of A and TN values of B at k of the staged tiles:
    TM / 4 + TN / 4 16-byte shared reads (``f``, the fragment set, a compile-time 0 or 1)."""
    for h in static_range(TM // 4):
        x = vload(sa, abase + k * LDA + h * TY * 4 + tm * 4, 4)
        for i in static_range(4):
            a[f * TM + h * 4 + i] = x[i]
    for g in static_range(TN // 4):
        y = vload(sb, bbase + k * LDB + g * TX * 4 + tn * 4, 4)
        for j in static_range(4):
            b[f * TN + g * 4 + j] = y[j]


@func
def outer_product(acc, a, b, f, TM, TN):
    """acc += a[f * TM:][:TM] (x) b[f * TN:][:TN]: TM * TN fmas, every register index a compile-time constant."""
    for i in static_range(TM):
        for j in static_range(TN):
            acc[i * TN + j] = fma(a[f * TM + i], b[f * TN + j], acc[i * TN + j])


@func
def multiply_tile(sa, sb, abase, bbase, acc, tm, tn, LDA, LDB, BK, TM, TN, TY, TX):
    """acc += the staged A tile times the staged B tile, this thread's TM x TN block: per k, TM / 4 + TN / 4
    16-byte shared reads and TM * TN fmas (ptxas schedules the reads of later k ahead itself, within the tile)."""
    for k in static_range(BK):
        a = local_array(f32, TM)
        b = local_array(f32, TN)
        load_fragments(sa, sb, abase, bbase, a, b, 0, k, tm, tn, LDA, LDB, TM, TN, TY, TX)
        outer_product(acc, a, b, 0, TM, TN)


@func
def multiply_prefetched(sa, sb, abase, bbase, acc, fa, fb, tm, tn, LDA, LDB, BK, TM, TN, TY, TX):
    """PREFETCH: acc += k = 0 .. BK - 2 of the staged tiles, whose k = 0 fragments are in set 0 of (fa, fb) on entry;
    each k first reads k + 1's into the other set. Leaves k = BK - 1's in set 1 (BK is even), for after the barrier."""
    for k in static_range(BK - 1):
        load_fragments(sa, sb, abase, bbase, fa, fb, (k + 1) % 2, k + 1, tm, tn, LDA, LDB, TM, TN, TY, TX)
        outer_product(acc, fa, fb, k % 2, TM, TN)


@func
def store_block(C, off, acc, m0, n0, tm, tn, M, N, TM, TN, TY, TX, VEC):
    """C[m, n] = acc for this thread's elements inside M x N: 16-byte stores for VEC = 4 (N and off multiples of
    4, so a vector is wholly in or out), element stores else."""
    for h in static_range(TM // 4):
        for i in static_range(4):
            r = m0 + h * TY * 4 + tm * 4 + i
            if r < M:
                for g in static_range(TN // 4):
                    c = n0 + g * TX * 4 + tn * 4
                    o = local_array(f32, 4)
                    for j in static_range(4):
                        o[j] = acc[(h * 4 + i) * TN + g * 4 + j]
                    if VEC == 4:
                        if c < N:
                            vstore(C, off + r * N + c, o)
                    else:
                        for j in static_range(4):
                            if c + j < N:
                                C[off + r * N + c + j] = o[j]


@func
def fetch_tiles(A, B, sb, ra, rb, a0, b0, buf, k0, m0, n0, M, N, K, B_TILE, LDB, BM, BN, BK, TRANS_B, VEC, tid, NT):
    """Issue the reads of the A and B tiles at k0: A (and B^T) into registers, B straight into stage ``buf``."""
    fetch_rows(A, ra, a0, m0, k0, M, K, BM, BK, VEC, tid, NT)
    if TRANS_B:
        fetch_rows(B, rb, b0, n0, k0, N, K, BN, BK, VEC, tid, NT)
    else:
        copy_rows(B, sb, b0, buf * B_TILE, k0, n0, K, N, BK, BN, LDB, VEC, tid, NT)


@func
def place_tiles(sa, sb, ra, rb, buf, A_TILE, B_TILE, LDA, LDB, BM, BN, BK, TRANS_B, tid, NT):
    """Write the tiles ``fetch_tiles`` left in registers into stage ``buf``, k-major."""
    store_transposed(sa, ra, buf * A_TILE, LDA, BM, BK, tid, NT)
    if TRANS_B:
        store_transposed(sb, rb, buf * B_TILE, LDB, BN, BK, tid, NT)


@kernel
def gemm_f32(A: Tensor[f32], B: Tensor[f32], C: Tensor[f32], M: int, N: int, K: int, SA: int, SB: int, SC: int,
             BM: constexpr, BN: constexpr, BK: constexpr, TM: constexpr, TN: constexpr, UNROLL2: constexpr,
             PREFETCH: constexpr, TRANS_B: constexpr, VEC: constexpr):
    """C[M, N] = A[M, K] @ B[K, N] (TRANS_B: B is stored N x K and C = A @ B^T), row-major f32. Launch
    (ceil(N / BN) * NT, ceil(M / BM), batch) threads in groups of (NT, 1, 1), NT = (BM / TM) * (BN / TN); batch b's
    matrices start b * SA, b * SB, b * SC elements in (0 for one product). VEC = 4 (16-byte global accesses)
    needs K, N, SA, SB, SC multiples of 4, else VEC = 1. TM, TN multiples of 4; BN / TN a multiple of 8, NT of 32;
    BM * BK and BN * BK multiples of 4 * NT (``check_config``). UNROLL2: two steps of BK per loop iteration, stage 0
    then stage 1 (compile-time shared offsets); PREFETCH: each k reads k + 1's fragments before its fmas, and the last
    k of a tile is multiplied after the barrier, behind the reads of the next tile's first fragments."""
    TY = BM // TM
    TX = BN // TN
    NT = TY * TX
    LDA = BM + PAD
    LDB = BN + PAD if TRANS_B else BN
    A_TILE = BK * LDA
    B_TILE = BK * LDB
    STEPS = 2 if UNROLL2 else 1
    sa = shared(f32, 2 * A_TILE)
    sb = shared(f32, 2 * B_TILE)
    tid = local_id(0)
    tm, tn = thread_origin(tid, TX)
    m0 = group_id(1) * BM
    n0 = group_id(0) * BN
    a0 = group_id(2) * SA
    b0 = group_id(2) * SB
    c0 = group_id(2) * SC
    ra = local_array(f32, BM * BK // NT)
    rb = local_array(f32, BN * BK // NT)
    acc = local_array(f32, TM * TN)
    fa = local_array(f32, 2 * TM)  # PREFETCH: two sets of fragments, k's and k + 1's
    fb = local_array(f32, 2 * TN)
    for i in static_range(TM * TN):
        acc[i] = 0.0
    ktiles = (K + BK - 1) // BK
    fetch_tiles(A, B, sb, ra, rb, a0, b0, 0, 0, m0, n0, M, N, K, B_TILE, LDB, BM, BN, BK, TRANS_B, VEC, tid, NT)
    async_commit()
    place_tiles(sa, sb, ra, rb, 0, A_TILE, B_TILE, LDA, LDB, BM, BN, BK, TRANS_B, tid, NT)
    async_wait(0)
    barrier()
    if PREFETCH:
        load_fragments(sa, sb, 0, 0, fa, fb, 0, 0, tm, tn, LDA, LDB, TM, TN, TY, TX)
    for kt0 in range(0, ktiles, STEPS):
        for u in static_range(STEPS):
            kt = kt0 + u
            cur = u if UNROLL2 else kt % 2
            if u == 0 or kt < ktiles:  # UNROLL2 with odd ktiles: the last pair is one step
                more = kt + 1 < ktiles
                if more:  # tile kt + 1 travels while tile kt is multiplied
                    fetch_tiles(A, B, sb, ra, rb, a0, b0, 1 - cur, (kt + 1) * BK, m0, n0, M, N, K, B_TILE, LDB, BM,
                                BN, BK, TRANS_B, VEC, tid, NT)
                async_commit()
                if PREFETCH:
                    multiply_prefetched(sa, sb, cur * A_TILE, cur * B_TILE, acc, fa, fb, tm, tn, LDA, LDB, BK, TM,
                                        TN, TY, TX)
                else:
                    multiply_tile(sa, sb, cur * A_TILE, cur * B_TILE, acc, tm, tn, LDA, LDB, BK, TM, TN, TY, TX)
                if more:  # stage 1 - cur was last read in step kt - 1, which the barrier below that step closed
                    place_tiles(sa, sb, ra, rb, 1 - cur, A_TILE, B_TILE, LDA, LDB, BM, BN, BK, TRANS_B, tid, NT)
                async_wait(0)
                barrier()
                if PREFETCH:  # tile kt + 1's k = 0 (unused after the last tile), then tile kt's last k
                    load_fragments(sa, sb, (1 - cur) * A_TILE, (1 - cur) * B_TILE, fa, fb, 0, 0, tm, tn, LDA, LDB,
                                   TM, TN, TY, TX)
                    outer_product(acc, fa, fb, 1, TM, TN)
    store_block(C, c0, acc, m0, n0, tm, tn, M, N, TM, TN, TY, TX, VEC)


#: the tunable constexprs of ``gemm_f32``
_FIELDS = ("BM", "BN", "BK", "TM", "TN", "UNROLL2", "PREFETCH")
#: the pipeline switches, off unless a configuration names them
_PIPELINE = {"UNROLL2": False, "PREFETCH": False}
#: GPUs, (BM, BN, BK, TM, TN[, UNROLL2, PREFETCH]), the first the default (IRON_AUTOTUNE=0). 128 x 128 tiles of 8 x 8
#: per thread (256 threads, 17 KiB of shared memory, 124-128 registers on sm_90: two groups per SM), then BK = 16
#: (33 KiB, half the barriers; 151 registers for A @ B^T), 8 x 16 per thread on 128 x 256 (213-255 registers, one
#: group per SM, 128 FFMA per 6 shared reads), smaller tiles for shapes that give too few 128 x 128 tiles to fill 132
#: SMs, then the pipelined ones (module docstring; SASS-read, not yet timed): 128 x 256 with the kt loop unrolled by
#: two and fragment prefetch (92% FFMA), unrolled only, prefetch only (a loop half the size, should the unrolled one
#: miss the instruction cache), and 128 x 128 unrolled (89% FFMA, 122 registers for A @ B: still two groups per SM).
_GPU = [(128, 128, 8, 8, 8), (128, 128, 16, 8, 8), (128, 256, 8, 8, 16), (64, 128, 8, 8, 8), (128, 64, 8, 8, 8),
        (64, 64, 8, 4, 8), (128, 256, 8, 8, 16, True, True), (128, 256, 8, 8, 16, True, False),
        (128, 256, 8, 8, 16, False, True), (128, 128, 8, 8, 8, True, False)]
CONFIGS = {"cuda": _GPU, "hip-on-cuda": _GPU[:1], "metal": [_GPU[0], (64, 64, 8, 4, 8)]}
#: CPU backends (the interpreter, lavapipe: SIMD width 8 and 32 KiB, the Metal model: 32 KiB) and the default: one
#: small tile, 64 threads of 4 x 4, 4 KiB of shared memory, so tests run fast
SMALL = [(32, 32, 8, 4, 4)]
#: the constexprs `iron build` compiles by default: the GPU default (17 KiB of shared memory, within Metal's 32 KiB)
BM, BN, BK, TM, TN = _GPU[0]
UNROLL2 = PREFETCH = False
TRANS_B = False
VEC = 4


def configs_for(name: str) -> list[dict[str, int]]:
    """The configurations autotuning tries on backend ``name``: Vulkan on a GPU gets the GPU list (those over the
    device's shared memory are skipped when tuning), a CPU device the small one."""
    if name == "vulkan" and get_backend(name).info().get("type") not in ("cpu", None):
        values = _GPU
    else:
        values = CONFIGS.get(name, SMALL)
    return [config(v) for v in values]


def config(values: tuple) -> dict[str, int]:
    """A configuration from (BM, BN, BK, TM, TN[, UNROLL2, PREFETCH]); the pipeline switches default to off."""
    given = dict(zip(_FIELDS, values))
    return {f: given.get(f, _PIPELINE.get(f)) for f in _FIELDS}


def check_config(cfg: dict[str, int]) -> None:
    """Raise ValueError unless ``cfg`` satisfies ``gemm_f32``'s shape rules (its docstring)."""
    bm, bn, bk, tm, tn = (cfg[f] for f in _FIELDS[:5])
    if bm % tm or bn % tn or tm % 4 or tn % 4:
        raise ValueError(f"gemm_f32 {cfg}: TM, TN must be multiples of 4 dividing BM, BN")
    tx, nt = bn // tn, (bm // tm) * (bn // tn)
    if tx % 8 or nt % 32 or bk % 4 or (bm * bk) % (4 * nt) or (bn * bk) % (4 * nt):
        raise ValueError(f"gemm_f32 {cfg}: needs BN / TN % 8 == 0, NT % 32 == 0, BK % 4 == 0 and BM * BK, "
                         f"BN * BK multiples of 4 * NT (NT = {nt})")


def launch(a: Any, b: Any, c: Any, trans_b: bool = False, backend: str | None = None,
           config: dict[str, int] | None = None) -> None:
    """C = A @ B (or A @ B^T: ``b`` is N x K) for C-contiguous f32 arrays: 2-D, or 3-D with a leading batch
    dimension (one product per batch, one launch). ``config`` forces a configuration (else autotuned)."""
    batch = a.shape[0] if len(a.shape) == 3 else 1
    m, k = a.shape[-2:]
    n = b.shape[-2] if trans_b else b.shape[-1]
    if batch == 0 or m == 0 or n == 0:
        return
    strides = (m * k, n * k, m * n) if batch > 1 else (0, 0, 0)
    flat = [x.reshape(-1) for x in (a, b, c)]
    vec = 4 if k % 4 == 0 and n % 4 == 0 else 1  # then every row start and batch stride is 16-byte aligned
    name = backend or get_backend(None).name

    def run(cfg: dict[str, int]) -> None:
        cfg = {**_PIPELINE, **cfg}
        check_config(cfg)
        nt = (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])
        grid = (-(-n // cfg["BN"]) * nt, -(-m // cfg["BM"]), batch)
        gemm_f32[grid, (nt, 1, 1)](*flat, m, n, k, *strides, *(cfg[f] for f in _FIELDS), trans_b, vec,
                                   backend=backend)

    if config is not None:
        run(config)
        return
    label = f"std/gemm_f32{'_nt' if trans_b else ''}"
    run(tune(label, configs_for(name), run, backend=name, dtype="f32", key=(batch * m, n, k)))


# --- registration: iron bench / iron test --------------------------------------------------------------------------

#: |C - oracle| <= atol + rtol |oracle|. Inputs are standard normal, so |C| ~ sqrt(K) and an f32 sum of K terms is off
#: by ~eps * K / 2 root-mean-square (1.5e-4 at K = 8192, simulated): atol holds the largest device shape (8192^3) with
#: a wide margin, and a wrong index or a lost k-term (an error of order 1) still fails at every shape.
TOLERANCE = {"f32": (5e-3, 1e-4)}


def _setup(gen: InputGen, trans_b: bool) -> dict[str, np.ndarray]:
    *batch, m, n, k = gen.shape
    return {"a": gen.random(shape=(*batch, m, k)), "b": gen.random(shape=(*batch, n, k) if trans_b else (*batch, k, n)),
            "c": gen.poisoned(shape=(*batch, m, n))}


def oracle(d: dict[str, Any], trans_b: bool = False) -> np.ndarray:
    """C in float64 from the f32 inputs (batched when 3-D)."""
    b = d["b"].astype(np.float64)
    return d["a"].astype(np.float64) @ (np.swapaxes(b, -1, -2) if trans_b else b)


class _Alias:
    """``gemm_f32`` registered once more under another name (the registry keeps one entry per object)."""

    def __init__(self, k, what: str):
        self.fn = k.fn
        self.kernel = k
        self.what = what

    def __repr__(self) -> str:
        return f"<iron kernel gemm_f32 ({self.what})>"


def _register(name: str, target: Any, trans_b: bool, shapes: list, device_shapes: list) -> None:
    references = {"numpy": ("matmul", {"trans_b": trans_b, "out": "c"}), "torch": ("matmul", {"trans_b": trans_b})}
    if len(shapes[0]) == 3:  # the Triton peer multiplies 2-D matrices
        references["triton"] = ("gemm", {"trans_b": trans_b})
    bench(name, setup=lambda g: _setup(g, trans_b), launch=lambda d, be: launch(d["a"], d["b"], d["c"], trans_b, be),
          output="c", references=references,
          bytes_moved=lambda shape, itemsize: int(np.prod(shape[:-3])) * (shape[-3] * shape[-1] + shape[-1] * shape[-2]
                                                                           + shape[-3] * shape[-2]) * itemsize,
          flops=lambda shape: 2 * int(np.prod(shape)), shapes=shapes, device_shapes=device_shapes, dtypes=("f32",),
          oracle=lambda d: oracle(d, trans_b))(target)
    test_kernel(name, tolerance=TOLERANCE, domain="signed")(target)


#: shapes are (M, N, K), batched ones (batch, M, N, K)
_register("std/gemm/gemm_f32", gemm_f32, False, [(67, 45, 33), (32, 64, 16)],
          [(4096, 4096, 4096), (8192, 8192, 8192)])
_register("std/gemm/gemm_f32_nt", _Alias(gemm_f32, "A @ B^T"), True, [(67, 45, 33), (32, 64, 16)],
          [(4096, 4096, 4096), (8192, 8192, 8192)])
_register("std/gemm/gemm_f32_batched", _Alias(gemm_f32, "batched A @ B"), False, [(3, 33, 20, 12)],
          [(64, 512, 512, 512)])
