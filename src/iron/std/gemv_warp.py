"""Decode-step GEMV y = A x with one SIMD group per block of rows: no shared memory, no barrier (std/gemv's
other kernel, timed beside its group kernel by ``launch_gemv``'s autotuning on CUDA).

Design (the shape of llama.cpp's and TensorRT-LLM's decode GEMVs): each SIMD group (warp) owns ``R`` consecutive
rows and reduces their ``R`` dot products with ``simd_sum`` alone, so a warp retires as soon as its own loads have
landed instead of waiting at a group barrier for the slowest warp. A lane's vectors of a row are ``lane + i * S``
(``S = simd_size()``; adjacent lanes read adjacent 16-byte vectors, coalesced); one *chunk* is ``K`` of them per
row, ``S * K`` vectors across the warp. A lane issues the chunk's ``R * K`` 16-byte loads of A, then its x, before
any arithmetic, with no branch between them: ptxas keeps a branch-guarded load behind its branch (std/gemv's second
unrolled step waits for its first: 5 loads in flight, not 10). The last, partial chunk of a row clamps its vector
index into the row and skips the arithmetic of the vectors past its end; rows past ``nrows`` re-read the last row
and are never stored.

When one chunk spans the whole row (``ncols <= S * K * VEC``: 2048 bf16 columns with K = 8 on a 32-wide warp), x is
loaded once per warp, kept in registers as f32 (for ``GLU``: gated once) and reused for every block of rows the warp
takes: a warp takes blocks ``w, w + W, ...`` (``W`` warps launched: ``BPW`` blocks per warp). Longer rows (the down
projection's 8192 columns) loop over chunks, x re-read per chunk from L1/L2 (and gated again: R rows share it).

``GLU_OUT`` (std/gemv's ``glu_out``: SwiGLU inside a decode step's gate/up projection, so that the down projection
is a plain GEMV without per-block gating): a is the gate rows then as many up rows, and a block's ``R`` rows (R even)
are ``H = R / 2`` gate rows and the matching up rows, ``half`` rows apart; the SIMD group stores ``H`` values
silu(g) * u, g and u rounded to T first and the product by the store, what std/elementwise swiglu_rows stores from
the plain GEMV's output (bit for bit: the sums below do not depend on R).

Sums are f32 FMAs; a lane adds its vectors in increasing column order into two partial sums per row (even/odd
element: two independent chains), so the result depends only on ``S`` and ``VEC``, not on R, K, BPW or the group.

sm_90, bf16 (NVRTC; ``tests/std/test_gemv_warp.py`` checks no spills, no stack): R = 1, K = 8 takes 122 registers and
issues its 8 loads of A at once; R = 2, K = 8 162 registers, 13 of its 16 loads before the first FMA (ptxas trickles
the last few behind FMAs); for 8192 columns with the GLU, R = 4, K = 4 168 registers, all 16 loads of A and the first
x vector in one batch. ``bench/experiments/gemv_decode_sweep.py`` times every configuration on the GPU.
"""

from __future__ import annotations

from typing import Any

from ..frontend import func, kernel
from ..lang import (
    T,
    Tensor,
    cast,
    constexpr,
    f32,
    fma,
    group_id,
    group_size,
    local_array,
    num_groups,
    simd_group,
    simd_lane,
    simd_size,
    simd_sum,
    static_range,
    vload,
)
from ..runtime import get_backend
from .elementwise import SILU, fast_math, unary_op

#: rows per SIMD group, vectors per lane per row and chunk, the largest group size it is launched with
MAX_R = 8
MAX_K = 16
#: the default variant (``iron build``, the compile tests): valid for every dtype (4 elements: 16 bytes of f32)
VEC = 4
R = 2
K = 4
GLU = 0
GLU_OUT = 0


@func
def load_x(x, xs, c0, nvec, ncols, K, VEC, GLU, EXACT):
    """xs[k * VEC + j] = x (GLU: silu(gate) * up rounded to T) at vector c0 + lane + k * S, element j, as f32
    (the GLU value rounded to T first, as std/elementwise swiglu stores it);
    EXACT = 0: vectors past nvec read the last one (in bounds) and are never used."""
    S = simd_size()
    for k in static_range(K):
        v = c0 + simd_lane() + k * S
        if not EXACT:
            v = min(v, nvec - 1)
        if GLU:
            gv = vload(x, v * VEC, VEC)
            uv = vload(x, ncols + v * VEC, VEC)
            for j in static_range(VEC):
                xs[k * VEC + j] = cast(cast(unary_op(cast(gv[j], f32), SILU, GLU == 2) * cast(uv[j], f32), T), f32)
        else:
            xv = vload(x, v * VEC, VEC)
            for j in static_range(VEC):
                xs[k * VEC + j] = cast(xv[j], f32)


