"""Kernels exercised by the front-end test suite (tests/frontend/test_kernels.py, test_api.py).

Each kernel is small and written the way a user would write it; together they use every builtin and every
control-flow form of DESIGN.md's fixed-names list. ``iron inspect tests/frontend/kernels.py:<name>`` works on them.
The NumPy oracles live in the tests, not here, so that a kernel and its oracle are never written in the same idiom.
"""

from __future__ import annotations

import iron
from iron import (
    T,
    Tensor,
    abs,
    atomic_add,
    atomic_max,
    barrier,
    cast,
    ceil,
    constexpr,
    cos,
    erf,
    exp,
    exp2,
    f32,
    floor,
    fma,
    group_id,
    group_size,
    i32,
    kernel,
    load,
    local_id,
    log,
    log2,
    max,
    min,
    num_groups,
    program_id,
    rsqrt,
    shared,
    simd_broadcast,
    simd_group,
    simd_lane,
    simd_max,
    simd_min,
    simd_shuffle,
    simd_shuffle_xor,
    simd_size,
    simd_sum,
    sin,
    sqrt,
    static_range,
    store,
    tanh,
    u32,
    where,
)

# ---------------------------------------------------------------------------------------------------------------
# the seed (issue 2), exactly as written there


@kernel
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    out[idx] = exp(a[idx])


# ---------------------------------------------------------------------------------------------------------------
# math builtins; OP is a constexpr, so each op is its own variant and the `if` chain is resolved at compile time

UNARY_OPS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "erf", "abs", "floor", "ceil")
UNARY_OP_CODE = {name: code for code, name in enumerate(UNARY_OPS)}


@kernel
def unary_math(x: Tensor[T], out: Tensor[T], OP: constexpr):
    i = program_id(0)
    v = x[i]
    if OP == 0:
        y = exp(v)
    elif OP == 1:
        y = exp2(v)
    elif OP == 2:
        y = log(v)
    elif OP == 3:
        y = log2(v)
    elif OP == 4:
        y = sqrt(v)
    elif OP == 5:
        y = rsqrt(v)
    elif OP == 6:
        y = sin(v)
    elif OP == 7:
        y = cos(v)
    elif OP == 8:
        y = tanh(v)
    elif OP == 9:
        y = erf(v)
    elif OP == 10:
        y = abs(v)
    elif OP == 11:
        y = floor(v)
    else:
        y = ceil(v)
    out[i] = y


@kernel
def minmax_fma(a: Tensor[T], b: Tensor[T], c: Tensor[T], lo: Tensor[T], hi: Tensor[T], fused: Tensor[T]):
    """min of two, max of three (variadic), and fma."""
    i = program_id(0)
    lo[i] = min(a[i], b[i])
    hi[i] = max(a[i], b[i], c[i])
    fused[i] = fma(a[i], b[i], c[i])


