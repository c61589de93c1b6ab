"""The CPU model of Metal's SIMD-group matrices (``msl_model/include/metal_simdgroup_matrix.h`` and the driver's
collective, ``metal_matrix_driver.h``), on their own: a hand-written MSL kernel compiled with the driver runs
``simdgroup_load`` (device memory with a stride, an origin and the transpose flag; threadgroup memory),
``simdgroup_multiply_accumulate``, ``simdgroup_store`` (into a larger matrix at an origin) and
``make_filled_simdgroup_matrix`` for float, half and bfloat against float64 NumPy, checks each lane's
``thread_elements()`` against Apple's layout as MLX writes it, and that misuse is an error, never a hang."""

from __future__ import annotations

import ctypes
import subprocess

import ml_dtypes
import numpy as np
import pytest

from iron.codegen.msl_model import INCLUDE_DIR, find_clang, syntax_check
from iron.runtime.msl_cpu import find_clangxx

CLANGXX = find_clangxx()
pytestmark = pytest.mark.skipif(CLANGXX is None, reason="clang++ not installed (apt-get install clang-16)")

TYPES = {"float": np.float32, "half": np.float16, "bfloat": ml_dtypes.bfloat16}
MODES = {"ops": 0, "half_the_lanes": 1, "lane_pointers": 2}

# The kernel under test, in MSL; params: type, mode, lda, ax, ay, transpose, ldd, dx, dy, fill (float bits).
_HARNESS = r"""
#include "metal_driver.h"
using namespace metal;

template <typename T>
void matrix_ops(const device T* a, const device T* b, const device float* c, device float* d, device T* copy,
                device float* elems, device T* filled, const device uint* p, threadgroup T* tb, uint lane,
                uint lid) {
    for (uint i = lid; i < 64; i += 32) {
        tb[i] = b[i];
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_matrix<T, 8, 8> ma;
    simdgroup_matrix<T, 8, 8> mb;
    simdgroup_float8x8 mc;
    simdgroup_float8x8 md;
    if (p[1] == 1 && lane >= 16) {
        return;  // misuse: half the SIMD-group skips the load
    }
    const ulong shift = p[1] == 2 ? lane % 2 : 0;  // misuse: lanes pass different pointers
    simdgroup_load(ma, a + shift, p[2], ulong2{p[3], p[4]}, p[5] != 0);
    simdgroup_load(mb, tb);
    simdgroup_load(mc, c, 8);
    simdgroup_multiply_accumulate(md, ma, mb, mc);
    simdgroup_store(md, d, p[6], ulong2{p[7], p[8]});
    simdgroup_store(ma, copy);
    elems[2 * lane] = static_cast<float>(ma.thread_elements()[0]);
    elems[2 * lane + 1] = static_cast<float>(ma.thread_elements()[1]);
    simdgroup_store(make_filled_simdgroup_matrix<T, 8, 8>(static_cast<T>(as_type<float>(p[9]))), filled, 8);
}

template <typename T>
void call(void* const* args, void* const* groupmem, const iron_model::Ids& ids) {
    matrix_ops<T>(static_cast<const T*>(args[0]), static_cast<const T*>(args[1]), static_cast<const float*>(args[2]),
                  static_cast<float*>(args[3]), static_cast<T*>(args[4]), static_cast<float*>(args[5]),
                  static_cast<T*>(args[6]), static_cast<const uint*>(args[7]), static_cast<volatile T*>(groupmem[0]),
                  ids.thread_index_in_simdgroup, ids.thread_position_in_threadgroup.x);
}

static void invoke(void* const* args, void* const* groupmem, const iron_model::Ids& ids) {
    const uint type = static_cast<const uint*>(args[7])[0];
    if (type == 0) call<float>(args, groupmem, ids);
    if (type == 1) call<half>(args, groupmem, ids);
    if (type == 2) call<bfloat>(args, groupmem, ids);
}

IRON_MODEL_ENTRY(invoke)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("msl-matrix")
    (folder / "harness.cpp").write_text(_HARNESS)
    lib = folder / "harness.so"
    cmd = [CLANGXX, "-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-ffp-contract=off",
           "-Wno-unknown-attributes", "-I", str(INCLUDE_DIR), "-o", str(lib), str(folder / "harness.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    fn = ctypes.CDLL(str(lib)).iron_model_launch
    fn.restype = ctypes.c_int
    return fn


def _run(model, type_name, arrays, params, simd_width=32, group=32):
    """Launch one threadgroup; returns the driver's error text ("" on success)."""
    u32 = ctypes.c_uint
    args = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    tg = (u32 * 1)(64 * np.dtype(TYPES[type_name]).itemsize)
    error = ctypes.create_string_buffer(1024)
    rc = model(args, tg, u32(1), (u32 * 3)(1, 1, 1), (u32 * 3)(group, 1, 1), u32(simd_width), ctypes.c_int(1),
               u32(1), error, u32(len(error)))
    assert (rc == 0) == (error.value == b"")
    return error.value.decode()


