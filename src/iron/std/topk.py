"""Top-k over the last axis (issue 18): the k <= 64 largest logits of each row, values and i32 indices.

Order. Elements are ranked by value, descending; **equal values rank by the lower index first** (a total order, so
the result is unique: ``np.lexsort((index, -value))[:k]``). The values come back in the logits' dtype, exactly the
logits' own values (the rounds path may give +0.0 for a -0.0: ``simd_max`` picks either of equal zeros); indices are
column numbers within the row. NaN logits are not supported (their rank is unspecified). ``k`` must be at most 64
and at most the row length.

Two paths, each two launches (the split of long rows that softmax.py uses), and the radix path in one launch
(``"radix1"``: the last group of each row to finish merges its row, argmax's pattern, ``reductions.last_of_row``),
and the filter path in one launch (``"filter"``, topk_filter.py, ``launch_filter``: rows of at most 16 chunks; as
``"filterv"`` comparing the logits as f32 values rather than order keys).
``launch_topk`` runs the radix path on CPU devices (the interpreter, lavapipe, msl-cpu: no tuning table, so tests
are deterministic); a GPU that autotunes (``autotune.table_for(PATH_TUNING, backend)``) times them all on the first
launch per shape and keeps the fastest; ``path=`` forces one (the tests run each everywhere).

The radix path (topk_radix.py, ``launch_radix``): order-preserving u32 keys, a radix select of the k-th key with
8-bit digits (shared-memory histograms, one barrier a digit, the digit scan done by every SIMD group alone), the
threshold's surplus ties cut by a position scan, the k winners ranked by k^2 comparisons; 6-9 barriers a group
whatever k is. On the H200 (2026-12-04) tuning chose it at 16 elements a thread: 37.4 us for 32 x 128256 bf16
(torch.topk 85.3 us); in one launch 37.5 us (2026-12-05), its chunk kernel bound by its instruction count (3.7 warp
instructions a logit under Nsight Compute), which the filter path cuts (bound, filter, rank among a few in a hundred).

The rounds path (this module, ``launch_rounds``):

- ``topk_partial``: the row is cut into chunks of ``BLOCK * PER * VEC`` elements, one group per chunk. Each thread
  loads its ``PER`` vectors of ``VEC`` elements (16-byte ``vload``s, a SIMD group's accesses contiguous) into f32
  registers, once. The group then runs k *selection rounds*: each thread offers its best element that ranks after
  the previous round's winner (a scan of its registers, redone only by the thread that won), the group takes the
  best offer (``simd_max`` of the values, ``simd_min`` of the tied indices, one shared slot per SIMD group, double
  buffered so that one barrier per round suffices) and thread 0 writes it. No element is ever marked or moved: the
  "ranks after the last winner" filter makes equal values and -inf safe. The chunk's k winners, in order, go to an
  f32/i32 workspace.
- ``topk_merge``: one group per row runs the same rounds over the row's ``chunks * k`` candidates and writes the k
  winners: values cast back to the logits' dtype (exact: they were read from it), indices as i32.

Reading: 32 x 128256 bf16 is 8.2 MB, one read. Each round costs two SIMD reductions, a shared write, a barrier and
two more reductions, and 64 rounds in each launch made 174.1 us on the H200 (47 GB/s; torch.topk 85.8 us), far
from the 2000 GB/s target (4.1 us): hence the radix path.

``topk_merge_f32`` is ``topk_merge`` writing the indices as f32 (exact below 2^24): the registered entry's checked
output, since the harness compares one NaN-poisoned float array.
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
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    shared,
    simd_group,
    simd_lane,
    simd_max,
    simd_min,
    simd_size,
    static_range,
    vload,
    where,
)
from ..runtime import get_backend
from ..runtime.device_array import Array, empty
from .reductions import counters, counters_guard
from .softmax import chunk_span, dtype_label
from .topk_filter import MAX_LISTS, topk_filter_one, topk_filter_one_f32
from .topk_radix import (
    KEY_PASSES,
    MAX_K,
    topk_radix_merge,
    topk_radix_merge_f32,
    topk_radix_one,
    topk_radix_one_f32,
    topk_radix_partial,
)

__all__ = ["BLOCK", "MAX_K", "PER", "VEC", "launch_radix", "launch_rounds", "launch_topk", "topk_merge",
           "topk_partial", "topk_oracle"]

#: defaults of the constexprs (``iron build``); valid for every dtype
BLOCK = 256
VEC = 4
PER = 4
#: elements per thread of the chunk pass (16: four 16-byte loads in flight per thread for f32, two for 16-bit)
ELEMS_PER_THREAD = 16
#: threads of the merge pass's group (one per row)
MERGE_BLOCK = 256
#: an index after every real one: the rank of "no element"
NO_INDEX = 2147483647
#: indices of the merge pass's padding slots start here (distinct, after every column)
PAD_INDEX = 1 << 30


@func
def ranks_before(v, i, bv, bi):
    """(v, i) ranks before (bv, bi): a larger value, or the same value at a lower index."""
    return v > bv or (v == bv and i < bi)


@func
def best_after(vals, idxs, pv, pi, N):
    """The best (value, index) of the thread's N registers among those ranking after (pv, pi); (-inf, NO_INDEX)
    when none is left."""
    bv = -math.inf
    bi = NO_INDEX
    for r in static_range(N):
        v = vals[r]
        i = idxs[r]
        if ranks_before(pv, pi, v, i) and ranks_before(v, i, bv, bi):
            bv = v
            bi = i
    return bv, bi


@func
def simd_best(v, i):
    """The best (value, index) over the SIMD group, given to every lane."""
    m = simd_max(v)
    return m, simd_min(where(v == m, i, NO_INDEX))


@func
def select_rounds(vals, idxs, N, K, out_v, out_i, base, sv, si, BLOCK):
    """K selection rounds over the group's registers (N per thread): out_v/out_i[base + t] = the t-th ranked
    (value, index). ``sv``/``si`` are shared arrays of 2 * BLOCK (two buffers of one slot per SIMD group: round t
    writes buffer t % 2, so one barrier per round keeps readers of round t ahead of writers of round t + 2)."""
    bv, bi = best_after(vals, idxs, math.inf, -1, N)
    nsg = (BLOCK + simd_size() - 1) // simd_size()
    for t in range(K):
        off = (t % 2) * BLOCK
        m, c = simd_best(bv, bi)
        if simd_lane() == 0:
            sv[off + simd_group()] = m
            si[off + simd_group()] = c
        barrier()
        gv = -math.inf
        gi = NO_INDEX
        for s in range(simd_lane(), nsg, simd_size()):
            v = sv[off + s]
            i = si[off + s]
            if ranks_before(v, i, gv, gi):
                gv = v
                gi = i
        m, c = simd_best(gv, gi)
        if local_id(0) == 0:
            out_v[base + t] = m
            out_i[base + t] = c
        if bi == c:
            bv, bi = best_after(vals, idxs, m, c, N)


@kernel
def topk_partial(x: Tensor[T], cand_v: Tensor[f32], cand_i: Tensor[i32], ncols: int, nchunks: int, k: int,
                 BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """Each group's chunk (group g: chunk g % nchunks of row g // nchunks) -> its k best, ranked, at
    cand_v/cand_i[g * k ...] (indices are columns of the row). Launch rows * nchunks * BLOCK threads."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    row = start // ncols
    col0 = start - row * ncols
    tid = local_id(0)
    vals = local_array(f32, PER * VEC)
    idxs = local_array(i32, PER * VEC)
    for q in static_range(PER):
        v = q * BLOCK + tid
        if v < nvec:
            chunk = vload(x, start + v * VEC, VEC)
            for j in static_range(VEC):
                vals[q * VEC + j] = chunk[j]
        else:
            for j in static_range(VEC):
                vals[q * VEC + j] = -math.inf  # past the row: ranks after every real element (its column is larger)
        for j in static_range(VEC):
            idxs[q * VEC + j] = col0 + v * VEC + j
    select_rounds(vals, idxs, PER * VEC, k, cand_v, cand_i, group_id(0) * k, shared(f32, 2 * BLOCK),
                  shared(i32, 2 * BLOCK), BLOCK)


