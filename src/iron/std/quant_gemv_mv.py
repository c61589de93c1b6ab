"""The 4-bit dequantizing GEMV with the weight rows as the matrix units' rows (``mv_q4``): ``launch_gemv_q``'s path
"mv".

Why: ``gemv_q4_mma`` puts x in A's 16 rows and the weight rows in B, so each lane turns 4 codes a mma.sync into
scaled halves (a logic op and a packed fma per two) and copies x into both row halves of A: NVRTC's SASS of its
loop at (NT 1, WARPS 8, U 2) is ~3.6 instructions a weight and a lane, against the SIMD-group kernel's ~2.5, and it
measured slower (H200 s21: 88 against 61 us at 16384^2). ``mv_q4`` makes the weight rows A (8 codes a lane and
mma.sync) and x B, takes each k-step's codes from one quantization group so the group's sum is scaled once after
the matrix units (no packed fma: one logic op per two codes, ``codegen/cfamily/cuda_matrix.py``): ~1.6
instructions a weight and a lane in its loop at MT 4 (the logic ops and shifts making the halves 0.9 of them).

Measured (s31, an H100, bench/results/2026-12-07-h100-s31-mv-q4): correct on CUDA, but slower than
``gemv_q_warp``: 101.4 us at best (MT 1, WARPS 8, U 2) against 69.5 at 16384^2. Nsight Compute (MT 4 WARPS 4):
L1/TEX 74 %, DRAM 47 %, 12 % occupancy (134 registers), two thirds of the stalls waiting on L1 data: loads in the
fragments' layout touch 8 rows an instruction (words 8 bytes a lane, scales 2), about four times the L1 wavefronts
per byte of the SIMD-group kernel's 16-byte row loads, with too few in flight. Next: stage each slab's words (and
the block's scales) in shared memory by coalesced async copies and read the fragments from there (Marlin's way),
or give each lane 16 bytes of a row (two mma.sync a step, one per group, B zeroed in the other group's lanes).
NS >= 2 (s31) is the first: each slab staged by ``copy_slab``; timed in s32 (H100, 16384^2 bf16): 99.1 us at best
(1, 8, 1, 2), against 102.0 unstaged and gemv_q_warp's 67.7 in the same run: staging bought 3 %.

Layout and blocks as ``gemv_q4_mma`` (``quant_gemv_mma.py``): a group of ``WARPS`` SIMD groups owns 16 MT rows and
splits K's 128-code slabs into WARPS ranges; each SIMD group issues ``U`` slabs' ``mv_q4`` a step; the bias term
(sum over groups of bias times x's group sum, x's sums made once per group in shared memory) and the WARPS parts
are added by ``finish_block``. y[n] = sum_g s[n, g] (sum_k q x_k over g) + sum_g b[n, g] (sum of x over g): no
rounding of the dequantized weights (``gemv_q4_mma`` rounds each code times its scale to T, as torch's
dequantize-then-mv). Other targets run ``mv_q4``'s scalar fallback (correct, slow): the launcher offers this path
on CUDA only.
"""

from __future__ import annotations

from ..frontend import kernel
from ..lang import (
    Tensor,
    async_commit,
    async_wait,
    barrier,
    constexpr,
    f32,
    frag_acc,
    frag_store,
    group_id,
    mv_q4,
    num_groups,
    shared,
    simd_group,
    static_range,
    u32,
)
from .gemm_tiles import H
from .quant_gemv_mma import copy_slab, finish_block, group_sums, matrix_configs, matrix_fits

#: iron build's defaults
GROUP = 64
MT = 1
WARPS = 4
U = 4
NG = 256
XV = 8
NS = 0
#: (MT, WARPS, U) that ``mv_configs`` offers (path "mv"; not among the tuned candidates: slower, above). NVRTC
#: sm_90, bf16, group 64: MT 4 U 1 128 registers, ~1.6 SASS instructions a weight and a lane in its loop (the codes'
#: logic ops and shifts 0.9 of them; the SIMD-group kernel's ~2.5); MT 4 U 2 156; MT 2 U 2 108; MT 2 U 1 96; MT 1 U 2
#: 78. At 16384 rows MT 4 makes 256 groups: WARPS 8 gives the H200's SMs ~16 SIMD groups each (2 groups an SM fit)
#: (MT, WARPS, U, NS): NS >= 2 stages each slab's words, x and scales in shared memory by async copies NS - 1 slabs
#: ahead, coalesced (``copy_slab``, as gemv_q4_mma's), and mv_q4 reads the staged copy (groups of 32 and 64; within
#: lavapipe's 32 KiB, where 16-bit shared arrays take 32-bit words): the loads of the fragments from shared memory
#: instead of 8 rows of global memory an instruction (the measured bottleneck above); NVRTC sm_90 bf16: (2, 2, 1, 3)
#: 76 registers, ~2.7 instructions a weight in its loop (copies, barrier and shared loads included). H100, s32: 117.6,
#: 107.9, 116.0 and 99.1 us in table order (bench/results/2026-12-07-h100-s32-q4-mv-staged)
TUNING = {"cuda": [(4, 8, 1, 0), (4, 4, 1, 0), (2, 8, 1, 0), (2, 4, 2, 0), (1, 8, 2, 0), (4, 4, 2, 0), (2, 2, 1, 3),
                   (2, 4, 1, 2), (1, 4, 1, 4), (1, 8, 1, 2)]}


