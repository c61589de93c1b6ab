"""Attention decode (issue 18): one query token per sequence over a KV cache, split over the KV length, combined.

Layouts: ``q``/``out`` are (B, HQ, D); the contiguous cache is ``k``/``v`` (B, L_max, HKV, D); the paged cache is
``k``/``v`` (num_pages, PAGE, HKV, D) with a block table (B, max_pages) of i32 page numbers: position j of sequence
b lives at row j % PAGE of page table[b, j // PAGE]. ``lens`` (B,) i32 are the sequence lengths (>= 1). Query head
h reads key/value head h // (HQ // HKV); scale 1/sqrt(D) unless given. f32, f16, bf16; all sums in f32.

Design (split-K decode, as FlashDecoding): a split kernel runs one group per (split, kv head, sequence). The group
takes CHUNK positions of the sequence and all G = HQ // HKV query heads that share the kv head, so each K/V row is
read once for G heads. A group whose split starts at or past the sequence's length returns at once (the cache shape
is fixed across decode steps, the length lives on the device, so most splits of a short sequence are empty). A
length past the cache is clamped to it (``seq_len``: the whole cache, never the next sequence's rows); one of 0 or
below gives zeros. Four split kernels compute the same partials; they differ in how they read K and V:

- ``attn_decode_split_coalesced`` (``attention_decode_coalesced``, the default): LANES consecutive lanes share a K
  row, each holding its slice of the G query rows in registers (f32, pre-scaled); a thread scores UK rows a step,
  their loads in flight together and the next step's issued before the lane sums (``simd_shuffle_xor``: a
  reduce-scatter, then a butterfly); 8-byte vectors of f16/bf16 by default (80 registers at bf16 D 128, G 4 with
  NVRTC 13.5 against 252 for the per-thread kernel). See that module's docstring.
- ``attn_decode_split_staged`` (``attention_decode_staged``, "staged"): K/V tiles of R rows copied to a ring of
  STAGES shared-memory stages by ``async_copy`` (cp.async), STAGES - 1 tiles in flight while one is computed, one
  barrier a tile; scores and P V in one pass with an online softmax per row set, merged at the end. Slower than
  the coalesced kernel on the H200 (557-982 us against 420 at bf16 32 x 8192; 128 registers, 24 % occupancy):
  kept as a tuning candidate for shapes not yet measured.
- ``attn_decode_split_mma`` (``attention_decode_mma``, "mma"): the same ring of K/V tiles in shared memory, but the
  G query heads are the rows of a matrix-fragment A operand, so S = Q K^T and P V run on the tensor cores
  (mma.sync on NVIDIA), the online softmax on the accumulators and P from the registers (``frag_to_a``); one SIMD
  group a group. Written because the two kernels above are bound by instruction issue (ncu: SM throughput 76-83 %,
  DRAM 35-42 %); f16/bf16 with G <= 16, timed on CUDA only (elsewhere its fragments take the scalar fallback); not
  yet measured on a GPU.
- ``attn_decode_split`` (the per-thread path):

1. loads: the G query rows, the thread's first K row (D / VEC 16-byte loads) and its first U V vectors are all issued
   before the first barrier (no load crosses one), so a short sequence waits for global memory once; the query
   rows, pre-scaled, go to shared memory (f32);
2. scores: each thread takes whole positions and writes G dot products to a shared score array (unrolled over the
   chunk: in a loop the compiler would hold all G x D query values in registers and spill);
3. per head, the chunk's max m and sum l of exp(s - m) (the scores become the weights in place), each a SIMD-group
   reduction (``simd_max``/``simd_sum``), one slot per SIMD group in shared memory, one barrier (``chunk_weights``,
   shared by both kernels);
4. P V (``weigh_values``, shared): thread t owns the vector t % (D / VEC) of V's rows t // (D / VEC),
   t // (D / VEC) + TG, ... (a SIMD group reads whole rows, coalesced), U rows per step (loads in flight together),
   accumulating G x VEC sums in registers, reduced over the TG row sets in shared memory. A sequence that fits in
   split 0 is normalised and written to ``out`` here; otherwise the split's partial (out, m, l) goes to an f32
   workspace.

``attn_decode_combine`` merges the splits per (sequence, head, column): out = sum_s e^(m_s - M) o_s /
sum_s e^(m_s - M) l_s, M the max of the m_s, over the ceil(len / CHUNK) splits that hold positions, in one
online-softmax pass that loads U splits' (m, l, o) at once without waiting for ``lens`` (splits past the length are
read and weighted 0); it leaves a sequence of one split alone. The paged cache differs only in the row address
(``PAGED``).

Launch: ``split_configs`` lists the configurations; where the backend autotunes (CUDA; Vulkan on a GPU) the launch
times the ``TUNING`` list (the coalesced kernel at a few vector widths, rows per step, chunks and group sizes, and
the per-thread and staged kernels) and keeps the fastest per shape bucket; CPU devices (the interpreter, lavapipe,
msl-cpu) run the first, the coalesced kernel. ``path=`` forces a kernel. Measured before the coalesced kernel
(2026-12, H200, bf16 B 32 x L 8192, HQ 32, HKV 8, D 128): 496.6 us, 2165 GB/s of K/V against torch SDPA's 255.7 us;
2026-12-04 (decode_ncu.py, CUDA events): coalesced 420.2 us = 2555 GB/s at VEC 8, LANES 16 (537.8 at the default
VEC 4), SDPA 267.2 us = 4018 GB/s; all limited by registers (ncu: 30 % achieved occupancy at the default).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    constexpr,
    exp,
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    program_id,
    shared,
    static_range,
    where,
)
from ..runtime import get_backend
from .attention_decode_coalesced import (
    attn_decode_split_coalesced,
    chunk_pages,
    chunk_weights,
    load_rows,
    seq_len,
    weigh_values,
)
from .attention_decode_mma import attn_decode_split_mma, mma_shared_bytes
from .attention_decode_staged import attn_decode_split_staged, staged_shared_bytes
from .softmax import dtype_label, scratch_f32

#: the default variant (``iron build``): D 128, 4 query heads per kv head, 64-position chunks, 4-element vectors
D = 128
G = 4
CHUNK = 64
BLOCK = 128
VEC = 4
PAGED = False
SW = 32  # the SIMD width `iron build` assumes (launches pass the backend's)
U = 16  # splits per step of the combine kernel `iron build` compiles (launches pass min(16, splits rounded up))
#: the paged cache's page size (positions per page)
PAGE = 16


@func
def score_row(k, kr, sq, sc, mx, table, b, start, jj, cnt, hk, L, MAXP, HKV, D, PAGED, G, CHUNK, BLOCK, NV, VEC):
    """The G scores of chunk row jj from its K row in ``kr`` into sc and the running maxima mx; then the K row this
    thread scores next, jj + BLOCK, into kr."""
    dot = local_array(f32, G)
    for g in static_range(G):
        dot[g] = 0.0
    for e in static_range(D):
        x = kr[e]
        for g in static_range(G):
            dot[g] += x * sq[g * D + e]
    if jj + BLOCK < cnt:
        load_rows(k, kr, table, b, start, jj + BLOCK, BLOCK, cnt, hk, 0, L, MAXP, HKV, D, PAGED, 1, NV, VEC, 1)
    for g in static_range(G):
        sc[g * CHUNK + jj] = dot[g]
        mx[g] = max(mx[g], dot[g])


@kernel
def attn_decode_split(q: Tensor[T], k: Tensor[T], v: Tensor[T], table: Tensor[i32], lens: Tensor[i32],
                      po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], out: Tensor[T], HQ: int, HKV: int, L: int,
                      MAXP: int, NSPLIT: int, scale: float, D: constexpr, G: constexpr, CHUNK: constexpr,
                      BLOCK: constexpr, VEC: constexpr, PAGED: constexpr, SW: constexpr):
    """One split's partial attention for G query heads of one kv head; launch (NSPLIT * BLOCK, HKV, B) threads in
    groups of (BLOCK, 1, 1). Partials: po (B, HQ, NSPLIT, D), pm and pl (B, HQ, NSPLIT); a sequence that fits in
    split 0 gets its output ``out`` (B, HQ, D) here instead. SW is the backend's SIMD width (a constexpr, so that
    the variant's shared arrays and unrolled reductions are sized at compile time, also in `iron build`)."""
    NV = D // VEC
    TG = BLOCK // NV
    NW = BLOCK // SW
    U = max(1, min(8, 256 // (G * VEC)))  # V rows per thread and P V step, their loads in flight together
    sq = shared(f32, G * D)
    sc = shared(f32, G * CHUNK)
    redm = shared(f32, G * NW)
    redl = shared(f32, G * NW)
    acc_s = shared(f32, TG * G * D)
    tid = local_id(0)
    s = group_id(0)
    hk = group_id(1)
    b = group_id(2)
    head0 = b * HQ + hk * G
    qr = local_array(T, (G * D + BLOCK - 1) // BLOCK)  # loaded with lens, not after it
    for i0 in static_range(0, G * D, BLOCK):
        if i0 + tid < G * D:
            qr[i0 // BLOCK] = q[head0 * D + i0 + tid]
    n = seq_len(lens, b, L, MAXP, PAGED)  # clamped to the cache; uniform: the SIMD reductions keep the full mask
    start = s * CHUNK
    if start >= n:  # the whole group: nothing of the sequence here; the combine never reads this split
        return
    cnt = min(n - start, CHUNK)
    whole = n <= CHUNK or NSPLIT == 1  # one split holds the sequence: normalise here, the combine skips it
    # paged: the chunk's K/V row indices in shared memory first (chunk_pages); then kv_row reads pg, not table
    pg = shared(i32, CHUNK if PAGED else 1)
    tb, mp = chunk_pages(table, pg, b, start, cnt, hk, L, MAXP, HKV, D, BLOCK, PAGED)
    dv = tid % NV
    tg = tid // NV
    # this thread's first K row and first U V rows go in flight with q's, before the barrier (no load crosses one):
    # a short sequence then waits for global memory once
    kr = local_array(T, D)
    vr = local_array(T, U * VEC)
    load_rows(k, kr, pg, tb, start, tid, BLOCK, cnt, hk, 0, L, mp, HKV, D, PAGED, 1, NV, VEC, 1)
    load_rows(v, vr, pg, tb, start, tg, TG, cnt, hk, dv, L, mp, HKV, D, PAGED, U, 1, VEC, 1)
    for i0 in static_range(0, G * D, BLOCK):
        if i0 + tid < G * D:
            sq[i0 + tid] = qr[i0 // BLOCK] * scale
    barrier()
    # scores and the local max
    mx = local_array(f32, G)
    for g in static_range(G):
        mx[g] = -math.inf
    # unrolled where the unroll budget allows: in a loop the compiler hoists all G x D of sq into registers (spills)
    if (CHUNK + BLOCK - 1) // BLOCK * G * D <= 2048:
        for j0 in static_range(0, CHUNK, BLOCK):
            if j0 + tid < cnt:
                score_row(k, kr, sq, sc, mx, pg, tb, start, j0 + tid, cnt, hk, L, mp, HKV, D, PAGED, G, CHUNK,
                          BLOCK, NV, VEC)
    else:
        for jj in range(tid, cnt, BLOCK):
            score_row(k, kr, sq, sc, mx, pg, tb, start, jj, cnt, hk, L, mp, HKV, D, PAGED, G, CHUNK, BLOCK, NV,
                      VEC)
    stat = local_array(f32, G)
    den = local_array(f32, G)
    chunk_weights(sc, mx, redm, redl, stat, den, cnt, G, CHUNK, BLOCK, NW)
    weigh_values(v, vr, sc, acc_s, stat, den, pg, po, pm, pl, out, tb, start, cnt, hk, head0, s, whole, L, mp,
                 HKV, NSPLIT, D, G, CHUNK, BLOCK, VEC, PAGED, U, False)


@kernel
def attn_decode_combine(po: Tensor[f32], pm: Tensor[f32], pl: Tensor[f32], lens: Tensor[i32], out: Tensor[T],
                        HQ: int, NSPLIT: int, D: int, CHUNK: int, U: constexpr):
    """out[b, h, d] from the splits' partials; one thread per output element (B * HQ * D threads). Only the splits
    that hold positions (ceil(lens[b] / CHUNK)) count; a sequence with one such split was written by the split
    kernel. One online-softmax pass, U splits per step: their 3 U loads are independent, all in flight."""
    i = program_id(0)
    bh = i // D
    n = lens[bh // HQ]
    mx = -math.inf
    num = 0.0
    den = 0.0
    for s0 in range(0, NSPLIT, U):
        # the loads do not wait for lens: splits past the length (unwritten) are read and weighted 0
        ms = local_array(f32, U)
        ls = local_array(f32, U)
        ov = local_array(f32, U)
        for u in static_range(U):
            sj = bh * NSPLIT + min(s0 + u, NSPLIT - 1)
            ms[u] = pm[sj]
            ls[u] = pl[sj]
            ov[u] = po[sj * D + i % D]
        ns = min((n + CHUNK - 1) // CHUNK, NSPLIT)
        if ns == 1:  # written by the split kernel
            return
        if s0 >= ns:
            break
        m_new = mx
        for u in static_range(U):
            ms[u] = where(s0 + u < ns, ms[u], -math.inf)
            m_new = max(m_new, ms[u])
        alpha = where(mx > -math.inf, exp(mx - m_new), 0.0)
        num *= alpha
        den *= alpha
        for u in static_range(U):
            w = exp(ms[u] - m_new)
            num += where(s0 + u < ns, w * ov[u], 0.0)
            den += where(s0 + u < ns, w * ls[u], 0.0)
        mx = m_new
    out[i] = num / den if den > 0.0 else 0.0


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan_chunk(lmax: int) -> int:
    """Positions per split: about 8 splits for short caches (16 positions at least), 256 from 1025 positions on."""
    return min(256, max(16, _pow2(-(-lmax // 8))))


#: the split kernels' paths: "coalesced" (``attn_decode_split_coalesced``), "per_thread" (``attn_decode_split``) and
#: "staged" (``attn_decode_split_staged``) and "mma" (``attn_decode_split_mma``: f16/bf16, G <= 16)
PATHS = ("coalesced", "per_thread", "staged", "mma")
#: (path, BLOCK, elements per vector at most, rows-per-step factor, CHUNK factor) that autotuning times on GPUs beside
#: the first entry (the default, the only one elsewhere): 16-byte vectors of f16/bf16 (the default takes 4 elements:
#: fewer registers), twice the rows in flight per thread, longer chunks (fewer splits, less combine work; only where
#: the caller leaves the chunk to plan_chunk), wider groups, and the per-thread kernel. A "staged" entry is (path,
#: BLOCK, R rows per tile, STAGES, CHUNK factor), its vectors always 16 bytes (``staged_config``). Timed on the
#: H200 at bf16 32 x 8192 (2026-12-04): the VEC 8 coalesced entry won; the staged ones lost (module docstring).
#: An "mma" entry is (path, 0, BN positions a tile, STAGES, CHUNK factor), one SIMD group a group; it applies to
#: f16/bf16 with G <= 16 only (``mma_config``). At bf16 D 128 a group takes 39 KiB of shared memory at (16, 4)
#: (5 groups an SM), 31 KiB at (16, 3) (7), 22 KiB at (16, 2) (10), 57 KiB at (32, 3) (3). On the H200 (2026-12-05,
#: bf16 32 x 8192, GPU time) the first seven took 271-288 us, every scalar entry 367 or more. Why the best of them
#: (16, 2, CHUNK 512: 22 KiB, 10 groups an SM, 1320 at once) still trails SDPA by ~9 %: 4096 groups are 3.1 waves, and
#: the last 0.1 wave streams with a tenth of the GPU's groups, ~8 KiB in flight each: about a wave's time at a few
#: TB/s less (a wave streams 262 KiB a group in ~80 us). Longer chunks make one wave or none left over: 2048 (factor
#: 8: 1024 groups, one wave), 4096 (16: 512 groups, 3 or 4 stages for more bytes in flight each) and the whole cache
#: (32: one split a sequence and kv head, 256 groups; no partials, the combine returns at once).
TUNING = {"cuda": (("coalesced", 128, 4, 1, 1), ("coalesced", 128, 8, 1, 1), ("coalesced", 128, 4, 2, 1),
                   ("coalesced", 128, 4, 1, 2), ("coalesced", 256, 4, 1, 2), ("per_thread", 128, 8, 1, 1),
                   ("staged", 128, 16, 3, 1), ("staged", 128, 32, 2, 1), ("staged", 256, 16, 4, 2),
                   ("mma", 0, 16, 4, 1), ("mma", 0, 16, 2, 1), ("mma", 0, 32, 3, 1), ("mma", 0, 16, 4, 2),
                   ("mma", 0, 32, 2, 2), ("mma", 0, 16, 2, 2), ("mma", 0, 16, 3, 1), ("mma", 0, 16, 2, 4),
                   ("mma", 0, 16, 2, 8), ("mma", 0, 16, 3, 8), ("mma", 0, 16, 3, 16), ("mma", 0, 16, 4, 16),
                   ("mma", 0, 16, 4, 32), ("mma", 0, 32, 3, 32))}
#: the shared memory per group the staged kernel's configurations may take: 32 KiB (Metal, lavapipe: runs
#: everywhere) except on CUDA, where 48 KiB is what a group gets without opting in
SHARED_LIMIT = {"cuda": 48 * 1024}
#: the matrix-unit kernel's: CUDA's opt-in 227 KiB (one SIMD group a group needs its whole ring)
MMA_SHARED_LIMIT = {"cuda": 227 * 1024, "hip": 64 * 1024}


def lanes_per_row(d: int, vec: int, simd_width: int) -> int:
    """Lanes sharing a K row in the coalesced kernel: the largest power of two that divides D / VEC and the SIMD
    width."""
    nv = d // vec
    return min(nv & -nv, simd_width)


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, int(n)).bit_length() - 1)


def coalesced_config(d: int, g: int, itemsize: int, chunk: int, block: int, most: int, factor: int,
                     simd_width: int) -> dict[str, Any]:
    """The coalesced kernel's constexprs: vectors of min(most, 16 / itemsize) elements in both phases (4 f16/bf16
    by default: half the registers of 16-byte vectors at D 128, G 4), LANES a row, and rows per thread and step:
    16 / G within 2 .. 8 (so G x rows partial dots stay <= 16 registers), times ``factor``; UK at most the rows
    the chunk gives a thread."""
    vec = min(most, 16 // itemsize)
    lanes = lanes_per_row(d, vec, simd_width)
    rows = _pow2_floor(min(8, max(2, 16 // g))) * factor  # the lane sums halve the rows: UK a power of two
    uk = max(1, min(rows, _pow2(-(-chunk // (block // lanes)))))
    assert uk & (uk - 1) == 0, uk
    return {"path": "coalesced", "BLOCK": block, "CHUNK": chunk, "VEC": vec, "LANES": lanes, "UK": uk, "U": rows}


def staged_config(d: int, g: int, itemsize: int, chunk: int, block: int, simd_width: int, rows: int = 16,
                  stages: int = 3, backend: str = "cpu") -> dict[str, Any]:
    """The staged kernel's constexprs: 16-byte pieces (VEC = 16 / itemsize), LANES a row (``lanes_per_row``), R
    ``rows`` a tile (a power of two, at least BLOCK / LANES, so that each row set takes whole rows; at most the
    chunk rounded up) in ``stages`` stages; STAGES, then R (below BLOCK / LANES too: f32 D 128 at lavapipe's SIMD
    width of 8), shrink while the shared memory passes ``backend``'s ``SHARED_LIMIT`` (SPIR-V keeps f16/bf16
    shared arrays as 4-byte words)."""
    vec = 16 // itemsize
    lanes = lanes_per_row(d, vec, simd_width)
    r = max(block // lanes, min(_pow2_floor(rows), _pow2(chunk)))
    limit = SHARED_LIMIT.get(backend, 32 * 1024)
    stored = 4 if backend == "vulkan" else itemsize

    def size(r: int, stages: int) -> int:
        return staged_shared_bytes(d, g, stored, chunk, block, simd_width, lanes, r, stages)

    while stages > 2 and size(r, stages) > limit:
        stages -= 1
    while r > 1 and size(r, stages) > limit:
        r //= 2
    return {"path": "staged", "BLOCK": block, "CHUNK": chunk, "VEC": vec, "LANES": lanes, "R": r, "STAGES": stages}


def mma_config(d: int, g: int, itemsize: int, chunk: int, simd_width: int, bn: int = 16, stages: int = 4,
               backend: str = "cpu", paged: bool = False) -> dict[str, Any] | None:
    """The matrix-unit kernel's constexprs (one SIMD group a group, 16-byte pieces), or None where it does not
    apply (f32, G > 16, D > 256, or 2 stages of 16 positions past the shared memory: D 128 on lavapipe); STAGES, then BN
    (down to 16), shrink while the shared memory passes ``backend``'s limit (``MMA_SHARED_LIMIT`` on CUDA,
    ``SHARED_LIMIT`` elsewhere)."""
    if itemsize != 2 or g > 16 or d > 256:
        return None
    limit = MMA_SHARED_LIMIT.get(backend, SHARED_LIMIT.get(backend, 32 * 1024))
    stored = 4 if backend == "vulkan" else itemsize
    while stages > 2 and mma_shared_bytes(d, stored, bn, stages, chunk, paged) > limit:
        stages -= 1
    while bn > 16 and mma_shared_bytes(d, stored, bn, stages, chunk, paged) > limit:
        bn //= 2
    if mma_shared_bytes(d, stored, bn, stages, chunk, paged) > limit:
        return None
    return {"path": "mma", "BLOCK": simd_width, "CHUNK": chunk, "VEC": 16 // itemsize, "BN": bn, "STAGES": stages}


def entry_config(entry: tuple, d: int, g: int, itemsize: int, chunk: int | None, lmax: int, simd_width: int,
                 backend: str = "cpu", paged: bool = False) -> dict[str, Any] | None:
    """The configuration of one ``TUNING`` entry for these shapes (``chunk``: the caller's, else planned) on
    ``backend``."""
    p, block, most, factor, chunk_factor = entry
    ch = chunk or plan_chunk(lmax)
    if chunk is None and chunk_factor > 1:  # longer chunks while the cache has positions for them
        ch = max(ch, min(ch * chunk_factor, _pow2(lmax)))
    if p == "coalesced":
        return coalesced_config(d, g, itemsize, ch, block, most, factor, simd_width)
    if p == "staged":
        return staged_config(d, g, itemsize, ch, block, simd_width, most, factor, backend)
    if p == "mma":
        return mma_config(d, g, itemsize, ch, simd_width, most, factor, backend, paged)
    return {"path": p, "BLOCK": block, "CHUNK": ch, "VEC": 16 // itemsize}


def split_configs(d: int, g: int, itemsize: int, chunk: int | None, lmax: int, backend: str,
                  path: str | None = None, paged: bool = False) -> list[dict[str, Any]]:
    """The configurations the launch chooses among on ``backend`` (the first alone where it times nothing); ``path``
    keeps that path's."""
    if path is not None and path not in PATHS:
        raise ValueError(f"attention decode: path {path!r} is not one of {', '.join(PATHS)}")
    sw = get_backend(backend).simd_width()
    table = table_for(TUNING, backend) or TUNING["cuda"][:1]
    if path is not None:
        table = [e for e in table if e[0] == path] or [e for e in TUNING["cuda"] if e[0] == path][:1]
    configs: list[dict[str, Any]] = []
    for entry in table:
        if path is None and entry[0] == "mma" and backend != "cuda":
            continue  # Vulkan on a GPU borrows CUDA's table, but its fragments would take the scalar fallback
        cfg = entry_config(entry, d, g, itemsize, chunk, lmax, sw, backend, paged)
        if cfg is not None and cfg not in configs:
            configs.append(cfg)
    if not configs:
        raise ValueError(f"attention decode: path {path!r} does not apply to {itemsize}-byte elements, {g} query "
                         f"heads a kv head and head dim {d} on {backend}: it takes f16/bf16, at most 16 heads, head "
                         f"dim at most 256, and two stages of 16 K/V rows in the group's shared memory")
    return configs


def run_config(cfg: dict[str, Any], q, k, v, table, lens, out, cache_len: int, maxp: int, lmax: int, paged: bool,
               scale, backend) -> None:
    """The split kernel of ``cfg``'s path, then the combine."""
    b, hq, d = q.shape
    hkv = k.shape[2]
    chunk, block = cfg["CHUNK"], cfg["BLOCK"]
    nsplit = -(-lmax // chunk)
    po, pm, pl = scratch_f32(q, b * hq * nsplit * d), scratch_f32(q, b * hq * nsplit), scratch_f32(q, b * hq * nsplit)
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    args = (q, k, v, table, lens, po, pm, pl, out, hq, hkv, cache_len, maxp, nsplit, sc, d, hq // hkv, chunk, block,
            cfg["VEC"], paged, get_backend(backend).simd_width())
    grid, group = (nsplit * block, hkv, b), (block, 1, 1)
    if cfg["path"] == "coalesced":
        attn_decode_split_coalesced[grid, group](*args, cfg["LANES"], cfg["UK"], cfg["U"], backend=backend)
    elif cfg["path"] == "staged":
        attn_decode_split_staged[grid, group](*args, cfg["LANES"], cfg["R"], cfg["STAGES"], backend=backend)
    elif cfg["path"] == "mma":
        attn_decode_split_mma[grid, group](*args, cfg["BN"], cfg["STAGES"], backend=backend)
    else:
        attn_decode_split[grid, group](*args, backend=backend)
    attn_decode_combine[b * hq * d, 128](po, pm, pl, lens, out, hq, nsplit, d, chunk, min(16, _pow2(nsplit)),
                                         backend=backend)


def _launch(q, k, v, table, lens, out, cache_len: int, maxp: int, lmax: int, paged: bool, scale, backend, chunk,
            path) -> dict[str, Any]:
    b, hq, d = q.shape
    hkv = k.shape[2]
    if hq % hkv or d % 16 or k.shape[-1] != d or tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"attention decode: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit")
    be = backend or get_backend(None).name
    configs = split_configs(d, hq // hkv, q.dtype.itemsize, chunk, lmax, be, path, paged)

    def run(cfg: dict[str, Any]) -> None:
        run_config(cfg, q, k, v, table, lens, out, cache_len, maxp, lmax, paged, scale, backend)

    name = "std/attention/decode_paged" if paged else "std/attention/decode"
    cfg = tune(name, configs, run, backend=be, dtype=dtype_label(q), key=(b, lmax, hq, hkv, d, hq // hkv))
    run(cfg)
    return cfg


def launch_decode(q: Any, k: Any, v: Any, lens: Any, out: Any, scale: float | None = None,
                  backend: str | None = None, chunk: int | None = None, path: str | None = None) -> dict[str, Any]:
    """out (B, HQ, D) = attention of q over the first lens[b] positions of the contiguous cache (B, L_max, HKV, D).
    ``path`` ("coalesced", "per_thread", "staged" or "mma") forces that split kernel; returns the configuration that
    ran."""
    lmax = k.shape[1]
    return _launch(q, k, v, lens, lens, out, lmax, 0, lmax, False, scale, backend, chunk, path)


def launch_decode_paged(q: Any, k: Any, v: Any, table: Any, lens: Any, out: Any, scale: float | None = None,
                        backend: str | None = None, chunk: int | None = None,
                        path: str | None = None) -> dict[str, Any]:
    """As launch_decode over the paged cache (num_pages, PAGE, HKV, D) and block table (B, max_pages)."""
    page, maxp = k.shape[1], table.shape[1]
    return _launch(q, k, v, table, lens, out, page, maxp, page * maxp, True, scale, backend, chunk, path)


# --- registration ---------------------------------------------------------------------------------------------------


def _lens(gen: InputGen, b: int, lmax: int) -> np.ndarray:
    """Ragged lengths in [1, lmax] for host shapes (one at lmax); every sequence full for device shapes (>= 1024)."""
    if lmax >= 1024:
        return np.full(b, lmax, np.int32)
    lens = gen.rng.integers(1, lmax + 1, b).astype(np.int32)
    lens[0] = lmax
    return lens


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    b, lmax, hq, hkv, d = gen.shape
    return {"q": gen.random(shape=(b, hq, d)), "k": gen.random(shape=(b, lmax, hkv, d)),
            "v": gen.random(shape=(b, lmax, hkv, d)), "lens": _lens(gen, b, lmax),
            "out": gen.poisoned(shape=(b, hq, d))}


def _setup_paged(gen: InputGen) -> dict[str, np.ndarray]:
    """A shuffled pool with a few spare pages: no sequence's pages are consecutive or in order."""
    b, lmax, hq, hkv, d = gen.shape
    maxp = -(-lmax // PAGE)
    npages = b * maxp + 3
    table = gen.rng.permutation(npages)[: b * maxp].reshape(b, maxp).astype(np.int32)
    return {"q": gen.random(shape=(b, hq, d)), "k": gen.random(shape=(npages, PAGE, hkv, d)),
            "v": gen.random(shape=(npages, PAGE, hkv, d)), "table": table, "lens": _lens(gen, b, lmax),
            "out": gen.poisoned(shape=(b, hq, d))}


def _attend(q: np.ndarray, keys: np.ndarray, vals: np.ndarray, scale: float) -> np.ndarray:
    """float64 softmax(scale q k^T) v of one query row over (n, D) keys and values."""
    s = scale * keys @ q
    p = np.exp(s - s.max())
    return (p / p.sum()) @ vals


def oracle(d: dict, scale: float | None = None) -> np.ndarray:
    """float64, position by position: out[b, h] over k[b, :lens[b], h // (HQ / HKV)]."""
    q, k, v = (d[x].astype(np.float64) for x in ("q", "k", "v"))
    b, hq, dim = q.shape
    rep = hq // k.shape[2]
    sc = 1.0 / np.sqrt(dim) if scale is None else scale
    out = np.empty_like(q)
    for i in range(b):
        n = int(d["lens"][i])
        for h in range(hq):
            out[i, h] = _attend(q[i, h], k[i, :n, h // rep], v[i, :n, h // rep], sc)
    return out


def oracle_paged(d: dict, scale: float | None = None) -> np.ndarray:
    """float64: each position's row looked up through the block table, then as ``oracle``."""
    q, k, v = (d[x].astype(np.float64) for x in ("q", "k", "v"))
    b, hq, dim = q.shape
    page, rep = k.shape[1], hq // k.shape[2]
    sc = 1.0 / np.sqrt(dim) if scale is None else scale
    out = np.empty_like(q)
    for i in range(b):
        pos = np.arange(int(d["lens"][i]))
        pages = d["table"][i][pos // page].astype(np.int64)
        for h in range(hq):
            out[i, h] = _attend(q[i, h], k[pages, pos % page, h // rep], v[pages, pos % page, h // rep], sc)
    return out


def _torch_sdpa(q, k, v, lens):
    """torch SDPA over (B, H, 1, D) queries and (B, HKV, L, D) keys, a padding mask from lens, enable_gqa."""
    import torch
    import torch.nn.functional as F

    mask = torch.arange(k.shape[1], device=k.device)[None, :] < lens.long()[:, None]
    o = F.scaled_dot_product_attention(q.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2),
                                       attn_mask=mask[:, None, None, :], enable_gqa=q.shape[1] != k.shape[2])
    return o.squeeze(2)


def _torch_paged(d: dict):
    """The block table gathered into a contiguous cache (torch indexing), then SDPA."""
    b, maxp = d["table"].shape
    idx = d["table"].long()
    k = d["k"][idx].reshape(b, maxp * d["k"].shape[1], *d["k"].shape[2:])
    v = d["v"][idx].reshape(b, maxp * d["v"].shape[1], *d["v"].shape[2:])
    return _torch_sdpa(d["q"], k, v, d["lens"])


class _Paged:
    """``attn_decode_split`` registered again for the paged cache (the registry keeps one entry per object)."""

    def __init__(self):
        self.fn = attn_decode_split.fn
        self.kernel = attn_decode_split

    def __repr__(self) -> str:
        return "<iron kernel attn_decode_split (paged)>"


def _kv_bytes(shape, itemsize) -> int:
    b, lmax, hq, hkv, d = shape
    return (2 * b * lmax * hkv + 2 * b * hq) * d * itemsize


def _flops(shape) -> int:
    b, lmax, hq, _, d = shape
    return 4 * b * hq * lmax * d


#: f32: sums of D products and of L weights; f16/bf16: the output rounded once
_TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}
_DEVICE = [(32, 8192, 32, 8, 128), (8, 32768, 32, 8, 128), (64, 2048, 32, 4, 64)]

bench("std/attention/decode", setup=_setup,
      launch=lambda d, be: launch_decode(d["q"], d["k"], d["v"], d["lens"], d["out"], None, be),
      references={"numpy": lambda d: oracle(d).astype(d["q"].dtype),
                  "torch": lambda d: _torch_sdpa(d["q"], d["k"], d["v"], d["lens"])},
      bytes_moved=_kv_bytes, flops=_flops, device_shapes=_DEVICE)(attn_decode_split)
test_kernel(oracle=oracle, domain="signed", shapes=[(3, 40, 4, 2, 64), (2, 21, 2, 1, 128)],
            tolerance=_TOL)(attn_decode_split)

_paged = _Paged()
bench("std/attention/decode_paged", setup=_setup_paged,
      launch=lambda d, be: launch_decode_paged(d["q"], d["k"], d["v"], d["table"], d["lens"], d["out"], None, be),
      references={"numpy": lambda d: oracle_paged(d).astype(d["q"].dtype), "torch": _torch_paged},
      bytes_moved=_kv_bytes, flops=_flops, device_shapes=_DEVICE)(_paged)
test_kernel(oracle=oracle_paged, domain="signed", shapes=[(3, 40, 4, 2, 64), (2, 21, 2, 1, 128)],
            tolerance=_TOL)(_paged)
