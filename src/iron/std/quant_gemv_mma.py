"""The 4-bit dequantizing GEMV on the matrix units (``mma_q4``): ``quant_gemv.launch_gemv_q``'s third path.

Why: the SIMD-group kernel (``gemv_q_warp``) spends ~4 instructions per element (a logic op, a subtraction and an
FMA in f32, plus its share of loads and sums): ~128 SASS instructions per 16-byte vector and row, so on the H200 its
issue time (~32 us at 16384 x 16384) is as long as its memory time (~36 us) and it reached 2324 GB/s against the
3500 the issue asks. Here the codes become scaled halves two at a time by one packed fma in registers and the dot
products run on mma.sync (``mma_q4``, NVIDIA's spelling in ``codegen/cfamily/cuda_matrix.py``): per 16-byte vector
of words ~9 logic ops and fmas plus 2 mma, a third of the issue.

Layout (``quant``): W (N, K) as u32 words (N, K / 8), scales and biases (N, K / GROUP) in T (f16/bf16), x (K,),
y (N,); K a multiple of 128. y[n] = sum_k round_T(s q) x_k + sum_g b[n, g] (sum of x over group g): the first sum
is ``mma_q4`` over 128-code slabs (A is x in every row: lda 0), the second a dot of each row's biases with the
group sums of x, which a group computes once into shared memory (``NG`` slots).

A group of ``WARPS`` SIMD groups owns a block of 16 NT rows and splits its K slabs into WARPS contiguous ranges, one
per SIMD group (so a 4096-row matrix still gives the GPU 1024 SIMD groups); each SIMD group issues ``U`` slabs'
``mma_q4`` per step (their 16-byte loads in flight together, as far as ptxas schedules them so), or, with ``NS`` >=
2, stages each slab's words, x and scales into shared memory by async copies (cp.async) NS - 1 slabs ahead and runs
``mma_q4`` on the staged copy (one barrier a slab: the lanes read what others copied); then it stores row 0 of its
accumulator and its bias partials in shared memory; after a barrier the first SIMD group adds the WARPS parts and
writes y. The last block is shifted back to end at row N (N >= 16 NT), its rows that the block before it already
wrote left unwritten.
The rounding of each code times its scale to T is the one torch's dequantize-then-mv makes; on other targets
``mma_q4`` is the scalar fallback (correct, slow): the launcher times this path on CUDA only.
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    Tensor,
    async_commit,
    async_copy,
    async_wait,
    barrier,
    cast,
    constexpr,
    f32,
    frag_acc,
    frag_store,
    group_id,
    local_id,
    mma_q4,
    num_groups,
    shared,
    simd_group,
    simd_lane,
    simd_shuffle_xor,
    simd_size,
    static_range,
    u32,
    vload,
)
from .gemm_tiles import H

#: iron build's defaults
GROUP = 64
NT = 1
WARPS = 4
U = 4
NG = 256
XV = 8
NS = 0
#: (NT, WARPS, U) that CUDA's autotuning times: 16, 32 or 64 rows per SIMD group, 4 or 8 SIMD groups splitting K,
#: 1 to 4 slabs a step. At 16384 rows (sm_90 registers from NVRTC): NT 2 WARPS 4 is 512 groups of 108 registers, one
#: wave at 4 groups an SM; NT 4 (144 registers at U 2) 256 groups, one wave of 8-12 SIMD groups an SM, each with 4 KiB
#: of words a slab; NT 1 makes 1024 groups, 1.3 waves at 6 an SM, better for fewer rows (4096: 256 groups)
#: (NT, WARPS, U, NS): NS >= 2 stages each slab's words, x and scales by async copies NS - 1 slabs ahead (groups
#: of 32 and 64 only: a slab's scales must be 4 or 8 bytes), whatever order ptxas gives the direct loads; shared
#: memory WARPS NS (64 ROWS + 256 + 2 ROWS 128 / GROUP) bytes, kept under 32 KiB with the rest (every backend's
#: limit: lavapipe and Metal give a group 32 KiB)
TUNING = {"cuda": [(2, 4, 2, 0), (1, 4, 4, 0), (4, 4, 2, 0), (2, 8, 2, 0), (1, 8, 2, 0), (4, 8, 1, 0), (1, 4, 2, 0),
                   (2, 4, 4, 0), (2, 4, 1, 2), (1, 4, 1, 4), (1, 8, 1, 2), (4, 2, 1, 2)]}


@func
def copy_slab(w, x, scales, sw, sx, ss, st, j, wb, sb, ldw, ng, ROWS, SPS, GROUP):
    """Start this SIMD group's async copies of slab j (its ROWS rows' 16 words, x's 128 elements, the rows' SPS
    scales) into stage st of the shared rings sw, sx, ss."""
    S = simd_size()
    for p in range(simd_lane(), ROWS * 4, S):
        r = p // 4
        async_copy(sw, (st * ROWS + r) * 16 + (p % 4) * 4, w, wb + r * ldw + 16 * j + (p % 4) * 4, 4)
    for p in range(simd_lane(), 16, S):
        async_copy(sx, st * 128 + p * 8, x, 128 * j + p * 8, 8)
    for r in range(simd_lane(), ROWS, S):
        async_copy(ss, (st * ROWS + r) * SPS, scales, sb + r * ng + 128 * j // GROUP, SPS)


@kernel
def gemv_q4_mma(w: Tensor[u32], scales: Tensor[H], biases: Tensor[H], x: Tensor[H], y: Tensor[H], nrows: int,
                ncols: int, GROUP: constexpr, NT: constexpr, WARPS: constexpr, U: constexpr, NG: constexpr,
                XV: constexpr, NS: constexpr):
    """y = W x for a 4-bit W (module docstring). Launch ceil(nrows / (16 NT)) groups of WARPS SIMD groups (any
    number of groups: they stride over the blocks); NG >= ncols / GROUP; XV: x elements per 16-byte load (8: the
    staged copies move x 8 at a time); NS >= 2 (GROUP 32 or 64): the slabs staged by async copies in NS stages."""
    ROWS = 16 * NT
    ldw = ncols // 8
    ng = ncols // GROUP
    nslabs = ncols // 128
    xsum = shared(f32, NG)  # sum of x over each quantization group
    part = shared(f32, WARPS * ROWS)  # row 0 of each SIMD group's accumulator
    bpart = shared(f32, WARPS * ROWS)  # each SIMD group's bias partials
    SPS = max(1, 128 // GROUP)  # scales a row per slab
    sw = shared(u32, max(WARPS * NS * ROWS * 16, 1))  # NS = 0: none used
    sx = shared(H, max(WARPS * NS * 128, 1))
    ss = shared(H, max(WARPS * NS * ROWS * SPS, 1))
    group_sums(x, xsum, ng, GROUP, XV, WARPS)
    # this SIMD group's slabs [s0, s1) and groups [g0, g1)
    per = (nslabs + WARPS - 1) // WARPS
    s0 = min(simd_group() * per, nslabs)
    s1 = min(s0 + per, nslabs)
    g0 = s0 * 128 // GROUP
    g1 = s1 * 128 // GROUP
    nblocks = (nrows + ROWS - 1) // ROWS
    for b in range(group_id(0), nblocks, num_groups(0)):
        row0 = min(b * ROWS, nrows - ROWS)
        wb = row0 * ldw
        sb = row0 * ng
        acc = frag_acc(1, NT)
        if NS == 0:
            steps = (s1 - s0) // U
            for i in range(steps):
                for u in static_range(U):
                    j = s0 + i * U + u
                    acc = mma_q4(x, 128 * j, 0, w, wb + 16 * j, ldw, scales, sb + 128 * j // GROUP, ng, acc, GROUP)
            for j in range(s0 + steps * U, s1):
                acc = mma_q4(x, 128 * j, 0, w, wb + 16 * j, ldw, scales, sb + 128 * j // GROUP, ng, acc, GROUP)
        else:
            # every SIMD group takes `per` steps (one barrier each, after the wait: the stage refilled below was
            # read one step ago by all), computing only its own slabs
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
                    acc = mma_q4(sx, st * 128, 0, sw, st * ROWS * 16, 16, ss, st * ROWS * SPS, SPS, acc, GROUP)
        frag_store(part, simd_group() * ROWS, ROWS, acc, 1, ROWS)
        finish_block(biases, y, xsum, part, bpart, sb, ng, g0, g1, row0, b * ROWS, ROWS, WARPS)


@func
def group_sums(x, xsum, ng, GROUP, XV, WARPS):
    """xsum[g] = the sum of x over quantization group g (f32), the group's threads striding over the groups; then a
    barrier."""
    for g in range(local_id(0), ng, WARPS * simd_size()):
        t = 0.0
        for c in range(GROUP // XV):
            xv = vload(x, g * GROUP + c * XV, XV)
            for j in static_range(XV):
                t += cast(xv[j], f32)
        xsum[g] = t
    barrier()


@func
def finish_block(biases, y, xsum, part, bpart, sb, ng, g0, g1, row0, first, ROWS, WARPS):
    """After each SIMD group stored its product rows in part: its bias partials over groups [g0, g1) into bpart
    (lane l takes row l % ROWS, groups g0 + l // ROWS, ...: S // ROWS lanes a row, at least 1), a barrier, the
    WARPS parts summed into y's rows row0 + n >= first (a shifted last block leaves the rows before it alone)."""
    S = simd_size()
    if S >= ROWS:
        n = simd_lane() % ROWS
        t = 0.0
        for g in range(g0 + simd_lane() // ROWS, g1, S // ROWS):
            t += cast(biases[sb + n * ng + g], f32) * xsum[g]
        for e in static_range(6):  # lanes l and l ^ (ROWS << e) hold the same row
            if (ROWS << e) < S:
                t += simd_shuffle_xor(t, ROWS << e)
        if simd_lane() < ROWS:
            bpart[simd_group() * ROWS + n] = t
    else:
        for n in range(simd_lane(), ROWS, S):
            t = 0.0
            for g in range(g0, g1):
                t += cast(biases[sb + n * ng + g], f32) * xsum[g]
            bpart[simd_group() * ROWS + n] = t
    barrier()
    for n in range(local_id(0), ROWS, WARPS * S):
        t = 0.0
        for k in static_range(WARPS):
            t += part[k * ROWS + n] + bpart[k * ROWS + n]
        if row0 + n >= first:
            y[row0 + n] = t
    barrier()


def mma_ok(nrows: int, ncols: int, bits: int, dtype: str) -> bool:
    """Whether the shape and types fit this kernel: 4 bits, f16/bf16, K a multiple of 128, at least 16 rows."""
    return bits == 4 and dtype in ("f16", "bf16") and ncols % 128 == 0 and nrows >= 16


def matrix_configs(path: str, table: list[tuple[int, ...]], tiles: str, backend: str, nrows: int, ncols: int,
                   bits: int, dtype: str, group: int, forced: bool) -> list[dict]:
    """The configurations a matrix-unit GEMV (``path`` "mma" or "mv") offers from its CUDA ``table`` of (tiles,
    WARPS, U, NS), ``tiles`` naming its count of 16-row tiles: the rows that fit (the staged ones, NS >= 2, for
    groups of 32 and 64); ``forced``: the first that fits, on any backend (elsewhere the scalar fallback)."""
    if not mma_ok(nrows, ncols, bits, dtype):
        if forced:
            raise ValueError(f"gemv_q: the {path} path needs 4 bits, f16/bf16, K a multiple of 128 and >= 16 rows; "
                             f"got {bits} bits, {dtype}, {nrows} x {ncols}")
        return []
    if backend != "cuda" and not forced:
        return []
    rows = [c for c in table if 16 * c[0] <= nrows and (c[3] == 0 or group <= 64)]
    if forced and backend != "cuda":
        rows = rows[:1]
    return [{"PATH": path, tiles: n, "WARPS": warps, "U": u, "NS": ns} for n, warps, u, ns in rows]


def matrix_fits(cfg: dict, tiles: str, nrows: int, ncols: int, bits: int, dtype: str, group: int) -> bool:
    """Whether a forced matrix-unit configuration (``tiles``: its key for the count of 16-row tiles) can run this
    matrix."""
    return mma_ok(nrows, ncols, bits, dtype) and nrows >= 16 * cfg[tiles] and (cfg.get("NS", 0) == 0 or group <= 64)


def mma_configs(backend: str, nrows: int, ncols: int, bits: int, dtype: str, group: int = 64,
                forced: bool = False) -> list[dict]:
    """The configurations the launcher times: CUDA's table (NVIDIA's spelling of mma_q4), ``matrix_configs``."""
    return matrix_configs("mma", TUNING["cuda"], "NT", backend, nrows, ncols, bits, dtype, group, forced)


def config_fits(cfg: dict, nrows: int, ncols: int, bits: int, dtype: str, group: int) -> bool:
    """Whether a forced configuration can run this matrix."""
    return matrix_fits(cfg, "NT", nrows, ncols, bits, dtype, group)


def launch_q4_mma(w, scales, biases, x, y, group: int, cfg: dict, width: int, backend: str | None) -> None:
    """``gemv_q4_mma`` with configuration ``cfg`` (``mma_configs``) on SIMD groups of ``width`` lanes."""
    nrows, ncols = w.shape[0], w.shape[1] * 8
    ng = ncols // group
    slots = 1 << max(0, (ng - 1).bit_length())
    groups = -(-nrows // (16 * cfg["NT"]))
    threads = cfg["WARPS"] * width
    gemv_q4_mma[groups * threads, threads](w, scales, biases, x, y, nrows, ncols, group, cfg["NT"], cfg["WARPS"],
                                           cfg["U"], slots, 16 // x.dtype.itemsize, cfg.get("NS", 0),
                                           backend=backend)
