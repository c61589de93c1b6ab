"""Tile-level constructs (issue 14) on every backend: register arrays (``local_array``) and vector accesses
(``vload``/``vstore``), against NumPy, outputs poisoned first."""

from __future__ import annotations

import numpy as np
import pytest

import iron

from . import kernels as K
from .sources import HEADER, module_from_source
from .test_kernels import DTYPES, as_dtype, assert_close, assert_exact, f64, poisoned


@pytest.fixture(params=list(DTYPES))
def dtype(request) -> str:
    return request.param


def _vec_widths(dtype: str) -> list[int]:
    return [1, 2, 4] if dtype == "f32" else [2, 4, 8]  # up to 16 bytes


@pytest.mark.parametrize("wide", [False, True])
def test_vload_vstore_through_registers(backend, dtype, rng, wide):
    vec = _vec_widths(dtype)[-1 if wide else 0]
    n = 64 * vec * 3
    x = as_dtype(rng.standard_normal(n) * 4, dtype)
    out = poisoned(n, dtype)
    K.vector_scale[n // vec](x, out, vec, backend=backend)
    want = f64(as_dtype(f64(x) * 2.0 + 1.0, dtype))  # computed in f32 (exact here: x*2+1 of a half), rounded once
    assert_close(out, want, dtype, n_ops=2)


def test_vectors_through_shared_memory(backend, dtype, rng):
    vec, block = (4 if dtype == "f32" else 8), 64
    groups = 3
    n = groups * block * vec
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.vector_via_shared[groups * block, block](x, out, vec, block, backend=backend)
    want = f64(x).reshape(groups, block, vec)[:, ::-1, :].reshape(-1)  # vectors reversed inside each group
    assert_exact(out, want, "vectors through shared memory")


def test_register_array_with_run_time_indices(backend, dtype, rng):
    threads, N = 37, 8
    x = as_dtype(rng.standard_normal(threads * N), dtype)
    out = poisoned(threads * N, dtype)
    K.local_dynamic_index[threads](x, out, N, N, backend=backend)
    assert_exact(out, f64(x).reshape(threads, N)[:, ::-1].reshape(-1), "reversed through a local array")


def test_misaligned_vector_access_is_located():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(8, np.float32)
    K.misaligned_vload[8](x, out, 0, backend="cpu")
    assert_exact(out, x.reshape(-1, 4)[:8, 0] + x.reshape(-1, 4)[:8, 3], "aligned")
    with pytest.raises(iron.ExecutionError, match=r"vector load from buffer 'x' at index 2 is misaligned") as e:
        K.misaligned_vload[8](x, out, 2, backend="cpu")
    assert "kernels.py" in str(e.value) and "vload(x, i * 4 + OFFSET, 4)" in str(e.value)


BAD_SOURCES = {
    "vload(x, 0, 3)": r"power-of-two count of elements, at most 16 bytes: 3 x f32",
    "vload(x, 0, 8)": r"8 x f32 is not one",
    "vload(x, 0, n)": r"vload\(t, i, n\) needs a compile-time count n",
    "local_array(iron.f32, n)": r"local_array\(dtype, n\) needs a positive compile-time size n",
    "vstore(out, 0, x)": r"vstore's value must be a local_array",
    "vload(local_array(iron.f32, 4), 0, 4)": r"vload needs a buffer or shared array, got a local",
}


@pytest.mark.parametrize("expr", list(BAD_SOURCES))
def test_bad_tile_constructs_are_located_errors(expr, tmp_path):
    call = expr.replace("vload(", "iron.vload(").replace("vstore(", "iron.vstore(")
    call = call.replace("local_array(", "iron.local_array(")
    mod = module_from_source(tmp_path, "bad_tile", HEADER + "def k(x: iron.Tensor[iron.f32], "
                             f"out: iron.Tensor[iron.f32], n: int):\n    v = {call}\n")
    with pytest.raises(iron.CompileError, match=BAD_SOURCES[expr]) as e:
        mod.k.ir(dtype=None)
    assert "bad_tile.py:6" in str(e.value)


def test_async_copy_pipeline(backend, dtype, rng):
    block, vec, tiles = 32, (4 if dtype == "f32" else 8), 5
    n = block * vec * tiles
    x = as_dtype(rng.standard_normal(n), dtype)
    out = poisoned(n, dtype)
    K.async_pipeline[block, block](x, out, tiles, block, vec, False, backend=backend)
    assert_exact(out, f64(x) * 2.0, "two-stage async pipeline")


def test_reading_a_stage_before_its_wait_is_exposed_by_the_interpreter(rng):
    """The interpreter lands async copies only at the async_wait that covers them: a kernel that skips the wait
    reads the old contents (NaN garbage or the previous tile), so its output is wrong on the CPU, not only on a GPU."""
    block, vec, tiles = 32, 4, 4
    n = block * vec * tiles
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    K.async_pipeline[block, block](x, out, tiles, block, vec, True, backend="cpu")
    assert not np.array_equal(out, x * 2.0)


def test_async_copy_errors_are_located(tmp_path):
    mod = module_from_source(tmp_path, "bad_async", HEADER + "def k(x: iron.Tensor[iron.f32], "
                             "out: iron.Tensor[iron.f32]):\n"
                             "    s = iron.shared(iron.f32, 64)\n    iron.async_copy(out, 0, x, 0, 4)\n")
    with pytest.raises(iron.CompileError, match="async_copy copies into a shared array") as e:
        mod.k.ir(dtype=None)
    assert "bad_async.py:7" in str(e.value)
