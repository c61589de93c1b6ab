"""std/gemv_warp (the SIMD-group decode GEMV) against float64 NumPy on every backend and dtype, at the shapes that take
each of its paths: a row in one exact chunk (x kept in registers), a short row (one partial chunk), several chunks with
a partial last one, rows not a multiple of R, rows not a multiple of 16 bytes (scalar accesses), the GLU, several
blocks per SIMD group; outputs poisoned with NaN, fresh random inputs per case. Its wiring into launch_gemv's
autotuning (CUDA only), and its registers on sm_90 through NVRTC (no spills, no stack) at the Llama-3.2-1B decode
shapes' constexprs."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.nvrtc import resource_report, unavailable_reason
from iron.ir import types as t
from iron.runtime import get_backend
from iron.std import gemv as G
from iron.std.gemv_warp import MAX_K, gemv_warp, launch_gemv_warp, warp_constexprs

U_IN = {"f32": 2.0**-21, "f16": 2.0**-10, "bf16": 2.0**-7}  # one unit of a GLU-gated value
U_OUT = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}  # y's rounding


def _inputs(rng, shape, dtype, glu):
    rows, ncols = shape
    np_dtype = t.SCALAR_TYPES[dtype].np_dtype
    a = rng.standard_normal(shape).astype(np_dtype)
    x = rng.standard_normal(2 * ncols if glu else ncols).astype(np_dtype)
    return a, x, np.full(rows, np.nan, np_dtype)


def _check(a, x, y, dtype, glu):
    """|y - a @ v| within the f32 sum's error over sum |a||v| (ncols terms), y's rounding, and for the GLU one unit of
    the dtype per gated value (the kernel's f32 silu may round it the other way)."""
    ncols = a.shape[1]
    xv = x.astype(np.float64)
    if glu:
        g, u = xv[:ncols], xv[ncols:]
        xv = (g / (1.0 + np.exp(-g)) * u).astype(a.dtype).astype(np.float64)  # rounded once, as swiglu stores it
    want = a.astype(np.float64) @ xv
    size = np.abs(a.astype(np.float64)) @ np.abs(xv)
    bound = size * ((U_IN[dtype] if glu else 0.0) + ncols * 2.0**-24) + U_OUT[dtype] * np.abs(want)
    got = y.astype(np.float64)
    assert not np.isnan(got).any(), "a row was never written"
    bad = np.abs(got - want) > bound
    assert not bad.any(), f"rows {np.flatnonzero(bad)[:8]}: got {got[bad][:4]}, want {want[bad][:4]}"


#: (shape, glu, rows, k, bpw, warps): every path of the kernel (for a 32-wide SIMD group; at width 8 the chunks are
#: 4x narrower, so the same shapes take the multi-chunk path more often)
CASES = [
    ((37, 256), False, 2, 8, 1, 4),  # f16/bf16: 32 vectors a row, one exact chunk at width 32 (x in registers)
    ((37, 300), False, 4, 8, 1, 2),  # 300 % 8: scalar accesses for f16/bf16; a short row; 37 rows, R = 4
    ((67, 1000), False, 2, 2, 1, 4),  # several chunks, a partial last one; 67 rows: the last block half empty
    ((45, 512), True, 4, 4, 3, 4),  # GLU, several chunks; three blocks of rows per SIMD group, x gated once each
    ((19, 2048), True, 1, 8, 4, 1),  # GLU, a row of one exact chunk (f16/bf16, width 32): gated once per SIMD group
    ((5, 13), True, 8, 16, 1, 4),  # GLU, 13 columns (scalar), 5 rows below one block of 8
    ((130, 72), False, 3, 1, 2, 2),  # R = 3 (not a power of two), one vector a lane: many chunks
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][0]}x{c[0][1]}{'-glu' if c[1] else ''}-R{c[2]}K{c[3]}")
def test_matches_float64(backend, dtype, rng, case):
    shape, glu, rows, k, bpw, warps = case
    a, x, y = _inputs(rng, shape, dtype, glu)
    block, vec, r, kk = launch_gemv_warp(a, x, y, backend, glu, warps, rows, k, bpw)
    width = get_backend(backend).simd_width()
    assert (block, r) == (warps * width, rows) and 1 <= kk <= k and shape[1] % vec == 0
    _check(a, x, y, dtype, glu)