@kernel
def where_select(a: Tensor[T], b: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    x = a[i]
    y = b[i]
    out[i] = where(x > y, x - y, y * 0.5)


@kernel
def cast_roundtrip(x: Tensor[T], xi: Tensor[i32], xu: Tensor[u32], back: Tensor[T]):
    """float -> i32 (truncates toward zero), float -> u32, and i32/u32 -> T."""
    i = program_id(0)
    v = x[i]
    t = cast(v * 8.0, i32)
    u = cast(abs(v), u32)
    xi[i] = t
    xu[i] = u
    back[i] = cast(t, T) + cast(u, T)


@kernel
def load_store_reverse(a: Tensor[T], out: Tensor[T], n: int):
    """The explicit load()/store() builtins (t[i] is sugar for them)."""
    i = program_id(0)
    store(out, i, load(a, n - 1 - i) * 2.0)


@kernel
def axpy(alpha: float, x: Tensor[T], y: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = alpha * x[i] + y[i]


@kernel
def scalar_params(x: Tensor[T], out: Tensor[T], n: int, scale: iron.f32, stride: iron.u32, offset: iron.i32):
    """i32 program_id times a u32 scalar is u32 arithmetic (C's conversions): the index wraps modulo 2**32."""
    i = program_id(0)
    j = (offset + i * stride) % n
    out[i] = x[j] * scale


@kernel
def ieee_affine(x: Tensor[T], scaled: Tensor[T], plus: Tensor[T], minus: Tensor[T], SCALE: constexpr, BIAS: constexpr):
    """Arithmetic with compile-time constants that an optimiser is tempted to drop (x * 1.0, x + 0.0, x - 0.0):
    only some of those rewrites are exact for -0.0, inf and NaN."""
    i = program_id(0)
    v = x[i]
    scaled[i] = v * SCALE
    plus[i] = v + BIAS
    minus[i] = v - BIAS


@kernel
def divide_by_constant(x: Tensor[T], out: Tensor[T], D: constexpr):
    """Division by a compile-time constant, including +0.0 and -0.0: IEEE gives signed infinities and NaN, and a C
    compiler warns about the literal division by zero unless the emitter spells it another way."""
    i = program_id(0)
    out[i] = x[i] / D


# ---------------------------------------------------------------------------------------------------------------
# thread indices


@kernel
def thread_ids_1d(pid: Tensor[i32], lid: Tensor[i32], gid: Tensor[i32], gsz: Tensor[i32], ngr: Tensor[i32]):
    i = program_id(0)
    pid[i] = i
    lid[i] = local_id(0)
    gid[i] = group_id(0)
    gsz[i] = group_size(0)
    ngr[i] = num_groups(0)


@kernel
def thread_ids_2d(out: Tensor[i32], width: int, total: int):
    """Ten planes of `total` elements: program/local/group id, group size and group count on axes 0 and 1."""
    x = program_id(0)
    y = program_id(axis=1)
    k = y * width + x
    out[k] = x
    out[total + k] = y
    out[2 * total + k] = local_id(0)
    out[3 * total + k] = local_id(1)
    out[4 * total + k] = group_id(0)
    out[5 * total + k] = group_id(1)
    out[6 * total + k] = group_size(0)
    out[7 * total + k] = group_size(1)
    out[8 * total + k] = num_groups(0)
    out[9 * total + k] = num_groups(1)


@kernel
def simd_ids(lane: Tensor[i32], sgroup: Tensor[i32], ssize: Tensor[i32]):
    i = program_id(0)
    lane[i] = simd_lane()
    sgroup[i] = simd_group()
    ssize[i] = simd_size()


# ---------------------------------------------------------------------------------------------------------------
# shared memory, barriers, SIMD-group collectives


@kernel
def block_sum(x: Tensor[T], out: Tensor[T], BLOCK: constexpr):
    """One sum per group: a tree reduction in shared memory (BLOCK a power of two, the group size)."""
    tid = local_id(0)
    red = shared(f32, BLOCK)
    red[tid] = x[program_id(0)]
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] += red[tid + s]
        barrier()
        s = s // 2
    if tid == 0:
        out[group_id(0)] = red[0]


TILE = 16


@kernel
def transpose_tiled(x: Tensor[T], out: Tensor[T], rows: int, cols: int):
    """out (cols x rows) = x (rows x cols)^T through a TILE x TILE shared tile; launch grid (cols, rows), group
    (TILE, TILE). Values pass through shared memory of dtype T unchanged."""
    tile = shared(T, TILE * TILE)
    lx = local_id(0)
    ly = local_id(1)
    tile[ly * TILE + lx] = x[program_id(1) * cols + program_id(0)]
    barrier()
    orow = group_id(0) * TILE + ly
    ocol = group_id(1) * TILE + lx
    out[orow * rows + ocol] = tile[lx * TILE + ly]


@kernel
def reverse_tiles(x: Tensor[T], out: Tensor[T], BLOCK: constexpr, TILE: constexpr):
    """Reverses each TILE-element tile through one shared array of TILE f32 per group: 64 KiB at TILE=16384, over
    CUDA's 48 KiB static limit, so it exercises dynamic shared memory and the kernel's opt-in."""
    g = group_id(0)
    t = local_id(0)
    tile = shared(iron.f32, TILE)
    for k in range(t, TILE, BLOCK):
        tile[k] = x[g * TILE + k]
    barrier()
    for k in range(t, TILE, BLOCK):
        out[g * TILE + k] = tile[TILE - 1 - k]


@kernel
def simd_reduce(x: Tensor[T], s: Tensor[T], mx: Tensor[T], mn: Tensor[T]):
    i = program_id(0)
    v = x[i]
    s[i] = simd_sum(v)
    mx[i] = simd_max(v)
    mn[i] = simd_min(v)


@kernel
def simd_min_of_nan_lanes(x: Tensor[f32], positive: Tensor[i32]):
    """Numbers return early, so the active lanes hold only NaN: simd_min ignores NaN like fmin, and NaN of NaNs
    stays NaN (not the +inf an identity-filled reduction would give)."""
    i = program_id(0)
    v = x[i]
    if v >= v:
        return
    positive[i] = cast(simd_min(v) > 0.0, i32)


@kernel
def simd_exchange(x: Tensor[T], rot: Tensor[T], swz: Tensor[T], bc: Tensor[T], SHIFT: constexpr, MASK: constexpr):
    i = program_id(0)
    v = x[i]
    rot[i] = simd_shuffle(v, (simd_lane() + SHIFT) % simd_size())
    swz[i] = simd_shuffle_xor(v, MASK)
    bc[i] = simd_broadcast(v, simd_size() - 1)


# ---------------------------------------------------------------------------------------------------------------
# atomics


@kernel
def histogram_i32(x: Tensor[T], hist: Tensor[i32], nbins: int):
    """Bin b = trunc(x) clamped to [0, nbins - 1]."""
    i = program_id(0)
    b = min(max(cast(x[i], i32), 0), nbins - 1)
    atomic_add(hist, b, 1)


@kernel
def histogram_u32(x: Tensor[T], hist: Tensor[u32], tickets: Tensor[u32], counter: Tensor[u32], nbins: iron.u32):
    """u32 histogram, plus atomic_add's return value: every thread draws a distinct ticket from one counter."""
    i = program_id(0)
    b = cast(max(x[i], 0.0), u32)
    atomic_add(hist, min(b, nbins - 1), 1)
    tickets[i] = atomic_add(counter, 0, 1)


@kernel
def atomic_sum_f32(x: Tensor[T], total: Tensor[f32], nslots: int):
    i = program_id(0)
    atomic_add(total, i % nslots, x[i])


@kernel
def atomic_max_i32(x: Tensor[i32], out: Tensor[i32], old: Tensor[i32], nslots: int):
    i = program_id(0)
    old[i] = atomic_max(out, i % nslots, x[i])


@kernel
def atomic_max_f32(x: Tensor[T], out: Tensor[f32], nslots: int):
    i = program_id(0)
    atomic_max(out, i % nslots, x[i])


# ---------------------------------------------------------------------------------------------------------------
# control flow


@kernel
def static_dot(x: Tensor[T], w: Tensor[T], out: Tensor[T], evens: Tensor[T], K: constexpr):
    """Per-thread dot product of a K-row with w (static_range(K)), and the sum of the even-indexed entries in
    reverse order (static_range(start, stop, negative step))."""
    i = program_id(0)
    acc = 0.0
    for k in static_range(K):
        acc += x[i * K + k] * w[k]
    out[i] = acc
    e = 0.0
    for k in static_range(K - 2 + K % 2, -1, -2):
        e += x[i * K + k]
    evens[i] = e


@kernel
def static_alternating(x: Tensor[T], out: Tensor[T], K: constexpr):
    """sum_k (-1)^k x[i*K + k], k even counted twice: an `if` on a static_range index becomes a constant condition
    in each unrolled copy, which the passes resolve."""
    i = program_id(0)
    acc = 0.0
    for k in static_range(K):
        v = x[i * K + k]
        if k % 2 == 0:
            acc += 2.0 * v
        else:
            acc -= v
    out[i] = acc


@kernel
def piecewise(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    v = x[i]
    if v < -1.0:
        y = -1.0 - 0.5 * (v + 1.0)
    elif v < 0.0:
        y = v * v
    elif v < 1.0:
        if v < 0.5:
            y = 2.0 * v
        else:
            y = 1.0
    else:
        y = v + 0.25
    out[i] = y


@kernel
def range_sum(x: Tensor[T], out: Tensor[T], m: int, start: int, stop: int, step: int):
    """out[i] = sum over j in range(start, stop, step) of (j + 1) * x[i * m + j]; step may be negative."""
    i = program_id(0)
    acc = 0.0
    for j in range(start, stop, step):
        acc += (j + 1) * x[i * m + j]
    out[i] = acc


@kernel
def collatz_steps(start: Tensor[i32], steps: Tensor[i32], cap: int):
    """Steps of the Collatz map until 1, giving up (break) at `cap` steps."""
    i = program_id(0)
    n = start[i]
    count = 0
    while n != 1:
        if count == cap:
            break
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        count += 1
    steps[i] = count


@kernel
def break_continue(x: Tensor[T], total: Tensor[T], used: Tensor[i32], m: int, limit: float):
    """Sum the non-negative entries of row i (skipping negatives with continue) until the sum exceeds limit."""
    i = program_id(0)
    acc = 0.0
    count = 0
    for j in range(m):
        v = x[i * m + j]
        if v < 0:
            continue
        acc += v
        count += 1
        if acc > limit:
            break
    total[i] = acc
    used[i] = count


@kernel
def early_exit(x: Tensor[T], out: Tensor[T], n: int):
    """Launched with more threads than elements: the extra threads return before touching memory."""
    i = program_id(0)
    if i >= n:
        return
    v = x[i]
    if v < 0.0:
        out[i] = -v
        return
    out[i] = sqrt(v)


@iron.func
def square(v):
    return v * v


@iron.func
def poly(v):
    """Calls another helper (nested inlining)."""
    return square(v) * 0.5 + v


@iron.func
def soft_clamp(v, lim):
    """Early returns: a helper with three exits."""
    if v > lim:
        return lim
    if v < -lim:
        return -lim
    return v


@kernel
def helpers(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = poly(soft_clamp(x[i], 2.0))


@kernel
def constexpr_affine(x: Tensor[T], out: Tensor[T], SCALE: constexpr, SQUARE: constexpr):
    i = program_id(0)
    v = x[i] * SCALE
    if SQUARE:
        v = v * v
    out[i] = v


@kernel
def float_rem(x: Tensor[T], y: Tensor[T], out: Tensor[T]):
    """% on floats is C's fmod: the result has the sign of the dividend; fmod(x, 0) and fmod(inf, y) are NaN."""
    i = program_id(0)
    out[i] = x[i] % y[i]


@kernel
def int_arith_i32(a: Tensor[i32], b: Tensor[i32], q: Tensor[i32], r: Tensor[i32], bits: Tensor[i32]):
    """// and % truncate toward zero like C; >> is arithmetic on i32."""
    i = program_id(0)
    x = a[i]
    y = b[i]
    q[i] = x // y
    r[i] = x % y
    bits[i] = ((x & y) ^ (x | 12345)) + (x >> 3) - (y << 2) + ~x


@kernel
def int_arith_u32(a: Tensor[u32], b: Tensor[u32], q: Tensor[u32], r: Tensor[u32], bits: Tensor[u32]):
    """Unsigned: // and % on u32, >> is logical, + - * wrap modulo 2**32."""
    i = program_id(0)
    x = a[i]
    y = b[i]
    q[i] = x // y
    r[i] = x % y
    bits[i] = (x >> 7) + x * y - (y ^ x)


@kernel
def guarded_and(x: Tensor[T], out: Tensor[T], n: int):
    """x has n elements and the grid is larger: `and` must short-circuit before the load x[i]."""
    i = program_id(0)
    if i < n and x[i] > 0:
        out[i] = x[i]
    else:
        out[i] = -1.0


@kernel
def guarded_ifexp(x: Tensor[T], out: Tensor[T], n: int):
    """A conditional expression evaluates only the taken arm, so the load is skipped past the end of x."""
    i = program_id(0)
    out[i] = x[i] * 3.0 if i < n else 7.0


@kernel
def augmented(x: Tensor[T], acc: Tensor[T], cnt: Tensor[i32]):
    i = program_id(0)
    acc[i] += x[i]
    acc[i] *= 2.0
    acc[i] -= 1.0
    cnt[i] += 3
    cnt[i] <<= 1


@kernel(native_half=True)
def native_half_muladd(a: Tensor[T], b: Tensor[T], c: Tensor[T], out: Tensor[T]):
    """With native_half, a*b and +c each round to T (two roundings), instead of being done in f32."""
    i = program_id(0)
    out[i] = a[i] * b[i] + c[i]


@kernel
def default_muladd(a: Tensor[T], b: Tensor[T], c: Tensor[T], out: Tensor[T]):
    """The same expression without native_half: computed in f32, rounded once when stored."""
    i = program_id(0)
    out[i] = a[i] * b[i] + c[i]


@kernel
def round_through_halves(x: Tensor[f32], h: Tensor[f32], b: Tensor[f32]):
    """f32 -> f16 -> f32 and f32 -> bf16 -> f32 in registers (results stored as f32, so only the in-register
    rounding is tested, not the store's conversion)."""
    i = program_id(0)
    h[i] = cast(cast(x[i], iron.f16), f32)
    b[i] = cast(cast(x[i], iron.bf16), f32)


#: the math the op table added (issue 13): OP picks one, as in unary_math
NEW_UNARY_OPS = ("rint", "sigmoid", "silu", "gelu")
BINARY_OPS = ("atan2", "pow", "copysign")


@kernel
def new_unary_math(x: Tensor[T], out: Tensor[T], OP: constexpr):
    i = program_id(0)
    v = x[i]
    if OP == 0:
        y = iron.rint(v)
    elif OP == 1:
        y = iron.sigmoid(v)
    elif OP == 2:
        y = iron.silu(v)
    else:
        y = iron.gelu(v)
    out[i] = y


@kernel
def binary_math(x: Tensor[T], y: Tensor[T], out: Tensor[T], OP: constexpr):
    i = program_id(0)
    if OP == 0:
        r = iron.atan2(x[i], y[i])
    elif OP == 1:
        r = iron.pow(x[i], y[i])
    else:
        r = iron.copysign(x[i], y[i])
    out[i] = r


@kernel
def float_class(x: Tensor[T], out: Tensor[iron.i32]):
    i = program_id(0)
    out[i] = where(iron.isnan(x[i]), 1, 0) + where(iron.isinf(x[i]), 2, 0)


# -- tile-level constructs (issue 14): register arrays and 16-byte accesses --------------------------------------


@kernel
def vector_scale(x: Tensor[T], out: Tensor[T], VEC: constexpr):
    """Each thread: VEC elements in one vload, scaled in f32 registers, one vstore."""
    i = program_id(0) * VEC
    v = iron.vload(x, i, VEC)
    acc = iron.local_array(f32, VEC)
    for k in static_range(VEC):
        acc[k] = v[k] * 2.0 + 1.0
    r = iron.local_array(T, VEC)
    for k in static_range(VEC):
        r[k] = acc[k]
    iron.vstore(out, i, r)


@kernel
def vector_via_shared(x: Tensor[T], out: Tensor[T], VEC: constexpr, BLOCK: constexpr):
    """Global -> registers -> shared (vstore) -> registers (vload, reversed order of vectors) -> global."""
    tile = shared(T, BLOCK * VEC)
    lid = local_id(0)
    base = group_id(0) * BLOCK * VEC
    iron.vstore(tile, lid * VEC, iron.vload(x, base + lid * VEC, VEC))
    barrier()
    back = iron.vload(tile, (BLOCK - 1 - lid) * VEC, VEC)
    iron.vstore(out, base + lid * VEC, back)


@kernel
def local_dynamic_index(x: Tensor[T], out: Tensor[T], n: int, N: constexpr):
    """A register array indexed at run time (it may live in local memory): reverse N elements per thread."""
    i = program_id(0)
    buf = iron.local_array(T, N)
    for k in range(N):
        buf[k] = x[i * N + k]
    for k in range(n):
        out[i * N + k] = buf[N - 1 - k]


@kernel
def misaligned_vload(x: Tensor[f32], out: Tensor[f32], OFFSET: constexpr):
    i = program_id(0)
    v = iron.vload(x, i * 4 + OFFSET, 4)
    out[i] = v[0] + v[3]


# -- matrix fragments (issue 14) ----------------------------------------------------------------------------------


#: matrix fragments take f16/bf16 inputs
H = iron.DTypeVar("H", (iron.f16, iron.bf16))


@kernel
def frag_gemm(A: Tensor[H], B: Tensor[H], C: Tensor[f32], N: int, K: int, rows: int, cols: int, MT: constexpr,
              NT: constexpr, TRANS_A: constexpr, TRANS_B: constexpr):
    """C = A @ B, one (16 MT) x (16 NT) tile per SIMD group straight from global memory (A is M x K, or K x M when
    TRANS_A; B is K x N, or N x K when TRANS_B); only C[:rows, :cols] is written."""
    M = iron.group_size(0) // iron.simd_size() * iron.num_groups(0)  # one row tile per SIMD group, in order
    FM, FN, FK = iron.mma_shape(H)
    tm = group_id(0) * (iron.group_size(0) // iron.simd_size()) + iron.simd_group()
    tn = group_id(1)
    r0 = tm * FM * MT
    c0 = tn * FN * NT
    acc = iron.frag_acc(MT, NT)
    for k in range(0, K, FK):
        if TRANS_A:
            a = iron.frag_a(A, k * (M * FM * MT) + r0, M * FM * MT, True, MT)
        else:
            a = iron.frag_a(A, r0 * K + k, K, tiles=MT)
        if TRANS_B:
            b = iron.frag_b(B, c0 * K + k, K, trans=True, tiles=NT)
        else:
            b = iron.frag_b(B, k * N + c0, N, False, NT)
        acc = iron.mma(a, b, acc)
    iron.frag_store(C, r0 * N + c0, N, acc, rows - r0, cols - c0)


@kernel
def async_pipeline(x: Tensor[T], out: Tensor[T], n_tiles: int, BLOCK: constexpr, VEC: constexpr, EARLY: constexpr):
    """Two-stage pipeline: tile j + 1 is copied (async_copy) while tile j is doubled; EARLY reads a stage before
    waiting for it (a bug the interpreter must expose)."""
    TILE = BLOCK * VEC
    buf = shared(T, 2 * TILE)
    lid = local_id(0)
    iron.async_copy(buf, lid * VEC, x, lid * VEC, VEC)
    iron.async_commit()
    for j in range(n_tiles):
        if j + 1 < n_tiles:
            iron.async_copy(buf, ((j + 1) % 2) * TILE + lid * VEC, x, (j + 1) * TILE + lid * VEC, VEC)
        iron.async_commit()
        if not EARLY:
            iron.async_wait(1)
        barrier()
        for e in static_range(VEC):
            out[j * TILE + lid * VEC + e] = buf[(j % 2) * TILE + lid * VEC + e] * 2.0
        barrier()
