"""Matrix fragments in MSL (``codegen/cfamily/msl_matrix.py``): the source uses Metal's SIMD-group matrices, not the
scalar fallback; on the CPU model of Metal, fragments from threadgroup and device memory (transposed or not, padded
leading dimensions, several k steps) give A @ B, and ``frag_store`` writes exactly the elements inside rows x cols --
whole 8 x 8 blocks, blocks cut by an edge, and blocks wholly outside -- into f32 and f16/bf16 outputs."""

from __future__ import annotations

import re

import numpy as np
import pytest

import iron
from iron.codegen import emit_msl
from iron.codegen.msl_model import find_clang, syntax_check
from iron.runtime import unavailable_reason

from ..frontend import kernels as FK
from ..frontend.test_kernels import DTYPES, assert_close, f64
from . import msl_matrix_kernels as MK

#: (rows, cols) of frag_store for a 32 x 32 accumulator: all, none, cuts through and along 8 x 8 blocks
EDGES = [(32, 32), (0, 7), (5, 0), (21, 9), (8, 16), (1, 31), (31, 1), (17, 24), (40, 3)]


def _source(kernel, dtype, constexprs, version=None) -> str:
    return emit_msl(kernel.variant(dtype, constexprs).kernel, version=version).source


def _code(source: str) -> str:
    return "\n".join(line.split("//")[0] for line in source.splitlines())


@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16])
def test_mma_is_simdgroup_multiply_accumulate_not_the_fallback(dtype):
    src = _source(FK.frag_gemm, dtype, (2, 2, True, False))
    code = _code(src)
    assert "simdgroup_multiply_accumulate(c.m[i][j], a.m[i][k], b.m[k][j], c.m[i][j]);" in code
    assert "iron_frag_mma(" in code and "iron_frag_acc_zero<2, 2>()" in code
    # the scalar fallback (codegen/lower_fragments.py) would leave per-lane arrays and a loop of fmas
    assert "fma(" not in code and "alignas(16)" not in code
    assert "uint simd_lane_id [[thread_index_in_simdgroup]]" in code  # the masked store's lane
    if dtype == iron.f16:
        assert "iron_frag_a<half, 2>" in code and "simdgroup_load(a.m[i][k], p + index + at, (ulong)ld, ulong2(0), "\
            "trans);" in code
    else:  # bf16 computes in float matrices, converted lane by lane
        assert "iron_frag_a<float, 2>" in code and "simdgroup_matrix<bfloat" not in code
        assert re.search(r"iron_frag_a_load_bf16<2>\(A, .*, true, simd_lane_id\)", code)


def test_legacy_msl_writes_bf16_fragments_without_bfloat():
    src = _source(MK.frag_edges, iron.bf16, (1, 2, 1, True, True), version="3.0")
    code = _code(src)
    assert "bfloat" not in code and "iron_bf16_to_f32(p[index + at])" in code and "iron_f32_to_bf16(" in code
    if find_clang() is not None:
        ok, log = syntax_check(src)
        assert ok and "warning" not in log, log


@pytest.mark.skipif(find_clang() is None, reason="no clang")
@pytest.mark.parametrize("version", ["3.1", "3.0"])
def test_every_fragment_variant_passes_clang(version):
    for dtype in (iron.f16, iron.bf16):
        for constexprs in [(1, 1, 1, False, False), (2, 1, 2, True, False), (1, 2, 3, False, True)]:
            ok, log = syntax_check(_source(MK.frag_edges, dtype, constexprs, version))
            assert ok and "warning" not in log, log


def _oracle(rng, dtype, mt, nt, ks, trans_a, trans_b, ldb):
    m, n, k = 16 * mt, 16 * nt, 16 * ks
    a = rng.standard_normal((m, k)).astype(DTYPES[dtype])
    b = rng.standard_normal((k, n)).astype(DTYPES[dtype])
    a_mem = np.ascontiguousarray(a.T if trans_a else a).reshape(-1)
    b_stored = b.T if trans_b else b
    b_mem = np.full((b_stored.shape[0], ldb), np.nan, DTYPES[dtype])  # the padding is never read
    b_mem[:, :b_stored.shape[1]] = b_stored
    return a, b, a_mem, b_mem.reshape(-1)


@pytest.mark.parametrize("backend", ["cpu", "msl-cpu"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("tiles, ks, trans", [((2, 2), 2, (False, False)), ((2, 2), 1, (True, True)),
                                              ((1, 2), 3, (True, False)), ((2, 1), 2, (False, True))])
def test_masked_stores_write_exactly_the_inside(backend, dtype, tiles, ks, trans, rng):
    if unavailable_reason(backend) is not None:
        pytest.skip(unavailable_reason(backend))
    (mt, nt), (ta, tb) = tiles, trans
    m, n, k = 16 * mt, 16 * nt, 16 * ks
    ldb = (k if tb else n) + 5  # B is stored K x N, or N x K when transposed; padded
    a, b, a_mem, b_mem = _oracle(rng, dtype, mt, nt, ks, ta, tb, ldb)
    want = f64(a) @ f64(b)
    scale = np.abs(f64(a)) @ np.abs(f64(b))
    for rows, cols in EDGES:
        c = np.full((m, n), np.nan, DTYPES[dtype])
        c32 = np.full((m, n), np.nan, np.float32)
        MK.frag_edges[32, 32](a_mem, b_mem, c.reshape(-1), c32.reshape(-1), ldb, rows, cols, mt, nt, ks, ta, tb,
                              backend=backend)
        r, q = min(max(rows, 0), m), min(max(cols, 0), n)
        inside = np.zeros((m, n), bool)
        inside[:r, :q] = True
        what = f"rows={rows}, cols={cols}"
        assert np.isnan(f64(c)[~inside]).all() and np.isnan(c32[~inside]).all(), f"{what}: wrote outside"
        assert_close(c32[inside], want[inside], "f32", n_ops=k + 1, scale=scale[inside], what=f"C32, {what}")
        # the 16-bit output is the f32 result rounded once
        np.testing.assert_array_equal(f64(c[inside]), f64(c32[inside].astype(DTYPES[dtype])), err_msg=what)


@pytest.mark.skipif(unavailable_reason("msl-cpu") is not None, reason="msl-cpu unavailable")
def test_legacy_bf16_fragments_give_the_same_bits(monkeypatch, rng):
    """MSL 3.0 (bf16 as ushort bits) computes the same float matrices as MSL 3.1's bfloat: identical outputs."""
    a, b, a_mem, b_mem = _oracle(rng, "bf16", 1, 2, 2, False, True, 37)
    outs = []
    for version in ("3.1", "3.0"):
        monkeypatch.setenv("IRON_MSL_VERSION", version)
        c = np.full(16 * 32, np.nan, DTYPES["bf16"])
        c32 = np.full(16 * 32, np.nan, np.float32)
        MK.frag_edges[32, 32](a_mem, b_mem, c, c32, 37, 13, 27, 1, 2, 2, False, True, backend="msl-cpu")
        outs.append((c.view(np.uint16).copy(), c32.view(np.uint32).copy()))
    for new, old in zip(*outs):
        np.testing.assert_array_equal(new, old)
    assert np.isfinite(outs[0][1].view(np.float32).reshape(16, 32)[:13, :27]).all()
