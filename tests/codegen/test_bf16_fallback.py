"""The bf16 rounding that GPUs before sm_80 use (integer arithmetic, no cvt.rn.bf16.f32), run on the host.

The CUDA prelude's own text is compiled with the host C++ compiler under a few shims (``__device__`` dropped,
``__float_as_uint`` by memcpy; ``__CUDA_ARCH__`` undefined selects the fallback), and checked bit for bit against
ml_dtypes' round-to-nearest-even on every bf16 value, the ties around each, and a million random floats.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from iron.codegen import CUDA

CXX = shutil.which("g++") or shutil.which("clang++")

SHIM = """
#include <cstring>
#define __device__
#define __forceinline__ inline
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
"""

DRIVER = """
extern "C" void narrow(const float* x, unsigned short* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = iron_f32_to_bf16(x[i]).bits;
}
extern "C" void widen(const unsigned short* x, float* out, long n) {
    for (long i = 0; i < n; ++i) { iron_bf16 h; h.bits = x[i]; out[i] = iron_bf16_to_f32(h); }
}
"""


@pytest.mark.skipif(CXX is None, reason="no host C++ compiler (g++ or clang++)")
def test_bf16_integer_rounding_matches_round_to_nearest_even(tmp_path):
    src = tmp_path / "bf16.cpp"
    src.write_text(SHIM + CUDA.snippets["bf16"].text + DRIVER)
    lib = tmp_path / "libbf16.so"
    subprocess.run([CXX, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))

    rng = np.random.default_rng(0)
    tops = np.arange(1 << 16, dtype=np.uint32) << 16
    bits = np.concatenate([tops, tops | 0x8000, tops | 0x7FFF, tops | 0x8001, tops | 0xFFFF,
                           rng.integers(0, 2**32, 1 << 20, dtype=np.uint64).astype(np.uint32)])
    x = bits.view(np.float32)
    got = np.empty(x.size, np.uint16)
    so.narrow(x.ctypes.data_as(ctypes.c_void_p), got.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(x.size))
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan = np.isnan(x)
    assert np.array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()

    every = np.arange(1 << 16, dtype=np.uint16)
    back = np.empty(every.size, np.float32)
    so.widen(every.ctypes.data_as(ctypes.c_void_p), back.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(every.size))
    assert np.array_equal(back.view(np.uint32), every.astype(np.uint32) << 16)
