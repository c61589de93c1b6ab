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
    x = np.zeros((FEW_ROWS, 8192), np.float32)  # enough rows to stay on the register path at every EPT
    L.launch_layer_norm(x, x[0], None, x, L.EPS, "cuda")
    L.launch_layer_norm(x, x[0], None, x, L.EPS, "cpu")
    long = np.zeros((2, 128256), np.float32)  # the split path at every EPT: no LATE to time
    L.launch_layer_norm(long, long[0], None, long, L.EPS, "cuda")
    epts = autotune.table_for(L.ROW_TUNING, "cuda")
    assert seen[0] == [{"EPT": e, "LATE": lt} for e in epts for lt in (False, True)]
    assert seen[1] == [{"EPT": L.ELEMS_PER_THREAD, "LATE": False}]
    assert seen[2] == [{"EPT": e, "LATE": False} for e in epts]
