"""Matrix fragments (issue 14): ``mma_shape``, ``frag_a``/``frag_b`` (trans, tiles), ``frag_acc``, ``mma`` and
``frag_store`` on every backend against a float64 NumPy oracle; the scalar fallback (``codegen/lower_fragments.py``)
run through the interpreter at several SIMD widths against the interpreter's own semantics; located errors."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.lower_fragments import lower_fragments
from iron.interp.executor import run_kernel
from iron.runtime import get_backend

from . import kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import as_dtype, assert_close, f64

HALVES = ["f16", "bf16"]


def _problem(rng, dtype, m, n, k, trans_a, trans_b):
    a = as_dtype(rng.standard_normal((m, k)), dtype)
    b = as_dtype(rng.standard_normal((k, n)), dtype)
    a_mem = np.ascontiguousarray(a.T if trans_a else a).reshape(-1)
    b_mem = np.ascontiguousarray(b.T if trans_b else b).reshape(-1)
    return a, b, a_mem, b_mem


def _launch(backend, dtype, a_mem, b_mem, c, m, n, k, mt, nt, ta, tb, rows=None, cols=None):
    width = get_backend(backend).simd_width()
    groups_m = m // (16 * mt)  # one SIMD group per row tile, one group of one SIMD group each
    K.frag_gemm[(groups_m * width, n // (16 * nt)), (width, 1)](
        a_mem, b_mem, c.reshape(-1), n, k, m if rows is None else rows, n if cols is None else cols, mt, nt, ta, tb,
        backend=backend)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("tiles, trans", [((1, 1), (False, False)), ((2, 1), (True, False)),
                                          ((1, 2), (False, True)), ((2, 2), (True, True))])
def test_fragment_gemm(backend, dtype, tiles, trans, rng):
    mt, nt = tiles
    m, n, k = 32 * mt, 32 * nt, 48
    a, b, a_mem, b_mem = _problem(rng, dtype, m, n, k, *trans)
    c = np.full((m, n), np.nan, np.float32)
    _launch(backend, dtype, a_mem, b_mem, c, m, n, k, mt, nt, *trans)
    want = f64(a) @ f64(b)
    # f32 accumulation in any order: K roundings of partial sums bounded by |A| @ |B|
    assert_close(c, want, "f32", n_ops=k + 1, scale=np.abs(f64(a)) @ np.abs(f64(b)), what="A @ B")


def test_edge_tiles_write_only_inside(backend, rng):
    m, n, k = 32, 32, 16
    a, b, a_mem, b_mem = _problem(rng, "f16", m, n, k, False, False)
    c = np.full((m, n), -7.0, np.float32)
    _launch(backend, "f16", a_mem, b_mem, c, m, n, k, 1, 1, False, False, rows=21, cols=9)
    want = f64(a) @ f64(b)
    assert_close(c[:21, :9], want[:21, :9], "f32", n_ops=k + 1, scale=(np.abs(f64(a)) @ np.abs(f64(b)))[:21, :9])
    assert (c[21:, :] == -7.0).all() and (c[:, 9:] == -7.0).all(), "elements past rows/cols were written"


@pytest.mark.parametrize("width", [8, 16, 32, 64])
def test_scalar_fallback_matches_the_interpreter(width, rng):
    """The fallback every target without matrix units uses, run by the interpreter at each SIMD width."""
    mt, nt, m, n, k = 2, 1, 64, 16, 32
    a, b, a_mem, b_mem = _problem(rng, "bf16", m, n, k, False, True)
    variant = K.frag_gemm.variant(iron.bf16, (mt, nt, False, True))
    outs = []
    for kern in (variant.kernel, lower_fragments(variant.kernel, width)):
        c = np.full(m * n, np.nan, np.float32)
        args = {"A": a_mem, "B": b_mem, "C": c, "N": np.int32(n), "K": np.int32(k), "rows": np.int32(m),
                "cols": np.int32(n)}
        run_kernel(kern, args, (m // (16 * mt) * width, n // (16 * nt), 1), (width, 1, 1), simd_width=width)
        outs.append(c.reshape(m, n))
    assert lower_fragments(variant.kernel, width) is not variant.kernel
    scale = np.abs(f64(a)) @ np.abs(f64(b))
    assert_close(outs[1], outs[0], "f32", n_ops=k + 1, scale=scale, what=f"fallback at width {width}")


def test_partial_simd_group_is_an_execution_error():
    a = np.zeros(16 * 16, np.float16)
    c = np.zeros(16 * 16, np.float32)
    with pytest.raises(iron.LaunchError, match="must be a multiple of its group"):
        K.frag_gemm[(31, 1), (32, 1)](a, a, c, 16, 16, 16, 16, 1, 1, False, False, backend="cpu")
    with pytest.raises(iron.ExecutionError, match="needs whole SIMD groups") as e:  # 48 threads: 1.5 SIMD groups
        K.frag_gemm[(48, 1), (48, 1)](a, a, c, 16, 16, 16, 16, 1, 1, False, False, backend="cpu")
    assert "kernels.py" in str(e.value)


def test_mma_of_mismatched_tiles_is_a_compile_error(tmp_path):
    mod = module_from_source(tmp_path, "bad_mma", HEADER + "def k(x: iron.Tensor[iron.f16], "
                             "out: iron.Tensor[iron.f32]):\n"
                             "    acc = iron.mma(iron.frag_a(x, 0, 16, tiles=2), iron.frag_b(x, 0, 16), "
                             "iron.frag_acc())\n"
                             "    iron.frag_store(out, 0, 16, acc)\n")
    with pytest.raises(iron.CompileError, match=r"mma shapes disagree: A 32x16") as e:
        mod.k.ir(dtype=None)
    assert "bad_mma.py:6" in str(e.value)


def test_fragments_of_f32_are_refused_located(tmp_path):
    mod = module_from_source(tmp_path, "bad_frag", HEADER + "def k(x: iron.Tensor[iron.f32]):\n"
                             "    a = iron.frag_a(x, 0, 16)\n")
    with pytest.raises(iron.CompileError, match="frag_a reads f16, bf16 elements, not f32"):
        mod.k.ir(dtype=None)


def test_mma_shape_is_a_compile_time_constant():
    from iron.ir.types import MMA_SHAPE

    assert MMA_SHAPE == {"f16": (16, 16, 16), "bf16": (16, 16, 16)}
    from iron.ir import print_kernel

    src = print_kernel(K.frag_gemm.variant(iron.f16, (1, 1, False, False)).kernel)
    assert "mma_shape" not in src and "frag_load" in src