@func
def load_a(a, av, row0, nrows, ncols, c0, nvec, R, K, VEC, EXACT, GLU_OUT):
    """av[(k R + r) VEC + j] = a[row r of the block, vector c0 + lane + k * S, element j]: R * K 16-byte loads, no
    branch between them (EXACT = 0: the vector index clamped into the row; rows past the end re-read the last row, in
    bounds, never stored). Row r is row0 + r; GLU_OUT: gate row row0 + r for r < H = R / 2, up row nrows / 2 + row0
    + r - H for the others."""
    S = simd_size()
    for k in static_range(K):
        v = c0 + simd_lane() + k * S
        if not EXACT:
            v = min(v, nvec - 1)
        for r in static_range(R):
            if GLU_OUT:
                row = row0 + r % (R // 2) + nrows // 2 * (r // (R // 2))
            else:
                row = row0 + r
            ar = vload(a, min(row, nrows - 1) * ncols + v * VEC, VEC)
            for j in static_range(VEC):
                av[(k * R + r) * VEC + j] = ar[j]


@func
def fma_chunk(av, xs, acc, c0, nvec, R, K, VEC, EXACT):
    """acc[2 r + j % 2] += av[(k R + r) VEC + j] * xs[k VEC + j] (two FMA chains per row) for the lane's vectors
    below nvec."""
    S = simd_size()
    for k in static_range(K):
        if EXACT or c0 + simd_lane() + k * S < nvec:
            for r in static_range(R):
                for j in static_range(VEC):
                    i = 2 * r + j % 2
                    acc[i] = fma(cast(av[(k * R + r) * VEC + j], f32), xs[k * VEC + j], acc[i])


@func
def store_rows(y, acc, row0, nrows, R):
    """y[row0 + r] = the SIMD group's sum of row r, written by lane r % S (the rows that exist)."""
    for r in static_range(R):
        s = simd_sum(acc[2 * r] + acc[2 * r + 1])
        if simd_lane() == r % simd_size() and row0 + r < nrows:
            y[row0 + r] = s


@func
def store_glu_rows(y, acc, row0, nout, R, FAST):
    """y[row0 + i] = silu(g) * u for i < H = R / 2 (the rows below nout), g and u the SIMD group's sums of rows i and
    H + i each rounded to T first, the product rounded to T by the store: what std/elementwise swiglu_rows stores
    from the unfused GEMV's output."""
    H = R // 2
    for i in static_range(H):
        g = cast(cast(simd_sum(acc[2 * i] + acc[2 * i + 1]), T), f32)
        u = cast(cast(simd_sum(acc[2 * (H + i)] + acc[2 * (H + i) + 1]), T), f32)
        if simd_lane() == i % simd_size() and row0 + i < nout:
            y[row0 + i] = unary_op(g, SILU, FAST) * u


@func
def zero(acc, n):
    for i in static_range(n):
        acc[i] = 0.0


@kernel
def gemv_warp(a: Tensor[T], x: Tensor[T], y: Tensor[T], nrows: int, ncols: int, VEC: constexpr, R: constexpr,
              K: constexpr, GLU: constexpr, GLU_OUT: constexpr):
    """y[r] = sum_c a[r, c] * x[c] for a row-major (nrows, ncols) matrix, ncols a multiple of VEC. Launch groups of
    a whole number of SIMD groups; SIMD group w of the grid (W of them) computes the blocks of rows b = w, w + W, ...
    < ceil(nrows / R), rows [b R, b R + R). GLU = 1: x holds 2 ncols values (gate, up) and the vector is silu(gate)
    * up rounded to T (std/gemv's GLU). GLU_OUT = 1 (R even, nrows even): a holds nrows / 2 gate rows, then as many
    up rows; block b is gate rows [b H, b H + H) and the matching up rows (H = R / 2), and y (nrows / 2 values) is
    silu(g) * u of each pair's sums, each rounded to T (std/gemv's glu_out). GLU / GLU_OUT = 2: the same with
    silu by ``fast_exp2`` (f16/bf16, as std/elementwise swiglu and swiglu_rows)."""
    S = simd_size()
    per_group = group_size(0) // S
    warp = group_id(0) * per_group + simd_group()
    nwarps = num_groups(0) * per_group
    nvec = ncols // VEC
    if GLU_OUT:
        H = R // 2  # output rows per block
        nout = nrows // 2
    else:
        H = R
        nout = nrows
    nblocks = (nout + H - 1) // H
    CH = S * K
    xs = local_array(f32, K * VEC)
    av = local_array(T, R * K * VEC)
    acc = local_array(f32, 2 * R)
    if nvec <= CH:  # the row is one chunk: x once per warp, in registers, for all its blocks
        if nvec == CH:
            load_x(x, xs, 0, nvec, ncols, K, VEC, GLU, 1)
        else:
            load_x(x, xs, 0, nvec, ncols, K, VEC, GLU, 0)
        for b in range(warp, nblocks, nwarps):
            zero(acc, 2 * R)
            if nvec == CH:
                load_a(a, av, b * H, nrows, ncols, 0, nvec, R, K, VEC, 1, GLU_OUT)
                fma_chunk(av, xs, acc, 0, nvec, R, K, VEC, 1)
            else:
                load_a(a, av, b * H, nrows, ncols, 0, nvec, R, K, VEC, 0, GLU_OUT)
                fma_chunk(av, xs, acc, 0, nvec, R, K, VEC, 0)
            if GLU_OUT:
                store_glu_rows(y, acc, b * H, nout, R, GLU_OUT == 2)
            else:
                store_rows(y, acc, b * H, nout, R)
    else:  # several chunks: whole ones without bounds, then the partial one; A's loads go out before x's (whose
        # GLU gating then overlaps them)
        full = nvec // CH * CH
        for b in range(warp, nblocks, nwarps):
            zero(acc, 2 * R)
            for c0 in range(0, full, CH):
                load_a(a, av, b * H, nrows, ncols, c0, nvec, R, K, VEC, 1, GLU_OUT)
                load_x(x, xs, c0, nvec, ncols, K, VEC, GLU, 1)
                fma_chunk(av, xs, acc, c0, nvec, R, K, VEC, 1)
            if full < nvec:
                load_a(a, av, b * H, nrows, ncols, full, nvec, R, K, VEC, 0, GLU_OUT)
                load_x(x, xs, full, nvec, ncols, K, VEC, GLU, 0)
                fma_chunk(av, xs, acc, full, nvec, R, K, VEC, 0)
            if GLU_OUT:
                store_glu_rows(y, acc, b * H, nout, R, GLU_OUT == 2)
            else:
                store_rows(y, acc, b * H, nout, R)


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def warp_constexprs(ncols: int, itemsize: int, width: int, rows: int, k: int) -> tuple[int, int, int]:
    """(VEC, R, K) for a row of ncols elements at SIMD width ``width``: 16-byte vectors where every row allows them,
    K no more than a row needs (a power of two: few variants)."""
    wide = 16 // itemsize
    vec = wide if ncols % wide == 0 else 1
    return vec, rows, min(k, _pow2(-(-(ncols // vec) // width)))


def glu_code(glu: bool, a: Any) -> int:
    """The GLU / GLU_OUT constexpr (here and std/gemv): 0 none, 1 silu by exp2 (f32), 2 by fast_exp2 (f16/bf16,
    as std/elementwise swiglu and swiglu_rows compute it)."""
    return 1 + fast_math(a) if glu else 0


def launch_gemv_warp(a: Any, x: Any, y: Any, backend: str | None = None, glu: bool = False, warps: int = 4,
                     rows: int = 2, k: int = 8, bpw: int = 1, glu_out: bool = False) -> tuple[int, int, int, int]:
    """y = a @ x (``glu``: a @ (silu(gate) * up)) by ``gemv_warp``: groups of ``warps`` SIMD groups, ``rows`` rows
    per SIMD group, at most ``k`` vectors per lane per row in flight, ``bpw`` blocks of rows per SIMD group.
    ``glu_out``: a is (2 inter, ncols), the gate rows then the up rows, ``rows`` even (half gate, half up), and y
    (inter values) = silu(g) * u of g, u = a @ x's halves, each rounded to a's dtype. Returns (group threads, VEC,
    rows, K)."""
    if not 1 <= rows <= MAX_R or not 1 <= k <= MAX_K or warps < 1 or bpw < 1:
        raise ValueError(f"gemv_warp: rows {rows} (1..{MAX_R}), k {k} (1..{MAX_K}), warps {warps}, bpw {bpw}")
    nrows, ncols = a.shape
    if glu_out and (rows % 2 or nrows % 2 or glu):
        raise ValueError(f"gemv_warp: glu_out needs an even number of rows per SIMD group ({rows}) and of matrix rows "
                         f"({nrows}), and no glu ({glu})")
    width = get_backend(backend).simd_width()
    vec, r, kk = warp_constexprs(ncols, a.dtype.itemsize, width, rows, k)
    blocks = -(-nrows // r)  # glu_out: nrows / 2 outputs, r / 2 a block: the same count
    need = -(-blocks // bpw)  # SIMD groups
    groups = -(-need // warps)
    block = warps * width
    gemv_warp[groups * block, block](a, x, y, nrows, ncols, vec, r, kk, glu_code(glu, a), glu_code(glu_out, a),
                                     backend=backend)
    return block, vec, r, kk
