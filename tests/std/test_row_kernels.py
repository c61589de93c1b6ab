"""The register-array row kernels (softmax, rms_norm, gemv) at the row lengths that take each path: shorter than a
vector, not a multiple of 16 bytes (scalar accesses), one vector short of a bucket, and long enough for the split
path; every dtype, on every backend present, against float64 NumPy with outputs poisoned with NaN."""

from __future__ import annotations

import numpy as np
import pytest

from iron.harness.checking import compare
from iron.ir import types as t
from iron.std import load_all
from iron.std.elementwise import fast_math
from iron.std.gemv import plan_gemv
from iron.std.softmax import REGISTER_ROW_MAX, RowPlan, plan_rows

ENTRIES = {e.name: e for e in load_all()}
ROW_KERNELS = ("std/softmax/row", "std/norm/rms_norm", "std/gemv/gemv")
#: 1 and 7: shorter than one 16-byte vector; 100 and 4097: scalar accesses; 1000: vectors, a partial last one per
#: thread; 20000: the split path (longer than REGISTER_ROW_MAX); (3, 8192): split because the rows are few
SHAPES = [(3, 1), (3, 7), (5, 100), (4, 1000), (3, 4097), (2, 20000), (3, 8192)]


def _check(name: str, shape: tuple[int, int], dtype: str, backend: str, rng: np.random.Generator) -> None:
    entry = ENTRIES[name]
    arrays = entry.make(shape, t.SCALAR_TYPES[dtype].np_dtype, rng)
    assert np.isnan(arrays[entry.output].astype(np.float32)).all()
    entry.launch(arrays, backend)
    result = compare(arrays[entry.output], entry.oracle(arrays), entry.tolerance[dtype])
    assert result.ok, f"{name} {dtype} {shape} on {backend}: {result.describe()}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", ROW_KERNELS)
def test_row_lengths(name, shape, backend, dtype, rng):
    _check(name, shape, dtype, backend, rng)


def test_gemv_several_rows_per_group_with_a_partial_last_group(backend, dtype, rng):
    """2050 rows: 4 rows per group, the last group has 2 (it re-reads the last row and stores only its own)."""
    assert plan_gemv(2050, 48, 4)[2] == 4
    _check("std/gemv/gemv", (2050, 48), dtype, backend, rng)


