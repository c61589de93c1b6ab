"""``mma_q4``: a 16 x 128 A (or one vector) times a 4-bit group-quantized B on the matrix units (issue 18's q4 GEMV):
on every backend against a float64 oracle of the dequantized weights (each code times its scale rounded to the
dtype, as the op defines), with located refusals and the alignment rule's execution errors."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import compile_cuda_log, default_options, unavailable_reason
from iron.runtime import get_backend

from . import mma_q4_kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import as_dtype, assert_close, f64


@pytest.mark.parametrize("what, offsets, lda", [("A index is 3", (3, 0), 0), ("word index is 2", (0, 2), 0),
                                                ("A leading dimension is 260", (0, 0), 260)])
def test_misaligned_operands_are_an_execution_error(what, offsets, lda, rng):
    """The alignment rule (NVIDIA's 16-byte loads): the interpreter names the operand and the line."""
    ai, wi = offsets
    a = as_dtype(rng.standard_normal(4096), "bf16")
    w = np.zeros(1024, np.uint32)
    s = as_dtype(np.ones(64), "bf16")
    out = np.full(256, np.nan, np.float32)
    with pytest.raises(iron.ExecutionError, match=f"mma_q4's {what}: it must be a multiple") as e:
        K.q4_product[32, 32](a, w, s, out, ai, lda, wi, 20, 0, 4, 1, 1, 32, backend="cpu")
    assert "mma_q4_kernels.py:" in str(e.value)


def _oracle(a, w, s, ai, lda, wi, ldw, si, lds, slabs, cols, group, dtype):
    k = np.arange(128 * slabs)
    rows = [f64(a[ai + r * lda: ai + r * lda + 128 * slabs]) for r in range(16)]
    words = np.stack([w[wi + n * ldw: wi + n * ldw + 16 * slabs] for n in range(cols)])
    codes = (words[:, k // 8] >> (4 * (k % 8)).astype(np.uint32)) & 15
    scales = np.stack([f64(s[si + n * lds: si + n * lds + (128 * slabs - 1) // group + 1]) for n in range(cols)])
    b = f64(as_dtype(codes * scales[:, k // group], dtype))
    return np.stack(rows) @ b.T


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("nt, group, lda, offsets", [
    (1, 32, 0, (0, 0, 0)),        # a vector (GEMV), aligned
    (2, 64, 0, (0, 0, 0)),
    (1, 128, 0, (0, 0, 0)),
    (2, 64, 264, (8, 4, 1)),      # 16 rows of A, starts past the buffers' first 16 bytes, an odd scale index
    (1, 32, 0, (16, 8, 3)),
])
def test_mma_q4_against_float64(backend, dtype, nt, group, lda, offsets, rng):
    slabs, cols = 2, 16 * nt
    ai, wi, si = offsets
    k = 128 * slabs
    ldw, lds = k // 8 + 4 * wi, k // group + 1
    a = as_dtype(rng.standard_normal(ai + (lda * 15 if lda else 0) + k + 8), dtype)
    w = rng.integers(0, 2 ** 32, wi + cols * ldw, dtype=np.uint64).astype(np.uint32)
    s = as_dtype(rng.uniform(0.01, 0.2, si + cols * lds), dtype)
    out = np.full(16 * cols, np.nan, np.float32)
    width = get_backend(backend).simd_width()
    K.q4_product[width, width](a, w, s, out, ai, lda, wi, ldw, si, lds, slabs, nt, group, backend=backend)
    want = _oracle(a, w, s, ai, lda, wi, ldw, si, lds, slabs, cols, group, dtype)
    if lda == 0:
        assert np.array_equal(f64(out).reshape(16, cols), np.repeat(f64(out).reshape(16, cols)[:1], 16, 0))
    assert_close(out.reshape(16, cols), want, "f32", n_ops=k, scale=np.abs(f64(a)).max() * 15 * 0.2 * k / 4)


_BAD = {
    "words": ("iron.i32", "bf16", "32", "(1, 1)", "mma_q4's packed weights must be u32 words"),
    "scales": ("iron.u32", "f32", "32", "(1, 1)", "mma_q4's scales must have A's dtype"),
    "group": ("iron.u32", "bf16", "48", "(1, 1)", "mma_q4's group must be a compile-time positive multiple of 32"),
    "acc": ("iron.u32", "bf16", "32", "(2, 1)", "mma_q4 accumulates into a 16-row accumulator fragment"),
}


@pytest.mark.parametrize("case", sorted(_BAD))
def test_misuse_is_a_located_error(tmp_path, case):
    words, scales, group, tiles, message = _BAD[case]
    src = (HEADER + f"def bad(A: iron.Tensor[iron.bf16], W: iron.Tensor[{words}], S: iron.Tensor[iron.{scales}], "
           "C: iron.Tensor[iron.f32]):\n"
           f"    acc = iron.frag_acc{tiles}\n"
           f"    acc = iron.mma_q4(A, 0, 0, W, 0, 16, S, 0, 4, acc, {group})\n"
           "    iron.frag_store(C, 0, 16, acc)\n")
    mod = module_from_source(tmp_path, f"mma_q4_bad_{case}", src)
    with pytest.raises(iron.CompileError, match=message) as e:
        mod.bad.variant(None)
    assert f"mma_q4_bad_{case}.py:" in str(e.value)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_nvidia_spells_it_on_mma_sync_and_nvrtc_compiles_it(dtype):
    """NVIDIA: the codes dequantized in registers (fma.rn on packed halves) into mma.sync, no fallback arrays; other
    targets' matrix spellings take the scalar fallback (their element order is not NVIDIA's)."""
    v = K.q4_product.variant(getattr(iron, dtype), (2, 64))
    src = emit_cuda(v.kernel)
    text = src.source
    assert f"iron_mma_q4_{dtype}<2>(" in text and "mma.sync.aligned.m16n8k16" in text
    assert f"fma.rn.{dtype}x2" in text
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    binary, log = compile_cuda_log(src, "sm_90", default_options())
    assert binary and "error" not in log.lower()
