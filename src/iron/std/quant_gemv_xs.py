"""The 4-bit dequantizing GEMV with x held in registers (``gemv_q4_xs``): ``launch_gemv_q``'s path "xs".

Why: ``gemv_q_warp`` gives each lane the next 16-byte vector of its R rows each step, so every step also loads that
vector's 32 x values, converts them to f32 and sums them (the bases of ``dot_rows_hi``): for R = 4, as many bytes
of x through the L1 as of weights, and ~0.5 of its ~3 instructions a weight. Here the columns stay with the lanes:
a group of ``WARPS`` SIMD groups splits K's vectors once (lane l of SIMD group w owns vectors w S + l + k WARPS S,
k < ``KX``), converts and sums its x once at the start, and then streams rows past it: a row block of R rows costs a
lane R 16-byte weight loads, their scales and biases, and the arithmetic of ``dot_rows_hi`` (one logic op and one
FMA an element, four shifts a word). Each lane's R partial sums are reduced across its SIMD group by a transposed
butterfly (R rows in log2 R halving exchanges, then plain ones: lane l ends with row l / (S / R)), written to shared
memory, and after a barrier summed over the WARPS SIMD groups. Rows go in super-blocks of 2 R: in the source the
second block's loads are issued before the first block's arithmetic and the next super-block's first block before
the second's (two register buffers), and one barrier a super-block (the partials double-buffered, so no second
barrier); NVRTC's SASS (sm_90, s34) sinks those loads below most of the other block's arithmetic, so about one block
is in flight: ``quant_gemv_xs_staged`` stages the blocks by async copies instead. The groups loop over super-blocks
(about one group an SM where the device says how many it has).

``X8`` = 1: each lane turns its x into 15-bit fixed point once (a scale per vector, max |x| / 16256, and X = 128 hi
+ lo in two signed bytes), and a word of 8 nibbles costs one logic op, a shift and a logic op (the even and the odd
nibbles as bytes) and four ``dp4a``: ~1 instruction an element in the loop against ~3 (NVRTC sm_90 R 4: 128 IDP and
~60 logic ops for 256 elements a lane). The sums are exact in i32 and in f32 (< 2^24); the only rounding is x's, at
most max |x| / 32512 an element. A NaN or inf in x still gives NaN/inf rows (the x sum of the bias term carries it;
an inf makes the scale inf, times the 0 it leaves in X). Measured on an H100 (s33): X8 R 8 65.1 us at 16384^2
against gemv_q_warp's 67.3 (-3 %), the float form 71.2: a third of the instructions bought 3-8 %, so the loop is
not bound by issue. s35 (H100) refuted the next guess, the bytes in flight: the staged kernel's deeper pipeline
bought nothing, and Nsight Compute reads DRAM at 78 % of peak for both (cuBLAS's bf16 GEMV: 91 %).

The float form (X8 = 0) and X8 = 1 are forced-only (path "xs"). The float form is slower than gemv_q_warp; X8 = 1's
rounding of x breaks the accuracy the tuned paths keep: tests/std/test_quant.py asks for the float64 result within
one f16 step (K 8192, x ~ N(0, 1), 16 rows), and on the interpreter over four seeds the float form stays within half
a step while X8 = 1 misses in 1 to 7 rows (up to 83 steps, at an output of 0.005). ``X8`` = 2 adds a third byte
(22-bit x: six dp4a a word, i32 sums below 2^31, rounded once to f32): within 0.52 of a step on the same four seeds
(tested on every backend). Timed in s35 (H100): R 8 64.9 us, X8 1's speed. s36 checked the doubt that kept it out
of the tuning, x rounded relative to each vector's max |x|: with an outlier in every third vector 10^2 to 6 10^4
times the typical |x| (to the top of f16), X8 = 2 stayed within 0.34-0.50 of a step over two seeds each, as
gemv_q_warp did (0.34-0.57), while X8 = 1 missed by up to 21 steps (the outlier test in
tests/std/test_quant_gemv_speed_paths.py). Its error, at most max |x_vector| 2^-22 an element, is below the float
chains' own (which carry 256 |x| in f32: |x| 2^-16 an addition) unless a vector's values span more than 2^6; for
scale, llama.cpp's 4-bit kernels round x to 8 bits a block of 32. So since s36 CUDA's tuning times X8 = 2 (``TUNED``)
beside the other paths where K fits one vector a lane.

4 bits, f16/bf16 x only (the HI form's chains carry 256 |x|: ``quant_dot.dot_rows_hi``'s rounding note). Lanes
whose vectors lie past the row read a clamped vector and hold x = 0, so they add nothing; rows past the matrix
re-read the last row and are never stored.
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    barrier,
    bitcast,
    cast,
    constexpr,
    dp4a,
    f32,
    fma,
    group_id,
    i32,
    local_array,
    num_groups,
    rint,
    shared,
    simd_group,
    simd_lane,
    simd_shuffle_xor,
    simd_size,
    simd_sum,
    static_range,
    u32,
    vload,
)
from .gemm_tiles import H
from .quant_dot import MAGIC_EVEN, MAGIC_ODD

#: iron build's defaults
GROUP = 64
R = 4
KX = 1
WARPS = 4
LR = 2
LS = 5
X8 = 0
#: (R, most SIMD groups a group, X8) a forced path "xs" times on CUDA. NVRTC sm_90 bf16 (launch bound 512 threads: 128
#: registers): at one vector a lane (KX 1) none spills at R 1..8 (X8: R 4 113 registers); at KX 2 (K 16384 with 8
#: SIMD groups) R 4 spills. H100 s33 (bench/results/2026-12-07-h100-s33-q4-xs, each alone, two rounds), 16384^2 bf16
#: group 64: X8 R 8 65.1-65.3 us, R 4 69.4-69.6, R 2 73.0-73.1; X8 = 0 R 8 71.2-71.9, R 4 76.7-77.0 (not tuned: slower
#: than gemv_q_warp's 67.3-67.7); 4096^2 X8 R 4 10.0 (warp 10.5-10.7); 14336 x 4096 X8 R 8 21.9-22.1 (warp 23.1-23.2).
#: X8 = 1's rounding of x breaks the one-f16-step accuracy of the other paths, and X8 = 0 is slower than
#: gemv_q_warp: offered when forced (path "xs") only
#: X8 = 2 (22-bit x, three bytes: six dp4a a word; R 4 and 8 128 registers, no spills) is untimed (s33 added it after
#: the GPU time was spent)
TUNING = {"cuda": [(8, 16, 1), (4, 16, 1), (2, 16, 1), (8, 16, 0), (4, 16, 0), (8, 16, 2), (4, 16, 2)]}
#: the entries CUDA's unforced tuning times beside the other paths' (s36): X8 = 2 only, whose rounding of x (at most
#: max |x| / 2^22 of its 32-value vector) kept every output within the tuned paths' one f16 step on N(0, 1) x and on x
#: with outliers up to the f16 range (tests/std/test_quant_gemv_speed_paths.py); H100 s35: R 8 64.9 us at 16384^2
#: against gemv_q_warp's 67.5 (R 4 untimed; the tuner times both where it runs)
TUNED = {"cuda": [(8, 16, 2), (4, 16, 2)]}


@func
def load_block(w, scales, biases, wb, sb, bb, vw, vg, row0, nrows, wrow, ngr, R, KX):
    """wb/sb/bb = the lane's vectors of rows row0 .. row0 + R - 1 (clamped to the last row) and their scales and
    biases, raw: R KX 16-byte loads and their scalars."""
    for r in static_range(R):
        rr = min(row0 + r, nrows - 1)
        for k in static_range(KX):
            wr = vload(w, rr * wrow + vw[k], 4)
            for j in static_range(4):
                wb[(k * R + r) * 4 + j] = wr[j]
            sb[k * R + r] = scales[rr * ngr + vg[k]]
            bb[k * R + r] = biases[rr * ngr + vg[k]]


@func
def dot_block(wb, sb, bb, xf, cx, acc, magic, R, KX):
    """acc[r] = sum over the lane's vectors of s (sum_j q_j x_j) + b (sum_j x_j) for the block's rows: each pair of
    elements shifted into the mantissas of 256.0 and 16.0, the bases removed by each chain's first value (cx)."""
    for r in static_range(R):
        acc[r] = 0.0
    for k in static_range(KX):
        for r in static_range(R):
            de = cx[k * 3]
            do = cx[k * 3 + 1]
            for i in static_range(4):
                word = wb[(k * R + r) * 4 + i]
                for p in static_range(4):  # elements 2p, 2p + 1 at bits 15 and 19
                    sh = (word << (15 - 8 * p)) if p < 2 else (word >> (8 * p - 15))
                    de = fma(bitcast((sh & 0x78000) | magic[0], f32), xf[k * 32 + i * 8 + 2 * p], de)
                    do = fma(bitcast((sh & 0x780000) | magic[1], f32), xf[k * 32 + i * 8 + 2 * p + 1], do)
            acc[r] = fma(cast(sb[k * R + r], f32), de + do, acc[r])
            acc[r] = fma(cast(bb[k * R + r], f32), cx[k * 3 + 2], acc[r])