def _layout(lane: int) -> tuple[int, int]:
    """Apple's thread_elements() layout as MLX's BlockMMA computes it (steel/gemm/mma.h: sm, sn)."""
    qid = lane // 4
    return (qid & 4) + (lane // 2) % 4, (qid & 2) * 2 + (lane % 2) * 2


def _problem(rng, type_name, trans, lda=13, origin=(3, 2), ldd=11, dorigin=(2, 5), mode="ops"):
    dt = TYPES[type_name]
    a = (rng.standard_normal(lda * 16) * 2).astype(dt)
    b = rng.standard_normal(64).astype(dt)
    c = rng.standard_normal(64).astype(np.float32)
    d = np.full(ldd * 16, np.nan, np.float32)
    copy, filled = np.zeros(64, dt), np.zeros(64, dt)
    elems = np.full(64, np.nan, np.float32)
    fill = np.float32(rng.standard_normal()).astype(dt).astype(np.float32)
    params = np.array([list(TYPES).index(type_name), MODES[mode], lda, *origin, int(trans), ldd, *dorigin,
                       fill.view(np.uint32)], np.uint32)
    return [a, b, c, d, copy, elems, filled, params]


def _block(mem, ld, origin, trans):
    """The 8 x 8 matrix simdgroup_load reads: rows y.., columns x.. of the row-major memory, then transposed."""
    x, y = origin
    block = mem.reshape(-1, ld)[y:y + 8, x:x + 8]
    return block.T if trans else block


def _mma_in_order(a, b, c):
    """d = c + sum_k a[:, k] b[k, :] in k order, one f32 rounding per step (the model's documented order). Exact:
    a product of two half or bfloat values is a float32, and the float64 sum of two float32 values rounded to
    float32 is the correctly rounded float32 sum (53 >= 2 * 24 + 2)."""
    acc = c.astype(np.float32)
    for k in range(8):
        prod = np.outer(a[:, k].astype(np.float64), b[k, :].astype(np.float64)).astype(np.float32)
        acc = (acc.astype(np.float64) + prod.astype(np.float64)).astype(np.float32)
    return acc


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize("trans", [False, True])
def test_load_multiply_accumulate_store(model, rng, type_name, trans):
    arrays = _problem(rng, type_name, trans)
    a, b, c, d, copy, elems, filled, params = arrays
    assert _run(model, type_name, arrays, params) == ""
    ma = _block(a, 13, (3, 2), trans)
    want = ma.astype(np.float64) @ b.reshape(8, 8).astype(np.float64) + c.reshape(8, 8)
    got = _block(d, 11, (2, 5), False)
    scale = np.abs(ma.astype(np.float64)) @ np.abs(b.reshape(8, 8).astype(np.float64)) + np.abs(c.reshape(8, 8))
    assert np.all(np.abs(got - want) <= 9 * 2.0**-24 * scale), "A @ B + C"
    if type_name != "float":  # exact against the documented order
        np.testing.assert_array_equal(got, _mma_in_order(ma, b.reshape(8, 8), c.reshape(8, 8)))
    outside = np.ones((16, 11), bool)
    outside[5:13, 2:10] = False
    assert np.isnan(d.reshape(16, 11)[outside]).all(), "simdgroup_store wrote outside its 8 x 8 block"
    np.testing.assert_array_equal(copy.reshape(8, 8).view(np.uint16 if type_name != "float" else np.uint32),
                                  np.ascontiguousarray(ma).view(np.uint16 if type_name != "float" else np.uint32))
    for lane in range(32):
        r, col = _layout(lane)
        assert elems[2 * lane] == np.float32(ma[r, col]) and elems[2 * lane + 1] == np.float32(ma[r, col + 1]), lane
    assert (filled.astype(np.float32) == params[9].view(np.float32)).all()


def test_a_matrix_op_skipped_by_some_lanes_is_an_error_not_a_hang(model, rng):
    arrays = _problem(rng, "half", False, mode="half_the_lanes")
    why = _run(model, "half", arrays, arrays[-1])
    assert "simdgroup_load reached by 16 of the 32 lanes of SIMD-group 0" in why


def test_lanes_passing_different_pointers_is_an_error(model, rng):
    arrays = _problem(rng, "float", False, mode="lane_pointers")
    why = _run(model, "float", arrays, arrays[-1])
    assert "simdgroup_load: lane 1 of SIMD-group 0 called simdgroup_load with other arguments than lane 0" in why


def test_simd_groups_other_than_32_lanes_are_refused(model, rng):
    arrays = _problem(rng, "bfloat", False)
    why = _run(model, "bfloat", arrays, arrays[-1], simd_width=16)
    assert "SIMD-group matrices need SIMD-groups of 32 lanes" in why and "IRON_MSL_CPU_SIMD_WIDTH=16" in why


@pytest.mark.skipif(find_clang() is None, reason="no clang")
def test_the_element_types_of_matrix_and_memory_must_agree():
    """As in Metal: a half matrix loads from half memory; the model refuses a float pointer at compile time."""
    prelude = "#include <metal_stdlib>\nusing namespace metal;\n"
    body = "kernel void k(device {mem} *p [[buffer(0)]]) {{\n    simdgroup_half8x8 m;\n    simdgroup_load(m, p);\n}}\n"
    assert syntax_check(prelude + body.format(mem="half"))[0]
    ok, log = syntax_check(prelude + body.format(mem="float"))
    assert not ok and "simdgroup_load" in log