@pytest.mark.parametrize("width", [8, 32, 64])
def test_every_simd_width(width, monkeypatch, rng):
    """The chunk is simd_size() * K vectors wide: the same shapes take other paths at widths 8 and 64."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    for shape, glu, rows, k, bpw, warps in CASES[:4]:
        a, x, y = _inputs(rng, shape, "f32", glu)
        launch_gemv_warp(a, x, y, "cpu", glu, warps, rows, k, bpw)
        _check(a, x, y, "f32", glu)


def test_sums_do_not_depend_on_the_configuration(rng):
    """A lane adds its vectors in column order whatever R, K, BPW and the group size: launch_gemv reports every
    configuration of the SIMD-group kernel alike (UNROLL 0), so equal reports must mean equal bits."""
    a, x, y = _inputs(rng, (50, 1000), "bf16", True)
    ys = []
    for rows, k, bpw, warps in [(1, 8, 1, 4), (2, 2, 3, 1), (8, 4, 1, 2)]:
        y = np.full(50, np.nan, a.dtype)
        launch_gemv_warp(a, x, y, "cpu", True, warps, rows, k, bpw)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_array_equal(ys[0], ys[2])


def test_refuses_a_bad_configuration():
    a = np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError):
        launch_gemv_warp(a, np.zeros(8, np.float32), np.zeros(4, np.float32), "cpu", rows=9)
    with pytest.raises(ValueError):
        launch_gemv_warp(a, np.zeros(8, np.float32), np.zeros(4, np.float32), "cpu", k=MAX_K + 1)


# --- launch_gemv's autotuning -------------------------------------------------------------------------------------

#: the Llama-3.2-1B decode GEMVs: (rows, columns, glu)
DECODE = [(3072, 2048, False), (2048, 2048, False), (16384, 2048, False), (2048, 8192, True), (128256, 2048, False)]


def test_tuned_on_cuda_only():
    """CUDA times the SIMD-group kernel beside the group kernel's configurations (K capped at a row's vectors per
    lane); every other backend keeps plan_gemv's single choice, so the new kernel is never picked there untimed."""
    for nrows, ncols, _ in DECODE:
        cfgs = G.gemv_configs("cuda", nrows, ncols, 2)
        block, _, rows, unroll = G.plan_gemv(nrows, ncols, 2)
        assert cfgs[0] == {"BLOCK": block, "ROWS": rows, "UNROLL": unroll}
        warp = [c for c in cfgs if "WARPS" in c]
        assert len(warp) == len({tuple(c.values()) for c in warp}) >= 5
        assert max(c["K"] for c in warp) == 8  # 2048 columns: 256 16-byte vectors, 8 a lane of 32
    for name in ("cpu", "vulkan", "msl-cpu", "hip", "metal"):
        assert all("WARPS" not in c for c in G.gemv_configs(name, 3072, 2048, 2))


def test_launch_gemv_runs_and_reports_the_warp_kernel(backend, rng, monkeypatch):
    """Where autotuning chose the SIMD-group kernel, launch_gemv runs it and reports (group, VEC, R, 0)."""
    width = get_backend(backend).simd_width()
    cfg = {"WARPS": 2, "R": 4, "K": 2, "BPW": 2}
    monkeypatch.setattr(G, "gemv_configs", lambda *args: (cfg,))
    for glu in (False, True):
        a, x, y = _inputs(rng, (37, 300), "f32", glu)
        assert G.launch_gemv(a, x, y, backend, glu=glu) == (2 * width, 4, 4, 0)
        _check(a, x, y, "f32", glu)


# --- sm_90 resources ----------------------------------------------------------------------------------------------

needs_nvrtc = pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")


@needs_nvrtc
@pytest.mark.parametrize("shape", DECODE, ids=lambda s: f"{s[0]}x{s[1]}{'-glu' if s[2] else ''}")
def test_cuda_decode_configurations_keep_their_registers(shape):
    """Every configuration autotuning may pick at the decode shapes compiles for sm_90 with its A vectors, x and
    sums in registers: no stack frame, no spills, no local memory (bf16)."""
    nrows, ncols, glu = shape
    for cfg in G.gemv_configs("cuda", nrows, ncols, 2):
        if "WARPS" not in cfg:
            continue
        vec, r, k = warp_constexprs(ncols, 2, 32, cfg["R"], cfg["K"])
        src = gemv_warp.source("cuda", dtype=iron.bf16, VEC=vec, R=r, K=k, GLU=int(glu))
        res = resource_report(src, "sm_90")["gemv_warp"]
        assert 0 < res["registers"] <= 255 and res["barriers"] == 0 and res["shared_bytes"] == 0, (cfg, res)
        assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, (cfg, res)
        assert not res["local_memory"], (cfg, res)
