"""@iron.kernel(launch_bounds=(T, G)): a group of more than T threads is a LaunchError on every backend; the
sources carry the bound (CUDA ``__launch_bounds__(T, G)``, HIP ``__launch_bounds__(T)``, Metal
``max_total_threads_per_threadgroup``), and the compilers accept it."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda, emit_hip, emit_msl
from iron.codegen.nvrtc import PTXAS_VERBOSE, compile_cuda_log, default_options
from iron.codegen.nvrtc import unavailable_reason as nvrtc_unavailable
from iron.lang import Tensor, f32, program_id
from iron.runtime import get_backend


@iron.kernel(launch_bounds=(64, 2))
def scaled(x: Tensor[f32], y: Tensor[f32], n: int):
    i = program_id(0)
    if i < n:
        y[i] = 3.0 * x[i] + 1.0


def test_groups_within_the_bound_run_and_larger_ones_are_refused(backend, rng):
    n = 300
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    group = min(64, get_backend(backend).simd_width() * 2)
    scaled[(-(-n // group) * group,), (group,)](x, y, n, backend=backend)
    np.testing.assert_allclose(y, 3.0 * x.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)
    y[:] = np.nan
    with pytest.raises(iron.LaunchError, match="launch_bounds of 64 threads per group") as e:
        scaled[(384,), (128,)](x, y, n, backend=backend)
    assert "test_launch_bounds.py" in str(e.value).splitlines()[0]
    assert np.isnan(y).all()  # refused before anything ran


@pytest.mark.parametrize("bad", [0, 2048, (64, 0), (1, 2, 3), "64", 64.0])
def test_malformed_bounds_are_refused(bad):
    with pytest.raises(iron.CompileError, match="launch_bounds must be T or"):
        iron.kernel(launch_bounds=bad)


def test_sources_carry_the_bound():
    kernel = scaled.variant(None).kernel
    assert 'extern "C" __global__ void __launch_bounds__(64, 2) scaled(' in emit_cuda(kernel).source
    assert "__global__ void __launch_bounds__(64) scaled(" in emit_hip(kernel).source
    assert "[[max_total_threads_per_threadgroup(64)]] kernel void" in emit_msl(kernel).source
    plain = iron.kernel(scaled.fn)  # the same function without a bound
    assert "__launch_bounds__" not in emit_cuda(plain.variant(None).kernel).source


@pytest.mark.parametrize("target", ["gfx90a", "gfx1030"])
def test_hiprtc_accepts_the_bound(target):
    from iron.codegen.hiprtc import compile_hip, unavailable_reason

    if unavailable_reason():
        pytest.skip(f"hipRTC unavailable: {unavailable_reason()}")
    assert compile_hip(emit_hip(scaled.variant(None).kernel, wavefront=64 if target == "gfx90a" else 32), target)


@pytest.mark.skipif(nvrtc_unavailable() is not None, reason=f"NVRTC unavailable: {nvrtc_unavailable()}")
def test_nvrtc_accepts_the_bound():
    _, log = compile_cuda_log(emit_cuda(scaled.variant(None).kernel), "sm_90", [*default_options(), PTXAS_VERBOSE])
    assert "error" not in log.lower()
