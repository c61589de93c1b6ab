"""Every pass, alone and in the default pipeline, leaves a random kernel's outputs bit for bit the same."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from iron.interp.executor import run_kernel
from iron.ir import Kernel, print_kernel, verify
from iron.ir.rewrite import clone_kernel
from iron.passes import CSE, DCE, Fold, PassManager, Simplify, Unroll, default_pipeline

from .passes_kernel_gen import N_THREADS, SITES, kernels

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    xi = rng.integers(-(2**31), 2**31, N_THREADS, dtype=np.int64).astype(np.int32)
    xi[:6] = [0, 1, -1, 7, -(2**31), 2**31 - 1]
    xu = rng.integers(0, 2**32, N_THREADS, dtype=np.uint64).astype(np.uint32)
    xu[:4] = [0, 1, 2**31, 2**32 - 1]
    xf = (rng.standard_normal(N_THREADS) * 10).astype(np.float32)
    xf[:10] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, -3.5, -0.0, 0.5, -0.0]
    return {"xi": xi, "xu": xu, "xf": xf}


INPUTS = _inputs()


def _run(kernel: Kernel) -> dict[str, np.ndarray]:
    args: dict[str, object] = {k: v.copy() for k, v in INPUTS.items()}
    size = N_THREADS * SITES
    args["oi"] = np.full(size, -12345, np.int32)  # outputs start as a sentinel (NaN for floats) every run
    args["ou"] = np.full(size, 0xDEADBEEF, np.uint32)
    args["of"] = np.full(size, np.nan, np.float32)
    args["n"] = np.int32(N_THREADS)
    run_kernel(kernel, args, (N_THREADS,), (8,), 4)
    return {name: args[name] for name in ("oi", "ou", "of")}


def _assert_same(expected: dict[str, np.ndarray], got: dict[str, np.ndarray], what: str) -> None:
    for name, want in expected.items():
        have = got[name]
        if want.dtype.kind == "f":  # bit-identical, except that any NaN equals any NaN
            nan = np.isnan(want)
            same = np.array_equal(nan, np.isnan(have)) and np.array_equal(
                want.view(np.uint32)[~nan], have.view(np.uint32)[~nan]
            )
        else:
            same = np.array_equal(want, have)
        assert same, f"{what} changed output {name}:\n  before {want}\n  after  {have}"


def _check(kernel: Kernel, passes: list) -> None:
    verify(kernel)
    expected = _run(kernel)
    optimised = clone_kernel(kernel)
    PassManager(passes).run(optimised)
    _assert_same(expected, _run(optimised), f"{[p.name for p in passes]} on\n{print_kernel(kernel)}")


@pytest.mark.parametrize("make_pass", [Unroll, Fold, Simplify, CSE, DCE], ids=lambda p: p.name)
@SETTINGS
@given(kernel=kernels())
def test_each_pass_preserves_outputs(make_pass, kernel):
    _check(kernel, [make_pass()])


@SETTINGS
@given(kernel=kernels(budget=40))
def test_default_pipeline_preserves_outputs(kernel):
    _check(kernel, default_pipeline())


@settings(max_examples=50, deadline=None)
@given(kernel=kernels())
def test_pipeline_is_idempotent_and_deterministic(kernel):
    a, b = clone_kernel(kernel), clone_kernel(kernel)
    PassManager(default_pipeline()).run(a)
    PassManager(default_pipeline()).run(b)
    text = print_kernel(a)
    assert print_kernel(b) == text
    PassManager(default_pipeline()).run(a)
    assert print_kernel(a) == text