@func
def merge_candidates(cand_v, cand_i, values, indices, ncand, k, BLOCK, PER):
    """Row r = group_id(0): its ncand candidates (thread tid holds candidates q * BLOCK + tid) -> its k best at
    values/indices[r * k ...]."""
    row = group_id(0)
    tid = local_id(0)
    vals = local_array(f32, PER)
    idxs = local_array(i32, PER)
    for q in static_range(PER):
        p = q * BLOCK + tid
        if p < ncand:
            vals[q] = cand_v[row * ncand + p]
            idxs[q] = cand_i[row * ncand + p]
        else:
            vals[q] = -math.inf
            idxs[q] = PAD_INDEX + p
    select_rounds(vals, idxs, PER, k, values, indices, row * k, shared(f32, 2 * BLOCK), shared(i32, 2 * BLOCK),
                  BLOCK)


@kernel
def topk_merge(cand_v: Tensor[f32], cand_i: Tensor[i32], values: Tensor[T], indices: Tensor[i32], ncand: int,
               k: int, BLOCK: constexpr, PER: constexpr):
    """Row r (one group each) -> the k best of its ncand candidates at values/indices[r * k ...]. Launch
    rows * BLOCK threads; ncand <= BLOCK * PER."""
    merge_candidates(cand_v, cand_i, values, indices, ncand, k, BLOCK, PER)