@func
def setup_x(x, xf, cx, vw, vg, xq, nvec, GROUP, KX, WARPS, X8):
    """The lane's KX vectors of x (v = simd_group() S + lane + k WARPS S; past nvec: the last one's place, x = 0):
    vw/vg their first word and quantization group in a row (lane_vectors), then x itself (convert_x)."""
    lane_vectors(vw, vg, nvec, GROUP, KX, WARPS)
    convert_x(x, xf, cx, xq, nvec, KX, WARPS, X8)


@func
def lane_vectors(vw, vg, nvec, GROUP, KX, WARPS):
    """vw/vg: the first word and the quantization group in a row of each of the lane's KX vectors."""
    S = simd_size()
    for k in static_range(KX):
        vc = min(simd_group() * S + simd_lane() + k * WARPS * S, nvec - 1)
        vw[k] = vc * 4
        vg[k] = cast(cast(vc, u32) // (GROUP // 32), i32)


@func
def convert_x(x, xf, cx, xq, nvec, KX, WARPS, X8):
    """xf: the lane's x values in f32 (0 past nvec), cx the chains' bases and the x sum (dot_block); with X8, xq
    their fixed-point digits (setup_x8)."""
    S = simd_size()
    for k in static_range(KX):
        v = simd_group() * S + simd_lane() + k * WARPS * S
        vc = min(v, nvec - 1)
        xe = 0.0
        xo = 0.0
        for c in static_range(4):
            xv = vload(x, vc * 32 + c * 8, 8)
            for j in static_range(8):
                val = cast(xv[j], f32) if v < nvec else 0.0
                xf[k * 32 + c * 8 + j] = val
                if j % 2 == 0:
                    xe += val
                else:
                    xo += val
        cx[k * 3] = -256.0 * xe
        cx[k * 3 + 1] = -16.0 * xo
        cx[k * 3 + 2] = xe + xo
    if X8:
        setup_x8(xf, xq, cx, KX, X8 + 1)


@func
def setup_x8(xf, xq, cx, KX, NB):
    """X8: each vector's 32 x values as fixed point of its own scale (cx[k 3] = max |x| / (127 128^(NB - 1))), X =
    sum_j d_j 128^(NB - 1 - j) in NB signed bytes (d_0 in [-127, 127], the others in [-64, 64]): 15 bits at NB 2
    (X8 = 1), 22 at NB 3 (X8 = 2). Packed four bytes a word in the order of the weight words' bytes: xq[(k 4 + i) 2 NB
    + 2 j + m] for word i holds digit j of its even elements (m 0) and of its odd ones (1). cx[k 3 + 2] keeps the f32
    sum of x (the bias term); a non-finite x makes the scale inf or the sum NaN."""
    for k in static_range(KX):
        amax = 0.0
        for j in static_range(32):
            amax = max(amax, abs(xf[k * 32 + j]))
        inv = 127.0 * (1 << (7 * (NB - 1))) / amax if amax > 0.0 else 0.0
        cx[k * 3] = amax * (1.0 / (127.0 * (1 << (7 * (NB - 1)))))
        for i in static_range(4):
            for m in static_range(2 * NB):
                xq[(k * 4 + i) * 2 * NB + m] = 0
            for e in static_range(8):
                rem = cast(rint(xf[k * 32 + i * 8 + e] * inv), i32)
                for j in static_range(NB):
                    d = rem
                    if j < NB - 1:  # the digit of 128^(NB - 1 - j), rounded, and what is left below it
                        d = (rem + (1 << (7 * (NB - 1 - j) - 1))) >> (7 * (NB - 1 - j))
                        rem = rem - d * (1 << (7 * (NB - 1 - j)))
                    xq[(k * 4 + i) * 2 * NB + 2 * j + e % 2] |= (d & 0xFF) << (8 * (e // 2))


@func
def dot_block_x8(wb, sb, bb, xq, cx, acc, R, KX, NB):
    """X8's dot_block: per word the even and odd nibbles as bytes (one logic op, one shift and logic op), 2 NB dp4a
    against x's digits; sum_j q_j x_j = scale sum_j 128^(NB - 1 - j) (digit j's sum): exact in i32 (< 2^31 at NB 3),
    and in f32 at NB 2 (< 2^24)."""
    ds = local_array(i32, NB)
    for r in static_range(R):
        acc[r] = 0.0
    for k in static_range(KX):
        for r in static_range(R):
            for j in static_range(NB):
                ds[j] = 0
            for i in static_range(4):
                word = wb[(k * R + r) * 4 + i]
                ev = bitcast(word & 0x0F0F0F0F, i32)
                od = bitcast((word >> 4) & 0x0F0F0F0F, i32)
                for j in static_range(NB):
                    ds[j] = dp4a(ev, xq[(k * 4 + i) * 2 * NB + 2 * j], ds[j])
                    ds[j] = dp4a(od, xq[(k * 4 + i) * 2 * NB + 2 * j + 1], ds[j])
            tot = ds[0]
            for j in static_range(1, NB):
                tot = tot * 128 + ds[j]
            acc[r] = fma(cast(sb[k * R + r], f32) * cx[k * 3], cast(tot, f32), acc[r])
            acc[r] = fma(cast(bb[k * R + r], f32), cx[k * 3 + 2], acc[r])


@func
def reduce_block(acc, part, slot, WARPS, R, LR, LS):
    """The SIMD group's sums of acc[0 .. R - 1] (R = 2^LR lanes' worth of halving exchanges, then plain ones up to
    S = 2^LS lanes) written to part[(slot + r) WARPS + simd_group()] by the first lane holding row r."""
    for st in static_range(LR):
        upper = (simd_lane() & (1 << (LS - 1 - st))) != 0
        for i in static_range(R // 2):
            if i < (R >> (st + 1)):  # the lower half of the rows still held
                send = acc[i] if upper else acc[i + (R >> (st + 1))]
                keep = acc[i + (R >> (st + 1))] if upper else acc[i]
                acc[i] = keep + simd_shuffle_xor(send, 1 << (LS - 1 - st))
    for st in static_range(LR, LS):
        acc[0] += simd_shuffle_xor(acc[0], 1 << (LS - 1 - st))
    span = 1 << (LS - LR)  # lanes holding one row's sum
    if simd_lane() % span == 0:
        part[(slot + simd_lane() // span) * WARPS + simd_group()] = acc[0]


@func
def finish_rows(part, y, slot, row0, nrows, WARPS, R2):
    """y[row0 + r] = the WARPS SIMD groups' partials of row r (r < R2), each row by SIMD group r % WARPS."""
    for r in static_range(R2):
        if simd_group() == r % WARPS:
            t = 0.0
            for i in range(simd_lane(), WARPS, simd_size()):
                t += part[(slot + r) * WARPS + i]
            t = simd_sum(t)
            if simd_lane() == 0 and row0 + r < nrows:
                y[row0 + r] = t


@kernel(launch_bounds=(512, 1))
def gemv_q4_xs(w: Tensor[u32], scales: Tensor[H], biases: Tensor[H], x: Tensor[H], y: Tensor[H], nrows: int,
               ncols: int, GROUP: constexpr, R: constexpr, KX: constexpr, WARPS: constexpr, LR: constexpr,
               LS: constexpr, X8: constexpr):
    """y = W x for 4-bit W (group GROUP) with x in registers: groups of WARPS SIMD groups of 2^LS lanes, each lane
    owning KX vectors of 32 columns; R = 2^LR rows a block, super-blocks of 2 R rows strided over the groups."""
    wrow = ncols // 8
    ngr = ncols // GROUP
    # the magic numbers from a value NVRTC cannot fold (quant_gemv.gemv_q_warp's note)
    magic = local_array(u32, 2)
    magic[0] = cast(MAGIC_EVEN, u32) - cast(nrows >> 31, u32)
    magic[1] = cast(MAGIC_ODD, u32) - cast(nrows >> 31, u32)
    xf = local_array(f32, KX * 32)
    cx = local_array(f32, KX * 3)  # per vector: -256 (even x sum), -16 (odd x sum), x sum
    vw = local_array(i32, KX)  # the vector's first word in its row
    vg = local_array(i32, KX)  # its quantization group in its row
    xq = local_array(i32, max(KX * 8 * (X8 + 1) * min(X8, 1), 1))
    setup_x(x, xf, cx, vw, vg, xq, ncols // 32, GROUP, KX, WARPS, X8)
    part = shared(f32, 2 * 2 * R * WARPS)  # two super-blocks' partials: (buffer, row, SIMD group)
    acc = local_array(f32, R)
    wa, wb = local_array(u32, KX * R * 4), local_array(u32, KX * R * 4)
    sa, sb = local_array(H, KX * R), local_array(H, KX * R)
    ba, bb = local_array(H, KX * R), local_array(H, KX * R)
    nsb = (nrows + 2 * R - 1) // (2 * R)
    gid = group_id(0)
    stride = num_groups(0)
    load_block(w, scales, biases, wa, sa, ba, vw, vg, gid * 2 * R, nrows, wrow, ngr, R, KX)
    for sbk in range(gid, nsb, stride):
        row0 = sbk * 2 * R
        slot = (((sbk - gid) // stride) % 2) * 2 * R
        load_block(w, scales, biases, wb, sb, bb, vw, vg, row0 + R, nrows, wrow, ngr, R, KX)
        if X8:
            dot_block_x8(wa, sa, ba, xq, cx, acc, R, KX, X8 + 1)
        else:
            dot_block(wa, sa, ba, xf, cx, acc, magic, R, KX)
        reduce_block(acc, part, slot, WARPS, R, LR, LS)
        load_block(w, scales, biases, wa, sa, ba, vw, vg, row0 + stride * 2 * R, nrows, wrow, ngr, R, KX)
        if X8:
            dot_block_x8(wb, sb, bb, xq, cx, acc, R, KX, X8 + 1)
        else:
            dot_block(wb, sb, bb, xf, cx, acc, magic, R, KX)
        reduce_block(acc, part, slot + R, WARPS, R, LR, LS)
        barrier()
        finish_rows(part, y, slot, row0, nrows, WARPS, 2 * R)


def xs_ok(bits: int, dtype: str) -> bool:
    """Whether this kernel applies: 4 bits, f16/bf16 x."""
    return bits == 4 and dtype in ("f16", "bf16")


def xs_shape(ncols: int, width: int, most: int) -> tuple[int, int]:
    """(WARPS, KX): the fewest vectors a lane (KX) with at most ``most`` SIMD groups (and 512 threads), then the
    fewest SIMD groups."""
    nvec = ncols // 32
    most = max(1, min(most, 512 // width))  # the launch bound: 512 threads a group
    lanes = -(-nvec // width)  # SIMD groups needed at one vector a lane
    kx = -(-lanes // most)
    return -(-lanes // kx), kx


def xs_configs(backend: str, bits: int, dtype: str, forced: bool = False, ncols: int = 0) -> list[dict]:
    """CUDA's table when forced on CUDA, its first entry when forced elsewhere; unforced, ``TUNED``'s entries on
    CUDA (X8 = 2) where a lane holds one vector of x (K <= 16384 at 32 lanes: at two, R 4 spills), none elsewhere."""
    if not xs_ok(bits, dtype):
        if forced:
            raise ValueError(f"gemv_q: the xs path needs 4 bits and f16/bf16 x; got {bits} bits, {dtype}")
        return []
    if not forced:
        rows = [row for row in TUNED.get(backend, []) if xs_shape(ncols, 32, row[1])[1] == 1]
    else:
        rows = TUNING["cuda"] if backend == "cuda" else TUNING["cuda"][:1]
    return [dict(zip(("R", "MOST", "X8", "NS"), row), PATH="xs") for row in rows]


def launch_q4_xs(w, scales, biases, x, y, group: int, cfg: dict, width: int, sms: int, backend: str | None) -> None:
    """``gemv_q4_xs`` with configuration ``cfg`` on SIMD groups of ``width`` lanes, on ``xs_grid``'s groups."""
    nrows, ncols = w.shape[0], w.shape[1] * 8
    r = cfg["R"]
    groups, warps, kx = xs_grid(nrows, ncols, r, cfg["MOST"], width, sms)
    threads = warps * width
    gemv_q4_xs[groups * threads, threads](w, scales, biases, x, y, nrows, ncols, group, r, kx, warps,
                                          r.bit_length() - 1, width.bit_length() - 1, cfg.get("X8", 0),
                                          backend=backend)


def xs_grid(nrows: int, ncols: int, r: int, most: int, width: int, sms: int) -> tuple[int, int, int]:
    """(groups, WARPS, KX) of both xs kernels: about one group an SM's worth of SIMD groups (16) where ``sms`` is
    known, else one group a super-block of 2 R rows."""
    warps, kx = xs_shape(ncols, width, most)
    nsb = -(-nrows // (2 * r))
    return (min(nsb, sms * max(1, 16 // warps)) if sms else nsb), warps, kx
