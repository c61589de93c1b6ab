"""Real Iron kernels through ``k[grid](..., backend="vulkan")``: emitter + runtime end to end, NumPy oracles.

Skips where the SPIR-V emitter (``iron.codegen.spirv.emit_spirv``) has not landed or no Vulkan device is present.
"""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import T, Tensor, exp, kernel, program_id, simd_lane, simd_size, simd_sum

spirv = pytest.importorskip("iron.codegen.spirv", reason="the SPIR-V emitter has not landed")
if not hasattr(spirv, "emit_spirv"):
    pytest.skip("iron.codegen.spirv has no emit_spirv yet", allow_module_level=True)


@pytest.fixture
def vulkan(vk_backend, monkeypatch) -> str:
    """The backend name, registered for this test (until iron.runtime registers "vulkan" itself)."""
    import iron.runtime as rt

    monkeypatch.setitem(rt.BACKENDS, "vulkan", ("iron.runtime.vulkan", "VulkanBackend", "Vulkan compute"))
    monkeypatch.setitem(rt._INSTANCES, "vulkan", vk_backend)
    return "vulkan"


@kernel
def vk_exp(a: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = exp(a[i])


@kernel
def vk_axpb(x: Tensor[iron.f32], out: Tensor[iron.f32], a: float, b: int):
    i = program_id(0)
    out[i] = x[i] * a + b


@kernel
def vk_grid2(x: Tensor[iron.f32], out: Tensor[iron.f32], width: int):
    col = program_id(0)
    row = program_id(1)
    out[row * width + col] = x[row * width + col] + row


@kernel
def vk_simd(out: Tensor[iron.f32], width: Tensor[iron.i32]):
    i = program_id(0)
    out[i] = simd_sum(simd_lane() * 1.0)
    width[i] = simd_size()


@pytest.mark.parametrize("n", [1, 100, 1000, 4097])
def test_exp_f32(vulkan, rng, n):
    a = rng.uniform(-5, 5, n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    vk_exp[n](a, out, backend=vulkan)
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64)), rtol=2e-5)


def test_exp_f16(vulkan, vk_backend, rng):
    missing = {"float16", "storage16"} - set(vk_backend.info()["features"])
    if missing:
        pytest.skip(f"{vk_backend.info()['name']} lacks {', '.join(sorted(missing))}")
    a = rng.uniform(-3, 3, 333).astype(np.float16)
    out = np.full(333, np.nan, np.float16)
    vk_exp[333](a, out, backend=vulkan)
    np.testing.assert_allclose(out.astype(np.float64), np.exp(a.astype(np.float64)), rtol=2e-3)


def test_scalars(vulkan, rng):
    x = rng.uniform(-1, 1, 777).astype(np.float32)
    out = np.full(777, np.nan, np.float32)
    vk_axpb[777, 64](x, out, 2.5, -4, backend=vulkan)
    np.testing.assert_allclose(out, x.astype(np.float64) * 2.5 - 4, rtol=1e-6, atol=1e-6)


def test_2d_grid(vulkan, rng):
    w, h = 37, 19
    x = rng.uniform(-1, 1, w * h).astype(np.float32)
    out = np.full(w * h, np.nan, np.float32)
    vk_grid2[(w, h), (8, 8)](x, out, w, backend=vulkan)
    expect = x.reshape(h, w).astype(np.float64) + np.arange(h)[:, None]
    np.testing.assert_allclose(out.reshape(h, w), expect, rtol=1e-6)


def test_simd_size_is_the_device_subgroup(vulkan, vk_backend):
    n = 64
    out = np.full(n, np.nan, np.float32)
    width = np.zeros(n, np.int32)
    vk_simd[n, 32](out, width, backend=vulkan)
    w = vk_backend.simd_width()
    assert (width == w).all()
    np.testing.assert_allclose(out, w * (w - 1) / 2)


def test_non_contiguous_argument_is_a_launch_error(vulkan):
    a = np.zeros(64, np.float32)[::2]
    with pytest.raises(iron.LaunchError, match="'a' is not C-contiguous"):
        vk_exp[32](a, np.zeros(32, np.float32), backend=vulkan)
