"""The registration decorators and the oracle comparison."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.harness.checking import compare
from iron.harness.registry import REGISTRY, InputGen, bench, load_all, matches, test_kernel, unregister


@iron.kernel
def _double(a: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    out[i] = a[i] * 2.0


def _setup(gen: InputGen):
    return {"a": gen.random(), "out": gen.poisoned()}


def _launch(d, backend):
    _double[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend)


@pytest.mark.parametrize("named_on", ["bench", "test_kernel"])
def test_stacked_decorators_fill_one_entry(named_on):
    name = "user/double"
    try:
        fn = test_kernel(name if named_on == "test_kernel" else None, oracle=lambda d: 2.0 * d["a"].astype(float),
                         domain="positive", shapes=[(100,)], tolerance={"f16": (0.0, 1e-3)})(_double)
        fn = bench(name if named_on == "bench" else None, setup=_setup, launch=_launch,
                   references={"numpy": lambda d: 2 * d["a"], "mlx": "mx.multiply"},
                   bytes_moved=lambda s, i: 2 * s[0] * i, flops=lambda s: s[0])(fn)
        assert fn is _double
        entry = REGISTRY[name]
        assert entry.benched and entry.tested and entry.domain == "positive"
        assert entry.tolerance["f16"] == (0.0, 1e-3) and entry.tolerance["f32"] == (1e-6, 1e-5)
        assert entry.references["mlx"] == "mx.multiply" and entry.count_bytes((100,), 4) == 800
        arrays = entry.make((100,), np.float32, np.random.default_rng(0))
        assert (arrays["a"] > 0).all() and np.isnan(arrays["out"]).all()
        entry.launch(arrays, "cpu")
        assert compare(arrays["out"], entry.oracle(arrays), entry.tolerance["f32"]).ok
    finally:
        unregister(name)
    assert not hasattr(_double, "__iron_registration__")


def test_registration_errors():
    with pytest.raises(ValueError, match="input domain"):
        test_kernel("user/x", domain="complex")
    load_all()
    with pytest.raises(ValueError, match="already registered"):
        bench("std/unary/exp")(lambda: None)


@pytest.mark.parametrize("domain,lo,hi", [("signed", -np.inf, np.inf), ("positive", 0.0, np.inf), ("unit", 0.0, 1.0)])
def test_input_domains(domain, lo, hi, rng):
    x = InputGen((1000,), np.dtype(np.float32), rng, domain).random()
    assert x.dtype == np.float32 and (x >= lo).all() and (x <= hi).all()


def test_filter_matches_substring_and_glob():
    assert matches("std/unary/exp", "unary") and matches("std/unary/exp", "std/*/exp")
    assert not matches("std/unary/exp", "std/*/add") and matches("anything", None)


def test_compare_reports_worst_index_and_nan():
    want = np.zeros((4, 5))
    got = want.copy()
    got[2, 3] = 0.5
    got[1, 1] = 0.1
    res = compare(got, want, (1e-3, 0.0))
    assert not res.ok and res.worst == (2, 3) and res.max_abs == 0.5 and "worst at [2, 3]" in res.describe()
    got[:] = 0.0
    got[3, 0] = np.nan
    res = compare(got, want, (1e-3, 0.0))
    assert not res.ok and res.worst == (3, 0) and res.nonfinite == 1
    assert compare(want, want, (0.0, 0.0)).ok


def test_reloading_a_std_module_replaces_its_entries():
    import importlib

    import iron.std.unary

    load_all()
    module = importlib.reload(iron.std.unary)
    assert REGISTRY["std/unary/exp"].kernel is module.iron_exp
