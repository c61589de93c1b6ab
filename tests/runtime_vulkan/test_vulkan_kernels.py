"""Real Iron kernels through ``k[grid](..., backend="vulkan")``: emitter + runtime end to end, NumPy oracles.

Skips where the SPIR-V emitter (``iron.codegen.spirv.emit_spirv``) has not landed or no Vulkan device is present.
"""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import (
    T,
    Tensor,
    atomic_add,
    cast,
    exp,
    f32,
    i32,
    kernel,
    max,
    min,
    program_id,
    simd_lane,
    simd_size,
    simd_sum,
)

from ..frontend.kernels import block_sum
from ..frontend.test_atomics import check_float_atomics

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


@kernel
def vk_histogram(x: Tensor[f32], hist: Tensor[i32], total: Tensor[f32], nbins: int):
    i = program_id(0)
    atomic_add(hist, min(max(cast(x[i], i32), 0), nbins - 1), 1)
    atomic_add(total, 0, x[i])


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


@pytest.mark.parametrize("block", [8, 64, 256])
def test_shared_memory_and_barriers(vulkan, rng, block):
    groups = 5
    x = rng.uniform(-1, 1, groups * block).astype(np.float32)
    out = np.full(groups, np.nan, np.float32)
    block_sum[groups * block, block](x, out, block, backend=vulkan)
    rows = x.reshape(groups, block).astype(np.float64)
    # any f32 summation order: |error| <= n * 2**-24 * sum|x| (a relative bound fails on a row that cancels)
    err, bound = np.abs(out - rows.sum(1)), block * 2.0**-24 * np.abs(rows).sum(1)
    assert (err <= bound).all(), (out, rows.sum(1), bound)


@pytest.mark.parametrize("native", [True, False])
def test_atomics(vulkan, vk_backend, rng, monkeypatch, native):
    """i32 and f32 atomic_add; native=False forces the CAS-loop form a device without float atomics gets."""
    if not native:
        monkeypatch.setitem(vk_backend.context().has, "atomic_float_add", False)
    x = rng.uniform(-2, 12, 1001).astype(np.float32)
    hist = np.zeros(10, np.int32)
    total = np.zeros(1, np.float32)
    vk_histogram[1001](x, hist, total, 10, backend=vulkan)
    np.testing.assert_array_equal(hist, np.bincount(np.clip(x.astype(np.int32), 0, 9), minlength=10))
    np.testing.assert_allclose(total[0], x.astype(np.float64).sum(), rtol=1e-4)



@pytest.mark.parametrize("m", [1, 16])
def test_cas_float_add_returns_old_values(vulkan, vk_backend, rng, monkeypatch, m):
    """The CAS-loop f32 atomic_add (a device without float atomics) returns each thread's old value, as the loop of
    atomic_max does (lavapipe once gave lanes that left the loop early the last lane's value)."""
    monkeypatch.setitem(vk_backend.context().has, "atomic_float_add", False)
    check_float_atomics(vulkan, rng, m)

def test_source_and_compile_need_no_device(monkeypatch):
    import iron.runtime as rt
    from iron.runtime.vulkan import VulkanBackend

    monkeypatch.setitem(rt.BACKENDS, "vulkan", ("iron.runtime.vulkan", "VulkanBackend", "Vulkan compute"))
    monkeypatch.setitem(rt._INSTANCES, "vulkan", VulkanBackend())
    words = vk_exp.compile("vulkan", dtype="f32")
    assert isinstance(words, bytes) and words[:4] == (0x07230203).to_bytes(4, "little")
    text = vk_exp.source("vulkan", dtype="f32")
    assert "vk_exp" in text


def test_time_launch(vulkan, vk_backend, rng):
    a = rng.uniform(-1, 1, 4096).astype(np.float32)
    out = np.full(4096, np.nan, np.float32)
    variant = vk_exp.variant(iron.f32)
    ms = vk_backend.time_launch(variant, {"a": a, "out": out}, {}, (4096, 1, 1), (256, 1, 1), repeat=3)
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64)), rtol=2e-5)
    if vk_backend.info()["timestamps"]:
        assert ms is not None and ms > 0
