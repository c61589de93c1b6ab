"""The lanes module: elementwise kernels on a 1-D grid run several consecutive elements per invocation on Vulkan
(``codegen.spirv.lanes_plan``; 4 for f32 buffers, 8 for 16-bit ones). Every grid size around the width (the full
path and the tail), in-place updates, write-only outputs, buffers read at other indices and loops inside the body,
against NumPy oracles in float64 with poisoned outputs; and ``IRON_VULKAN_VECTORIZE=0`` takes the plain module."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import T, Tensor, exp, kernel, program_id
from iron.codegen.spirv import lanes_plan

from ..frontend.test_kernels import as_dtype, f64, poisoned


@kernel
def scale_shift(x: Tensor[T], y: Tensor[T], alpha: float):
    i = program_id(0)
    y[i] = y[i] * alpha + exp(x[i])  # y is read and written: preloaded and written back


@kernel
def gather_add(x: Tensor[T], table: Tensor[T], out: Tensor[T], m: int):
    i = program_id(0)
    acc = x[i]
    for j in range(m):  # a loop inside the element's body, a buffer read at other indices
        acc = acc + table[(i + j) % m]
    out[i] = acc


@kernel
def half_of_them(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    if x[i] > 0.0:  # out is stored on some paths only: the others keep its contents
        out[i] = x[i] * 2.0


@kernel
def widen(x: Tensor[T], out: Tensor[iron.f32], back: Tensor[T]):
    i = program_id(0)
    out[i] = x[i] * 2.0  # an f32 lane beside 16-bit ones: two 16-byte words per invocation for it
    back[i] = x[i] + 1.0


_TOL = {"f32": 2e-6, "f16": 2e-3, "bf16": 1.6e-2}


def _close(got, want, dtype):
    got, want = f64(got), np.asarray(want, dtype=np.float64)
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} elements still NaN"
    tol = _TOL[dtype]
    assert np.all(np.abs(got - want) <= tol * np.abs(want) + tol), np.max(np.abs(got - want))


@pytest.fixture
def be(vk_backend, monkeypatch):
    import iron.runtime as rt

    monkeypatch.setitem(rt._INSTANCES, "vulkan", vk_backend)
    return vk_backend


def _module(be, k, dtype, n):
    return be._device_module(k.variant(getattr(iron, dtype)), (n, 1, 1))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 64, 1001])
def test_lanes_match_numpy_around_the_width(be, rng, dtype, n):
    width = 4 if dtype == "f32" else 8
    assert _module(be, scale_shift, dtype, n).lanes == width
    x = as_dtype(rng.standard_normal(n), dtype)
    y0 = as_dtype(rng.standard_normal(n), dtype)
    y = y0.copy()
    scale_shift[n](x, y, 0.5, backend="vulkan")
    _close(y, f64(y0) * 0.5 + np.exp(f64(x)), dtype)

    m = 5
    table = as_dtype(rng.standard_normal(m), dtype)
    out = poisoned(n, dtype)
    gather_add[n](x, table, out, m, backend="vulkan")
    idx = np.arange(n)
    want = f64(x) + sum(f64(table)[(idx + j) % m] for j in range(m))
    _close(out, want, dtype)

    out = as_dtype(np.full(n, 7.0), dtype)
    half_of_them[n](x, out, backend="vulkan")
    _close(out, np.where(f64(x) > 0, f64(x) * 2.0, 7.0), dtype)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [5, 16, 1003])
def test_lanes_with_buffers_of_two_widths(be, rng, dtype, n):
    assert _module(be, widen, dtype, n).lanes == 8
    x = as_dtype(rng.standard_normal(n), dtype)
    out, back = poisoned(n, "f32"), poisoned(n, dtype)
    widen[n](x, out, back, backend="vulkan")
    _close(out, f64(x) * 2.0, "f32")
    _close(back, f64(x) + 1.0, dtype)


def test_vectorize_off_takes_the_plain_module(be, rng, monkeypatch):
    monkeypatch.setenv("IRON_VULKAN_VECTORIZE", "0")
    assert _module(be, scale_shift, "f32", 100).lanes == 1
    x, y = as_dtype(rng.standard_normal(100), "f32"), as_dtype(np.zeros(100), "f32")
    scale_shift[100](x, y, 1.0, backend="vulkan")
    _close(y, np.exp(f64(x)), "f32")


def test_kernels_with_a_return_or_a_2d_grid_have_no_lanes_module(be):
    @kernel
    def early(x: Tensor[T], out: Tensor[T], n: int):
        i = program_id(0)
        out[i] = x[i]
        if i >= n:
            return
        out[i] = x[i] + 1.0

    assert lanes_plan(early.variant(iron.f32).kernel) is None
    assert lanes_plan(scale_shift.variant(iron.f32).kernel) is not None
    assert be._device_module(scale_shift.variant(iron.f32), (16, 2, 1)).lanes == 1


@kernel
def many_loops(x: Tensor[iron.i32], out: Tensor[iron.i32]):
    i = program_id(0)
    acc = x[i]
    for k in iron.static_range(70):  # unrolled: 70 loops, each with its own trip count
        j = 0
        while j < (i + k) % 3:
            acc = acc * 3 + k
            j += 1
    out[i] = acc


def test_a_kernel_whose_lanes_module_is_huge_runs_its_plain_one(be, rng):
    """The lanes module holds the body 8 times (4 elements, full path and tail); fuzz seed 707002911's 149 loops made
    it 197,761 words, which lavapipe had not compiled after 150 s and then crashed on (its plain module: 1.9 s). Over
    LANES_MAX_WORDS (65,536) a launch takes the plain module; this kernel's lanes module is 81,379 words, its plain
    one 10,784."""
    from iron.codegen.spirv import emit_spirv

    variant = many_loops.variant(None)
    plan = lanes_plan(variant.kernel)
    assert plan is not None and len(emit_spirv(variant.kernel, lanes=plan).words) // 4 > 1 << 16
    n = 37
    lanes = be._device_module(variant, (n, 1, 1)).lanes
    assert lanes == 1, lanes
    assert _module(be, scale_shift, "f32", n).lanes == 4  # small kernels keep theirs
    x = rng.integers(-1000, 1000, n).astype(np.int32)
    out = np.full(n, -12345, np.int32)
    many_loops[n](x, out, backend="vulkan")
    want = x.astype(np.int64)
    for k in range(70):
        for j in range(3):
            step = j < (np.arange(n) + k) % 3
            want = np.where(step, (want * 3 + k + 2**31) % 2**32 - 2**31, want)
    assert np.array_equal(out, want.astype(np.int32))
