"""Row softmax with the row held in registers, read once from global memory (Triton's fused-softmax design).

Design. ``plan_rows`` picks a variant from the row length and the element size (each distinct constexpr tuple is
one compiled variant, so the row length is bucketed to powers of two):

- **register path** (ncols <= ``REGISTER_ROW_MAX``): one group of ``BLOCK`` threads per row. Thread ``tid`` holds
  ``PER`` vectors of ``VEC`` elements, vector ``k`` being the row's vector ``k * BLOCK + tid`` (so a SIMD group's
  16-byte accesses are contiguous), in an f32 ``local_array`` indexed only by ``static_range`` indices (registers).
  Max and sum are reduced with ``simd_max``/``simd_sum`` and a one-slot-per-SIMD-group shared combine that every
  SIMD group reads back (no second broadcast barrier); ``exp(x - max)`` is kept in registers, scaled and stored with
  ``vstore``. Global traffic: one read, one write.
- **split path** (rows longer than that, or long rows too few to fill the GPU, e.g. 32 x 128256): each row is cut
  into chunks of ``BLOCK * PER * VEC`` elements, one group per chunk. ``softmax_chunk_stats`` writes each chunk's
  (max, sum of exp) to an f32 workspace; ``softmax_chunk_apply`` combines the row's chunks (online-softmax
  rescaling, every group redundantly: a few dozen floats), re-reads its chunk (from L2 when the matrix fits there)
  and writes it.

``VEC`` is 16 bytes of elements (8 x f16/bf16, 4 x f32) when ncols is a multiple of it (then every row base and
chunk start is vector-aligned); otherwise ``VEC = 1``, plain scalar accesses, still one read per element from
registers. Masked lanes hold -inf (exp gives 0); no element past ncols is ever read. f16/bf16 rows take
``fast_exp`` (``FAST = 1``, elementwise.py's reason: on Vulkan ``exp`` is Iron's ~30-instruction precise sequence, and
a bf16 softmax streams 4 bytes an element, so at 4-5 TB/s it would be bound by that arithmetic, not by memory).

Expected on an H200 (bf16, not measured here): 16384x8192 and 4096x4096 use 512 and 256 threads x 16 elements per
thread (two 16-byte loads in flight per thread before the first reduction), which is Triton's shape and should reach
its ~4050 and ~3150 GB/s; 32x128256 runs 32 x 32 groups of 4096-element chunks, two launches, the second read hitting
L2 (8 MB), aiming at >= 900 GB/s. The strided three-pass kernel ``softmax`` stays as the portable baseline that the
code-generation tests pin (golden sources, build manifests); the registered entry runs the kernels above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
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
    fast_exp,
    group_id,
    local_array,
    local_id,
    num_groups,
    shared,
    simd_group,
    simd_lane,
    simd_max,
    simd_size,
    simd_sum,
    static_range,
    vload,
    vstore,
)
from ..runtime import get_backend
from ..runtime.device_array import Array, empty
from .elementwise import fast_math

#: threads per group of the strided baseline; the register kernels' default variant (``iron build``, golden tests)
BLOCK = 256
#: elements per vector access and vectors per thread of the default variant (valid for every dtype)
VEC = 4
PER = 4
FAST = 0  # iron build's default: the precise exp (launches pass fast_math(x))
#: longest row kept in one group's registers: 1024 threads x ``ELEMS_PER_THREAD``
ELEMS_PER_THREAD = 16
MIN_BLOCK, MAX_BLOCK = 64, 1024
REGISTER_ROW_MAX = MAX_BLOCK * ELEMS_PER_THREAD
#: the split path's groups: 256 threads x 16 elements = 4096-element chunks
SPLIT_BLOCK = 256
#: below this many rows, a row of at least two chunks is split so that the GPU gets enough groups (H200: 132 SMs)
FEW_ROWS = 128
#: softmax_rows_ahead's groups per multiprocessor that GPUs time (launch_softmax), where that many fit in
#: MAX_RESIDENT threads (an NVIDIA SM's; more would run the persistent grid in two waves)
AHEAD_PER_SM = (2, 4)
MAX_RESIDENT = 2048


# --- the row layout, shared with norm.py ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RowPlan:
    """One variant of the row kernels: ``block`` threads, ``per`` vectors of ``vec`` elements each, and ``chunks``
    groups per row (1: the register path, one group per row)."""

    block: int
    vec: int
    per: int
    chunks: int

    @property
    def chunk(self) -> int:
        """Elements one group covers."""
        return self.block * self.per * self.vec


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan_rows(rows: int, ncols: int, itemsize: int, ept: int = ELEMS_PER_THREAD) -> RowPlan:
    """The variant for a (rows, ncols) matrix of ``itemsize``-byte elements (bucketed to powers of two), aiming at
    ``ept`` elements per thread (the more, the more 16-byte loads each thread has in flight)."""
    wide = 16 // itemsize
    vec = wide if ncols % wide == 0 else 1
    split_chunk = SPLIT_BLOCK * ept
    if ncols > MAX_BLOCK * ept or (rows < FEW_ROWS and ncols >= 2 * split_chunk):
        per = max(1, ept // vec)
        return RowPlan(SPLIT_BLOCK, vec, per, -(-ncols // (SPLIT_BLOCK * per * vec)))
    block = min(max(_pow2(-(-ncols // ept)), MIN_BLOCK), MAX_BLOCK)
    return RowPlan(block, vec, _pow2(-(-ncols // (block * vec))), 1)


#: elements per thread that autotuning times per (device, kernel, dtype, shape bucket) on a GPU backend; elsewhere
#: the first (ELEMS_PER_THREAD). Triton's softmax and rms_norm hold 32 bf16 per thread at 8192 columns; 64 (eight
#: 16-byte loads in flight per thread, 128 threads per 8192-element row) is tried too
ROW_TUNING = {"cuda": (ELEMS_PER_THREAD, 32, 8, 64)}


def dtype_label(x: Any) -> str:
    """``x``'s dtype as Iron names it (NumPy, torch or CuPy arrays): the autotuner's key."""
    return str(getattr(x, "dtype", "")).replace("torch.", "").replace("bfloat16", "bf16").replace("float16", "f16") \
        .replace("float32", "f32")


def row_plans(rows: int, ncols: int, itemsize: int, backend: str) -> list[RowPlan]:
    """The plans ``tuned_rows`` chooses among on ``backend`` (one where it times nothing)."""
    return [plan_rows(rows, ncols, itemsize, e) for e in table_for(ROW_TUNING, backend) or (ELEMS_PER_THREAD,)]


def tuned_rows(name: str, x: Any, backend: str | None, launch_plan) -> RowPlan:
    """Launch a row kernel with the plan autotuning picks (``launch_plan(plan)`` launches one); returns the plan."""
    rows, ncols = x.shape
    be = backend or get_backend(None).name
    configs = [{"EPT": e} for e in table_for(ROW_TUNING, be) or (ELEMS_PER_THREAD,)]

    def run(cfg: dict) -> None:
        launch_plan(plan_rows(rows, ncols, x.dtype.itemsize, cfg["EPT"]))

    cfg = tune(name, configs, run, backend=be, dtype=dtype_label(x), key=(rows, ncols))
    plan = plan_rows(rows, ncols, x.dtype.itemsize, cfg["EPT"])
    launch_plan(plan)
    return plan


def scratch_f32(like: Any, n: int) -> Any:
    """An f32 workspace of n elements where ``like`` lives: NumPy on the host, torch or CuPy on the device."""
    if isinstance(like, np.ndarray):
        return np.empty(n, np.float32)
    if isinstance(like, Array):  # an iron device array: the workspace on its backend
        return empty(n, f32, backend=like.backend)
    if hasattr(like, "new_empty"):  # torch: the caching allocator makes this cheap per launch
        import torch

        return like.new_empty((n,), dtype=torch.float32)
    import cupy

    return cupy.empty(n, dtype=cupy.float32)


@func
def load_vectors(x, vals, start, nvec, fill, BLOCK, VEC, PER):
    """vals[k * VEC + j] = x[start + (k * BLOCK + tid) * VEC + j] (in vals' dtype: f32 registers for statistics,
    raw T for rms_norm's weights) for the thread's vectors below ``nvec`` (one VEC-wide access each), ``fill`` past
    them; every load is issued before any value is used."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            chunk = vload(x, start + v * VEC, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = chunk[j]
        else:
            for j in static_range(VEC):
                vals[k * VEC + j] = fill


@func
def store_vectors(out, vals, start, nvec, scale, BLOCK, VEC, PER):
    """out[start + (k * BLOCK + tid) * VEC + j] = vals[k * VEC + j] * scale for the thread's vectors below nvec."""
    tid = local_id(0)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = vals[k * VEC + j] * scale
            vstore(out, start + v * VEC, o)


@func
def group_max(v, partial, BLOCK):
    """Maximum of v over the group, given to every thread. ``partial`` is a shared f32 array of BLOCK elements (one
    slot per SIMD group; simd_size() is unknown until run time). Every SIMD group reads all the slots back itself, so
    one barrier suffices; ``partial`` must not be reused by another reduction."""
    v = simd_max(v)
    if simd_lane() == 0:
        partial[simd_group()] = v
    barrier()
    r = -math.inf
    for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
        r = max(r, partial[i])
    return simd_max(r)


@func
def group_total(v, partial, BLOCK):
    """Sum of v (f32) over the group, given to every thread; the same contract as ``group_max``."""
    v = simd_sum(v)
    if simd_lane() == 0:
        partial[simd_group()] = v
    barrier()
    r = 0.0
    for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
        r += partial[i]
    return simd_sum(r)


@func
def chunk_span(ncols, nchunks, BLOCK, VEC, PER):
    """(first element, vectors) of this group's chunk: group g covers chunk g % nchunks of row g // nchunks."""
    g = group_id(0)
    row = g // nchunks
    c0 = (g - row * nchunks) * (BLOCK * PER * VEC)
    return row * ncols + c0, min(BLOCK * PER * VEC, ncols - c0) // VEC


# --- softmax ------------------------------------------------------------------------------------------------------


@func
def exp_shifted_sum(vals, m, PER, VEC, FAST):
    """vals <- exp(vals - m) in place (FAST = 1: ``fast_exp``, for f16/bf16 rows); returns this thread's sum."""
    s = 0.0
    for i in static_range(PER * VEC):
        if FAST:
            e = fast_exp(vals[i] - m)
        else:
            e = exp(vals[i] - m)
        vals[i] = e
        s += e
    return s


@func
def thread_max(vals, PER, VEC):
    m = vals[0]
    for i in static_range(1, PER * VEC):
        m = max(m, vals[i])
    return m


@kernel
def softmax_rows(x: Tensor[T], out: Tensor[T], ncols: int, BLOCK: constexpr, VEC: constexpr, PER: constexpr,
                 FAST: constexpr):
    """out[r, :] = softmax(x[r, :]), one group of BLOCK threads per row, the row in registers (ncols <=
    BLOCK * PER * VEC; ncols a multiple of VEC)."""
    start = group_id(0) * ncols
    nvec = ncols // VEC
    vals = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, -math.inf, BLOCK, VEC, PER)
    m = group_max(thread_max(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    s = group_total(exp_shifted_sum(vals, m, PER, VEC, FAST), shared(f32, BLOCK), BLOCK)
    store_vectors(out, vals, start, nvec, 1.0 / s, BLOCK, VEC, PER)


@kernel
def softmax_rows_ahead(x: Tensor[T], out: Tensor[T], nrows: int, ncols: int, BLOCK: constexpr, VEC: constexpr,
                       PER: constexpr, FAST: constexpr):
    """``softmax_rows`` by a fixed number of groups G = num_groups(0) (any G; ``launch_softmax`` launches
    ``AHEAD_PER_SM`` per multiprocessor): group g does rows g, g + G, ... and issues the next row's loads (raw T,
    converted after this row's store) before the current row's reductions, so a row is on its way while the group
    waits at its barriers. The two reductions keep their own shared slots: a row's ``pmax`` is written only after
    every SIMD group passed the previous row's second barrier, after reading the previous ``pmax``; a row's ``psum``
    only after the first barrier, after reading the previous ``psum``."""
    nvec = ncols // VEC
    cur = local_array(f32, PER * VEC)
    nxt = local_array(T, PER * VEC)
    pmax = shared(f32, BLOCK)
    psum = shared(f32, BLOCK)
    r = group_id(0)
    if r < nrows:
        load_vectors(x, cur, r * ncols, nvec, -math.inf, BLOCK, VEC, PER)
    while r < nrows:
        after = r + num_groups(0)
        if after < nrows:
            load_vectors(x, nxt, after * ncols, nvec, -math.inf, BLOCK, VEC, PER)
        m = group_max(thread_max(cur, PER, VEC), pmax, BLOCK)
        s = group_total(exp_shifted_sum(cur, m, PER, VEC, FAST), psum, BLOCK)
        store_vectors(out, cur, r * ncols, nvec, 1.0 / s, BLOCK, VEC, PER)
        for i in static_range(PER * VEC):
            cur[i] = nxt[i]
        r = after


@kernel
def softmax_chunk_stats(x: Tensor[T], stats: Tensor[f32], ncols: int, nchunks: int, BLOCK: constexpr,
                        VEC: constexpr, PER: constexpr, FAST: constexpr):
    """Split path, pass 1: stats[2g], stats[2g + 1] = max and sum of exp(x - max) over group g's chunk."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, -math.inf, BLOCK, VEC, PER)
    m = group_max(thread_max(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    s = group_total(exp_shifted_sum(vals, m, PER, VEC, FAST), shared(f32, BLOCK), BLOCK)
    if local_id(0) == 0:
        stats[2 * group_id(0)] = m
        stats[2 * group_id(0) + 1] = s


@kernel
def softmax_chunk_apply(x: Tensor[T], stats: Tensor[f32], out: Tensor[T], ncols: int, nchunks: int,
                        BLOCK: constexpr, VEC: constexpr, PER: constexpr, FAST: constexpr):
    """Split path, pass 2: combine the row's chunk statistics, then write this group's chunk. The chunk's loads are
    issued first so that they are in flight while the statistics are combined."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    vals = local_array(f32, PER * VEC)
    load_vectors(x, vals, start, nvec, -math.inf, BLOCK, VEC, PER)
    first = (group_id(0) // nchunks) * nchunks
    tid = local_id(0)
    m = -math.inf
    for i in range(tid, nchunks, BLOCK):
        m = max(m, stats[2 * (first + i)])
    m = group_max(m, shared(f32, BLOCK), BLOCK)
    s = 0.0
    for i in range(tid, nchunks, BLOCK):
        s += stats[2 * (first + i) + 1] * exp(stats[2 * (first + i)] - m)
    s = group_total(s, shared(f32, BLOCK), BLOCK)
    exp_shifted_sum(vals, m, PER, VEC, FAST)
    store_vectors(out, vals, start, nvec, 1.0 / s, BLOCK, VEC, PER)


@kernel
def softmax(x: Tensor[T], out: Tensor[T], ncols: int, BLOCK: constexpr):
    """The portable baseline: out[r, :] = softmax(x[r, :]) with one group of BLOCK threads (a power of two) per row,
    a strided pass per statistic (three reads of the row) and tree reductions in shared memory. Launch rows * BLOCK
    threads. Not the registered path (see the module docstring); code-generation tests pin its source."""
    row = group_id(0)
    tid = local_id(0)
    base = row * ncols
    red = shared(f32, BLOCK)
    m = -math.inf
    for c in range(tid, ncols, BLOCK):
        m = max(m, x[base + c])
    red[tid] = m
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = max(red[tid], red[tid + s])
        barrier()
        s = s // 2
    m = red[0]
    barrier()
    acc = 0.0
    for c in range(tid, ncols, BLOCK):
        acc += exp(x[base + c] - m)
    red[tid] = acc
    barrier()
    s = BLOCK // 2
    while s > 0:
        if tid < s:
            red[tid] = red[tid] + red[tid + s]
        barrier()
        s = s // 2
    inv = 1.0 / red[0]
    for c in range(tid, ncols, BLOCK):
        out[base + c] = exp(x[base + c] - m) * inv


def launch_softmax(x: Any, out: Any, backend: str | None = None, ahead: int | None = None) -> RowPlan:
    """out = softmax(x, axis=1) for a C-contiguous (rows, ncols) matrix; returns the plan it ran. Where the backend
    autotunes and reports its multiprocessors (CUDA), ``softmax_rows_ahead`` with ``AHEAD_PER_SM`` groups per
    multiprocessor is timed beside the one-group-a-row launch at every elements-per-thread value that keeps a row in
    registers, for at least two rows a group. ``ahead`` = G (1 <= G < rows) runs that kernel with G groups
    wherever the plan keeps a row in registers (a split plan, or G >= rows, runs the usual kernels)."""
    rows, ncols = x.shape
    size = x.dtype.itemsize
    be = backend or get_backend(None).name
    tuned = table_for(ROW_TUNING, be)
    configs = [{"EPT": e, "AHEAD": 0 if ahead is None else ahead} for e in tuned or (ELEMS_PER_THREAD,)]
    whole = [e for e in tuned or () if plan_rows(rows, ncols, size, e).chunks == 1]
    if ahead is None and whole:
        sms = processors(be)
        configs += [{"EPT": e, "AHEAD": k * sms} for e in whole for k in AHEAD_PER_SM if 0 < 2 * k * sms <= rows
                    and k * plan_rows(rows, ncols, size, e).block <= MAX_RESIDENT]

    def run(cfg: dict) -> RowPlan:
        p = plan_rows(rows, ncols, size, cfg["EPT"])
        _launch_plan(x, out, p, backend, cfg["AHEAD"])
        return p

    return run(tune("std/softmax", configs, run, backend=be, dtype=dtype_label(x), key=(rows, ncols)))


_PROCESSORS: dict[int, int] = {}


def processors(name: str) -> int:
    """The device's multiprocessors (0 where it does not say), asked once per backend object."""
    be = get_backend(name)
    if id(be) not in _PROCESSORS:
        _PROCESSORS[id(be)] = int(be.info().get("sms") or 0)
    return _PROCESSORS[id(be)]


def _launch_plan(x: Any, out: Any, p: RowPlan, backend: str | None, ahead: int = 0) -> None:
    rows, ncols = x.shape
    fast = fast_math(x)
    if p.chunks == 1 and 0 < ahead < rows:
        softmax_rows_ahead[ahead * p.block, p.block](x, out, rows, ncols, p.block, p.vec, p.per, fast,
                                                     backend=backend)
        return
    if p.chunks == 1:
        softmax_rows[rows * p.block, p.block](x, out, ncols, p.block, p.vec, p.per, fast, backend=backend)
        return
    stats = scratch_f32(x, 2 * rows * p.chunks)
    grid = rows * p.chunks * p.block
    softmax_chunk_stats[grid, p.block](x, stats, ncols, p.chunks, p.block, p.vec, p.per, fast, backend=backend)
    softmax_chunk_apply[grid, p.block](x, stats, out, ncols, p.chunks, p.block, p.vec, p.per, fast, backend=backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(scale=4.0), "out": gen.poisoned()}


def _launch(d, backend: str) -> None:
    launch_softmax(d["x"], d["out"], backend)


def _oracle(d):
    x = d["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _reference(d):
    x = d["x"].astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(d["x"].dtype)


bench("std/softmax/row", setup=_setup, launch=_launch,
      references={"numpy": _reference, "torch": lambda d: __import__("torch").softmax(d["x"], dim=1, out=d["ref_out"]),
                  "triton": "softmax", "mlx": "mlx.core.softmax"},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize,
      flops=lambda shape: 5 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192), (32, 128256)])(softmax_rows)
test_kernel(oracle=_oracle, domain="signed", shapes=[(256, 1024), (1024, 1024)],
            tolerance={"f32": (1e-7, 1e-5), "f16": (1e-4, 2e-3), "bf16": (1e-3, 1.6e-2)})(softmax_rows)
