"""``gemv_q4_xs`` with its row blocks staged by asynchronous copies (``gemv_q4_xs_staged``: path "xs", ``NS`` >= 2).

Why: ``gemv_q4_xs`` loads the next block of R rows into a second register buffer before the current block's
arithmetic, but NVRTC's scheduler (sm_90 SASS, R 4 and R 8, both forms) sinks those loads below the other block's
arithmetic, so about one block a SIMD group is in flight, and not at all times. Here each lane's 16-byte vector of
each row and the 4-byte pieces holding its scale and bias go to the lane's own slots of ``NS`` shared-memory stages
by ``async_copy`` (cp.async on NVIDIA sm_80+; an ordinary copy elsewhere), ``NS - 1`` blocks ahead: copies that
hold no registers and that the compiler cannot move below a later wait. Each lane reads back only what it copied,
so the pipeline needs no barrier (``async_wait`` alone); the super-blocks' reduction keeps ``gemv_q4_xs``'s one
barrier every two blocks. The arithmetic, the reduction and the x set-up are ``gemv_q4_xs``'s (both forms); the
first NS - 1 blocks' copies are issued before x is converted (s35), so DRAM works through the set-up.

Shared memory a group: NS R KX 24 bytes a thread and 16 R WARPS for the partials: at 16 SIMD groups of 32 lanes, R 4,
NS 3 144 KiB, above the 48 KiB default (CUDA's opt-in; other backends refuse past their limit at launch). The scale
and bias pieces are 4 bytes, two 2-byte values: ncols / GROUP must be even, so that a piece stays aligned and within
its row (the launcher refuses otherwise).

Measured on an H100 (s35, bench/results/2026-12-07-h100-s35-q4-staged): 65.1-66.7 us at 16384^2 for NS 2-6, no
better than ``gemv_q4_xs`` (64.9): more blocks in flight did not move DRAM throughput (78 % of peak under Nsight
Compute either way, cuBLAS's bf16 GEMV 91 %), so the prefetch the compiler sank was not what held the kernel back.
Forced-only (path "xs" with NS), not tuned.
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
    group_id,
    group_size,
    i32,
    local_array,
    local_id,
    num_groups,
    shared,
    static_range,
    u32,
    vload,
)
from .gemm_tiles import H
from .quant_dot import MAGIC_EVEN, MAGIC_ODD
from .quant_gemv_xs import (
    convert_x,
    dot_block,
    dot_block_x8,
    finish_rows,
    lane_vectors,
    launch_q4_xs,
    reduce_block,
    xs_grid,
)

#: iron build's defaults
GROUP = 64
R = 4
KX = 1
WARPS = 4
LR = 2
LS = 5
X8 = 0
NS = 2  # 24 KiB at the defaults: within every backend's 32 KiB


@func
def block_row0(t, gid, stride, R):
    """The first row of this group's block t: super-block gid + (t / 2) stride, its half t % 2."""
    return (gid + (t // 2) * stride) * 2 * R + (t % 2) * R


@func
def copy_block(w, scales, biases, sw, ssb, st, vw, vg, row0, nrows, wrow, ngr, R, KX):
    """Async copies of the lane's vectors of rows row0 .. row0 + R - 1 (clamped to the last row) into its slots of
    stage st (slot-major, thread-minor: a SIMD group's read of a slot is contiguous), with the 4-byte pieces
    holding their scales and biases."""
    for r in static_range(R):
        rr = min(row0 + r, nrows - 1)
        for k in static_range(KX):
            slot = ((st * KX + k) * R + r) * group_size(0) + local_id(0)
            piece = rr * ngr + (vg[k] & ~1)
            async_copy(sw, slot * 4, w, rr * wrow + vw[k], 4)
            async_copy(ssb, slot * 4, scales, piece, 2)
            async_copy(ssb, slot * 4 + 2, biases, piece, 2)


@func
def read_block(sw, ssb, st, wv, sv, bv, vg, R, KX):
    """What copy_block copied into stage st, into the registers dot_block reads."""
    for r in static_range(R):
        for k in static_range(KX):
            slot = ((st * KX + k) * R + r) * group_size(0) + local_id(0)
            wr = vload(sw, slot * 4, 4)
            for j in static_range(4):
                wv[(k * R + r) * 4 + j] = wr[j]
            sv[k * R + r] = ssb[slot * 4 + (vg[k] & 1)]
            bv[k * R + r] = ssb[slot * 4 + 2 + (vg[k] & 1)]


@kernel(launch_bounds=(512, 1))
def gemv_q4_xs_staged(w: Tensor[u32], scales: Tensor[H], biases: Tensor[H], x: Tensor[H], y: Tensor[H],
                      nrows: int, ncols: int, GROUP: constexpr, R: constexpr, KX: constexpr, WARPS: constexpr,
                      LR: constexpr, LS: constexpr, X8: constexpr, NS: constexpr):
    """gemv_q4_xs with this group's blocks (R rows, two a super-block) copied NS - 1 blocks ahead into NS stages."""
    wrow = ncols // 8
    ngr = ncols // GROUP
    magic = local_array(u32, 2)  # from a value NVRTC cannot fold (quant_gemv.gemv_q_warp's note)
    magic[0] = cast(MAGIC_EVEN, u32) - cast(nrows >> 31, u32)
    magic[1] = cast(MAGIC_ODD, u32) - cast(nrows >> 31, u32)
    xf = local_array(f32, KX * 32)
    cx = local_array(f32, KX * 3)
    vw = local_array(i32, KX)
    vg = local_array(i32, KX)
    xq = local_array(i32, max(KX * 8 * (X8 + 1) * min(X8, 1), 1))
    lane_vectors(vw, vg, ncols // 32, GROUP, KX, WARPS)
    part = shared(f32, 2 * 2 * R * WARPS)  # two super-blocks' partials: (buffer, row, SIMD group)
    sw = shared(u32, NS * KX * R * (WARPS << LS) * 4)  # a 16-byte vector a slot
    ssb = shared(H, NS * KX * R * (WARPS << LS) * 4)  # its scale piece, then its bias piece
    acc = local_array(f32, R)
    wv = local_array(u32, KX * R * 4)
    sv = local_array(H, KX * R)
    bv = local_array(H, KX * R)
    gid = group_id(0)
    stride = num_groups(0)
    nb = 2 * (((nrows + 2 * R - 1) // (2 * R) - gid + stride - 1) // stride)  # this group's blocks
    for t in static_range(NS - 1):
        if t < nb:
            copy_block(w, scales, biases, sw, ssb, t, vw, vg, block_row0(t, gid, stride, R), nrows, wrow, ngr, R,
                       KX)
        async_commit()
    convert_x(x, xf, cx, xq, ncols // 32, KX, WARPS, X8)  # while the first blocks' copies are on their way
    for t in range(nb):
        if t + NS - 1 < nb:  # into the stage block t - 1 was read from
            copy_block(w, scales, biases, sw, ssb, (t + NS - 1) % NS, vw, vg, block_row0(t + NS - 1, gid, stride, R),
                       nrows, wrow, ngr, R, KX)
        async_commit()
        async_wait(NS - 1)  # block t has landed; each lane reads only what it copied (no barrier)
        read_block(sw, ssb, t % NS, wv, sv, bv, vg, R, KX)
        if X8:
            dot_block_x8(wv, sv, bv, xq, cx, acc, R, KX, X8 + 1)
        else:
            dot_block(wv, sv, bv, xf, cx, acc, magic, R, KX)
        slot = ((t // 2) % 2) * 2 * R
        reduce_block(acc, part, slot + (t % 2) * R, WARPS, R, LR, LS)
        if t % 2 == 1:
            barrier()
            finish_rows(part, y, slot, block_row0(t - 1, gid, stride, R), nrows, WARPS, 2 * R)


def launch_xs(w, scales, biases, x, y, group: int, cfg: dict, width: int, sms: int, backend: str | None) -> None:
    """Path "xs": ``gemv_q4_xs_staged`` where ``cfg["NS"]`` >= 2, else ``gemv_q4_xs`` (quant_gemv_xs.launch_q4_xs);
    the same groups and shape."""
    ns = cfg.get("NS", 0)
    if ns < 2:
        launch_q4_xs(w, scales, biases, x, y, group, cfg, width, sms, backend)
        return
    nrows, ncols = w.shape[0], w.shape[1] * 8
    if (ncols // group) % 2:
        raise ValueError(f"gemv_q: the staged xs path (NS = {ns}) needs an even number of groups a row (4-byte "
                         f"scale pieces); K / GROUP = {ncols // group}: use NS = 0")
    r = cfg["R"]
    groups, warps, kx = xs_grid(nrows, ncols, r, cfg["MOST"], width, sms)
    threads = warps * width
    gemv_q4_xs_staged[groups * threads, threads](w, scales, biases, x, y, nrows, ncols, group, r, kx, warps,
                                                 r.bit_length() - 1, width.bit_length() - 1, cfg.get("X8", 0), ns,
                                                 backend=backend)
