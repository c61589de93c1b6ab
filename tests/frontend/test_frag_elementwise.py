"""Element-wise fragment ops (issue 14/18: what a FlashAttention-style kernel needs to keep O and S in registers):
``frag_mask``, ``frag_row_max``/``frag_row_sum``, ``frag_rows``, arithmetic, min/max and math on accumulators, row
broadcasts, row fragments carried through loops -- on every backend against float64 NumPy oracles, the scalar
fallback at several SIMD widths through the interpreter, NVIDIA's lane layout compiled by NVRTC, and located
refusals."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.lower_fragments import lower_fragments
from iron.codegen.nvrtc import compile_cuda_log, default_options, unavailable_reason
from iron.interp.executor import run_kernel
from iron.runtime import get_backend

from . import frag_ew_kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import as_dtype, assert_close, f64


def _inputs(rng, dtype, mt, nt):
    a = as_dtype(rng.standard_normal((16 * mt, 16)), dtype)
    b = as_dtype(rng.standard_normal((16, 16 * nt)), dtype)
    return a, b, f64(a) @ f64(b)


def _group(backend):
    w = get_backend(backend).simd_width()
    return (w, 1), (w, 1)


def _softmax_oracle(s, scale, row0, col0, cols, causal):
    r = np.arange(s.shape[0])[:, None] + row0
    c = np.arange(s.shape[1])[None, :] + col0
    x = np.where((c >= cols) | (causal & (c > r)), -np.inf, s * scale)
    p = np.exp2(x - x.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), p.sum(axis=1)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("tiles, mask", [((1, 1), (0, 0, 16, False)), ((2, 2), (0, 0, 27, True)),
                                         ((1, 4), (40, 30, 80, True)), ((2, 1), (5, -3, 9, False))])
def test_softmax_of_an_accumulator(backend, dtype, tiles, mask, rng):
    mt, nt = tiles
    a, b, s = _inputs(rng, dtype, mt, nt)
    p = np.full(256 * mt * nt, np.nan, np.float32)
    l = np.full_like(p, np.nan)
    scale = float(rng.uniform(0.2, 0.6))
    K.softmax_tile[_group(backend)](a.reshape(-1), b.reshape(-1), p, l, scale, *mask[:3], mt, nt, mask[3],
                                    backend=backend)
    want_p, want_l = _softmax_oracle(s, scale, *mask)
    # exp2 and sums in f32; the max is exact
    assert_close(p.reshape(s.shape), want_p, "f32", math_fn=True, n_ops=16 * nt + 4, scale=np.abs(want_p) + 1e-30,
                 what="P")
    assert_close(l.reshape(s.shape), np.repeat(want_l[:, None], s.shape[1], 1), "f32", math_fn=True,
                 n_ops=16 * nt + 2, what="row sums")


@pytest.mark.parametrize("tiles", [(1, 1), (2, 3)])
def test_arithmetic_and_math_on_accumulators(backend, tiles, rng):
    mt, nt = tiles
    a, b, s = _inputs(rng, "bf16", mt, nt)
    o1 = np.full(256 * mt * nt, np.nan, np.float32)
    o2 = np.full_like(o1, np.nan)
    x = float(rng.uniform(-1, 1))
    K.arith_tile[_group(backend)](a.reshape(-1), b.reshape(-1), o1, o2, x, mt, nt, backend=backend)
    want1 = -np.abs(np.maximum(s, x) * 2 - 1.5) + np.minimum(s, s * 0.25) / 3
    want2 = np.exp(s * 0.1) - x
    scale = np.abs(s) * 3 + 3
    assert_close(o1.reshape(s.shape), want1, "f32", n_ops=24, scale=scale, what="arithmetic")
    assert_close(o2.reshape(s.shape), want2, "f32", math_fn=True, n_ops=24, scale=np.exp(s * 0.1) + 1, what="exp")


def test_row_fragments_carried_through_a_loop(backend, rng):
    mt, nt, steps = 2, 2, 3
    a, b, s = _inputs(rng, "f16", mt, nt)
    o = np.full(256 * mt * nt, np.nan, np.float32)
    K.running_max[_group(backend)](a.reshape(-1), b.reshape(-1), o, steps, mt, nt, backend=backend)
    m = np.max([(s * (i + 1) - i).max(axis=1) for i in range(steps)], axis=0)
    l = steps * 0.5 * s.sum(axis=1)
    want = s - m[:, None] + l[:, None]
    assert_close(o.reshape(s.shape), want, "f32", n_ops=16 * nt * steps + 8, scale=np.abs(s).sum(1, keepdims=True)
                 * steps + np.abs(want) + 1, what="loop")


@pytest.mark.parametrize("bits", [0x7FA00001, 0xFFC00000, 0x7FC00000])
def test_row_max_skips_masked_nans_signalling_too(backend, bits, rng):
    """frag_row_max over columns masked to a NaN (signalling: 0x7fa00001, or quiet) gives the max of the others,
    as float max and simd_max do (the interpreter's reduction went through NumPy's fmax loop, glibc's fmaxf for a
    signalling NaN)."""
    a, b, s = _inputs(rng, "bf16", 1, 1)
    o = np.full(256, 7.0, np.float32)
    K.nan_masked_max[_group(backend)](a.reshape(-1), b.reshape(-1), o, 9, bits, backend=backend)
    want = s[:, :9].max(axis=1).astype(np.float32)
    np.testing.assert_allclose(o.reshape(16, 16), np.repeat(want[:, None], 16, 1), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("width", [4, 8, 16, 32, 64])
def test_scalar_fallback_matches_the_interpreter(width, rng):
    """The layout every target without one of its own uses (lavapipe, Metal, HIP), at each SIMD width."""
    mt, nt = 2, 2
    a, b, _ = _inputs(rng, "bf16", mt, nt)
    variant = K.softmax_tile.variant(iron.bf16, (mt, nt, True))
    outs = []
    for kern in (variant.kernel, lower_fragments(variant.kernel, width)):
        p = np.full(256 * mt * nt, np.nan, np.float32)
        l = np.full_like(p, np.nan)
        args = {"A": a.reshape(-1), "B": b.reshape(-1), "P": p, "L": l, "scale": np.float32(0.3),
                "row0": np.int32(3), "col0": np.int32(1), "cols": np.int32(29)}
        run_kernel(kern, args, (width, 1, 1), (width, 1, 1), simd_width=width)
        outs.append((p, l))
    assert_close(outs[1][0], outs[0][0], "f32", math_fn=True, n_ops=40, scale=np.abs(outs[0][0]) + 1e-30)
    assert_close(outs[1][1], outs[0][1], "f32", math_fn=True, n_ops=40)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("nt, nv", [(1, 1), (2, 3)])
def test_p_from_the_accumulator_times_v(backend, dtype, nt, nv, rng):
    """frag_to_a: P = exp2(S - rowmax S), rounded to the input type, straight from the accumulator into P V."""
    a, b, s = _inputs(rng, dtype, 1, nt)
    v = as_dtype(rng.standard_normal((16 * nt, 16 * nv)), dtype)
    o = np.full(256 * nv, np.nan, np.float32)
    K.p_times_v[_group(backend)](a.reshape(-1), b.reshape(-1), v.reshape(-1), o, nt, nv, backend=backend)
    p = f64(as_dtype(np.exp2(s - s.max(axis=1, keepdims=True)), dtype))  # P rounded to the input type, as the A
    want = p @ f64(v)                                                     # operand holds it
    # S itself is f32 on the device: a P element near a rounding boundary may round the other way (one half ulp)
    ulp = 2.0 ** (-8 if dtype == "bf16" else -11)
    tol = ulp * (np.abs(p) @ np.abs(f64(v))) + 1e-5 * (np.abs(s).max() + 1)
    assert np.all(np.abs(o.reshape(want.shape) - want) <= tol), np.abs(o.reshape(want.shape) - want).max()


def test_a_per_lane_scalar_is_an_execution_error(rng):
    a = np.zeros(256, np.float16)
    o = np.zeros(256, np.float32)
    with pytest.raises(iron.ExecutionError, match="differs across the lanes") as e:
        K.per_lane_scale[(32, 1), (32, 1)](a, a, o, backend="cpu")
    assert "frag_ew_kernels.py" in str(e.value)


@pytest.mark.parametrize("body, message", [
    ("s = iron.mma(a, b, iron.frag_acc())\n    iron.frag_store(C, 0, 16, s ** 2)", "not defined on fragments"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    iron.frag_store(C, 0, 16, a * 2.0)",
     "accumulator and row fragments"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    iron.frag_store(C, 0, 16, s + iron.frag_rows(2))",
     "different row counts"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    iron.frag_store(C, 0, 16, s + iron.frag_acc(1, 2))",
     "different shapes"),
    ("s = iron.frag_row_max(a)", "needs an accumulator fragment"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    t = iron.frag_mask(s, 0, 0, 16, n > 1, 0.0)",
     "causal must be a compile-time bool"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    t = iron.atan2(s, 1.0)", "atan2\\(\\) is not defined on fragments"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    t = iron.frag_rows(1, s)", "value must be a number"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    t = iron.frag_to_a(s, 8, iron.f16)", "multiple of 16 from 0 to 0"),
    ("s = iron.mma(a, b, iron.frag_acc(1, 2))", "shapes disagree"),
    ("s = iron.mma(a, b, iron.frag_acc())\n    t = iron.frag_to_a(s, 0, iron.f32)", "hold f16"),
    ("s = iron.mma(iron.frag_a(A, 0, 16, False, 2), b, iron.frag_acc(2))\n    t = iron.frag_to_a(s, 0, iron.f16)",
     "16-row accumulator"),
    ("t = iron.frag_to_a(a, 0, iron.f16)", "16-row accumulator"),
])
def test_misuse_is_a_located_error(tmp_path, body, message):
    src = (HEADER + "def bad(A: iron.Tensor[iron.f16], C: iron.Tensor[iron.f32], n: int):\n"
           "    a = iron.frag_a(A, 0, 16)\n    b = iron.frag_b(A, 0, 16)\n    " + body + "\n")
    mod = module_from_source(tmp_path, "frag_ew_bad", src)
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.bad.variant(None)
    assert "frag_ew_bad.py:" in str(e.value)


def test_nvidia_spells_them_in_the_mma_sync_layout():
    src = emit_cuda(K.softmax_tile.variant(iron.bf16, (2, 2, True)).kernel)
    text = src.source
    assert "mma.sync.aligned.m16n8k16" in text and "iron_freduce<2, 2>" in text and "iron_fmask<2>" in text
    assert "__shfl_xor_sync" in text and "regs[" not in text  # no scalar-fallback arrays


def test_frag_to_a_column_known_only_at_run_time(tmp_path):
    """A run-time col0 is refused where the kernel is compiled (every target lays the columns out at compile time);
    the interpreter takes it, and faults on a column off the 16-column grid."""
    src = (HEADER + "def bad(A: iron.Tensor[iron.f16], B: iron.Tensor[iron.f16], C: iron.Tensor[iron.f32], n: int):\n"
           "    s = iron.mma(iron.frag_a(A, 0, 16), iron.frag_b(B, 0, 32, False, 2), iron.frag_acc(1, 2))\n"
           "    o = iron.mma(iron.frag_to_a(s, n, iron.f16), iron.frag_b(A, 0, 16), iron.frag_acc())\n"
           "    iron.frag_store(C, 0, 16, o)\n")
    mod = module_from_source(tmp_path, "frag_to_a_rt", src)
    with pytest.raises(iron.CompileError, match="known at compile time") as e:
        emit_cuda(mod.bad.variant(None).kernel)
    assert "frag_to_a_rt.py:" in str(e.value)
    a = np.ones(256, np.float16)
    bm = np.tile(np.arange(32, dtype=np.float16), 16)  # B[k, n] = n: S[r, n] = 16 n, exact in f16
    for n in (0, 16):
        c = np.full(256, np.nan, np.float32)
        mod.bad[(32, 1), (32, 1)](a, bm, c, n, backend="cpu")
        assert np.all(c == 16.0 * 16 * np.arange(n, n + 16).sum() / 16), (n, c[:4])
    with pytest.raises(iron.ExecutionError, match="col0 is 8") as e:
        mod.bad[(32, 1), (32, 1)](a, bm, c, 8, backend="cpu")
    assert "frag_to_a_rt.py:" in str(e.value)


def test_nvidia_turns_an_accumulator_into_an_a_fragment_in_registers():
    text = emit_cuda(K.p_times_v.variant(iron.bf16, (2, 3)).kernel).source
    assert "iron_fto_a_bf16<2, 2>" in text and "mma.sync.aligned.m16n8k16" in text and "regs[" not in text


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
@pytest.mark.parametrize("kern, cfg", [(K.softmax_tile, (2, 2, True)), (K.arith_tile, (2, 3)),
                                       (K.running_max, (1, 4)),
                                       (K.p_times_v, (2, 3))])
def test_nvrtc_compiles_them(kern, cfg):
    src = emit_cuda(kern.variant(iron.f16, cfg).kernel)
    _, log = compile_cuda_log(src, "sm_80", default_options())
    assert "error" not in log.lower()


def test_attention_on_wgmma_uses_them_with_the_copy_engine():
    from iron.std.attention_wg import attn_prefill_wg

    src = emit_cuda(attn_prefill_wg.variant(iron.bf16, (128, 2, 1, 2, True, 0)).kernel, arch="sm_90")
    assert src.arch == "sm_90a"
    text = src.source
    assert "wgmma.mma_async.sync.aligned.m64n64k16" in text and "wgmma.mma_async.sync.aligned.m64n128k16" in text
    assert "cp.async.bulk.tensor" in text and "iron_fmask<4>" in text and "iron_wg_mma_rs_bf16_n128_t0" in text
    assert "fence.proxy.async" not in text  # P stays in registers; only the copy engine writes operand arrays


@pytest.mark.parametrize("body, message", [
    ("p = iron.frag_acc(1, 2)\n    o = iron.warpgroup_mma(p, 0, s, 0, 64, False, iron.frag_acc(1, 4))",
     "must be a 16 x 64 accumulator"),
    ("p = iron.frag_acc(1, 4)\n    o = iron.warpgroup_mma(p, 64, s, 0, 64, False, iron.frag_acc(1, 4))",
     "A index must be 0"),
])
def test_warpgroup_mma_fragment_a_misuse(tmp_path, body, message):
    src = (HEADER + "def bad(A: iron.Tensor[iron.f16]):\n    s = iron.shared(iron.f16, 4096)\n    " + body + "\n")
    mod = module_from_source(tmp_path, "wg_frag_bad", src)
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.bad.variant(None)
    assert "wg_frag_bad.py:" in str(e.value)


def test_proxy_fences_only_after_ordinary_operand_writes():
    """gemm_wg's cp.async refills write operand arrays in its loop: its barrier keeps the fence. In a loop of
    barrier, ordinary write, barrier, only the second barrier needs it (the write before the first one, of the
    previous iteration, was fenced by the second)."""
    from iron.codegen.cfamily.tiles import mark_proxy_fences
    from iron.ir.builder import Builder
    from iron.std.gemm import gemm_wg

    text = emit_cuda(gemm_wg.variant(iron.bf16, (128, 256, 4, 0, False)).kernel, arch="sm_90").source
    assert text.count('fence.proxy.async.shared::cta;" ::: "memory"); __syncthreads();') == \
        text.count("__syncthreads();") == 1
    # a loop: barrier (top), write, barrier (after the write); the top one needs no fence, the second does
    from iron.ir import types as t
    from iron.ir.core import Block

    b = Builder(Block())
    arr = b.op("shared", [], t.BufferType(t.f16, "shared", 64), {"elem": t.f16, "size": 64}).result
    _, body = b.for_(b.const(0, t.i32), b.const(4, t.i32), b.const(1, t.i32))[:2]
    with b.at(body):
        top = b.op("barrier", [], None)
        b.store(arr, b.const(0, t.i32), b.const(1.0, t.f16))
        after = b.op("barrier", [], None)
    assert mark_proxy_fences(b.block, frozenset({arr.uid}), False) is False
    assert top.attrs["proxy_fence"] is False and after.attrs["proxy_fence"] is True