@pytest.mark.parametrize("width", [8, 32, 64])
@pytest.mark.parametrize("shape", [(3, 1000), (2, 20000)], ids=["registers", "split"])
@pytest.mark.parametrize("name", ROW_KERNELS)
def test_reductions_at_every_simd_width(name, shape, width, monkeypatch, rng):
    """The group reductions read simd_size() (lavapipe 8, NVIDIA 32, AMD 64), also with fewer SIMD groups than a
    group of 64 threads has lanes at width 64."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    _check(name, shape, "f32", "cpu", rng)


def test_plans_for_the_bench_shapes():
    """The H200 bench shapes get the variants the module docstrings describe (bf16: 2-byte elements)."""
    assert plan_rows(16384, 8192, 2) == RowPlan(block=512, vec=8, per=2, chunks=1)
    assert plan_rows(4096, 4096, 2) == RowPlan(block=256, vec=8, per=2, chunks=1)
    split = plan_rows(32, 128256, 2)
    assert (split.block, split.vec, split.chunks) == (256, 8, 32) and split.chunk * split.chunks >= 128256
    assert plan_rows(4096, 4096, 4) == RowPlan(block=256, vec=4, per=4, chunks=1)
    assert plan_rows(8, 4097, 2).vec == 1  # not a multiple of 8 elements: scalar accesses
    assert plan_rows(1000, REGISTER_ROW_MAX + 8, 2).chunks > 1
    assert plan_gemv(16384, 16384, 2) == (256, 8, 4, 2)


@pytest.mark.parametrize("ncols", [1, 7, 64, 100, 1000, 4097, 8192, 16384, 16385, 20000, 128256])
@pytest.mark.parametrize("itemsize", [2, 4])
def test_every_plan_covers_its_row(ncols, itemsize):
    """A plan's groups hold the whole row (registers: one group; split: its chunks) and its constexprs are few
    (powers of two), so the number of compiled variants stays small."""
    for rows in (1, 4096):
        p = plan_rows(rows, ncols, itemsize)
        assert ncols % p.vec == 0 and p.vec * itemsize <= 16
        assert p.chunk * p.chunks >= ncols and (p.chunks == 1 or p.chunk * (p.chunks - 1) < ncols)
        assert all(v & (v - 1) == 0 for v in (p.block, p.vec, p.per)) and 64 <= p.block <= 1024
        assert p.per * p.vec <= 16


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("groups", [1, 3, 7], ids=["one_group", "three", "seven"])
def test_softmax_rows_ahead(backend, groups, dtype, rng):
    """The persistent softmax (rows g, g + G, ...; the next row's loads issued before this row's reductions) against
    float64 NumPy: 10 rows of 1024 (16-byte vectors in every dtype) over 1, 3 (an uneven share) and 7 groups, a row
    with -inf entries, a constant row; the shared reduction slots are reused row after row. Also launched directly
    with more groups than rows: the extra groups do nothing."""
    from iron.std import softmax as S

    from ..frontend.test_kernels import as_dtype, f64

    x = rng.standard_normal((10, 1024)) * 4
    x[3, ::3] = -np.inf
    x[5] = 2.5
    x = as_dtype(x, dtype)
    z = f64(x)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    tol = {"f32": (1e-5, 1e-7), "bf16": (8e-3, 1e-5)}[dtype]
    out = as_dtype(np.full(x.shape, np.nan), dtype)
    plan = S.launch_softmax(x, out, backend, ahead=groups)
    assert plan.chunks == 1
    assert np.allclose(f64(out), want, rtol=tol[0], atol=tol[1])
    out = as_dtype(np.full(x.shape, np.nan), dtype)
    S.softmax_rows_ahead[12 * plan.block, plan.block](x, out, 10, 1024, plan.block, plan.vec, plan.per, fast_math(x),
                                                       backend=backend)
    assert np.allclose(f64(out), want, rtol=tol[0], atol=tol[1])


def test_gpus_time_the_persistent_softmax(monkeypatch):
    """Where rows autotune and the device reports its multiprocessors, AHEAD_PER_SM x multiprocessors groups are
    timed beside one group a row, at each elements-per-thread value whose plan keeps a row in registers."""
    from iron.std import softmax as S

    class Fake:
        def info(self):
            return {"sms": 4}

    monkeypatch.setattr(S, "_PROCESSORS", {})

    seen = []
    monkeypatch.setattr(S, "tune", lambda name, configs, run, **kw: seen.append(list(configs)) or configs[0])
    monkeypatch.setattr(S, "_launch_plan", lambda *a: None)
    monkeypatch.setattr(S, "table_for", lambda table, be: table.get("cuda") if be == "cuda" else None)
    monkeypatch.setattr(S, "get_backend", lambda name: Fake())
    x = np.zeros((1000, 4096), np.float32)
    S.launch_softmax(x, x, "cuda")
    S.launch_softmax(x, x, "cpu")
    epts = S.ROW_TUNING["cuda"]
    assert seen[0] == ([{"EPT": e, "AHEAD": 0} for e in epts]
                       + [{"EPT": e, "AHEAD": 4 * k} for e in epts for k in S.AHEAD_PER_SM])
    assert seen[1] == [{"EPT": S.ELEMS_PER_THREAD, "AHEAD": 0}]
    wide = np.zeros((1000, 8192), np.float32)  # 1024 threads at EPT 8: 4 an SM would not fit (2048 threads), 2 do
    S.launch_softmax(wide, wide, "cuda")
    fits = [{"EPT": e, "AHEAD": 4 * k} for e in epts for k in S.AHEAD_PER_SM
            if k * S.plan_rows(1000, 8192, 4, e).block <= S.MAX_RESIDENT]
    assert seen[2] == [{"EPT": e, "AHEAD": 0} for e in epts] + fits
    assert {"EPT": 8, "AHEAD": 8} in fits and {"EPT": 8, "AHEAD": 16} not in fits
