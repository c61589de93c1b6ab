"""Dequantizing GEMV (decode): y = W x for a 4-bit or 8-bit affine group-wise quantized W (layout: ``quant``).

W is (N, K): packed u32 words (N, K * BITS / 32), scales and biases (N, K / GROUP) in T; x (K,) and y (N,) in T;
sums in f32; K a multiple of GROUP (so of 32). Both kernels read W as 16-byte vectors of 4 words (32 elements at 4
bits, 16 at 8 bits, all in one quantization group since GROUP >= 32) and use MLX's factoring per vector and row:

    sum_j (s q_j + b) x_j = s * sum_j q_j x_j + b * sum_j x_j

(sum_j x_j is shared by the rows). q_j becomes a float without a shift or an int-to-float conversion: the low and
high 16 bits of a word each hold 16 / BITS elements; OR-ing ``word & (MASK << BITS*p)`` into the mantissa of a power
of two and subtracting that power gives the element exactly (one logic op and one subtraction).

``gemv_q`` (the first kernel; ``gemv``'s structure): a group of ``BLOCK`` threads owns ``ROWS`` consecutive rows; each
step a thread loads, for ``UNROLL`` chunks, one vector per row with its scale and bias, and the chunk's x; the magic
number is 2^23 for every position p, giving 2^(BITS p) q, and the positions are summed apart (multiply, then add)
and combined with their 2^(-BITS p) per chunk. Rows are reduced with ``simd_sum`` and a shared combine behind a
barrier. On the H200 (bf16, 16384 x 16384): 76.0 us, 1765 GB/s of packed weights, latency-bound: NVRTC's SASS has
~210 instructions per vector and row, and ptxas issues most of a step's loads between its arithmetic.

``gemv_q_warp`` (the SIMD-group kernel, gemv_warp's layout): each SIMD group owns ``R`` rows and reduces them with
``simd_sum`` alone (no shared combine, no barrier); lane l takes vectors c0 + l + k S (k < ``KV``) of each row per step,
so a step reads R KV contiguous 512-byte runs, and converts and sums the step's x once for its R rows. The magic number
of position p is 2^(23 - BITS p), whose mantissa bit BITS p is worth 1, so q comes out unscaled and every element is one
logic op, one subtraction and one FMA (two FMA chains per row); the magic numbers come from a value NVRTC cannot fold,
else ptxas re-makes a constant before each logic op (a quarter more instructions). At 4 bits with f16/bf16 x
(``dot_rows_hi``, s29) each pair of elements is shifted high into the mantissas of 256.0 and 16.0 and the bases are
subtracted once a vector instead of once an element: four shifts, eight logic ops and eight FMAs a word where the
form above takes one shift, eight logic ops, eight subtractions and eight FMAs (NVRTC, sm_90, bf16, R 4 NS 1: 2568
SASS instructions against 2896, 128 registers, no spills). With ``NS`` >= 2 each lane streams
its vectors, its scale and bias pieces and its x into its own shared-memory slots by async copies (cp.async on NVIDIA,
the 16-byte ones bypassing L1), step t + NS - 1 in flight while step t is computed: a step's bytes are in flight
whatever order ptxas gives the arithmetic, and no barrier is needed, as a lane reads only what it copied. ``NS = 0``
loads each step directly (the fallback where K / GROUP is odd with 2-byte scales, whose 4-byte pieces would straddle
rows, the last one past the end of the array). A step's last, partial run clamps its vector indices into the row and
skips their arithmetic; rows past the matrix re-read the last row and are never stored. NVRTC, sm_90, bf16, 4 bits,
group 64 (``tests/std/test_quant_gemv_speed_paths.py`` checks no spills): R = 16, NS = 2 is ~128 SASS instructions per
vector and row in its loop (the floor is ~100: 3 per element, 4 shifts), 127 registers, 56 KiB of shared memory per
group of two SIMD groups; R = 8 ~141. On the H200 (2026-12-04) tuning chose R 8 WARPS 4: 57.8 us at 16384 x 16384
(2324 GB/s; gemv_q 76.0 us); at 128 instructions a vector and row, issuing alone takes ~32 us there, against ~36 us
to stream its 151 MB at 4.2 TB/s.

``launch_gemv_q`` times both kernels' configurations where a tuning table applies (CUDA; Vulkan on a GPU) and keeps
the faster; elsewhere it runs gemv_q_warp's default. ``path`` and ``config`` force one. Two more 4-bit paths live in
their own modules: the matrix-unit ones (``quant_gemv_mma.py``, ``quant_gemv_mv.py``) and ``gemv_q4_xs``
(``quant_gemv_xs.py``, path "xs": x held in registers by the lanes that own its columns, rows streamed past it;
X8 = 1 and 2 turn x into 15- and 22-bit fixed point and dot the nibbles with ``dp4a``; CUDA's tuning also
times X8 = 2, ``quant_gemv_xs.TUNED``, where K <= 16384; the rest are forced only).

Bytes: the bench counts the packed weight bytes only (N K BITS / 8, the issue's "GB/s of packed weight bytes");
scales and biases add 2 * 2 / (GROUP * BITS / 8) of that in f16/bf16 (12.5% at 4 bits, group 64), x and y ~0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    bitcast,
    cast,
    constexpr,
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    num_groups,
    shared,
    simd_group,
    simd_lane,
    simd_size,
    simd_sum,
    static_range,
    u32,
    vload,
)
from ..runtime import get_backend
from . import quant as Q
from .quant_dot import MAGIC_EVEN, MAGIC_ODD, TWO23, dot_rows
from .quant_gemv_mma import config_fits, launch_q4_mma, mma_configs
from .quant_gemv_mv import launch_q4_mv, mv_configs, mv_fits
from .quant_gemv_xs import xs_configs, xs_ok
from .quant_gemv_xs_staged import launch_xs
from .softmax import dtype_label, processors

#: iron build's defaults (valid for every dtype)
BITS = 4
GROUP = 64
BLOCK = 128
ROWS = 4
UNROLL = 2
XV = 4
R = 4  # gemv_q_warp's (valid for every dtype: SP = 2 copies 8-byte pieces of f32 scales)
KV = 1
WARPS = 1
NS = 2
SP = 2
LANES = 64  # at least simd_size(): the shared slots' lane stride (a launch passes the backend's width)
MAGIC = 0x4B000000  # the bits of f32 2^23: an integer below 2^23 OR-ed into its mantissa is added to 2^23


@kernel
def gemv_q(w: Tensor[u32], scales: Tensor[T], biases: Tensor[T], x: Tensor[T], y: Tensor[T], nrows: int,
           ncols: int, BITS: constexpr, GROUP: constexpr, BLOCK: constexpr, ROWS: constexpr, UNROLL: constexpr,
           XV: constexpr):
    """y[r] = sum_c W[r, c] x[c], W quantized (BITS, GROUP); launch ceil(nrows / ROWS) * BLOCK threads in groups of
    BLOCK. XV: x elements per 16-byte load (16 / itemsize)."""
    PER = 32 // BITS  # elements per word
    EPV = 4 * PER  # elements per 16-byte vector of words
    POS = 16 // BITS  # elements per 16-bit half of a word
    MASK = (1 << BITS) - 1
    tid = local_id(0)
    row0 = group_id(0) * ROWS
    nvec = ncols // EPV
    wrow = ncols // PER
    grow = ncols // GROUP
    acc = local_array(f32, ROWS)
    for r in static_range(ROWS):
        acc[r] = 0.0
    xs = local_array(f32, UNROLL * EPV)
    wv = local_array(u32, UNROLL * ROWS * 4)
    sv = local_array(f32, UNROLL * ROWS)
    bv = local_array(f32, UNROLL * ROWS)
    part = local_array(f32, POS)
    for v0 in range(tid, nvec, BLOCK * UNROLL):
        for u in static_range(UNROLL):
            v = v0 + u * BLOCK
            if v < nvec:
                for c in static_range(EPV // XV):
                    xv = vload(x, v * EPV + c * XV, XV)
                    for j in static_range(XV):
                        xs[u * EPV + c * XV + j] = xv[j]
                for r in static_range(ROWS):
                    rr = min(row0 + r, nrows - 1)  # rows past the end re-read the last row (never stored)
                    wr = vload(w, rr * wrow + v * 4, 4)
                    for j in static_range(4):
                        wv[(u * ROWS + r) * 4 + j] = wr[j]
                    g = rr * grow + (v * EPV) // GROUP
                    sv[u * ROWS + r] = scales[g]
                    bv[u * ROWS + r] = biases[g]
            else:
                for j in static_range(EPV):
                    xs[u * EPV + j] = 0.0
                for r in static_range(ROWS):
                    sv[u * ROWS + r] = 0.0
                    bv[u * ROWS + r] = 0.0
                    for j in static_range(4):
                        wv[(u * ROWS + r) * 4 + j] = 0
        for u in static_range(UNROLL):
            xsum = 0.0
            for j in static_range(EPV):
                xsum += xs[u * EPV + j]
            for r in static_range(ROWS):
                for p in static_range(POS):
                    part[p] = 0.0
                for i in static_range(4):
                    word = wv[(u * ROWS + r) * 4 + i]
                    hi = word >> 16
                    for p in static_range(POS):
                        m = MASK << (BITS * p)
                        q_lo = bitcast((word & m) | MAGIC, f32) - TWO23  # 2^(BITS p) * element p
                        q_hi = bitcast((hi & m) | MAGIC, f32) - TWO23  # 2^(BITS p) * element POS + p
                        part[p] += q_lo * xs[u * EPV + i * PER + p]
                        part[p] += q_hi * xs[u * EPV + i * PER + POS + p]
                dot = part[0]
                for p in static_range(1, POS):
                    dot += part[p] * (1.0 / (1 << (BITS * p)))
                acc[r] += sv[u * ROWS + r] * dot + bv[u * ROWS + r] * xsum
    partial = shared(f32, ROWS * BLOCK)  # one slot per (row, SIMD group)
    for r in static_range(ROWS):
        s = simd_sum(acc[r])
        if simd_lane() == 0:
            partial[r * BLOCK + simd_group()] = s
    barrier()
    if simd_group() == 0:
        for r in static_range(ROWS):
            t = 0.0
            for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
                t += partial[r * BLOCK + i]
            t = simd_sum(t)
            if simd_lane() == 0 and row0 + r < nrows:
                y[row0 + r] = t


# --- the SIMD-group kernel ---------------------------------------------------------------------------------------


@func
def load_rows(w, scales, biases, wv, sv, bv, wo, go, c0, nvec, R, KV, BITS, GROUP):
    """wv[(k R + r) 4 + j] = word j of vector c0 + lane + k S of the block's row r (whose words start at wo[r], its
    scales at go[r]), sv/bv its group's scale and bias: R * KV 16-byte loads and their scalars, no branch between
    them (a vector past the row is clamped: read, never used)."""
    S = simd_size()
    for k in static_range(KV):
        v = min(c0 + simd_lane() + k * S, nvec - 1)
        vg = cast(cast(v, u32) // (GROUP * BITS // 128), i32)  # the vector's group in its row
        for r in static_range(R):
            wr = vload(w, wo[r] + v * 4, 4)
            for j in static_range(4):
                wv[(k * R + r) * 4 + j] = wr[j]
            sv[k * R + r] = scales[go[r] + vg]
            bv[k * R + r] = biases[go[r] + vg]


@func
def load_xs(x, xs, c0, nvec, KV, BITS, XV):
    """xs[k EPV + j] = x[(c0 + lane + k S) EPV + j] in xs's element type (a vector past nvec reads the last one):
    f32, or x's own type for NS = 1's raw registers (no conversion waits on the loads)."""
    S = simd_size()
    EPV = 128 // BITS
    for k in static_range(KV):
        v = min(c0 + simd_lane() + k * S, nvec - 1)
        for c in static_range(EPV // XV):
            xv = vload(x, v * EPV + c * XV, XV)
            for j in static_range(XV):
                xs[k * EPV + c * XV + j] = xv[j]


@func
def take_step(wn, sn, bn, xn, wv, sv, bv, xs, R, KV, BITS):
    """The prefetched step (raw registers) becomes the current one: words copied, scales, biases and x converted."""
    for i in static_range(KV * R * 4):
        wv[i] = wn[i]
    for i in static_range(KV * R):
        sv[i] = cast(sn[i], f32)
        bv[i] = cast(bn[i], f32)
    for i in static_range(KV * (128 // BITS)):
        xs[i] = cast(xn[i], f32)


@func
def copy_step(w, scales, biases, x, sw, ssb, sx, st, wo, go, c0, nvec, R, KV, BITS, GROUP, XV, SP, LANES):
    """load_rows and load_xs as async copies into this lane's slots of stage st (a stage: KV R LANES 16-byte
    vectors, as many pieces of SP scales and of SP biases holding the vectors' ones, KV EPV / XV LANES
    16-byte pieces of x; lane-minor, so that a SIMD group's read of a slot is contiguous, free of bank conflicts).
    ncols / GROUP must be a multiple of SP: the pieces are then aligned and within their row."""
    S = simd_size()
    EPV = 128 // BITS
    for k in static_range(KV):
        v = min(c0 + simd_lane() + k * S, nvec - 1)
        piece = cast(cast(v, u32) // (GROUP * BITS // 128) & ~cast(SP - 1, u32), i32)
        for r in static_range(R):
            slot = (st * KV * R + k * R + r) * LANES + simd_lane()
            async_copy(sw, slot * 4, w, wo[r] + v * 4, 4)
            async_copy(ssb, slot * 2 * SP, scales, go[r] + piece, SP)
            async_copy(ssb, (slot * 2 + 1) * SP, biases, go[r] + piece, SP)
        for c in static_range(EPV // XV):
            async_copy(sx, (((st * KV + k) * (EPV // XV) + c) * LANES + simd_lane()) * XV, x, v * EPV + c * XV,
                       XV)


@func
def read_step(sw, ssb, sx, wv, sv, bv, xs, st, c0, nvec, R, KV, BITS, GROUP, XV, SP, LANES):
    """What load_rows and load_xs load, from stage st's slots that copy_step filled."""
    S = simd_size()
    EPV = 128 // BITS
    for k in static_range(KV):
        v = min(c0 + simd_lane() + k * S, nvec - 1)
        e = cast(cast(v, u32) // (GROUP * BITS // 128) % SP, i32)  # the scale's place in its piece
        for r in static_range(R):
            slot = (st * KV * R + k * R + r) * LANES + simd_lane()
            wr = vload(sw, slot * 4, 4)
            for j in static_range(4):
                wv[(k * R + r) * 4 + j] = wr[j]
            sv[k * R + r] = ssb[slot * 2 * SP + e]
            bv[k * R + r] = ssb[(slot * 2 + 1) * SP + e]
        for c in static_range(EPV // XV):
            xv = vload(sx, (((st * KV + k) * (EPV // XV) + c) * LANES + simd_lane()) * XV, XV)
            for j in static_range(XV):
                xs[k * EPV + c * XV + j] = cast(xv[j], f32)


@kernel
def gemv_q_warp(w: Tensor[u32], scales: Tensor[T], biases: Tensor[T], x: Tensor[T], y: Tensor[T], nrows: int,
                ncols: int, BITS: constexpr, GROUP: constexpr, R: constexpr, KV: constexpr, WARPS: constexpr,
                NS: constexpr, XV: constexpr, SP: constexpr, LANES: constexpr):
    """y[r] = sum_c W[r, c] x[c], W quantized (BITS, GROUP): R rows per SIMD group, reduced by simd_sum alone.
    Launch groups of WARPS SIMD groups; SIMD group w of the grid (W of them) takes the blocks of rows b = w, w + W,
    ... < ceil(nrows / R). NS = 0: each step loads its vectors; NS = 1: step t + 1 loaded into raw registers before
    step t is computed (``take_step`` converts them after); NS >= 2: NS-stage async copies, step t + NS - 1 in
    flight while step t is computed (needs ncols / GROUP a multiple of SP). XV: x elements per 16-byte load; SP:
    scales per 4 bytes; LANES >= simd_size(): the lane stride of the shared slots (constant, for the array sizes)."""
    S = simd_size()
    EPV = 128 // BITS
    nvec = ncols // EPV
    CH = S * KV  # vectors per row and step
    nfull = nvec // CH
    nsteps = (nvec + CH - 1) // CH
    NST = NS if NS >= 2 else 0  # shared stages: NS = 0 and 1 use none
    sw = shared(u32, max(WARPS * NST * KV * R * LANES * 4, 1))
    ssb = shared(T, max(WARPS * NST * KV * R * LANES * 2 * SP, 1))
    sx = shared(T, max(WARPS * NST * KV * LANES * EPV, 1))
    st0 = simd_group() * NS  # this SIMD group's first stage
    # from a value NVRTC cannot fold (nrows >= 0): ptxas then keeps the magic numbers in registers instead of
    # re-making a constant before each logic op (a quarter more instructions in the loop)
    HI = BITS == 4 and SP == 2  # 4 bits, 16-bit x (SP: scales per 4 bytes): dot_rows_hi
    magic = local_array(u32, 16 // BITS)
    if HI:
        magic[0] = cast(MAGIC_EVEN, u32) - cast(nrows >> 31, u32)  # a subtraction: not merged into the logic ops
        magic[1] = cast(MAGIC_ODD, u32) - cast(nrows >> 31, u32)
    else:
        magic[0] = cast(MAGIC, u32) | cast(nrows >> 31, u32)
        for p in static_range(1, 16 // BITS):
            magic[p] = magic[0] - cast((BITS * p) << 23, u32)
    wv = local_array(u32, KV * R * 4)
    sv = local_array(f32, KV * R)
    bv = local_array(f32, KV * R)
    xs = local_array(f32, KV * EPV)
    acc = local_array(f32, R)
    wo = local_array(i32, R)
    go = local_array(i32, R)
    for b in range(group_id(0) * WARPS + simd_group(), (nrows + R - 1) // R, num_groups(0) * WARPS):
        row0 = b * R
        for r in static_range(R):
            acc[r] = 0.0
            wo[r] = min(row0 + r, nrows - 1) * (ncols * BITS // 32)  # rows past the end re-read the last one
            go[r] = min(row0 + r, nrows - 1) * (ncols // GROUP)
        if NS == 1:  # two raw register buffers: step t + 1's loads issued into one before step t's arithmetic
            wa, wb = local_array(u32, KV * R * 4), local_array(u32, KV * R * 4)
            sa, sb = local_array(T, KV * R), local_array(T, KV * R)
            ba, bb = local_array(T, KV * R), local_array(T, KV * R)
            xa, xb = local_array(T, KV * EPV), local_array(T, KV * EPV)
            if nsteps > 0:  # K = 0: nothing to load (a vector index of -1 otherwise)
                load_rows(w, scales, biases, wa, sa, ba, wo, go, 0, nvec, R, KV, BITS, GROUP)
                load_xs(x, xa, 0, nvec, KV, BITS, XV)
            # pairs of full steps; past the last step the loads read clamped vectors (never used): no branch around
            # them, and with one buffer ptxas put them after the arithmetic reading the old values, so nothing was
            # in flight during it (SASS read with nvdisasm)
            for t in range(0, nfull - 1, 2):
                load_rows(w, scales, biases, wb, sb, bb, wo, go, (t + 1) * CH, nvec, R, KV, BITS, GROUP)
                load_xs(x, xb, (t + 1) * CH, nvec, KV, BITS, XV)
                take_step(wa, sa, ba, xa, wv, sv, bv, xs, R, KV, BITS)
                dot_rows(wv, xs, sv, bv, acc, magic, t * CH, nvec, R, KV, BITS, 1, HI)
                load_rows(w, scales, biases, wa, sa, ba, wo, go, (t + 2) * CH, nvec, R, KV, BITS, GROUP)
                load_xs(x, xa, (t + 2) * CH, nvec, KV, BITS, XV)
                take_step(wb, sb, bb, xb, wv, sv, bv, xs, R, KV, BITS)
                dot_rows(wv, xs, sv, bv, acc, magic, (t + 1) * CH, nvec, R, KV, BITS, 1, HI)
            if nfull % 2 == 1:  # buffer a holds step nfull - 1 (full)
                take_step(wa, sa, ba, xa, wv, sv, bv, xs, R, KV, BITS)
                dot_rows(wv, xs, sv, bv, acc, magic, (nfull - 1) * CH, nvec, R, KV, BITS, 1, HI)
                if nfull < nsteps:
                    load_rows(w, scales, biases, wa, sa, ba, wo, go, nfull * CH, nvec, R, KV, BITS, GROUP)
                    load_xs(x, xa, nfull * CH, nvec, KV, BITS, XV)
            if nfull < nsteps:  # buffer a holds the partial last step
                take_step(wa, sa, ba, xa, wv, sv, bv, xs, R, KV, BITS)
                dot_rows(wv, xs, sv, bv, acc, magic, nfull * CH, nvec, R, KV, BITS, 0, HI)
        elif NS == 0:
            for t in range(nfull):
                load_rows(w, scales, biases, wv, sv, bv, wo, go, t * CH, nvec, R, KV, BITS, GROUP)
                load_xs(x, xs, t * CH, nvec, KV, BITS, XV)
                dot_rows(wv, xs, sv, bv, acc, magic, t * CH, nvec, R, KV, BITS, 1, HI)
            if nfull < nsteps:
                load_rows(w, scales, biases, wv, sv, bv, wo, go, nfull * CH, nvec, R, KV, BITS, GROUP)
                load_xs(x, xs, nfull * CH, nvec, KV, BITS, XV)
                dot_rows(wv, xs, sv, bv, acc, magic, nfull * CH, nvec, R, KV, BITS, 0, HI)
        else:
            for t in static_range(NS - 1):
                if t < nsteps:
                    copy_step(w, scales, biases, x, sw, ssb, sx, st0 + t, wo, go, t * CH, nvec, R, KV, BITS, GROUP,
                              XV, SP, LANES)
                async_commit()
            for t in range(nfull):
                if t + NS - 1 < nsteps:  # into the stage step t - 1 was read from
                    copy_step(w, scales, biases, x, sw, ssb, sx, st0 + (t + NS - 1) % NS, wo, go,
                              (t + NS - 1) * CH, nvec, R, KV, BITS, GROUP, XV, SP, LANES)
                async_commit()
                async_wait(NS - 1)  # step t has landed; each lane reads only what it copied (no barrier)
                read_step(sw, ssb, sx, wv, sv, bv, xs, st0 + t % NS, t * CH, nvec, R, KV, BITS, GROUP, XV, SP,
                          LANES)
                dot_rows(wv, xs, sv, bv, acc, magic, t * CH, nvec, R, KV, BITS, 1, HI)
            if nfull < nsteps:
                async_wait(0)
                read_step(sw, ssb, sx, wv, sv, bv, xs, st0 + nfull % NS, nfull * CH, nvec, R, KV, BITS, GROUP, XV,
                          SP, LANES)
                dot_rows(wv, xs, sv, bv, acc, magic, nfull * CH, nvec, R, KV, BITS, 0, HI)
        for r in static_range(R):
            s = simd_sum(acc[r])
            if simd_lane() == r % S and row0 + r < nrows:
                y[row0 + r] = s


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan(nrows: int, ncols: int, bits: int) -> tuple[int, int, int]:
    """(BLOCK, ROWS, UNROLL): a group just wide enough for a row's vectors in UNROLL steps (32..128 threads); 4 rows
    per group once there are enough rows to fill the GPU, fewer below."""
    nvec = ncols * bits // 128
    block = min(max(_pow2(-(-nvec // UNROLL)), 32), 128)
    rows = 4 if nrows >= 2048 else 2 if nrows >= 512 else 1
    return block, rows, UNROLL


#: (BLOCK, ROWS, UNROLL) autotuning times on CUDA beside plan's choice: more rows share each x chunk and its
#: conversion; more unrolling (or wider groups) puts more loads in flight
TUNING = {"cuda": [(128, 8, 1), (64, 8, 2), (256, 4, 1), (128, 4, 1), (64, 4, 2), (128, 2, 2), (256, 2, 2)]}
#: (R, KV, WARPS, NS) of gemv_q_warp that autotuning times beside them: R = 16 shares each x chunk among the most
#: rows (16384 x 16384: 1024 SIMD groups, one wave at 8 an SM); R = 4 with 3 stages for matrices of a few thousand
#: rows (more SIMD groups, two steps in flight each); NS = 0 (direct loads) for comparison. Shared memory per group
#: (bf16, 4 bits, 32 lanes): WARPS NS (R KV 768 + KV 2048) bytes, 56 KiB for the first. Measured since: NS = 0 (8, 1, 4)
#: wins among those (H200 s21 61.5 us, H100 s22 72.6 us at 16384^2; the NS >= 2 entries 94-202 us), latency-bound (13
#: warps an SM, nothing in flight across steps). NS = 1 (the next step in a second raw register buffer), H100 s24
#: (bench/results/2026-12-06-h100-s24-attn-q4-rows): at R 8 85.4 us (168 registers: worse than NS 0's 69.9, dropped),
#: at R 4 68.2 (4 warps) and 67.8 (8 warps), at 4096^2 10.5 against R 8 NS 0's 13.8. H200 s30 (dot_rows_hi): R 4 NS 1
#: won every shape (16384^2 57.4 us), NS >= 2 never (95-205 us). Added in s30: R 4 NS 0 with 8 warps (96 registers
#: at bf16 q4, so ~20 warps an SM instead of 16) and R 4 KV 2 NS 0 (twice the bytes in flight a lane, 127
#: registers); neither spills at any bits/dtype (`iron inspect --resources`). H100 s31: 70.3-70.6 and 69.8-70.0 us
#: against R 4 NS 1's 69.5-69.7 at 16384^2: more warps or bytes in flight a lane buy nothing
WARP_TUNING = {"cuda": [(16, 1, 2, 2), (8, 1, 4, 2), (8, 1, 2, 2), (4, 1, 4, 3), (16, 1, 2, 0), (8, 1, 4, 0),
                        (4, 1, 8, 1), (4, 1, 4, 1), (4, 1, 8, 0), (4, 2, 4, 0)]}
#: the one configuration where nothing is timed (CPU backends, a GPU without a table): within every backend's
#: shared-memory limit (14 KiB at f32 and 32 lanes, against Metal's 32 KiB)
WARP_DEFAULT = (4, 1, 1, 2)
PATHS = ("group", "warp", "mma", "mv", "xs")


def gemv_q_configs(backend: str, nrows: int, ncols: int, bits: int, group: int, itemsize: int,
                   path: str | None = None, dtype: str = "") -> list[dict]:
    """The configurations ``launch_gemv_q`` chooses among on ``backend``: where a tuning table applies, gemv_q's
    (plan's first: what runs untimed) then gemv_q_warp's, then on CUDA gemv_q4_mma's (4 bits, f16/bf16: ``dtype``);
    elsewhere gemv_q_warp's default alone. ``path`` ("group": gemv_q, "warp": gemv_q_warp, "mma": gemv_q4_mma,
    quant_gemv_mma.py) keeps that kernel's. gemv_q_warp's async copies need ncols / group a multiple of
    the scales per 4 bytes; otherwise it loads directly (NS = 0). On the H200 (2026-12-04) tuning picked
    gemv_q_warp at every bench shape (q4 16384^2: 57.8 us against gemv_q's 76.0)."""
    if path not in (None, *PATHS):
        raise ValueError(f"gemv_q: path {path!r} is not one of {PATHS}")
    block, rows, unroll = plan(nrows, ncols, bits)
    table = table_for(TUNING, backend)
    group_cfgs = [{"PATH": "group", "BLOCK": block, "ROWS": rows, "UNROLL": unroll}]
    group_cfgs += [{"PATH": "group", "BLOCK": b, "ROWS": r, "UNROLL": u} for b, r, u in (table or [])
                   if (b, r, u) != (block, rows, unroll)]
    async_ok = (ncols // group) % max(4 // itemsize, 1) == 0
    warp_cfgs = []
    for r, kv, warps, ns in table_for(WARP_TUNING, backend) or [WARP_DEFAULT]:
        cfg = {"PATH": "warp", "R": r, "KV": kv, "WARPS": warps, "NS": ns if async_ok or ns < 2 else 0}
        if cfg not in warp_cfgs:
            warp_cfgs.append(cfg)
    mma_cfgs = mma_configs(backend, nrows, ncols, bits, dtype, group, forced=path == "mma")
    if path == "group":
        return group_cfgs
    if path == "warp":
        return warp_cfgs
    if path == "mma":
        return mma_cfgs
    if path == "mv":  # not among the tuned candidates: slower than gemv_q_warp on an H100 (quant_gemv_mv.py)
        return mv_configs(backend, nrows, ncols, bits, dtype, group, forced=True)
    if path == "xs":  # CUDA's tuning times only its X8 = 2 entries (quant_gemv_xs.TUNED); forced: every one
        return xs_configs(backend, bits, dtype, forced=True)
    return group_cfgs + warp_cfgs + mma_cfgs + xs_configs(backend, bits, dtype, ncols=ncols) if table else warp_cfgs


def launch_gemv_q(w: Any, scales: Any, biases: Any, x: Any, y: Any, bits: int, group: int,
                  backend: str | None = None, path: str | None = None, config: dict | None = None) -> dict:
    """y = dequantize(w, scales, biases) @ x; returns the configuration it ran. ``path`` (one of ``PATHS``) keeps one
    kernel's configurations; ``config`` (one of ``gemv_q_configs``'s) runs exactly that one."""
    nrows = w.shape[0]
    ncols = w.shape[1] * 32 // bits
    if bits not in Q.BITS or group not in Q.GROUPS or ncols % group or tuple(scales.shape) != (nrows, ncols // group):
        raise ValueError(f"gemv_q: bits {bits}, group {group}, packed {tuple(w.shape)}, scales "
                         f"{tuple(scales.shape)} do not describe a quantized (N, K) matrix")
    be = backend or get_backend(None).name
    itemsize = x.dtype.itemsize
    xv = 16 // itemsize

    def run(cfg: dict) -> None:
        if cfg["PATH"] == "mma":
            launch_q4_mma(w, scales, biases, x, y, group, cfg, get_backend(backend).simd_width(), backend)
            return
        if cfg["PATH"] == "mv":
            launch_q4_mv(w, scales, biases, x, y, group, cfg, get_backend(backend).simd_width(), backend)
            return
        if cfg["PATH"] == "xs":
            launch_xs(w, scales, biases, x, y, group, cfg, get_backend(backend).simd_width(), processors(be),
                      backend)
            return
        if cfg["PATH"] == "group":
            groups = -(-nrows // cfg["ROWS"])
            gemv_q[groups * cfg["BLOCK"], cfg["BLOCK"]](w, scales, biases, x, y, nrows, ncols, bits, group,
                                                        cfg["BLOCK"], cfg["ROWS"], cfg["UNROLL"], xv, backend=backend)
            return
        width = get_backend(backend).simd_width()
        blocks = -(-nrows // cfg["R"])
        groups = -(-blocks // cfg["WARPS"])  # one block of R rows per SIMD group
        gemv_q_warp[groups * cfg["WARPS"] * width, cfg["WARPS"] * width](
            w, scales, biases, x, y, nrows, ncols, bits, group, cfg["R"], cfg["KV"], cfg["WARPS"], cfg["NS"], xv,
            max(4 // itemsize, 1), width, backend=backend)

    if config is not None:
        cfg = dict(config)
        if cfg.get("PATH") == "mma" and not config_fits(cfg, nrows, ncols, bits, dtype_label(x), group):
            raise ValueError(f"gemv_q: {cfg} needs 4 bits, f16/bf16, K a multiple of 128, >= {16 * cfg['NT']} rows "
                             f"and (staged) a group of 32 or 64; got {bits} bits, {dtype_label(x)}, {nrows} x {ncols}, "
                             f"group {group}")
        if cfg.get("PATH") == "mv" and not mv_fits(cfg, nrows, ncols, bits, dtype_label(x), group):
            raise ValueError(f"gemv_q: {cfg} needs 4 bits, f16/bf16, K a multiple of 128, >= {16 * cfg['MT']} rows "
                             f"and (staged) a group of 32 or 64; got {bits} bits, {dtype_label(x)}, {nrows} x {ncols}, "
                             f"group {group}")
        if cfg.get("PATH") == "xs" and not xs_ok(bits, dtype_label(x)):
            raise ValueError(f"gemv_q: the xs path needs 4 bits and f16/bf16 x; got {bits} bits, {dtype_label(x)}")
        if cfg.get("PATH") == "warp" and cfg["NS"] >= 2 and (ncols // group) % max(4 // itemsize, 1):
            raise ValueError(f"gemv_q: {cfg} copies scale pieces of 4 bytes, which K / group = {ncols // group} "
                             f"{x.dtype} scales do not align; use NS = 0 or 1")
    else:
        configs = gemv_q_configs(be, nrows, ncols, bits, group, itemsize, path, dtype_label(x))
        # cold: timed with the L2 flushed, as a decode step streams its weights (and as the bench measures)
        cfg = tune(f"std/quant/gemv_q{bits}", configs, run, backend=be, dtype=dtype_label(x),
                   key=(nrows, ncols, group), cold=True)
    run(cfg)
    return cfg


class _Variant:
    """``gemv_q`` registered once per bit width (the registry keeps one entry per object)."""

    def __init__(self, bits: int):
        self.fn = gemv_q.fn
        self.kernel = gemv_q
        self.bits = bits

    def __repr__(self) -> str:
        return f"<iron kernel gemv_q ({self.bits}-bit)>"


def _setup(gen: InputGen, bits: int, group: int) -> dict[str, np.ndarray]:
    n, k = gen.shape
    w, s, b = Q.quantize(Q.random_weight(gen.rng, n, k), bits, group, gen.dtype)
    return {"w": w, "scales": s, "biases": b, "x": gen.random(shape=(k,)), "y": gen.poisoned(shape=(n,))}


def oracle(d: dict, bits: int, group: int) -> np.ndarray:
    """float64: the dequantized weights times x."""
    return Q.dequantize(d["w"], d["scales"], d["biases"], bits, group) @ d["x"].astype(np.float64)


def _torch_mv(d: dict, bits: int, group: int):
    """torch's dequantize-then-mv: W dequantized to T (on the device), then ``torch.mv``."""
    import torch

    return torch.mv(Q.torch_dequantize(d["w"], d["scales"], d["biases"], bits, group), d["x"], out=d["ref_out"])


def _register(bits: int, group: int = 64) -> None:
    target = _Variant(bits)
    bench(f"std/quant/gemv_q{bits}", setup=lambda gen: _setup(gen, bits, group), output="y",
          launch=lambda d, be: launch_gemv_q(d["w"], d["scales"], d["biases"], d["x"], d["y"], bits, group, be),
          references={"numpy": lambda d: oracle(d, bits, group).astype(d["x"].dtype),
                      "torch": lambda d: _torch_mv(d, bits, group), "mlx": "mlx.core.quantized_matmul"},
          bytes_moved=lambda shape, itemsize: shape[0] * shape[1] * bits // 8,
          flops=lambda shape: 2 * shape[0] * shape[1],
          device_shapes=[(16384, 16384), (4096, 4096), (14336, 4096)])(target)
    # |y| ~ |x| (rows of norm ~1): f32 sums of K terms; f16/bf16: the output's rounding, and the torch peer's
    # rounding of each dequantized weight to T
    test_kernel(oracle=lambda d: oracle(d, bits, group), domain="signed", shapes=[(37, 256), (64, 512)],
                tolerance={"f32": (1e-5, 1e-5), "f16": (4e-3, 2e-3), "bf16": (3e-2, 1.6e-2)})(target)


_register(4)
_register(8)
