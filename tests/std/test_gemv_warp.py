"""std/gemv_warp (the SIMD-group decode GEMV) against float64 NumPy on every backend and dtype, at the shapes that take
each of its paths: a row in one exact chunk (x kept in registers), a short row (one partial chunk), several chunks with
a partial last one, rows not a multiple of R, rows not a multiple of 16 bytes (scalar accesses), the GLU, several
blocks per SIMD group; outputs poisoned with NaN, fresh random inputs per case. The glu_out mode (gate and up rows in
one SIMD group, silu(g) * u stored) against float64 and bit for bit against the unfused pair (the plain GEMV, then
std/elementwise swiglu_rows). Its wiring into launch_gemv's autotuning (CUDA only), and its registers on sm_90
through NVRTC (no spills, no stack) at the Llama-3.2-1B decode shapes' constexprs."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.nvrtc import resource_report, unavailable_reason
from iron.frontend.autotune import table_for
from iron.ir import types as t
from iron.runtime import get_backend
from iron.runtime import unavailable_reason as backend_unavailable
from iron.std import gemv as G
from iron.std.elementwise import launch_swiglu_rows
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


# --- glu_out: y = silu(a[:half] @ x) * (a[half:] @ x) -------------------------------------------------------------

#: (outputs, ncols, rows, k, bpw, warps): outputs not a multiple of R / 2, rows not a multiple of 16 bytes, several
#: chunks with a partial last one, one exact chunk (f16/bf16 at width 32), fewer outputs than one block, R = 6
GLU_OUT_CASES = [
    (37, 300, 4, 8, 1, 2),
    (45, 1000, 2, 2, 3, 4),
    (19, 2048, 4, 8, 1, 1),
    (3, 13, 8, 16, 1, 4),
    (64, 256, 6, 4, 2, 2),
]
ULP = {"f32": 2.0**-23, "f16": 2.0**-10, "bf16": 2.0**-7}  # one unit of the dtype, relative
TINY = {"f32": 1e-37, "f16": 2.0**-24, "bf16": 1e-37}  # half the dtype's smallest step (f16: subnormal outputs)


def _glu_out_inputs(rng, half, ncols, dtype):
    np_dtype = t.SCALAR_TYPES[dtype].np_dtype
    a = rng.standard_normal((2 * half, ncols)).astype(np_dtype)
    x = rng.standard_normal(ncols).astype(np_dtype)
    return a, x, np.full(half, np.nan, np_dtype)


def _check_glu_out(a, x, y, dtype):
    """y = silu(g) * u with g, u = the halves of a @ x in float64, each rounded to the dtype as the unfused GEMV
    stores them. The kernel's g and u differ by the f32 sum's error (ncols units of 2^-24 of sum |a||x|) plus one
    unit of the dtype where that error moves their rounding; that carries through silu (slope below 1.1) and the
    product, and the output's own rounding (f32 math, then T) adds up to one unit."""
    half, ncols = a.shape[0] // 2, a.shape[1]
    a64, x64 = a.astype(np.float64), x.astype(np.float64)
    exact = a64 @ x64
    size = np.abs(a64) @ np.abs(x64)
    rounded = exact.astype(a.dtype).astype(np.float64)
    g, u = rounded[:half], rounded[half:]
    silu = g / (1.0 + np.exp(-g))
    want = silu * u
    err = size * ncols * 2.0**-24 + ULP[dtype] * np.abs(exact)
    dg, du = err[:half], err[half:]
    bound = 1.1 * dg * (np.abs(u) + du) + np.abs(silu) * du + (ULP[dtype] + 2.0**-20) * np.abs(want) + TINY[dtype]
    got = y.astype(np.float64)
    assert not np.isnan(got).any(), f"outputs {np.flatnonzero(np.isnan(got))[:8]} were never written"
    bad = ~(np.abs(got - want) <= bound)
    assert not bad.any(), f"outputs {np.flatnonzero(bad)[:8]}: got {got[bad][:4]}, want {want[bad][:4]}"


@pytest.mark.parametrize("case", GLU_OUT_CASES, ids=lambda c: f"{c[0]}x2-{c[1]}-R{c[2]}K{c[3]}B{c[4]}")
def test_glu_out_matches_float64(backend, dtype, rng, case):
    half, ncols, rows, k, bpw, warps = case
    a, x, y = _glu_out_inputs(rng, half, ncols, dtype)
    block, vec, r, kk = launch_gemv_warp(a, x, y, backend, False, warps, rows, k, bpw, glu_out=True)
    assert (block, r) == (warps * get_backend(backend).simd_width(), rows) and 1 <= kk <= k and ncols % vec == 0
    _check_glu_out(a, x, y, dtype)


@pytest.mark.parametrize("case", GLU_OUT_CASES[:2], ids=lambda c: f"{c[0]}x2-{c[1]}")
def test_glu_out_is_the_unfused_pair_bit_for_bit(backend, dtype, rng, case):
    """The same sums (a lane's column order does not depend on R), the same roundings, the same silu: what the
    plain GEMV then std/elementwise swiglu_rows store (the model's path for several rows or a gate/up bias)."""
    half, ncols, rows, k, bpw, warps = case
    a, x, y = _glu_out_inputs(rng, half, ncols, dtype)
    launch_gemv_warp(a, x, y, backend, False, warps, rows, k, bpw, glu_out=True)
    gu = np.full(2 * half, np.nan, a.dtype)
    launch_gemv_warp(a, x, gu, backend, False, 4, 1, 8, 1)
    act = np.full((1, half), np.nan, a.dtype)
    launch_swiglu_rows(gu.reshape(1, -1), act, backend)
    np.testing.assert_array_equal(y, act.reshape(-1))


