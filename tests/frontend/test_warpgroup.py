"""warpgroup_mma / warpgroup_wait (issue 14): the product on every backend against float64 NumPy (wgmma on an H200,
fragments elsewhere), the std GEMM built on it (gemm_wg) with ragged edges, the races the interpreter reports, the
128-byte swizzled layout the sm_90 path stores its tiles in, and the CUDA it emits for sm_90a."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import PTXAS_VERBOSE, compile_cuda_log, default_options, unavailable_reason
from iron.codegen.warpgroup import Layout, _phys, phys_index, plan_wgmma
from iron.interp.executor import run_kernel
from iron.ir import types as t
from iron.ir.builder import Builder
from iron.ir.core import Block, Kernel, Param, Value
from iron.runtime import get_backend
from iron.std import gemm as G

from . import warpgroup_kernels as W
from .sources import HEADER, module_from_source
from .test_kernels import as_dtype, assert_close, f64


def _slab(rng, nb, trans):
    a = as_dtype(rng.standard_normal((64, 64)), "bf16")
    b = as_dtype(rng.standard_normal((64, nb)), "bf16")
    b_mem = np.ascontiguousarray(b.T if trans else b).reshape(-1)
    return a, b, b_mem


@pytest.mark.parametrize("nb, trans", [(64, False), (64, True), (32, True), (48, True)])
def test_one_slab(backend, nb, trans, rng):
    _check_slab(backend, nb, trans, rng)


@pytest.mark.parametrize("nb, trans", [(128, False), (256, True), (192, False)])
def test_wide_slabs(nb, trans, rng):
    """N up to 256 (wgmma's widest), on the interpreter: lavapipe and Metal give a group 32 KiB of shared memory."""
    _check_slab("cpu", nb, trans, rng)


def _check_slab(backend, nb, trans, rng):
    a, b, b_mem = _slab(rng, nb, trans)
    c = np.full(64 * nb, np.nan, np.float32)
    g = 4 * get_backend(backend).simd_width()
    W.one_slab[(g,), (g,)](a.reshape(-1), b_mem, c, nb, trans, True, backend=backend)
    scale = np.abs(f64(a)) @ np.abs(f64(b))
    assert_close(c.reshape(64, nb), f64(a) @ f64(b), "f32", n_ops=65, scale=scale, what="warpgroup_mma")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("shape, trans, stages, deep", [
    ((64, 64, 64), False, 2, 0), ((80, 96, 136), False, 2, 0), ((72, 64, 200), True, 2, 0),
    ((80, 70, 300), False, 3, 0), ((80, 70, 300), False, 3, 1),
    # groups wholly inside (unchecked copies) beside edge groups
    ((136, 128, 128), True, 3, 0), ((136, 128, 128), False, 3, 1), ((128, 128, 192), False, 2, 0),
    # DEEP with four stages: three slabs in flight, each stage refilled right after its multiply is waited for
    ((128, 72, 320), True, 4, 1)])
def test_gemm_wg(backend, dtype, shape, trans, stages, deep, rng):
    m, n, k = shape
    a = as_dtype(rng.standard_normal((m, k)), dtype)
    b = as_dtype(rng.standard_normal((n, k) if trans else (k, n)), dtype)
    c = np.full((m, n), np.nan, a.dtype)
    g = 4 * get_backend(backend).simd_width()
    grid = (-(-n // 64) * g, -(-m // 64))
    try:  # two stages of 64 x 64 tiles: 32 KiB, Metal's limit; lavapipe stores 16-bit shared elements in 32 bits
        G.gemm_wg[grid, (g, 1)](a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k, 0, 0, 0, 64, 64, stages, deep,
                                trans, backend=backend)
    except (iron.LaunchError, iron.CompileError) as e:  # refused before running, located (tested elsewhere)
        if "bytes of shared memory" not in str(e):
            raise
        pytest.skip(f"{backend}: {e.message}")
    bb = f64(b).T if trans else f64(b)
    assert_close(c, f64(a) @ bb, dtype, n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(bb), what="gemm_wg")


def test_reading_the_accumulator_before_the_wait_is_reported(rng):
    a, _, b_mem = _slab(rng, 64, False)
    c = np.zeros(64 * 64, np.float32)
    with pytest.raises(iron.ExecutionError, match=r"frag_store reads an accumulator of the warpgroup_mma at "
                       r".*warpgroup_kernels.py:\d+:\d+ before a warpgroup_wait completed it") as e:
        W.one_slab[(128,), (128,)](a.reshape(-1), b_mem, c, 64, False, False, backend="cpu")
    assert "warpgroup_kernels.py" in str(e.value)


def test_refilling_a_stage_before_its_wait_is_reported(rng):
    a = as_dtype(rng.standard_normal(2 * 64 * 64), "bf16")
    b = as_dtype(rng.standard_normal(64 * 64), "bf16")
    with pytest.raises(iron.ExecutionError, match="tile that the warpgroup_mma at .* reads was written before the "
                       "warpgroup_wait that completes it"):
        W.early_refill[(128,), (128,)](a, b, np.zeros(64 * 64, np.float32), backend="cpu")


def test_a_group_of_part_of_a_warpgroup_is_refused(rng):
    a, _, b_mem = _slab(rng, 64, False)
    with pytest.raises(iron.ExecutionError, match=r"whole warpgroups \(4 SIMD groups, 128 threads\)"):
        W.one_slab[(64,), (64,)](a.reshape(-1), b_mem, np.zeros(4096, np.float32), 64, False, True, backend="cpu")


def test_misaligned_tile_is_refused(tmp_path):
    mod = module_from_source(tmp_path, "wg_misaligned", HEADER + (
        "def k(C: iron.Tensor[iron.f32]):\n"
        "    sa = iron.shared(iron.bf16, 64 * 72)\n"
        "    acc = iron.warpgroup_mma(sa, 8, sa, 0, 64, True, iron.frag_acc(1, 4))\n"
        "    iron.warpgroup_wait(0)\n"
        "    iron.frag_store(C, 0, 64, acc)\n"))
    with pytest.raises(iron.ExecutionError, match="the A index must be a multiple of 512") as e:
        mod.k[(128,), (128,)](np.zeros(64 * 64, np.float32), backend="cpu")
    assert "wg_misaligned.py:7" in str(e.value)


def test_operands_must_be_shared_arrays(tmp_path):
    mod = module_from_source(tmp_path, "wg_global", HEADER + (
        "def k(A: iron.Tensor[iron.bf16], C: iron.Tensor[iron.f32]):\n"
        "    acc = iron.warpgroup_mma(A, 0, A, 0, 64, True, iron.frag_acc(1, 4))\n"))
    with pytest.raises(iron.CompileError, match="reads its A tile from a shared array") as e:
        mod.k.ir(dtype=None)
    assert "wg_global.py:6" in str(e.value)


def test_accumulator_must_be_one_tile_high(tmp_path):
    mod = module_from_source(tmp_path, "wg_acc", HEADER + (
        "def k(C: iron.Tensor[iron.f32]):\n"
        "    sa = iron.shared(iron.bf16, 4096)\n"
        "    acc = iron.warpgroup_mma(sa, 0, sa, 0, 64, True, iron.frag_acc(2, 4))\n"))
    with pytest.raises(iron.CompileError, match=r"frag_acc\(1, nt\)"):
        mod.k.ir(dtype=None)


# -- the sm_90 layout and code --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [Layout(None), Layout(64), Layout(128), Layout(256)])
def test_phys_is_a_bijection_keeping_16_byte_chunks(layout):
    n = 2 * layout.block
    p = np.array([phys_index(i, layout) for i in range(n)])
    assert sorted(p) == list(range(n))
    assert (p[::8] % 8 == 0).all() and (p.reshape(-1, 8) - p[::8, None] == np.arange(8)).all()


@pytest.mark.parametrize("ld", [64, 128, 256])
def test_phys_is_the_layout_checked_on_the_h200(ld):
    """B (K x ld row-major): element (k, n) of a 64-row block where bench/experiments/wgmma_proto.py put it (that
    kernel's results matched torch on the H200 with LBO 8 KiB, SBO 1 KiB); A: 128-byte rows, chunk XOR row."""
    for k in range(64):
        for n in range(0, ld, 3):
            want = (n // 64) * 4096 + k * 64 + (((n % 64) // 8) ^ (k % 8)) * 8 + n % 8
            assert phys_index(64 * ld + k * ld + n, Layout(ld)) == 64 * ld + want
        for c in range(64):
            assert phys_index(k * 64 + c, Layout(None)) == k * 64 + ((c // 8) ^ (k % 8)) * 8 + c % 8


@pytest.mark.parametrize("layout", [Layout(None), Layout(192)])
def test_the_emitted_phys_arithmetic_is_phys_index(layout):
    """The IR the swizzle pass inserts, evaluated by the interpreter, against ``phys_index``."""
    out = Value(t.BufferType(t.i32, "global", None), "out")
    body = Block([out])
    b = Builder(body)
    i = b.thread("program_id", 0)
    b.store(out, i, _phys(b, i, layout))
    kern = Kernel("phys", [Param("out", "buffer", out)], body, W.one_slab.variant(None, (64, False, True)).kernel.loc,
                  {})
    n = 2 * layout.block
    got = np.zeros(n, np.int32)
    run_kernel(kern, {"out": got}, (n, 1, 1), (64, 1, 1))
    assert got.tolist() == [phys_index(i, layout) for i in range(n)]


@pytest.mark.parametrize("layout", [Layout(None), Layout(256)])
def test_a_stage_base_is_added_after_the_swizzle(layout):
    """phys(stage * TILE + x) is emitted as stage * TILE + phys(x) (the thread's offset swizzled once, outside the
    K loop) when TILE is a multiple of the layout's period; the value is phys_index's, for offsets past one period
    too. A base of unknown alignment stays inside the swizzle."""
    out = Value(t.BufferType(t.i32, "global", None), "out")
    body = Block([out])
    b = Builder(body)
    i = b.thread("program_id", 0)
    period = layout.block
    stage = b.binary("shr", i, b.const(12, t.i32))
    offset = b.binary("and", i, b.const(4095, t.i32))
    tile = b.binary("mul", stage, b.const(2 * period, t.i32))
    odd = b.binary("mul", stage, b.const(period // 2 + 8, t.i32))
    split = _phys(b, b.binary("add", b.binary("add", tile, offset), b.const(3 * period, t.i32)), layout)
    whole = _phys(b, b.binary("add", odd, offset), layout)
    b.store(out, i, split)
    b.store(out, b.binary("add", i, b.const(1 << 14, t.i32)), whole)
    kern = Kernel("phys", [Param("out", "buffer", out)], body, W.one_slab.variant(None, (64, False, True)).kernel.loc,
                  {})
    n = 1 << 14
    got = np.zeros(2 * n, np.int32)
    run_kernel(kern, {"out": got}, (n, 1, 1), (64, 1, 1))
    idx = np.arange(n)
    want = [phys_index(int(s * 2 * period + o + 3 * period), layout) for s, o in zip(idx >> 12, idx & 4095)]
    assert got[:n].tolist() == want
    pairs = zip(idx >> 12, idx & 4095)
    assert got[n:].tolist() == [phys_index(int(s * (period // 2 + 8) + o), layout) for s, o in pairs]
    assert split.owner.opcode == "add" and split.owner.operands[0].owner.operands[1] is tile  # outside the xor


def _wg_source(cfg=(128, 256, 4, 0, False), dtype=iron.bf16):
    return emit_cuda(G.gemm_wg.variant(dtype, cfg).kernel, arch="sm_90")


def test_sm90_source_uses_wgmma_and_needs_sm_90a():
    src = _wg_source()
    assert src.arch == "sm_90a"
    text = src.source
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in text and "wgmma.commit_group" in text
    assert "wgmma.wait_group.sync.aligned 1;" in text and "fence.proxy.async.shared::cta" in text
    assert "__align__(1024)" in text and src.dynamic_shared_bytes == 4 * (128 * 64 + 64 * 256) * 2 + 1024
    plain = emit_cuda(G.gemm_wg.variant(iron.bf16, (128, 256, 4, 0, False)).kernel)  # no arch: fragments (mma.sync)
    assert plain.arch is None and "wgmma" not in plain.source and "mma.sync.aligned.m16n8k16" in plain.source


def test_kernels_that_do_not_qualify_are_expanded():
    variant = W.runtime_ldb.variant(None)  # B's row length is not known at compile time
    assert plan_wgmma(variant.kernel) is None
    src = emit_cuda(variant.kernel, arch="sm_90")
    assert src.arch is None and "wgmma" not in src.source
    assert plan_wgmma(W.one_slab.variant(None, (64, False, True)).kernel) is not None


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
@pytest.mark.parametrize("cfg", [(128, 256, 4, 0, False), (128, 256, 4, 1, False), (128, 128, 4, 0, True),
                                 (64, 64, 3, 1, False)])
@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16])
def test_nvrtc_compiles_wgmma_for_sm_90a_without_serialising(cfg, dtype):
    """ptxas's C7515/C7518 ("wgmma.mma_async instructions are serialized") would mean the pipeline runs one wgmma
    at a time; a branch inside the call or writes to the accumulators before it cause them."""
    src = _wg_source(cfg, dtype)
    _, log = compile_cuda_log(src, "sm_90a", [*default_options(), PTXAS_VERBOSE])
    assert "C751" not in log and "serialized" not in log, log


@pytest.mark.parametrize("m, n, k", [(70, 64, 72), (64, 128, 128)])
def test_batched_gemm_wg(m, n, k, rng):
    """Grid axis 2 is the batch: each product's matrices SA, SB, SC elements apart."""
    bt = 3
    a = as_dtype(rng.standard_normal((bt, m, k)), "bf16")
    b = as_dtype(rng.standard_normal((bt, k, n)), "bf16")
    c = np.full((bt, m, n), np.nan, a.dtype)
    grid = (128 * (n // 64), -(-m // 64), bt)
    G.gemm_wg[grid, (128, 1, 1)](a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k, m * k, k * n, m * n,
                                 64, 64, 2, 0, False, backend="cpu")
    assert_close(c, f64(a) @ f64(b), "bf16", n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(f64(b)), what="batched")


@pytest.mark.parametrize("wg", [False, True], ids=["gemm", "gemm_wg"])
def test_grouped_tile_order_covers_every_tile(backend, wg, rng):
    """The std GEMMs walk tiles GROUP_M rows at a time (tile_origin): more tile rows than GROUP_M, with a ragged
    last band, still write every element of C once (C poisoned with NaN first)."""
    bm = 64 if wg else 32
    m, n, k = (G.GROUP_M + 1) * bm + 5, 2 * bm + 8, 64
    a = as_dtype(rng.standard_normal((m, k)), "bf16")
    b = as_dtype(rng.standard_normal((k, n)), "bf16")
    c = np.full((m, n), np.nan, a.dtype)
    width = get_backend(backend).simd_width()
    g = 4 * width if wg else 2 * width
    grid = (-(-n // bm) * g, -(-m // bm))
    args = (a.reshape(-1), b.reshape(-1), c.reshape(-1), m, n, k, 0, 0, 0)
    try:
        if wg:
            G.gemm_wg[grid, (g, 1)](*args, 64, 64, 2, 0, False, backend=backend)
        else:
            G.gemm[grid, (g, 1)](*args, 32, 32, 16, 2, 1, 2, False, backend=backend)
    except (iron.LaunchError, iron.CompileError) as e:
        if "bytes of shared memory" not in str(e):
            raise
        pytest.skip(f"{backend}: {e.message}")
    assert_close(c, f64(a) @ f64(b), "bf16", n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(f64(b)), what="order")
