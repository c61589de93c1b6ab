"""Reductions over the last axis of a (rows, ncols) matrix (issue 18): sum, max, min and argmax.

Kernels (``x`` C-contiguous (rows, ncols); statistics in f32; ``OP`` 0 sum, 1 max, 2 min). Each row is cut into
``nchunks`` spans of ``span`` columns (whole tiles of BLOCK * PER * VEC elements); group g reduces span g % nchunks of
row g // nchunks, tile by tile: thread ``tid`` loads the tile's vectors ``k * BLOCK + tid`` (k < PER, VEC elements
each, one 16-byte ``vload`` each, all issued before any is combined) into an f32 register array.

- ``reduce_rows(x, out, part, count, ncols, nchunks, span, OP, BLOCK, VEC, PER, ONE)``: launch rows * nchunks *
  BLOCK threads; writes op(row) rounded to T to out[row] when nchunks == 1, else each span's f32 result to part[g];
  with ``ONE`` the last group of a row to finish (``last_of_row``: an atomic count in ``count``, zero before the
  launch, between two ``fence()``s) then combines the row's parts into out[row] and resets its count: one launch.
- ``reduce_combine(part, out, nchunks, OP, CB)``: out[r] = op(part[r * nchunks : (r + 1) * nchunks]), one group of
  CB threads per row (launch rows * CB threads), in a fixed order: deterministic, no atomics.
- ``argmax_rows(x, out, outf, pval, pidx, count, ncols, nchunks, span, F32_OUT, BLOCK, VEC, PER, ONE)`` and
  ``argmax_combine(pval, pidx, out, outf, nchunks, F32_OUT, CB)``: the same for argmax, the first column of the
  row's maximum (ties go to the lower column; NaNs are ignored, as np.nanargmax does; a row of -inf gives 0). The
  index goes to the i32 ``out``, or with ``F32_OUT`` as an exact f32 to ``outf`` (what the harness's NaN-poisoned
  float outputs need); unused buffers may be 1-element dummies.

``launch_reduce(x, out, op)`` and ``launch_argmax(x, out)`` pick the variant: softmax.py's ``plan_rows`` (one tile
per row, the row bucketed to powers of two: 4096 x 4096 bf16 runs 4096 groups of 256 threads x 2 vectors of 8; or,
for long rows or few of them, one tile per span and a combine launch: 32 x 128256 bf16 runs 32 x 32 groups of 4096
columns, then 32 combine groups); on CUDA autotuning also times 8/16/32 elements per thread and, where rows are
split, one group of 1024 threads per row looping over it (one launch on fewer SMs against two launches) and the
split in one launch (``ONE``). H200, 2026-12-05, argmax 32 x 128256 bf16: 9.3 us with ONE (tuning's pick), 10.1 us
with the loop before.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..frontend import func, kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    atomic_add,
    barrier,
    constexpr,
    f32,
    fence,
    group_id,
    i32,
    local_array,
    local_id,
    shared,
    simd_group,
    simd_lane,
    simd_min,
    simd_size,
    static_range,
    vload,
)
from ..runtime import get_backend
from ..runtime.device_array import Array, empty, zeros
from .softmax import (
    BLOCK,
    ELEMS_PER_THREAD,
    MAX_BLOCK,
    PER,
    ROW_TUNING,
    VEC,
    RowPlan,
    dtype_label,
    group_max,
    group_total,
    plan_rows,
    scratch_f32,
)

__all__ = ["BLOCK", "CB", "ONE", "OP", "PER", "VEC", "argmax_combine", "argmax_rows", "launch_argmax", "launch_reduce",
           "reduce_combine", "reduce_partials", "reduce_rows"]

#: iron build's defaults: the sum, an i32 argmax output, argmax in one launch (the form with the fence)
OP = 0
F32_OUT = False
ONE = True
#: threads per group of the combine kernels
CB = 64
OPS = {"sum": 0, "max": 1, "min": 2}
BIG = 2147483647


@func
def identity(OP):
    if OP == 0:
        return 0.0
    if OP == 1:
        return -math.inf
    return math.inf


@func
def combine(a, b, OP):
    if OP == 0:
        return a + b
    if OP == 1:
        return max(a, b)
    return min(a, b)


@func
def group_min(v, partial, BLOCK):
    """Minimum of v (f32 or i32: partial's type) over the group, given to every thread; group_max's contract."""
    v = simd_min(v)
    if simd_lane() == 0:
        partial[simd_group()] = v
    barrier()
    r = partial[0]
    for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
        r = min(r, partial[i])
    return simd_min(r)


@func
def group_op(v, OP, BLOCK):
    if OP == 0:
        return group_total(v, shared(f32, BLOCK), BLOCK)
    if OP == 1:
        return group_max(v, shared(f32, BLOCK), BLOCK)
    return group_min(v, shared(f32, BLOCK), BLOCK)


@func
def load_tile(x, vals, start, t0, nvec, fill, BLOCK, VEC, PER):
    """vals[k * VEC + j] = x[start + (t0 + k * BLOCK + tid) * VEC + j] for the thread's vectors below nvec, ``fill``
    past them; every load is issued before any value is used."""
    tid = local_id(0)
    for k in static_range(PER):
        v = t0 + k * BLOCK + tid
        if v < nvec:
            chunk = vload(x, start + v * VEC, VEC)
            for j in static_range(VEC):
                vals[k * VEC + j] = chunk[j]
        else:
            for j in static_range(VEC):
                vals[k * VEC + j] = fill


@func
def span_of(ncols, nchunks, span):
    """(row, first column, elements) of this group's span: span g % nchunks of row g // nchunks."""
    g = group_id(0)
    row = g // nchunks
    c0 = (g - row * nchunks) * span
    return row, c0, min(span, ncols - c0)


@func
def last_of_row(count, flag, row, nchunks):
    """Whether this group is the last of its row's ``nchunks`` groups to get here (uniform over the group): what
    its threads wrote before is published (``fence``) before one thread counts the group in count[row]
    (``flag``: a 1-element shared i32); the last group fences again, so the others' published writes are visible
    to it. That group must reset count[row] to 0 for the next launch."""
    fence()
    barrier()
    if local_id(0) == 0:
        flag[0] = atomic_add(count, row, 1)
    barrier()
    last = flag[0] == nchunks - 1
    if last:
        fence()
    return last


@func
def combine_parts(part, out, row, nchunks, OP, NB):
    """out[row] = op(part[row * nchunks ...]) by a group of NB threads, in a fixed order."""
    first = row * nchunks
    acc = identity(OP)
    for i in range(local_id(0), nchunks, NB):
        acc = combine(acc, part[first + i], OP)
    r = group_op(acc, OP, NB)
    if local_id(0) == 0:
        out[row] = r


@kernel
def reduce_rows(x: Tensor[T], out: Tensor[T], part: Tensor[f32], count: Tensor[i32], ncols: int, nchunks: int,
                span: int, OP: constexpr, BLOCK: constexpr, VEC: constexpr, PER: constexpr, ONE: constexpr):
    """op over each group's span of ``span`` columns (a multiple of VEC), tile by tile (BLOCK * PER vectors, all
    loads of a tile issued before they are combined): to out[row] when a row is one span, else to part[g]. With
    ``ONE`` and several spans, the last group of a row (``last_of_row``) combines the parts and resets count[row]:
    one launch, no ``reduce_combine``."""
    row, c0, n = span_of(ncols, nchunks, span)
    nvec = n // VEC
    vals = local_array(f32, PER * VEC)
    acc = identity(OP)
    for t0 in range(0, nvec, BLOCK * PER):
        load_tile(x, vals, row * ncols + c0, t0, nvec, identity(OP), BLOCK, VEC, PER)
        for i in static_range(PER * VEC):
            acc = combine(acc, vals[i], OP)
    r = group_op(acc, OP, BLOCK)
    if local_id(0) == 0:
        if nchunks == 1:
            out[row] = r
        else:
            part[group_id(0)] = r
    if ONE:
        flag = shared(i32, 1)
        if nchunks > 1:
            if last_of_row(count, flag, row, nchunks):
                combine_parts(part, out, row, nchunks, OP, BLOCK)
                if local_id(0) == 0:
                    count[row] = 0


@kernel
def reduce_combine(part: Tensor[f32], out: Tensor[T], nchunks: int, OP: constexpr, CB: constexpr):
    """Split path, pass 2: out[r] = op(part[r * nchunks ...]) in a fixed order; one group of CB threads per row."""
    combine_parts(part, out, group_id(0), nchunks, OP, CB)


# --- argmax ---------------------------------------------------------------------------------------------------------


@func
def write_index(out, outf, i, idx, F32_OUT):
    if F32_OUT:
        outf[i] = idx
    else:
        out[i] = idx


@func
def best_of_spans(pval, pidx, out, outf, row, nchunks, F32_OUT, NB):
    """out[row] = the column of row's best span maximum (the lowest column among equal ones), by a group of NB
    threads over pval/pidx[row * nchunks ...] in a fixed order."""
    first = row * nchunks
    m = -math.inf
    for i in range(local_id(0), nchunks, NB):
        m = max(m, pval[first + i])
    m = group_max(m, shared(f32, NB), NB)
    best = BIG
    for i in range(local_id(0), nchunks, NB):
        if pval[first + i] == m:
            best = min(best, pidx[first + i])
    best = group_min(best, shared(i32, NB), NB)
    if local_id(0) == 0:
        write_index(out, outf, row, best, F32_OUT)


@kernel
def argmax_rows(x: Tensor[T], out: Tensor[i32], outf: Tensor[f32], pval: Tensor[f32], pidx: Tensor[i32],
                count: Tensor[i32], ncols: int, nchunks: int, span: int, F32_OUT: constexpr, BLOCK: constexpr,
                VEC: constexpr, PER: constexpr, ONE: constexpr):
    """(max, its first column) over each group's span, as reduce_rows: to out[row] (outf with F32_OUT) when a row
    is one span, else to (pval[g], pidx[g]). Each thread keeps its first strictly greater value (its columns come
    in increasing order), then the group takes the lowest column holding the group's maximum. With ``ONE`` and
    several spans, the last group of a row to finish (counted in count[row], zero before the launch and reset to
    zero by that group) combines the row's spans (``best_of_spans``): one launch, no ``argmax_combine``."""
    row, c0, n = span_of(ncols, nchunks, span)
    nvec = n // VEC
    tid = local_id(0)
    vals = local_array(f32, PER * VEC)
    best = -math.inf
    col = BIG
    for t0 in range(0, nvec, BLOCK * PER):
        load_tile(x, vals, row * ncols + c0, t0, nvec, -math.inf, BLOCK, VEC, PER)
        for k in static_range(PER):
            for j in static_range(VEC):
                if vals[k * VEC + j] > best:
                    best = vals[k * VEC + j]
                    col = c0 + (t0 + k * BLOCK + tid) * VEC + j
    m = group_max(best, shared(f32, BLOCK), BLOCK)
    idx = group_min(col if best == m else BIG, shared(i32, BLOCK), BLOCK)
    if idx == BIG:  # nothing above -inf (all -inf or NaN): the span's first column
        idx = c0
    if tid == 0:
        if nchunks == 1:
            write_index(out, outf, row, idx, F32_OUT)
        else:
            pval[group_id(0)] = m
            pidx[group_id(0)] = idx
    if ONE:
        flag = shared(i32, 1)
        if nchunks > 1:
            if last_of_row(count, flag, row, nchunks):
                best_of_spans(pval, pidx, out, outf, row, nchunks, F32_OUT, BLOCK)
                if tid == 0:
                    count[row] = 0


@kernel
def argmax_combine(pval: Tensor[f32], pidx: Tensor[i32], out: Tensor[i32], outf: Tensor[f32], nchunks: int,
                   F32_OUT: constexpr, CB: constexpr):
    """Split path, pass 2: the row's best span maximum, the lowest column among equal ones."""
    best_of_spans(pval, pidx, out, outf, group_id(0), nchunks, F32_OUT, CB)


# --- launches -------------------------------------------------------------------------------------------------------


def scratch_like(like: Any, n: int, dtype: Any = None) -> Any:
    """n elements of ``dtype`` (an Iron scalar type; default ``like``'s) where ``like`` lives: NumPy, an Iron device
    array, torch or CuPy."""
    if isinstance(like, np.ndarray):
        return np.empty(n, like.dtype if dtype is None else dtype.np_dtype)
    if isinstance(like, Array):
        return empty(n, like.dtype if dtype is None else dtype, backend=like.backend)
    if hasattr(like, "new_empty"):
        import torch

        return like.new_empty((n,)) if dtype is None else like.new_empty((n,), dtype=torch.int32)
    import cupy

    return cupy.empty(n, dtype=like.dtype if dtype is None else dtype.np_dtype)


def span_columns(ncols: int, p: RowPlan) -> int:
    """Columns per group: the row cut into ``p.chunks`` spans of whole tiles (BLOCK * PER * VEC elements)."""
    tile = p.block * p.per * p.vec
    per_chunk = -(-ncols // p.chunks)
    return -(-per_chunk // tile) * tile


def _plan(rows: int, ncols: int, itemsize: int, ept: int, loop: bool) -> RowPlan:
    """plan_rows' variant, or with ``loop`` (few long rows) one group of MAX_BLOCK threads per row looping over
    it: no second launch."""
    p = plan_rows(rows, ncols, itemsize, ept)
    return RowPlan(MAX_BLOCK, p.vec, max(1, ept // p.vec), 1) if loop else p


def _run(name: str, x: Any, backend: str | None, run, plan: RowPlan | None, one: bool = False) -> RowPlan:
    """Launch with ``plan`` (and ``one``: run's one-launch flag), else with the plan autotuning picks: elements per
    thread and, where plan_rows splits the rows, also the one-group-per-row loop (the two-launch split against one
    launch on fewer groups) and the split in one launch (its last group of a row combines). ``run(plan, one)``
    launches."""
    if plan is not None:
        run(plan, one)
        return plan
    rows, ncols = x.shape
    size = x.dtype.itemsize
    be = backend or get_backend(None).name
    epts = table_for(ROW_TUNING, be) or (ELEMS_PER_THREAD,)
    configs = [{"EPT": e, "LOOP": False} for e in epts]
    if table_for(ROW_TUNING, be):  # a GPU that autotunes: also the loop (and one launch), where plan_rows splits
        split = [e for e in epts if plan_rows(rows, ncols, size, e).chunks > 1]
        configs += [{"EPT": e, "LOOP": True} for e in split]
        configs += [{"EPT": e, "LOOP": False, "ONE": True} for e in split]
    cfg = tune(name, configs, lambda c: run(_plan(rows, ncols, size, c["EPT"], c["LOOP"]), c.get("ONE", False)),
               backend=be, dtype=dtype_label(x), key=(rows, ncols))
    p = _plan(rows, ncols, size, cfg["EPT"], cfg["LOOP"])
    run(p, cfg.get("ONE", False))
    return p


#: the one-launch counters (reduce, argmax and top-k): (backend, where x lives, rows) -> rows zeroed i32, each reset to
#: zero by the group that combines its row, so a launch finds them zero (launches on one stream, in order)
_COUNTERS: dict[tuple, Any] = {}


def counters(x: Any, rows: int, backend: str | None) -> Any:
    key = (backend or get_backend(None).name, type(x).__name__, str(getattr(x, "device", "")), rows)
    count = _COUNTERS.get(key)
    if count is None:
        if isinstance(x, np.ndarray):
            count = np.zeros(rows, np.int32)
        elif isinstance(x, Array):
            count = zeros(rows, i32, backend=x.backend, device=x.device)
        else:
            count = scratch_like(x, rows, i32)
            count.fill(0) if hasattr(count, "fill") else count.zero_()
        _COUNTERS[key] = count
    return count


@contextmanager
def counters_guard():
    """Forget the counters when a launch fails: one that failed part way may leave a count behind."""
    try:
        yield
    except Exception:
        _COUNTERS.clear()
        raise


def reduce_partials(x: Any, p: RowPlan, backend: str | None, out: Any = None, op: int = 0,
                    one: bool = False) -> Any:
    """Launch reduce_rows with plan p; returns the f32 partials (rows * p.chunks) when a row is several spans.
    ``one`` (with ``out`` and several spans): the last group of each row writes out[row] (no combine launch)."""
    rows, ncols = x.shape
    part = scratch_f32(x, rows * p.chunks if p.chunks > 1 else 1)
    if out is None:  # a T-typed dummy: with several spans per row, reduce_rows writes only the partials
        out = scratch_like(x, 1)
    one = one and p.chunks > 1
    count = counters(x, rows, backend) if one else scratch_like(x, 1, i32)
    with counters_guard():
        reduce_rows[rows * p.chunks * p.block, p.block](x, out, part, count, ncols, p.chunks,
                                                        span_columns(ncols, p), op, p.block, p.vec, p.per, one,
                                                        backend=backend)
    return part


def launch_reduce(x: Any, out: Any, op: str, backend: str | None = None, plan: RowPlan | None = None,
                  one: bool | None = None) -> RowPlan:
    """out[r] = op(x[r, :]) for op in sum/max/min; x C-contiguous (rows, ncols), out (rows,) of x's dtype;
    ``plan`` forces a variant (tests), ``one`` with a split plan the one-launch form (True) or the combine
    launch (False)."""
    code = OPS[op]

    def run(p: RowPlan, one_launch: bool) -> None:
        part = reduce_partials(x, p, backend, out, code, one_launch)
        if p.chunks > 1 and not one_launch:
            reduce_combine[x.shape[0] * CB, CB](part, out, p.chunks, code, CB, backend=backend)

    return _run(f"std/reduce/{op}", x, backend, run, plan, bool(one))


def launch_argmax(x: Any, out: Any, backend: str | None = None, plan: RowPlan | None = None,
                  one: bool | None = None) -> RowPlan:
    """out[r] = the first column of x[r, :]'s maximum; out (rows,) i32, or f32 (indices written exactly). With a
    split ``plan``, ``one`` forces the one-launch form (True) or the combine launch (False)."""
    as_f32 = dtype_label(out) == "f32"
    dummy = scratch_like(x, 1, i32) if as_f32 else scratch_f32(x, 1)
    out_i, out_f = (dummy, out) if as_f32 else (out, dummy)

    def run(p: RowPlan, one_launch: bool) -> None:
        rows, ncols = x.shape
        n = rows * p.chunks if p.chunks > 1 else 1
        pval, pidx = scratch_f32(x, n), scratch_like(x, n, i32)
        one_launch = one_launch and p.chunks > 1
        count = counters(x, rows, backend) if one_launch else scratch_like(x, 1, i32)
        with counters_guard():
            argmax_rows[rows * p.chunks * p.block, p.block](x, out_i, out_f, pval, pidx, count, ncols, p.chunks,
                                                            span_columns(ncols, p), as_f32, p.block, p.vec, p.per,
                                                            one_launch, backend=backend)
        if p.chunks > 1 and not one_launch:
            argmax_combine[rows * CB, CB](pval, pidx, out_i, out_f, p.chunks, as_f32, CB, backend=backend)

    return _run("std/reduce/argmax", x, backend, run, plan, bool(one))


# --- registration ---------------------------------------------------------------------------------------------------


class _Op:
    """``reduce_rows`` registered once per operation (the registry keeps one entry per object)."""

    def __init__(self, op: str):
        self.fn = reduce_rows.fn
        self.kernel = reduce_rows
        self.op = op

    def __repr__(self) -> str:
        return f"<iron kernel reduce_rows ({self.op})>"


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    rows, _ = gen.shape
    return {"x": gen.random(), "out": gen.poisoned(shape=(rows,))}


_NUMPY = {"sum": np.sum, "max": np.max, "min": np.min}
_TORCH = {"sum": "sum", "max": "amax", "min": "amin"}


def _register(op: str) -> None:
    target = _Op(op)

    def torch_ref(d):
        return getattr(__import__("torch"), _TORCH[op])(d["x"], dim=1, out=d["ref_out"])

    bench(f"std/reduce/{op}", setup=_setup, launch=lambda d, be: launch_reduce(d["x"], d["out"], op, be),
          references={"numpy": lambda d: _NUMPY[op](d["x"].astype(np.float32), axis=1).astype(d["x"].dtype),
                      "torch": torch_ref},
          bytes_moved=lambda shape, itemsize: (int(np.prod(shape)) + shape[0]) * itemsize,
          flops=lambda shape: int(np.prod(shape)),
          device_shapes=[(32, 128256), (4096, 4096)])(target)
    # sum: f32 accumulation, then one rounding to T; max/min: exact
    exact = {"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)}
    test_kernel(oracle=lambda d: _NUMPY[op](d["x"].astype(np.float64), axis=1), domain="signed",
                shapes=[(5, 301), (66, 512), (3, 9000)],
                tolerance={"f32": (3e-4, 1e-5), "f16": (1e-3, 1e-3), "bf16": (1e-2, 8e-3)} if op == "sum" else exact
                )(target)


for _name in OPS:
    _register(_name)


def _argmax_setup(gen: InputGen) -> dict[str, np.ndarray]:
    """Even rows are small integers (many ties for the maximum: the first must win), odd rows normal values."""
    rows, ncols = gen.shape
    x = gen.random()
    x[::2] = gen.rng.integers(-8, 8, (len(x[::2]), ncols)).astype(x.dtype)
    return {"x": x, "out": gen.poisoned(shape=(rows,)).astype(np.float32)}


bench("std/reduce/argmax", setup=_argmax_setup, launch=lambda d, be: launch_argmax(d["x"], d["out"], be),
      references={"numpy": lambda d: np.argmax(d["x"].astype(np.float32), axis=1).astype(np.float32),
                  "torch": lambda d: __import__("torch").argmax(d["x"], dim=1)},
      bytes_moved=lambda shape, itemsize: int(np.prod(shape)) * itemsize + 4 * shape[0],
      flops=lambda shape: int(np.prod(shape)),
      device_shapes=[(32, 128256), (4096, 4096)])(argmax_rows)
test_kernel(oracle=lambda d: np.argmax(d["x"].astype(np.float64), axis=1).astype(np.float64), domain="signed",
            shapes=[(5, 301), (66, 512), (3, 9000)],
            tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)})(argmax_rows)