@kernel
def gemv_q4_mv(w: Tensor[u32], scales: Tensor[H], biases: Tensor[H], x: Tensor[H], y: Tensor[H], nrows: int,
               ncols: int, GROUP: constexpr, MT: constexpr, WARPS: constexpr, U: constexpr, NG: constexpr,
               XV: constexpr, NS: constexpr):
    """y = W x for a 4-bit W (module docstring). Launch ceil(nrows / (16 MT)) groups of WARPS SIMD groups (any
    number of groups: they stride over the blocks); NG >= ncols / GROUP; XV: x elements per 16-byte load; NS >= 2
    (GROUP 32 or 64): the slabs staged by async copies in NS stages."""
    ROWS = 16 * MT
    ldw = ncols // 8
    ng = ncols // GROUP
    nslabs = ncols // 128
    xsum = shared(f32, NG)  # sum of x over each quantization group
    part = shared(f32, WARPS * ROWS)  # column 0 of each SIMD group's accumulator
    bpart = shared(f32, WARPS * ROWS)  # each SIMD group's bias partials
    SPS = max(1, 128 // GROUP)  # scales a row per slab
    sw = shared(u32, max(WARPS * NS * ROWS * 16, 1))  # NS = 0: none used
    sx = shared(H, max(WARPS * NS * 128, 1))
    ss = shared(H, max(WARPS * NS * ROWS * SPS, 1))
    group_sums(x, xsum, ng, GROUP, XV, WARPS)
    per = (nslabs + WARPS - 1) // WARPS  # this SIMD group's slabs [s0, s1) and groups [g0, g1)
    s0 = min(simd_group() * per, nslabs)
    s1 = min(s0 + per, nslabs)
    nblocks = (nrows + ROWS - 1) // ROWS
    for b in range(group_id(0), nblocks, num_groups(0)):
        row0 = min(b * ROWS, nrows - ROWS)
        wb = row0 * ldw
        sb = row0 * ng
        acc = frag_acc(MT, 1)
        if NS == 0:
            steps = (s1 - s0) // U
            for i in range(steps):
                for u in static_range(U):
                    j = s0 + i * U + u
                    acc = mv_q4(w, wb + 16 * j, ldw, scales, sb + 128 * j // GROUP, ng, x, 128 * j, acc, GROUP)
            for j in range(s0 + steps * U, s1):
                acc = mv_q4(w, wb + 16 * j, ldw, scales, sb + 128 * j // GROUP, ng, x, 128 * j, acc, GROUP)
        else:
            # every SIMD group takes `per` steps (one barrier each, after the wait: the lanes read what others
            # copied, and the stage refilled below was read one step ago by all), computing only its own slabs
            ring = simd_group() * NS
            for i in static_range(NS - 1):
                if s0 + i < s1:
                    copy_slab(w, x, scales, sw, sx, ss, ring + i, s0 + i, wb, sb, ldw, ng, ROWS, SPS, GROUP)
                async_commit()
            for i in range(per):
                async_wait(NS - 2)
                barrier()
                if s0 + i + NS - 1 < s1:
                    copy_slab(w, x, scales, sw, sx, ss, ring + (i + NS - 1) % NS, s0 + i + NS - 1, wb, sb, ldw, ng,
                              ROWS, SPS, GROUP)
                async_commit()
                if s0 + i < s1:
                    st = ring + i % NS
                    acc = mv_q4(sw, st * ROWS * 16, 16, ss, st * ROWS * SPS, SPS, sx, st * 128, acc, GROUP)
        frag_store(part, simd_group() * ROWS, 1, acc, ROWS, 1)
        finish_block(biases, y, xsum, part, bpart, sb, ng, s0 * 128 // GROUP, s1 * 128 // GROUP, row0, b * ROWS,
                     ROWS, WARPS)


def mv_configs(backend: str, nrows: int, ncols: int, bits: int, dtype: str, group: int = 64,
               forced: bool = False) -> list[dict]:
    """The configurations of ``TUNING`` that fit (``matrix_configs``; the launcher offers them only when forced)."""
    return matrix_configs("mv", TUNING["cuda"], "MT", backend, nrows, ncols, bits, dtype, group, forced)


def mv_fits(cfg: dict, nrows: int, ncols: int, bits: int, dtype: str, group: int) -> bool:
    """Whether a forced configuration can run this matrix."""
    return matrix_fits(cfg, "MT", nrows, ncols, bits, dtype, group)


def launch_q4_mv(w, scales, biases, x, y, group: int, cfg: dict, width: int, backend: str | None) -> None:
    """``gemv_q4_mv`` with configuration ``cfg`` (``mv_configs``) on SIMD groups of ``width`` lanes."""
    nrows, ncols = w.shape[0], w.shape[1] * 8
    slots = 1 << max(0, (ncols // group - 1).bit_length())
    groups = -(-nrows // (16 * cfg["MT"]))
    threads = cfg["WARPS"] * width
    gemv_q4_mv[groups * threads, threads](w, scales, biases, x, y, nrows, ncols, group, cfg["MT"], cfg["WARPS"],
                                          cfg["U"], slots, 16 // x.dtype.itemsize, cfg.get("NS", 0), backend=backend)
