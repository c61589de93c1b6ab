"""Matrix fragments on Vulkan through cooperative matrices (issue 14 point 4, codegen/spirv/coopmat.py), on a device
that reports VK_KHR_cooperative_matrix with 16 x 16 x 16 f16 (and bf16) configurations -- NVIDIA's driver on the
H200 -- and, for comparison, through the scalar fallback (``IRON_VULKAN_COOPMAT=0``). Every test runs once per
path: "coopmat" skips cleanly without such a device and asserts that the module it ran multiplies with cooperative
matrices; "emulated" runs the same lowering with the matrices emulated in plain SPIR-V (``IRON_VULKAN_COOPMAT=
emulate``: lavapipe in CI checks the tiles, layouts, strides, scratch paths and the Vulkan memory model there);
"fallback" runs the scalar fallback.

Covered: frag_gemm (tests/frontend/kernels.py) for every tiling and transpose, leading dimensions and offsets that
break the 16-byte alignment cooperative loads need (the scratch path), f16/bf16 results rounded as the interpreter
rounds them, edges written only inside, fragments loaded from and stored into shared memory, and std/gemm. Float64
NumPy oracles on fresh random inputs, outputs poisoned first. On the H200: ``IRON_TEST_BACKENDS=vulkan python -m
pytest tests/runtime_vulkan/test_coopmat_gpu.py -rs``."""

from __future__ import annotations

import numpy as np
import pytest

import iron

from ..codegen_spirv import coopmat_kernels as CK
from ..frontend import kernels as FK
from ..frontend.test_kernels import as_dtype, assert_close, f64, poisoned

HALVES = ["f16", "bf16"]


#: the module's ``fragments`` on each path, and the IRON_VULKAN_COOPMAT value that selects it
PATHS = {"coopmat": ("cooperative", "1"), "emulated": ("emulated", "emulate"), "fallback": ("scalar", "0")}


@pytest.fixture(params=list(PATHS))
def path(request, vk_backend, monkeypatch):
    """The Vulkan path under test (see the module docstring); "coopmat" skips where the device lacks it."""
    ctx = vk_backend.context()
    if request.param == "coopmat" and not ctx.coopmat:
        pytest.skip(f"{ctx.phys.name} ({ctx.driver}) has no 16x16x16 f16/bf16 -> f32 subgroup cooperative "
                    "matrices (VK_KHR_cooperative_matrix)")
    monkeypatch.setenv("IRON_VULKAN_COOPMAT", PATHS[request.param][1])
    import iron.runtime as rt

    monkeypatch.setitem(rt._INSTANCES, "vulkan", vk_backend)  # launches run on the context checked here
    return request.param


def _check_path(be, path: str, kernel, dtype: str, constexprs: tuple) -> None:
    """The module a launch of this variant runs took the path under test."""
    if path == "coopmat" and dtype not in be.context().coopmat:
        pytest.skip(f"the device multiplies no {dtype} cooperative matrices")
    spk = be._device_module(kernel.variant(getattr(iron, dtype), constexprs))
    assert spk.fragments == PATHS[path][0], spk.fragments
    assert ("cooperative_matrix" in spk.features) == (path == "coopmat"), sorted(spk.features)


def _scale(a, b):
    return np.abs(f64(a)) @ np.abs(f64(b))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("tiles, trans", [((1, 1), (False, False)), ((2, 1), (True, False)),
                                          ((1, 2), (False, True)), ((2, 2), (True, True))])
