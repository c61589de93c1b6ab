"""The HIP dialect's f16 conversions (``cfamily/hip.py``'s snippet, the code every f16 HIP kernel inlines) compiled
for the host by the system C++ compiler and run over every f16 and a spread of f32 bit patterns, against NumPy's
float16 conversions (round to nearest even, NaN kept NaN)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from iron.codegen.cfamily.hip import _F16

SHIM = """\
#include <cstring>
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
"""
DRIVER = """
extern "C" void to_f32(const unsigned short* h, float* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = iron_f16_to_f32(iron_f16{h[i]});
}
extern "C" void to_f16(const float* f, unsigned short* out, long n) {
    for (long i = 0; i < n; ++i) out[i] = iron_f32_to_f16(f[i]).bits;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++-16") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    folder = tmp_path_factory.mktemp("f16")
    (folder / "f16.cpp").write_text(SHIM + _F16.text + DRIVER)
    # -ffp-contract=off and SSE arithmetic: IEEE f32 with round to nearest even, as the GPUs' conversions assume
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-ffp-contract=off", "-o", str(folder / "f16.so"),
                    str(folder / "f16.cpp")], check=True, capture_output=True)
    return ctypes.CDLL(str(folder / "f16.so"))


def _call(fn, src: np.ndarray, out: np.ndarray) -> np.ndarray:
    fn(src.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(src.size))
    return out


def test_every_f16_widens_exactly(lib):
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = _call(lib.to_f32, bits, np.full(bits.size, np.nan, np.float32))
    want = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_f32_patterns_narrow_to_nearest_even(lib, rng):
    """Every 251st f32 bit pattern (all exponents, both signs), the f16 boundaries and their neighbours (ties at
    every subnormal and normal step, 65504 / 65520, the smallest subnormal's half), and fresh random patterns."""
    spread = np.arange(0, 1 << 32, 251, dtype=np.uint64).astype(np.uint32)
    halves = np.arange(1 << 15, dtype=np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    ties = (halves.astype(np.uint64) + (1 << 12)).astype(np.uint32)  # just above each f16's half step (mostly)
    edges = np.concatenate([halves, ties, ties - 1, ties + 1, halves - 1, halves + 1])
    edges = np.concatenate([edges, np.array([0x477FE000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x32FFFFFF,
                                             0x7F800000, 0x7F800001, 0x7FC00000, 0x387FC000, 0x38800000], np.uint32)])
    pats = np.concatenate([spread, edges, edges | 0x80000000, rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32)])
    f = pats.view(np.float32)
    got = _call(lib.to_f16, f, np.zeros(f.size, np.uint16))
    with np.errstate(over="ignore", invalid="ignore"):
        want = f.astype(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got.view(np.float16)), nan)
    bad = np.flatnonzero(got[~nan] != want[~nan].view(np.uint16))
    assert bad.size == 0, [(hex(p), hex(g), hex(w)) for p, g, w in zip(pats[~nan][bad[:5]], got[~nan][bad[:5]],
                                                                      want[~nan].view(np.uint16)[bad[:5]])]
