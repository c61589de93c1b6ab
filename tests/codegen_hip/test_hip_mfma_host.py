"""The printed MFMA fragment helpers themselves (``HipDialect(64)``'s prelude: loads, mma, store), compiled for the CPU
by clang and run by a wavefront of 64 threads that meet at every cross-lane operation:

- MFMA path (``-D__gfx90a__``): ``__builtin_amdgcn_mfma_f32_16x16x16f16`` / ``_bf16_1k`` are stand-ins that gather
  the 64 lanes' registers and compute D = A B + C where AMD's matrix instruction calculator places each operand
  (data/mfma_16x16x16_layout.csv), not where Iron's layout does;
- shuffle path (no CDNA2+ macro, as on gfx906): ``__shfl`` is a stand-in exchange between the 64 threads.

Each case loads fragments from memory with a stride, an offset and optionally transposed (the aligned 8-byte path
and the element path), accumulates over k steps, stores with an edge mask into a NaN-poisoned output, and is checked
against float64 NumPy: inside the mask within f32 accumulation (and output rounding), outside it untouched.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from iron.codegen.cfamily.hip import HIP64

from .mfma_reference import INSTRUCTIONS, bf16_bits, calculator_layout, random_bits, value

CLANG = shutil.which("clang++-16") or shutil.which("clang++")
pytestmark = pytest.mark.skipif(CLANG is None, reason="no clang++ to compile the helpers for the CPU")
SHAPES = ((1, 1), (2, 3))  # (MT, NT) instantiated in the harness, chosen at run time

_HARNESS = r"""
#include <cmath>
#include <cstring>
#include <pthread.h>
#define __device__
#define __forceinline__ inline
struct iron_host_dim3 { unsigned x, y, z; };
static thread_local iron_host_dim3 threadIdx;
static const iron_host_dim3 blockDim = {64, 1, 1};
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }

// the wavefront: 64 threads that meet at each cross-lane operation
static pthread_barrier_t wave;
static int shfl_slot[64];
static inline int __shfl(int v, int src) {
    shfl_slot[threadIdx.x] = v;
    pthread_barrier_wait(&wave);
    const int r = shfl_slot[src & 63];
    pthread_barrier_wait(&wave);
    return r;
}

// the instruction as AMD's calculator lays it out (tables filled by the test): D = A B + C
typedef short host_v4s __attribute__((ext_vector_type(4)));
typedef _Float16 host_v4h __attribute__((ext_vector_type(4)));
typedef float host_v4f __attribute__((ext_vector_type(4)));
extern "C" { int amd_a[16][16][2], amd_b[16][16][2], amd_d[16][16][2]; }
static float reg_a[64][4], reg_b[64][4], reg_c[64][4];
static host_v4f host_mfma(const float* a, const float* b, host_v4f c) {
    const int lane = threadIdx.x;
    for (int i = 0; i < 4; ++i) { reg_a[lane][i] = a[i]; reg_b[lane][i] = b[i]; reg_c[lane][i] = c[i]; }
    pthread_barrier_wait(&wave);
    host_v4f d;
    for (int m = 0; m < 16; ++m) for (int n = 0; n < 16; ++n) {
        if (amd_d[m][n][0] != lane) continue;
        double s = reg_c[lane][amd_d[m][n][1]];
        for (int k = 0; k < 16; ++k)
            s += (double)reg_a[amd_a[m][k][0]][amd_a[m][k][1]] * (double)reg_b[amd_b[k][n][0]][amd_b[k][n][1]];
        d[amd_d[m][n][1]] = (float)s;
    }
    pthread_barrier_wait(&wave);
    return d;
}
static host_v4f host_mfma_f16(host_v4h a, host_v4h b, host_v4f c, int, int, int) {
    float x[4], y[4];
    for (int i = 0; i < 4; ++i) { x[i] = (float)a[i]; y[i] = (float)b[i]; }
    return host_mfma(x, y, c);
}
static host_v4f host_mfma_bf16(host_v4s a, host_v4s b, host_v4f c, int, int, int) {
    float x[4], y[4];
    for (int i = 0; i < 4; ++i) {
        x[i] = __uint_as_float((unsigned)(unsigned short)a[i] << 16);
        y[i] = __uint_as_float((unsigned)(unsigned short)b[i] << 16);
    }
    return host_mfma(x, y, c);
}
#define __builtin_amdgcn_mfma_f32_16x16x16f16 host_mfma_f16
#define __builtin_amdgcn_mfma_f32_16x16x16bf16_1k host_mfma_bf16

