"""Issue 17: launches that must be refused the same way on every backend, before anything runs or is allocated.

1. A grid the kernel's i32 ``program_id`` cannot address: the threads of one axis, whole groups counted, must be
   fewer than 2^31 (the interpreter, whose thread ids are one array over the whole grid, also bounds their product).
   Giant grids are never run here: a refused one raises first; one that passes that check meets a tiny output
   whose size check (``out[program_id(axis)]``) refuses it before any thread runs.
2. Launch keys are checked by type whatever ran before: ``k[64.0]`` and ``k[True]`` are refused even after ``k[64]``
   and ``k[1]`` (which compare equal to them) were launched.
3. One array passed for two buffer parameters of which the kernel writes one is refused naming both (on Vulkan each
   parameter has its own device copy, so such writes were lost); read-only sharing stays allowed.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

import iron
import iron.runtime.cuda_fast as cf
from iron import LaunchError, Tensor, program_id
from iron.runtime.arrays import shares_memory

from ..runtime_cuda.conftest import recorder  # noqa: F401 - a fixture
from ..runtime_cuda.test_fast_c import driver  # noqa: F401 - the fake CUDA driver fixture
from ..runtime_cuda.test_fast_path import FakeTensor, _Backend

THIS_FILE = os.path.abspath(__file__)
BIG = 2**31


@iron.kernel
def mark_x(out: Tensor[iron.i32]):
    out[program_id(0)] = program_id(0)


@iron.kernel
def mark_y(out: Tensor[iron.i32]):
    out[program_id(1)] = program_id(1)


@iron.kernel
def add_into(a: Tensor[iron.f32], b: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = a[i] + b[i]


@iron.kernel
def shift_left(src: Tensor[iron.f32], dst: Tensor[iron.f32], n: int):
    i = program_id(0)
    if i < n:
        dst[i] = src[i + 1] * 2.0


def assert_launch_error(info, *needles: str) -> LaunchError:
    """The LaunchError points at this file's ``# LAUNCH`` line and says each of ``needles``."""
    err = info.value
    assert err.loc is not None and os.path.abspath(err.loc.file) == THIS_FILE, err
    assert "# LAUNCH" in err.loc.text, err
    for needle in needles:
        assert needle in str(err), (needle, str(err))
    return err


# -- 1. grids past the index type ----------------------------------------------------------------------------------


@pytest.mark.parametrize("grid,group", [(BIG, 256), (BIG - 1, 256), (BIG - 1, 2), (BIG, 1), (2**40, 1024)])
def test_axis0_past_i32_is_refused(backend, grid, group):
    out = np.full(4, -7, np.int32)
    with pytest.raises(LaunchError) as info:
        mark_x[grid, group](out, backend=backend)  # LAUNCH
    err = assert_launch_error(info, "axis 0", "2^31")
    assert err.hint and "grid-stride" in err.hint
    assert (out == -7).all()


@pytest.mark.parametrize("grid,group", [((1, BIG), (1, 1)), ((1, BIG - 1), (1, 4)), ((4, 2**35), (4, 64))])
def test_axis1_past_i32_is_refused(backend, grid, group):
    out = np.full(4, -7, np.int32)
    with pytest.raises(LaunchError) as info:
        mark_y[grid, group](out, backend=backend)  # LAUNCH
    assert_launch_error(info, "axis 1", "2^31")
    assert (out == -7).all()


@pytest.mark.parametrize("grid,group", [(BIG - 1, 1), (BIG - 256, 256), (BIG - 1024, 1024)])
def test_largest_addressable_axis_passes_the_grid_check(backend, grid, group):
    """The last grids below 2^31 pass the grid check and meet the size check next (so nothing runs)."""
    out = np.full(4, -7, np.int32)
    with pytest.raises(LaunchError) as info:
        mark_x[grid, group](out, backend=backend)  # LAUNCH
    assert_launch_error(info, "argument 'out' has 4 elements", f"all {grid} threads of grid axis 0")
    assert (out == -7).all()


def test_grid_product_past_i32_on_the_interpreter(backend):
    """Each axis fits, the whole grid does not: the interpreter (one id array over the grid) refuses it; the others
    index each axis on its own, pass the grid check and meet the size check."""
    out = np.full(4, -7, np.int32)
    with pytest.raises(LaunchError) as info:
        mark_x[(2**16, 2**15), (16, 16)](out, backend=backend)  # LAUNCH
    if backend == "cpu":
        assert_launch_error(info, "2^31", "2147483648 threads")
    else:
        assert_launch_error(info, "argument 'out' has 4 elements")
    assert (out == -7).all()


def test_grid_check_comes_before_the_empty_grid_shortcut(backend):
    out = np.full(4, -7, np.int32)
    with pytest.raises(LaunchError) as info:
        mark_y[(0, BIG), (1, 1)](out, backend=backend)  # LAUNCH
    assert_launch_error(info, "axis 1", "2^31")


# -- 2. launch keys of the wrong type ------------------------------------------------------------------------------


def _key_error(k, key, backend: str) -> str:
    out = np.zeros(64, np.int32)
    with pytest.raises(LaunchError) as info:
        k[key](out, backend=backend)  # LAUNCH
    return assert_launch_error(info).message


@pytest.mark.parametrize("good,bad", [(64, 64.0), (1, True), (64, np.float32(64)), ((64, 32), (64, 32.0)),
                                      ((64, 32), (64.0, 32)), (((8, 8), (8, 1)), ((8, 8), (8, True))),
                                      ((64, 1), (64, True))])