@kernel
def topk_merge_f32(cand_v: Tensor[f32], cand_i: Tensor[i32], values: Tensor[T], indices: Tensor[f32], ncand: int,
                   k: int, BLOCK: constexpr, PER: constexpr):
    """``topk_merge`` with the indices written as f32 (the registered entry's checked output)."""
    merge_candidates(cand_v, cand_i, values, indices, ncand, k, BLOCK, PER)


@dataclass(frozen=True)
class TopkPlan:
    """The chunk pass's variant (``block`` threads, ``per`` vectors of ``vec``, ``chunks`` groups per row) and the
    merge pass's ``merge_per`` candidates per thread."""

    block: int
    vec: int
    per: int
    chunks: int
    merge_per: int


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan_topk(ncols: int, k: int, itemsize: int, ept: int = ELEMS_PER_THREAD) -> TopkPlan:
    """16-byte vectors when the row length allows (every chunk start is then aligned), else scalars; groups of up
    to BLOCK threads x ``ept`` elements, smaller for short rows."""
    wide = 16 // itemsize
    vec = wide if ncols % wide == 0 else 1
    per = max(1, ept // vec)
    block = min(BLOCK, max(64, _pow2(-(-ncols // (per * vec)))))
    chunks = -(-ncols // (block * per * vec))
    return TopkPlan(block, vec, per, chunks, _pow2(-(-chunks * k // MERGE_BLOCK)))


def scratch(like: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """An uninitialised array of ``dtype`` ("f32", "i32", or "like": like's dtype) where ``like`` lives."""
    if isinstance(like, np.ndarray):
        return np.empty(shape, like.dtype if dtype == "like" else {"f32": np.float32, "i32": np.int32}[dtype])
    if isinstance(like, Array):  # an iron device array: the workspace on its backend
        return empty(shape, like.dtype if dtype == "like" else dtype, backend=like.backend)
    if hasattr(like, "new_empty"):  # torch: the caching allocator makes this cheap per launch
        import torch

        kind = {"like": like.dtype, "f32": torch.float32, "i32": torch.int32}[dtype]
        return like.new_empty(shape, dtype=kind)
    import cupy

    return cupy.empty(shape, dtype=like.dtype if dtype == "like" else {"f32": cupy.float32, "i32": cupy.int32}[dtype])


def _is_f32(a: Any) -> bool:
    return str(getattr(a, "dtype", "")).replace("torch.", "") in ("float32", "f32")


def check_k(k: int, ncols: int) -> None:
    """k in 1 .. min(MAX_K, ncols): the kernels' shared slots hold MAX_K, and padding must never be chosen."""
    if not 1 <= k <= min(MAX_K, ncols):
        raise ValueError(f"top-k: k = {k} must be in 1 .. min({MAX_K}, row length {ncols})")


def launch_rounds(x: Any, values: Any, indices: Any, k: int, backend: str | None = None) -> TopkPlan:
    """The rounds path (``topk_partial`` then ``topk_merge``)."""
    rows, ncols = x.shape
    check_k(k, ncols)
    p = plan_topk(ncols, k, x.dtype.itemsize)
    cand_v = scratch(x, (rows * p.chunks * k,), "f32")
    cand_i = scratch(x, (rows * p.chunks * k,), "i32")
    topk_partial[rows * p.chunks * p.block, p.block](x, cand_v, cand_i, ncols, p.chunks, k, p.block, p.vec, p.per,
                                                     backend=backend)
    merge = topk_merge_f32 if _is_f32(indices) else topk_merge
    merge[rows * MERGE_BLOCK, MERGE_BLOCK](cand_v, cand_i, values, indices, p.chunks * k, k, MERGE_BLOCK,
                                           p.merge_per, backend=backend)
    return p


@dataclass(frozen=True)
class RadixPlan:
    """The radix path: ``chunk`` (topk_partial's geometry, reused by topk_radix_partial), the merge's group
    (``merge_block`` threads x ``merge_per`` vectors of ``merge_vec`` candidates) and the key digits searched."""

    chunk: TopkPlan
    merge_block: int
    merge_vec: int
    merge_per: int
    passes: int


def plan_radix(ncols: int, k: int, dtype: str, itemsize: int, ept: int = ELEMS_PER_THREAD) -> RadixPlan:
    """Chunks as ``plan_topk``; the merge reads 16-byte vectors of candidates where chunks * k allows, over a group
    of up to MERGE_BLOCK threads (at least MAX_K: the bound phase takes the K-th of the threads' maxima)."""
    chunk = plan_topk(ncols, k, itemsize, ept)
    ncand = chunk.chunks * k
    vec = 4 if ncand % 4 == 0 else 1
    block = min(MERGE_BLOCK, max(MAX_K, _pow2(-(-ncand // vec))))
    return RadixPlan(chunk, block, vec, _pow2(-(-ncand // (block * vec))), KEY_PASSES.get(dtype, 4))


def launch_radix(x: Any, values: Any, indices: Any, k: int, backend: str | None = None,
                 ept: int = ELEMS_PER_THREAD, one: bool = False) -> RadixPlan:
    """The radix path (``topk_radix_partial`` then ``topk_radix_merge``, topk_radix.py), ``ept`` elements a
    thread; ``one``: in one launch (``topk_radix_one``: the last group of each row merges, on counters kept per
    backend, device and row count, as the one-launch reductions keep theirs; the plan's merge fields then describe
    the two-launch merge, not the in-kernel one, which uses the chunk's group)."""
    rows, ncols = x.shape
    check_k(k, ncols)
    p = plan_radix(ncols, k, dtype_label(x), x.dtype.itemsize, ept)
    c = p.chunk
    cand_k = scratch(x, (rows * c.chunks * k,), "i32")
    cand_i = scratch(x, (rows * c.chunks * k,), "i32")
    grid = (rows * c.chunks * c.block, c.block)
    if one:
        ncand = c.chunks * k
        mvec = 4 if ncand % 4 == 0 else 1
        mper = _pow2(-(-ncand // (c.block * mvec)))
        kern = topk_radix_one_f32 if _is_f32(indices) else topk_radix_one
        with counters_guard():
            kern[grid](x, cand_k, cand_i, values, indices, counters(x, rows, backend), ncols, c.chunks, k, c.block,
                       c.vec, c.per, p.passes, mvec, mper, backend=backend)
        return p
    topk_radix_partial[grid](x, cand_k, cand_i, ncols, c.chunks, k, c.block, c.vec, c.per, p.passes,
                             backend=backend)
    merge = topk_radix_merge_f32 if _is_f32(indices) else topk_radix_merge
    merge[rows * p.merge_block, p.merge_block](x, cand_k, cand_i, values, indices, ncols, c.chunks * k, k,
                                               p.merge_block, p.merge_vec, p.merge_per, p.passes, backend=backend)
    return p


def filter_ept(ncols: int, itemsize: int, ept: int = ELEMS_PER_THREAD) -> int:
    """Elements a thread of the filter path: ``ept`` doubled (to 64 at most) until a row of ncols takes at most
    MAX_LISTS chunks (it may still take more at 64: ``launch_filter`` refuses those)."""
    while ept < 64 and plan_topk(ncols, 1, itemsize, ept).chunks > MAX_LISTS:
        ept *= 2
    return ept


def launch_filter(x: Any, values: Any, indices: Any, k: int, backend: str | None = None,
                  ept: int = ELEMS_PER_THREAD, vals: bool = False) -> RadixPlan:
    """The filter path in one launch (``topk_filter_one``, topk_filter.py) at ``filter_ept(ept)`` elements a
    thread; rows of more than MAX_LISTS chunks at 64 are refused. ``vals``: the chunk held as f32 values rather
    than order keys (path "filterv")."""
    rows, ncols = x.shape
    check_k(k, ncols)
    p = plan_radix(ncols, k, dtype_label(x), x.dtype.itemsize, filter_ept(ncols, x.dtype.itemsize, ept))
    c = p.chunk
    if c.chunks > MAX_LISTS:
        raise ValueError(f"top-k: the filter path takes rows of at most {MAX_LISTS} chunks of {c.block * c.per * c.vec}"
                         f" elements; a row of {ncols} needs {c.chunks} (the radix paths take any length)")
    cand_k = scratch(x, (rows * c.chunks * k,), "i32")
    cand_i = scratch(x, (rows * c.chunks * k,), "i32")
    kern = topk_filter_one_f32 if _is_f32(indices) else topk_filter_one
    with counters_guard():
        kern[rows * c.chunks * c.block, c.block](x, cand_k, cand_i, values, indices, counters(x, rows, backend), ncols,
                                                 c.chunks, k, c.block, c.vec, c.per, p.passes, int(vals),
                                                 backend=backend)
    return p


#: the paths, the default first
PATHS = ("radix", "rounds", "radix1", "filter", "filterv")


def launch_path(x: Any, values: Any, indices: Any, k: int, path: str, backend: str | None = None,
                ept: int = ELEMS_PER_THREAD) -> TopkPlan | RadixPlan:
    """One path of PATHS by name, at ``ept`` elements a thread (the rounds path has one geometry)."""
    if path not in PATHS:
        raise ValueError(f"top-k: path = {path!r} must be one of {', '.join(PATHS)}")
    if path in ("radix", "radix1"):
        return launch_radix(x, values, indices, k, backend, ept, one=path == "radix1")
    if path in ("filter", "filterv"):
        return launch_filter(x, values, indices, k, backend, ept, vals=path == "filterv")
    return launch_rounds(x, values, indices, k, backend)
#: what a GPU times on the first launch per shape, keeping the fastest: (path, elements a thread). The radix path
#: also at 32 a thread: half the groups (512 for 32 x 128256 bf16) and half the merge's candidates, for twice the
#: keys in registers (77 registers a thread on sm_90 against 64 at 16: 3 groups of 256 per SM instead of 4). The
#: filter path also at 64: 32 x 128256 bf16 at 32 a thread is 512 groups of 256 (87 registers, 2 an SM: 1.94 waves
#: on an H100, measured 23.3 us with the SMs active 69 % of it); at 64, 256 groups (128 registers, no spills), one
#: wave, 8 lists a row to merge: 17.9 us on an H100 (2026-12-06, s24), the fastest (EPT 16 23.6, radix1 37.5).
#: "filterv" (s26): the filter path comparing f32 values, a key made only per thread maximum and per candidate
PATH_TUNING = {be: (("radix", ELEMS_PER_THREAD), ("radix", 32), ("rounds", ELEMS_PER_THREAD),
                    ("radix1", ELEMS_PER_THREAD), ("radix1", 32), ("filter", ELEMS_PER_THREAD), ("filter", 32),
                    ("filter", 64), ("filterv", 32), ("filterv", 64))
               for be in ("cuda", "hip")}


def launch_topk(x: Any, values: Any, indices: Any, k: int, backend: str | None = None,
                path: str | None = None) -> TopkPlan | RadixPlan:
    """values[r, :], indices[r, :] = the k best of x[r, :] (module docstring's order) for a C-contiguous (rows,
    ncols) x; values (rows, k) in x's dtype, indices (rows, k) i32 (or f32). ``path`` ("radix", "radix1": the radix
    path in one launch, "filter", "filterv" (the filter path on f32 values) or "rounds") forces a path; by default
    a GPU that autotunes times PATH_TUNING's (``autotune.tune``) and a CPU device runs the radix path.
    Returns the plan that ran."""
    rows, ncols = x.shape
    check_k(k, ncols)
    if path is not None:
        return launch_path(x, values, indices, k, path, backend)

    def run(cfg: dict) -> TopkPlan | RadixPlan:
        return launch_path(x, values, indices, k, cfg["path"], backend, cfg["EPT"])

    be = backend or get_backend(None).name
    configs: list[dict] = []
    for p, e in table_for(PATH_TUNING, be) or (("radix", ELEMS_PER_THREAD),):
        if p in ("filter", "filterv"):  # as launch_filter will run it, once, where the row fits
            e = filter_ept(ncols, x.dtype.itemsize, e)
            if plan_topk(ncols, k, x.dtype.itemsize, e).chunks > MAX_LISTS:
                continue
        if {"path": p, "EPT": e} not in configs:
            configs.append({"path": p, "EPT": e})
    return run(tune("std/sample/topk", configs, run, backend=be, dtype=dtype_label(x), key=(rows, ncols, k)))


def topk_oracle(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(values as float64, indices as int64) of each row's k best: a stable sort by descending value (float64),
    which keeps equal values in index order."""
    x64 = np.asarray(x).astype(np.float64)
    order = np.argsort(-x64, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(x64, order, axis=1), order


# --- registration: std/sample/topk with k = 64; the checked output is the indices (f32) -------------------------

K_REGISTERED = 64


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    """Random logits, a quarter of them snapped to a coarse grid (ties below the top), and k + 1 distinct values
    above all of them at random columns: the top is tie-free so that torch.topk, whose order among equal values is
    unspecified, is a valid peer (ties inside the top k and at its edge: tests/std/test_sampling.py)."""
    rows, ncols = gen.shape
    x = gen.random(scale=3.0).astype(np.float64)
    tied = gen.rng.random(gen.shape) < 0.25
    x[tied] = np.round(x[tied] * 2.0) / 2.0
    top = np.ceil(x.max()) + 1.0 + 0.25 * np.arange(K_REGISTERED + 1)  # 0.25 apart: distinct in bf16 below 32
    for r in range(rows):
        x[r, gen.rng.permutation(ncols)[: K_REGISTERED + 1]] = gen.rng.permutation(top)
    return {"x": x.astype(gen.dtype), "values": gen.poisoned(shape=(rows, K_REGISTERED)),
            "out": np.full((rows, K_REGISTERED), np.nan, np.float32)}


def _torch_topk(d):
    import torch

    v, i = torch.topk(d["x"], K_REGISTERED, dim=1, sorted=True)
    return i.to(torch.float32)


bench("std/sample/topk", setup=_setup,
      launch=lambda d, be: launch_topk(d["x"], d["values"], d["out"], K_REGISTERED, be),
      references={"numpy": lambda d: topk_oracle(d["x"], K_REGISTERED)[1].astype(np.float32),
                  "torch": _torch_topk},
      bytes_moved=lambda shape, itemsize: int(np.prod(shape)) * itemsize,
      flops=lambda shape: int(np.prod(shape)),
      device_shapes=[(32, 128256)])(topk_merge_f32)
# exact indices: the order is total, so there is one right answer
test_kernel(oracle=lambda d: topk_oracle(d["x"], K_REGISTERED)[1].astype(np.float64), domain="signed",
            shapes=[(3, 5000), (4, 100)],
            tolerance={"f32": (0.0, 0.0), "f16": (0.0, 0.0), "bf16": (0.0, 0.0)})(topk_merge_f32)