def test_frag_gemm(vk_backend, path, dtype, tiles, trans, rng):
    (mt, nt), (ta, tb) = tiles, trans
    _check_path(vk_backend, path, FK.frag_gemm, dtype, (mt, nt, ta, tb))
    width = vk_backend.simd_width()
    m, n, k = 64 * mt, 32 * nt, 80
    a, b = as_dtype(rng.standard_normal((m, k)), dtype), as_dtype(rng.standard_normal((k, n)), dtype)
    a_mem = np.ascontiguousarray(a.T if ta else a).reshape(-1)
    b_mem = np.ascontiguousarray(b.T if tb else b).reshape(-1)
    c = np.full((m, n), np.nan, np.float32)
    rows, cols = m - 5, n - 3  # the last tiles are edges
    FK.frag_gemm[(m // (16 * mt) * width, n // (16 * nt)), (width, 1)](
        a_mem, b_mem, c.reshape(-1), n, k, rows, cols, mt, nt, ta, tb, backend="vulkan")
    want = f64(a) @ f64(b)
    assert_close(c[:rows, :cols].reshape(-1), want[:rows, :cols].reshape(-1), "f32", n_ops=k + 1,
                 scale=_scale(a, b)[:rows, :cols].reshape(-1))
    assert np.isnan(c[rows:, :]).all() and np.isnan(c[:, cols:]).all(), "elements past rows/cols were written"


#: the strided problem: C (M x N, its last row and column tiles edges) from A (M_ALL x K) and B (K x N_ALL), whole
#: tiles of which the fragments read
M, N, K, M_ALL, N_ALL = 40, 56, 80, 48, 64


def _strided(rng, dtype, trans_a, trans_b, pad):
    """A and B stored with leading dimensions and offsets ``pad`` elements off alignment (trans: transposed)."""
    a, b = as_dtype(rng.standard_normal((M_ALL, K)), dtype), as_dtype(rng.standard_normal((K, N_ALL)), dtype)
    a_stored, b_stored = (a.T if trans_a else a), (b.T if trans_b else b)
    lda, ldb = a_stored.shape[1] + pad, b_stored.shape[1] + pad
    mems = []
    for stored, ld in ((a_stored, lda), (b_stored, ldb)):
        mem = np.zeros(pad + ld * stored.shape[0], a.dtype)
        mem[pad:].reshape(-1, ld)[:, :stored.shape[1]] = stored
        mems.append(mem)
    return a, b, mems[0], mems[1], lda, ldb


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("pad", [0, 3])
@pytest.mark.parametrize("trans", [(False, False), (True, True)])
def test_strided_gemm_rounds_into_halves(vk_backend, path, dtype, pad, trans, rng):
    """Offsets and leading dimensions ``pad`` off 8-element alignment (pad 3: every load and store takes the
    scratch path), an f16/bf16 result rounded once, an edge in both directions."""
    _check_path(vk_backend, path, CK.strided_gemm, dtype, trans)
    a, b, a_mem, b_mem, lda, ldb = _strided(rng, dtype, *trans, pad)
    ldc = N_ALL + pad
    c_mem = poisoned(pad + ldc * M_ALL, dtype)
    width = vk_backend.simd_width()
    CK.strided_gemm[(N_ALL // 32 * width, M_ALL // 16), (width, 1)](
        a_mem, b_mem, c_mem, pad, lda, pad, ldb, pad, ldc, M, N, K, *trans, backend="vulkan")
    c = c_mem[pad:].reshape(M_ALL, ldc)
    want = (f64(a) @ f64(b))[:M, :N]
    assert_close(c[:M, :N].reshape(-1), want.reshape(-1), dtype, n_ops=K + 1, scale=_scale(a, b)[:M, :N].reshape(-1))
    outside = np.concatenate([c[:M, N:].reshape(-1), c[M:, :].reshape(-1), c_mem[:pad]]).astype(np.float64)
    assert np.isnan(outside).all(), "elements outside the matrix were written"


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("pad", [0, 3])
def test_fragments_through_shared_memory(vk_backend, path, dtype, pad, rng):
    _check_path(vk_backend, path, CK.shared_gemm, dtype, (pad,))
    k = 64
    a, b = as_dtype(rng.standard_normal((16, k)), dtype), as_dtype(rng.standard_normal((k, 16)), dtype)
    c = np.full(256, np.nan, np.float32)
    width = vk_backend.simd_width()
    CK.shared_gemm[width, width](a.reshape(-1), b.reshape(-1), c, k, pad, backend="vulkan")
    assert_close(c, (f64(a) @ f64(b)).reshape(-1), "f32", n_ops=k + 1, scale=_scale(a, b).reshape(-1))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("vec_rows", [16, 5, 0])
def test_halves_two_to_a_word(vk_backend, path, dtype, vec_rows, rng):
    """Shared tiles written by vector copies and by neighbouring lanes' element stores (the two halves of one word:
    codegen/spirv/pairs.py), then multiplied from shared memory."""
    _check_path(vk_backend, path, CK.paired_gemm, dtype, (vec_rows,))
    k = 48
    a, b = as_dtype(rng.standard_normal((16, k)), dtype), as_dtype(rng.standard_normal((k, 16)), dtype)
    c = np.full(256, np.nan, np.float32)
    width = vk_backend.simd_width()
    CK.paired_gemm[width, width](a.reshape(-1), b.reshape(-1), c, k, vec_rows, backend="vulkan")
    assert_close(c, (f64(a) @ f64(b)).reshape(-1), "f32", n_ops=k + 1, scale=_scale(a, b).reshape(-1))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("shape", [(64, 48, 40), (96, 80, 72)])
def test_std_gemm(vk_backend, path, dtype, shape, rng):
    from iron.std import gemm as G
    from iron.std import gemm_staged

    cfg = dict(zip(G._RS_FIELDS, G.VULKAN[0]))  # what std gemm runs on lavapipe: gemm_rs, its first tile
    _check_path(vk_backend, path, gemm_staged.gemm_rs, dtype,
                (*(cfg[f] for f in G._RS_FIELDS), vk_backend.simd_width(), False))
    m, n, k = shape
    a, b = as_dtype(rng.standard_normal((m, k)), dtype), as_dtype(rng.standard_normal((k, n)), dtype)
    c = poisoned(m * n, dtype).reshape(m, n)
    G.launch(a, b, c, backend="vulkan")
    assert_close(c.reshape(-1), (f64(a) @ f64(b)).reshape(-1), dtype, n_ops=k + 1, scale=_scale(a, b).reshape(-1))