PRELUDE

// p: index_a, ld_a, index_b, ld_b, index_c, ld_c, a step, b step, k steps, rows, cols, trans_a, trans_b, shape,
// store kind (0: f32, 1: the input dtype)
template <int MT, int NT>
static void body(const iron_ELEM* A, const iron_ELEM* B, void* C, const long long* p) {
    iron_mfma_acc<MT, NT> acc = iron_mfma_acc<MT, NT>{};
    for (long long s = 0; s < p[8]; ++s) {
        const iron_mfma_a<MT> a = iron_mfma_a_load_ELEM<MT>(A, p[0] + s * p[6], p[1], p[11] != 0);
        const iron_mfma_b<NT> b = iron_mfma_b_load_ELEM<NT>(B, p[2] + s * p[7], p[3], p[12] != 0);
        acc = iron_mfma_mma_ELEM(a, b, acc);
    }
    if (p[14] == 0) iron_mfma_store_f32((float*)C, p[4], p[5], acc, (int)p[9], (int)p[10]);
    else iron_mfma_store_ELEM((iron_ELEM*)C, p[4], p[5], acc, (int)p[9], (int)p[10]);
}
struct Lane { const void* A; const void* B; void* C; const long long* p; unsigned lane; };
static void* lane_main(void* arg) {
    const Lane* l = (const Lane*)arg;
    threadIdx = {l->lane, 0, 0};
    const iron_ELEM* A = (const iron_ELEM*)l->A;
    const iron_ELEM* B = (const iron_ELEM*)l->B;
    if (l->p[13] == 0) body<1, 1>(A, B, l->C, l->p); else body<2, 3>(A, B, l->C, l->p);
    return nullptr;
}
extern "C" int run_wavefront(const void* A, const void* B, void* C, const long long* p) {
    pthread_t threads[64];
    Lane lanes[64];
    pthread_barrier_init(&wave, nullptr, 64);
    for (unsigned i = 0; i < 64; ++i) {
        lanes[i] = Lane{A, B, C, p, i};
        if (pthread_create(&threads[i], nullptr, lane_main, &lanes[i]) != 0) return 1;
    }
    for (int i = 0; i < 64; ++i) pthread_join(threads[i], nullptr);
    pthread_barrier_destroy(&wave);
    return 0;
}
"""


def _needs(elem: str) -> list[str]:
    return [f"mfma_load_a_{elem}", f"mfma_load_b_{elem}", f"mfma_mma_{elem}", "mfma_store_f32", f"mfma_store_{elem}"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """(elem, path) -> the compiled wavefront, its calculator tables filled in."""
    built = {}

    def get(elem: str, path: str):
        if (elem, path) not in built:
            src = _HARNESS.replace("PRELUDE", HIP64.prelude(_needs(elem))).replace("ELEM", elem)
            folder = tmp_path_factory.mktemp(f"mfma_{elem}_{path}")
            (folder / "h.cpp").write_text(src)
            flags = ["-D__gfx90a__"] if path == "mfma" else []
            r = subprocess.run([CLANG, "-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", *flags, "-o",
                                str(folder / "h.so"), str(folder / "h.cpp")], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            lib = ctypes.CDLL(str(folder / "h.so"))
            lay = calculator_layout(INSTRUCTIONS[elem])
            for name, matrix in (("amd_a", "A"), ("amd_b", "B"), ("amd_d", "D")):
                table = (ctypes.c_int * (16 * 16 * 2)).in_dll(lib, name)
                for (r, c), (lane, item) in lay[matrix].items():
                    table[(r * 16 + c) * 2], table[(r * 16 + c) * 2 + 1] = lane, item
            lib.run_wavefront.argtypes = [ctypes.c_void_p] * 4
            built[(elem, path)] = lib
        return built[(elem, path)]

    return get


def _stored(rng, elem, rows, cols, ld, index, trans):
    """A rows x cols matrix of ``elem`` placed at ``index`` with leading dimension ``ld`` (``trans``: its transpose
    stored), the rest of the buffer random too; returns (buffer bits, the matrix in float64)."""
    r, c = (cols, rows) if trans else (rows, cols)
    buf = random_bits(rng, elem, index + (r - 1) * ld + c + 5)
    m = value(buf[index + np.arange(r)[:, None] * ld + np.arange(c)[None, :]], elem)
    return buf, (m.T if trans else m)


CASES = [  # (MT, NT), trans_a, trans_b, aligned (index and ld multiples of 4: the 8-byte loads), k steps, edge
    ((1, 1), False, False, True, 1, (16, 16)),
    ((1, 1), True, True, False, 2, (9, 13)),
    ((2, 3), False, True, True, 3, (32, 48)),
    ((2, 3), True, False, False, 2, (27, 35)),
    ((2, 3), False, True, False, 1, (5, 40)),
]


@pytest.mark.parametrize("path", ["mfma", "shuffle"])
@pytest.mark.parametrize("elem", ["f16", "bf16"])
@pytest.mark.parametrize("shape,ta,tb,aligned,ksteps,edge", CASES)
@pytest.mark.parametrize("out", ["f32", "same"])
def test_printed_helpers_on_a_cpu_wavefront(harness, path, elem, shape, ta, tb, aligned, ksteps, edge, out):
    rng = np.random.default_rng()
    mt, nt = shape
    m, n, kk = 16 * mt, 16 * nt, 16 * ksteps
    ld_a, ld_b, ld_c = ((m if ta else kk) + (8 if aligned else 3), (kk if tb else n) + (4 if aligned else 1), n + 3)
    ia, ib, ic = (12, 20, 7) if aligned else (5, 3, 7)
    a_bits, a = _stored(rng, elem, m, kk, ld_a, ia, ta)
    b_bits, b = _stored(rng, elem, kk, n, ld_b, ib, tb)
    c_len = ic + (m - 1) * ld_c + n + 5
    c = np.full(c_len, np.nan, np.float32)
    if out == "same":
        c = np.full(c_len, 0x7E00 if elem == "f16" else 0x7FC0, np.uint16)  # NaN bit patterns
    a_step = 16 * ld_a if ta else 16
    b_step = 16 if tb else 16 * ld_b
    rows, cols = edge
    p = np.array([ia, ld_a, ib, ld_b, ic, ld_c, a_step, b_step, ksteps, rows, cols, ta, tb, SHAPES.index(shape),
                  out == "same"], np.int64)
    assert all(x.ctypes.data % 16 == 0 for x in (a_bits, b_bits))  # the buffer starts 16-byte aligned, as on GPUs
    assert harness(elem, path).run_wavefront(a_bits.ctypes.data, b_bits.ctypes.data, c.ctypes.data, p.ctypes.data) == 0

    got = c.astype(np.float64) if out == "f32" else value(c, elem)
    tile = got[ic + np.arange(m)[:, None] * ld_c + np.arange(n)[None, :]]
    want = a @ b
    inside = (np.arange(m)[:, None] < rows) & (np.arange(n)[None, :] < cols)
    scale = np.abs(a) @ np.abs(b)
    tol = 1e-5 if out == "f32" else (2 ** -10 if elem == "f16" else 2 ** -7)
    assert np.all(np.abs(tile - want)[inside] <= tol * scale[inside] + 1e-6), (path, elem)
    assert np.all(np.isnan(tile[~inside])), "an element past the edge was written"
    untouched = np.ones(c_len, bool)
    untouched[ic + np.arange(m)[:, None] * ld_c + np.arange(n)[None, :]] = False
    assert np.all(np.isnan(got[untouched])), "a store outside the tile"


def test_bf16_bits_round_to_nearest_even():
    x = np.array([1.0, 1.00390625, 1.005859375, -2.5], np.float32)  # 1 + 2^-8 is a tie: stays 1.0
    assert list(bf16_bits(x)) == [0x3F80, 0x3F80, 0x3F81, 0xC020]
