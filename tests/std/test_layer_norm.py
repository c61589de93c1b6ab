"""std/layer_norm without a bias and on the strided path (rows longer than one group holds), every backend, against
float64 NumPy; outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

from iron.std import layer_norm as L
from iron.std.softmax import FEW_ROWS

from ..frontend.test_kernels import f64


@pytest.mark.parametrize("shape", [(7, 256), (2, 20000)], ids=["registers", "strided"])
def test_without_bias(backend, shape, rng):
    x = (rng.standard_normal(shape) * 2 + 5).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32)
    out = np.full(shape, np.nan, np.float32)
    L.launch_layer_norm(x, w, None, out, L.EPS, backend)
    mu = f64(x).mean(axis=1, keepdims=True)
    want = (f64(x) - mu) / np.sqrt(((f64(x) - mu) ** 2).mean(axis=1, keepdims=True) + L.EPS) * f64(w)
    assert np.allclose(out, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("late", [False, True], ids=["early", "late"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
def test_weight_and_bias_loaded_before_or_after_the_statistics(backend, late, bias, rng):
    """LATE (what GPUs may tune to: the affine rows read after both reductions) gives what the early loads give."""
    x = (rng.standard_normal((9, 1000)) * 3 - 4).astype(np.float32)
    w, b = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    out = np.full(x.shape, np.nan, np.float32)
    plan = L.launch_layer_norm(x, w, b if bias else None, out, L.EPS, backend, late=late)
    assert plan.chunks == 1
    mu = f64(x).mean(axis=1, keepdims=True)
    want = (f64(x) - mu) / np.sqrt(((f64(x) - mu) ** 2).mean(axis=1, keepdims=True) + L.EPS) * f64(w)
    assert np.allclose(out, want + (f64(b) if bias else 0), rtol=2e-5, atol=2e-5)


def test_gpus_time_the_late_loads_beside_the_early_ones(monkeypatch):
    """Where the row kernels autotune (CUDA, a Vulkan GPU), each elements-per-thread figure is timed with the
    affine rows loaded early and late; elsewhere one configuration runs."""
    from iron.frontend import autotune

    seen = []
    monkeypatch.setattr(L, "tune", lambda name, configs, run, **kw: seen.append(list(configs)) or configs[0])
    monkeypatch.setattr(L, "_launch_plan", lambda *a: None)
    monkeypatch.setattr(L, "table_for", lambda table, be: table.get("cuda") if be == "cuda" else None)
    monkeypatch.setattr(L, "processors", lambda be: 132)
    x = np.zeros((FEW_ROWS, 8192), np.float32)  # enough rows to stay on the register path at every EPT
    L.launch_layer_norm(x, x[0], None, x, L.EPS, "cuda")
    L.launch_layer_norm(x, x[0], None, x, L.EPS, "cpu")
    long = np.zeros((2, 128256), np.float32)  # the split path at every EPT: no LATE to time
    L.launch_layer_norm(long, long[0], None, long, L.EPS, "cuda")
    epts = autotune.table_for(L.ROW_TUNING, "cuda")
    lates = (L.LATE, not L.LATE)  # the default first: what IRON_AUTOTUNE=0 runs
    assert seen[0] == [{"EPT": e, "LATE": lt, "AHEAD": 0} for e in epts for lt in lates]  # < 2 rows a group
    assert seen[1] == [{"EPT": L.ELEMS_PER_THREAD, "LATE": L.LATE, "AHEAD": 0}]
    assert seen[2] == [{"EPT": e, "LATE": L.LATE, "AHEAD": 0} for e in epts]
    many = np.zeros((8 * 132, 8192), np.float32)  # two rows a group at 4 groups an SM: both persistent grids timed
    L.launch_layer_norm(many, many[0], None, many, L.EPS, "cuda")
    ahead = [{"EPT": e, "LATE": L.LATE, "AHEAD": k * 132} for e in epts for k in L.AHEAD_PER_SM
             if k * L.plan_rows(8 * 132, 8192, 4, e).block <= L.MAX_RESIDENT]  # 4 groups of 1024 do not fit an SM
    assert seen[3] == seen[0] + ahead and {"EPT": 8, "LATE": L.LATE, "AHEAD": 4 * 132} not in ahead
    L.launch_layer_norm(many, many[0], None, many, L.EPS, "cuda", late=True)  # a forced LATE times no other kernel
    assert seen[4] == [{"EPT": e, "LATE": True, "AHEAD": 0} for e in epts]
    L.launch_layer_norm(many, many[0], None, many, L.EPS, "cuda", ahead=264)  # a forced grid: LATE not timed twice
    assert seen[5] == [{"EPT": e, "LATE": L.LATE, "AHEAD": 264} for e in epts]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("groups", [1, 3, 7], ids=["one_group", "three", "seven"])
def test_layer_norm_rows_ahead(backend, groups, bias, dtype, rng, monkeypatch):
    """The persistent layer_norm (rows g, g + G, ...; the next row's loads issued before this row's reductions, the
    weight and bias read a vector at a time) against float64 NumPy: 10 rows of 1000 (the last vectors masked) over 1,
    3 (an uneven share) and 7 groups, a constant row (variance 0) and a row with a large mean; the shared reduction
    slots are reused row after row. Also launched directly with more groups than rows: the extra groups do nothing."""
    from ..frontend.test_kernels import as_dtype

    x = rng.standard_normal((10, 1000)) * 2 - 1  # 125 vectors of 8: the group's last ones masked
    x[4] = 3.25
    x[6] += 30.0
    x, w, b = as_dtype(x, dtype), as_dtype(rng.standard_normal(1000), dtype), as_dtype(rng.standard_normal(1000), dtype)
    z = f64(x)
    mu = z.mean(axis=1, keepdims=True)
    want = (z - mu) / np.sqrt(((z - mu) ** 2).mean(axis=1, keepdims=True) + L.EPS) * f64(w) + (f64(b) if bias else 0)
    tol = {"f32": (2e-5, 2e-5), "bf16": (3e-2, 3e-2)}[dtype]
    out = as_dtype(np.full(x.shape, np.nan), dtype)
    monkeypatch.setattr(L, "layer_norm_rows", None)  # the helper must run the persistent kernel, not this one
    plan = L.launch_layer_norm(x, w, b if bias else None, out, L.EPS, backend, ahead=groups)
    assert plan.chunks == 1
    assert np.allclose(f64(out), want, rtol=tol[0], atol=tol[1])
    out = as_dtype(np.full(x.shape, np.nan), dtype)
    L.layer_norm_rows_ahead[12 * plan.block, plan.block](x, w, b if bias else w, out, 10, 1000, L.EPS, plan.block,
                                                         plan.vec, plan.per, bias, backend=backend)
    assert np.allclose(f64(out), want, rtol=tol[0], atol=tol[1])
