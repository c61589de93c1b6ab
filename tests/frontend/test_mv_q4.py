"""``mv_q4``: 16 mt rows of a 4-bit group-quantized W times a vector on the matrix units (the weight rows as the
matrix units' rows: issue 18's q4 GEMV), on every backend against a float64 oracle (each group's sum of codes
times x scaled once, as the op defines), with located refusals and the alignment rule's execution errors."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import compile_cuda_log, default_options, unavailable_reason
from iron.runtime import get_backend

from . import mv_q4_kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import as_dtype, assert_close, f64


@pytest.mark.parametrize("what, offsets", [("x index is 4", (4, 0, 20)), ("word index is 2", (0, 2, 20)),
                                           ("word leading dimension is 18", (0, 0, 18))])
def test_misaligned_operands_are_an_execution_error(what, offsets, rng):
    """The alignment rule (NVIDIA's 16-byte loads): the interpreter names the operand and the line."""
    xi, wi, ldw = offsets
    x = as_dtype(rng.standard_normal(4096), "bf16")
    w = np.zeros(1024, np.uint32)
    s = as_dtype(np.ones(64), "bf16")
    out = np.full(256, np.nan, np.float32)
    with pytest.raises(iron.ExecutionError, match=f"mv_q4's {what}: it must be a multiple") as e:
        K.q4_rows[32, 32](w, s, x, out, wi, ldw, 0, 4, xi, 1, 1, 32, backend="cpu")
    assert "mv_q4_kernels.py:" in str(e.value)


def _oracle(w, s, x, wi, ldw, si, lds, xi, slabs, rows, group):
    k = np.arange(128 * slabs)
    words = np.stack([w[wi + r * ldw: wi + r * ldw + 16 * slabs] for r in range(rows)])
    codes = (words[:, k // 8] >> (4 * (k % 8)).astype(np.uint32)) & 15
    scales = np.stack([f64(s[si + r * lds: si + r * lds + (128 * slabs - 1) // group + 1]) for r in range(rows)])
    return (codes * scales[:, k // group]) @ f64(x[xi: xi + 128 * slabs])


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("mt, group, offsets", [
    (1, 32, (0, 0, 0)),
    (2, 64, (0, 0, 0)),
    (1, 128, (0, 0, 0)),
    (2, 64, (8, 4, 1)),       # starts past the buffers' first 16 bytes, an odd scale index
    (1, 256, (16, 8, 3)),     # a group longer than the slab
    (4, 32, (0, 0, 0)),
])
def test_mv_q4_against_float64(backend, dtype, mt, group, offsets, rng):
    slabs, rows = 2, 16 * mt
    xi, wi, si = offsets
    k = 128 * slabs
    ldw, lds = k // 8 + 4 * wi, k // group + 1 + si
    x = as_dtype(rng.standard_normal(xi + k + 8), dtype)
    w = rng.integers(0, 2 ** 32, wi + rows * ldw, dtype=np.uint64).astype(np.uint32)
    s = as_dtype(rng.uniform(0.01, 0.2, si + rows * lds), dtype)
    out = np.full(rows * 16, np.nan, np.float32)
    width = get_backend(backend).simd_width()
    K.q4_rows[width, width](w, s, x, out, wi, ldw, si, lds, xi, slabs, mt, group, backend=backend)
    got = f64(out).reshape(rows, 16)
    assert np.array_equal(got, np.repeat(got[:, :1], 16, 1)), "every column holds the same product"
    want = _oracle(w, s, x, wi, ldw, si, lds, xi, slabs, rows, group)
    assert_close(got[:, 0], want, "f32", n_ops=k, scale=np.abs(f64(x)).max() * 15 * 0.2 * k / 4)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("mt, group", [(1, 32), (2, 64), (1, 128)])
def test_mv_q4_from_shared_arrays(backend, dtype, mt, group, rng):
    """W's words and scales staged in padded shared arrays (rows 20 words apart), x from its buffer."""
    rows, ldw, lds = 16 * mt, 16, 128 // group + 3
    x = as_dtype(rng.standard_normal(128), dtype)
    w = rng.integers(0, 2 ** 32, rows * ldw, dtype=np.uint64).astype(np.uint32)
    s = as_dtype(rng.uniform(0.01, 0.2, rows * lds), dtype)
    out = np.full(rows * 16, np.nan, np.float32)
    width = get_backend(backend).simd_width()
    K.q4_rows_shared[width, width](w, s, x, out, ldw, lds, mt, group, backend=backend)
    got = f64(out).reshape(rows, 16)
    want = _oracle(w, s, x, 0, ldw, 0, lds, 0, 1, rows, group)
    assert_close(got[:, 0], want, "f32", n_ops=128, scale=np.abs(f64(x)).max() * 15 * 0.2 * 128 / 4)
    assert np.array_equal(got, np.repeat(got[:, :1], 16, 1))


_BAD = {
    "words": ("iron.i32", "bf16", "32", "(1, 1)", "mv_q4's packed weights must be u32 words"),
    "scales": ("iron.u32", "f32", "32", "(1, 1)", "mv_q4's scales must have x's dtype"),
    "group": ("iron.u32", "bf16", "48", "(1, 1)", "mv_q4's group must be a compile-time positive multiple of 32"),
    "acc": ("iron.u32", "bf16", "32", "(1, 2)", "mv_q4 accumulates into a 16-column accumulator fragment"),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_misuse_is_a_located_error(tmp_path, case):
    words, scales, group, tiles, message = _BAD[case]
    src = (HEADER + f"def bad(X: iron.Tensor[iron.bf16], W: iron.Tensor[{words}], S: iron.Tensor[iron.{scales}], "
           "C: iron.Tensor[iron.f32]):\n"
           f"    acc = iron.frag_acc{tiles}\n"
           f"    acc = iron.mv_q4(W, 0, 16, S, 0, 4, X, 0, acc, {group})\n"
           "    iron.frag_store(C, 0, 16, acc)\n")
    mod = module_from_source(tmp_path, f"mv_q4_bad_{case}", src)
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.bad.variant(None)
    assert f"mv_q4_bad_{case}.py:" in str(e.value)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("group", [32, 64, 128])
def test_nvidia_spells_it_on_mma_sync_and_nvrtc_compiles_it(dtype, group):
    """NVIDIA: the codes made halves by logic ops alone in registers, straight into mma.sync (no fallback arrays);
    other targets' matrix spellings take the scalar fallback."""
    v = K.q4_rows.variant(getattr(iron, dtype), (2, group))
    src = emit_cuda(v.kernel)
    text = src.source
    assert f"iron_mv_q4_{dtype}<2, {group}>(" in text and "mma.sync.aligned.m16n8k16" in text
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    binary, log = compile_cuda_log(src, "sm_90", default_options())
    assert binary and "error" not in log.lower()


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_nvidia_compiles_it_from_shared_arrays(dtype):
    """The words and scales read from shared arrays through the same spelling (generic pointers)."""
    src = emit_cuda(K.q4_rows_shared.variant(getattr(iron, dtype), (2, 64)).kernel)
    assert f"iron_mv_q4_{dtype}<2, 64>(" in src.source
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    binary, log = compile_cuda_log(src, "sm_90", default_options())
    assert binary and "error" not in log.lower()


def test_bf16_and_f16_calls_in_one_kernel(rng):
    """Both dtypes' spellings in one CUDA source share one definition of the word loads (NVRTC compiles it); on the
    interpreter the sum of the two products against float64."""
    src = emit_cuda(K.q4_rows_two_dtypes.variant(None).kernel)
    assert src.source.count("void iron_mv_q4_words(unsigned (&d)[1]") == 1
    w = rng.integers(0, 2 ** 32, 16 * 16, dtype=np.uint64).astype(np.uint32)
    s, s2 = (as_dtype(rng.uniform(0.01, 0.2, 16 * 2), d) for d in ("bf16", "f16"))
    x, x2 = (as_dtype(rng.standard_normal(128), d) for d in ("bf16", "f16"))
    out = np.full(16 * 16, np.nan, np.float32)
    K.q4_rows_two_dtypes[32, 32](w, s, x, s2, x2, out, backend="cpu")
    want = _oracle(w, s, x, 0, 16, 0, 2, 0, 1, 16, 64) + _oracle(w, s2, x2, 0, 16, 0, 2, 0, 1, 16, 64)
    assert_close(f64(out).reshape(16, 16)[:, 0], want, "f32", n_ops=256, scale=np.abs(f64(x)).max() * 15 * 0.2 * 64)
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    binary, log = compile_cuda_log(src, "sm_90", default_options())
    assert binary and "error" not in log.lower()
