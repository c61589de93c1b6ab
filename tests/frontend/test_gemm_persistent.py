"""gemm_wgp (std/gemm_persistent.py): the persistent warpgroup GEMM against float64 NumPy on every backend, with
fewer groups than tiles (each group walks several, its copy pipeline running across tile boundaries), ragged edges
beside unchecked interior tiles, both B layouts, a batch; and the sm_90a source compiles without serialised wgmmas."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import PTXAS_VERBOSE, compile_cuda_log, default_options, unavailable_reason
from iron.runtime import get_backend
from iron.std import gemm as G
from iron.std.gemm_persistent import gemm_wgp

from .test_kernels import as_dtype, assert_close, f64


def _run(backend, m, n, k, trans, stages, groups, rng, dtype="bf16", batch=1, deep=0):
    a = as_dtype(rng.standard_normal((batch, m, k)), dtype)
    b = as_dtype(rng.standard_normal((batch, n, k) if trans else (batch, k, n)), dtype)
    c = np.full((batch, m, n), np.nan, a.dtype)
    g = 4 * get_backend(backend).simd_width()
    strides = (m * k, n * k, m * n) if batch > 1 else (0, 0, 0)
    try:  # two stages of 64 x 64 tiles: 32 KiB, Metal's limit
        gemm_wgp[(groups * g, 1, batch), (g, 1, 1)](a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k, *strides,
                                                     64, 64, stages, deep, trans, backend=backend)
    except (iron.LaunchError, iron.CompileError) as e:  # refused before running, located (tested elsewhere)
        if "bytes of shared memory" not in str(e):
            raise
        pytest.skip(f"{backend}: {e.message}")
    bb = np.swapaxes(f64(b), -1, -2) if trans else f64(b)
    assert_close(c, f64(a) @ bb, dtype, n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(bb), what="gemm_wgp")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape, trans, stages, groups, deep", [
    ((64, 64, 64), False, 2, 1, 0),
    ((200, 136, 72), False, 2, 3, 0),  # 12 tiles over 3 groups, ragged M, N and K
    ((136, 128, 128), True, 3, 2, 0),  # interior tiles copied unchecked beside edge tiles
    ((128, 192, 192), False, 3, 4, 0),  # 6 tiles over 4 groups: some walk two, some one
    ((128, 192, 192), True, 3, 4, 1),  # DEEP: the pipeline two slabs ahead across tile boundaries
    ((70, 64, 300), True, 2, 5, 0),  # more groups than tiles: the spare ones do nothing
])
def test_gemm_wgp(backend, dtype, shape, trans, stages, groups, deep, rng):
    _run(backend, *shape, trans, stages, groups, rng, dtype, deep=deep)


def test_batched_gemm_wgp(rng):
    """Grid axis 2 is the batch, as for gemm_wg."""
    _run("cpu", 72, 128, 128, False, 3, 2, rng, batch=3)


def test_grouped_order_over_many_tile_rows(rng):
    """More tile rows than GROUP_M, walked by 3 groups: every element of C written once (poisoned first)."""
    _run("cpu", (G.GROUP_M + 1) * 64 + 5, 136, 64, False, 2, 3, rng)


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
@pytest.mark.parametrize("cfg", [(128, 256, 4, 0, False), (128, 128, 4, 1, True)])
def test_nvrtc_compiles_wgmma_for_sm_90a_without_serialising(cfg):
    src = emit_cuda(gemm_wgp.variant(iron.bf16, cfg).kernel, arch="sm_90")
    assert src.arch == "sm_90a" and "wgmma.mma_async" in src.source
    _, log = compile_cuda_log(src, "sm_90a", [*default_options(), PTXAS_VERBOSE])
    assert "C751" not in log and "serialized" not in log, log