def test_glu_out_refuses_what_it_cannot_pair():
    a, x, y = np.zeros((8, 16), np.float32), np.zeros(16, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="even"):
        launch_gemv_warp(a, x, y, "cpu", rows=3, glu_out=True)  # R odd: a gate row without its up row
    with pytest.raises(ValueError, match="even"):
        launch_gemv_warp(a[:7], x, y, "cpu", rows=2, glu_out=True)
    with pytest.raises(ValueError):
        G.launch_gemv(a, np.zeros(32, np.float32), y, "cpu", glu=True, glu_out=True)
    with pytest.raises(ValueError, match="gemv_warp"):
        G.launch_config({"BLOCK": 64, "ROWS": 2, "UNROLL": 2}, a, x, y, "cpu", glu_out=True)


def test_launch_gemv_glu_out(backend, rng):
    """Untimed backends run GLU_OUT_DEFAULT (R = 2: one gate row and its up row per SIMD group); CUDA times the
    SIMD-group configurations with an even R alone (the group kernel has no glu_out)."""
    width = get_backend(backend).simd_width()
    a, x, y = _glu_out_inputs(rng, 37, 300, "bf16")
    ran = G.launch_gemv(a, x, y, backend, glu_out=True)
    if not _times(backend):
        assert ran[0] == G.GLU_OUT_DEFAULT[0] * width and ran[2:] == (2, 0)
    assert ran[3] == 0 and ran[2] % 2 == 0
    _check_glu_out(a, x, y, "bf16")
    for name in ("cuda", "cpu", "vulkan", "msl-cpu", "hip"):
        if backend_unavailable(name):  # the SIMD width needs the backend (compute-sanitizer's process had no Vulkan
            continue  # bindings: the backend object was made, its device was not)
        cfgs = G.gemv_configs(name, 16384, 2048, 2, True)
        if _times(name):
            assert len(cfgs) >= 5 and all("WARPS" in c and c["R"] % 2 == 0 for c in cfgs)
        else:
            w, r, k, bpw = G.GLU_OUT_DEFAULT
            assert [(c["WARPS"], c["R"], c["BPW"]) for c in cfgs] == [(w, r, bpw)]


def _times(backend: str) -> bool:
    """Whether launch_gemv times configurations on ``backend``: CUDA, and Vulkan where its device is a GPU (it
    borrows CUDA's tables); the rest run one configuration untimed."""
    return backend == "cuda" or table_for(G.GEMV_WARP_TUNING, backend) is not None


# --- launch_gemv's autotuning -------------------------------------------------------------------------------------

#: the Llama-3.2-1B decode GEMVs: (rows, columns, glu)
DECODE = [(3072, 2048, False), (2048, 2048, False), (16384, 2048, False), (2048, 8192, True), (128256, 2048, False)]


def test_tuned_on_cuda_only():
    """CUDA (and a Vulkan GPU, with CUDA's tables) times the SIMD-group kernel beside the group kernel's
    configurations (K capped at a row's vectors per lane); every other backend keeps plan_gemv's single choice, so the
    new kernel is never picked there untimed."""
    for nrows, ncols, _ in DECODE:
        cfgs = G.gemv_configs("cuda", nrows, ncols, 2)
        block, _, rows, unroll = G.plan_gemv(nrows, ncols, 2)
        assert cfgs[0] == {"BLOCK": block, "ROWS": rows, "UNROLL": unroll}
        warp = [c for c in cfgs if "WARPS" in c]
        assert len(warp) == len({tuple(c.values()) for c in warp}) >= 5
        assert max(c["K"] for c in warp) == 8  # 2048 columns: 256 16-byte vectors, 8 a lane of 32
    for name in ("cpu", "vulkan", "msl-cpu", "hip", "metal"):
        assert any("WARPS" in c for c in G.gemv_configs(name, 3072, 2048, 2)) == _times(name), name


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
        src = gemv_warp.source("cuda", dtype=iron.bf16, VEC=vec, R=r, K=k, GLU=int(glu), GLU_OUT=0)
        res = resource_report(src, "sm_90")["gemv_warp"]
        assert 0 < res["registers"] <= 255 and res["barriers"] == 0 and res["shared_bytes"] == 0, (cfg, res)
        assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, (cfg, res)
        assert not res["local_memory"], (cfg, res)


@needs_nvrtc
def test_cuda_glu_out_configurations_keep_their_registers():
    """The same at the decode step's gate/up shape (16384 x 2048, bf16) with glu_out, every configuration it times."""
    for cfg in G.gemv_configs("cuda", 16384, 2048, 2, True):
        vec, r, k = warp_constexprs(2048, 2, 32, cfg["R"], cfg["K"])
        src = gemv_warp.source("cuda", dtype=iron.bf16, VEC=vec, R=r, K=k, GLU=0, GLU_OUT=1)
        res = resource_report(src, "sm_90")["gemv_warp"]
        assert 0 < res["registers"] <= 255 and res["barriers"] == 0 and res["shared_bytes"] == 0, (cfg, res)
        assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, (cfg, res)
        assert not res["local_memory"], (cfg, res)