def test_bad_launch_key_refused_after_an_equal_good_one_ran(backend, good, bad):
    k = iron.kernel(mark_x.fn)  # a kernel object of its own: its launch cache starts empty
    fresh = _key_error(k, bad, backend)
    assert "grid" in fresh or "group" in fresh
    out = np.full(64, -7, np.int32)
    k[good](out, backend=backend)
    n = good if isinstance(good, int) else good[0] if isinstance(good[0], int) else good[0][0]
    np.testing.assert_array_equal(out, np.where(np.arange(64) < n, np.arange(64), -7))
    assert _key_error(k, bad, backend) == fresh


def test_numpy_int_keys_still_launch(backend):
    out = np.full(64, -7, np.int32)
    mark_x[np.int64(64)](out, backend=backend)
    np.testing.assert_array_equal(out, np.arange(64))
    out[:] = -7
    mark_x[np.int32(40), np.int64(8)](out, backend=backend)
    np.testing.assert_array_equal(out, np.where(np.arange(64) < 40, np.arange(64), -7))


# -- 3. one array behind two buffer parameters ---------------------------------------------------------------------


def test_same_array_written_through_two_parameters_is_refused(backend, rng):
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    before = a.copy()
    with pytest.raises(LaunchError) as info:
        add_into[64](a, b, a, backend=backend)  # LAUNCH
    assert_launch_error(info, "'a'", "'out'", "writes 'out'")
    np.testing.assert_array_equal(a, before)


def test_overlapping_views_are_refused(backend, rng):
    """In-place shift through overlapping views: each thread would read what another wrote (or its stale copy)."""
    base = rng.standard_normal(65).astype(np.float32)
    before = base.copy()
    with pytest.raises(LaunchError) as info:
        shift_left[64](base[0:65], base[0:64], 64, backend=backend)  # LAUNCH
    assert_launch_error(info, "'src'", "'dst'")
    np.testing.assert_array_equal(base, before)


def test_disjoint_views_of_one_array_are_allowed(backend, rng):
    base = rng.standard_normal(192).astype(np.float32)
    a, b, out = base[:64], base[64:128], base[128:]
    out[:] = np.nan
    expect = a.astype(np.float64) + b.astype(np.float64)
    add_into[64](a, b, out, backend=backend)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


def test_read_only_sharing_is_allowed(backend, rng):
    a = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    add_into[64](a, a, out, backend=backend)
    np.testing.assert_allclose(out, 2.0 * a.astype(np.float64), rtol=1e-6)


def test_refused_after_a_clean_launch_of_the_same_key(backend, rng):
    """The check runs on every launch, not only the first one of a ``k[grid]``."""
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    add_into[64](a, b, out, backend=backend)
    np.testing.assert_allclose(out, a.astype(np.float64) + b, rtol=1e-6)
    with pytest.raises(LaunchError) as info:
        add_into[64](a, b, b, backend=backend)  # LAUNCH
    assert_launch_error(info, "'b'", "'out'")


# -- 3b. the CUDA fast launchers (no GPU needed: fake tensors and a fake driver, see tests/runtime_cuda) -------------


def test_device_ranges_overlap_by_bytes():
    a = FakeTensor(10, 0x1000)  # [0x1000, 0x1028)
    assert shares_memory(a, FakeTensor(10, 0x1000 + 36)) and shares_memory(FakeTensor(10, 0x1000 - 36), a)
    assert not shares_memory(a, FakeTensor(10, 0x1000 + 40)) and not shares_memory(FakeTensor(10, 0x1000 - 40), a)
    assert not shares_memory(a, FakeTensor(0, 0x1004))  # an empty tensor covers no memory
    assert not shares_memory(a, np.zeros(10, np.float32))  # host and device memory never alias


def _fast_add_into(launched):
    """The fast launcher of ``add_into[1000]`` made from a clean call, and a check that it serves or declines."""
    x, y, out = FakeTensor(1000, 0x10000), FakeTensor(1000, 0x20000), FakeTensor(1000, 0x30000)
    fast = cf.make_fast_launch(_Backend(), add_into, add_into.variant(None), (x, y, out), {}, (1000, 1, 1),
                               (256, 1, 1), {"a": 1000, "b": 1000, "out": 1000})
    assert fast is not None

    def served(*args) -> bool:
        before = launched()
        ok = fast(args)
        assert launched() == before + ok  # a declined call launches nothing
        return ok

    assert served(x, y, out)
    return x, y, served


def _check_fast_aliasing(x, y, served) -> None:
    assert not served(x, y, x)  # the same tensor read as `a` and written as `out`
    assert not served(x, y, FakeTensor(1000, 0x10000 + 4 * 996))  # out's first elements are a's last four
    assert not served(FakeTensor(1000, 0x30000 + 4 * 500), y, FakeTensor(1000, 0x30000))
    assert served(x, y, FakeTensor(1000, 0x10000 + 4 * 1000))  # adjacent, not overlapping
    assert served(x, x, FakeTensor(1000, 0x30000))  # read-only sharing
    assert served(x, FakeTensor(1000, 0x10000 + 16), FakeTensor(1000, 0x30000))


def test_python_fast_launcher_declines_overlapping_buffers(recorder):  # noqa: F811 - the imported fixture
    _check_fast_aliasing(*_fast_add_into(lambda: len(recorder.calls)))


def test_compiled_fast_launcher_declines_overlapping_buffers(driver):  # noqa: F811 - the imported fixture
    _check_fast_aliasing(*_fast_add_into(lambda: ctypes.c_int.in_dll(driver, "calls").value))
