"""The CPU model of Metal (``backend="msl-cpu"``): what it compiles is the MSL Iron emits, byte for byte; its
threadgroups synchronise for real; it reports what it cannot run. The conformance suite (tests/frontend) runs every
test kernel on it as well."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import iron
from iron.runtime import cache, get_backend, unavailable_reason

from . import msl_cpu_kernels as MK

pytestmark = pytest.mark.skipif(unavailable_reason("msl-cpu") is not None,
                                reason=f"msl-cpu unavailable: {unavailable_reason('msl-cpu')}")


def test_the_library_is_built_from_the_exact_msl(rng):
    x = rng.standard_normal(320).astype(np.float32)
    MK.divergent_simd_sum[320, 64](x, np.full_like(x, np.nan), 16, backend="msl-cpu")
    variant = MK.divergent_simd_sum.variant(None, (16,))
    lib = variant.artifacts["msl-cpu"]
    compiled = lib.compiled_msl()
    assert compiled == MK.divergent_simd_sum.source("metal", HALF=16)
    assert compiled == lib.msl


def _run_divergent_sum(rng, variant) -> None:
    """divergent_simd_sum at HALF=16 on msl-cpu with its library loaded afresh (through the disk cache), checked."""
    variant.artifacts.pop("msl-cpu", None)
    n, width = 256, get_backend("msl-cpu").simd_width()
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full_like(x, np.nan)
    MK.divergent_simd_sum[n, 64](x, out, 16, backend="msl-cpu")
    want = x.astype(np.float64).reshape(-1, width)
    want[:, :16] = want[:, :16].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.reshape(-1, width), want, rtol=1e-6, atol=1e-6)


def test_libraries_are_cached_and_a_corrupt_entry_is_rebuilt_not_loaded(tmp_path, monkeypatch, rng):
    from iron.runtime import msl_cpu

    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_CACHE", "1")
    builds = []
    compile_library = msl_cpu.compile_library
    monkeypatch.setattr(msl_cpu, "compile_library", lambda *a: builds.append(a) or compile_library(*a))
    variant = MK.divergent_simd_sum.variant(None, (16,))
    _run_divergent_sum(rng, variant)
    (entry,) = (tmp_path / "msl-cpu").iterdir()
    whole = entry.read_bytes()
    _run_divergent_sum(rng, variant)
    assert len(builds) == 1  # the second load came from the cache
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0x40
    for n, corrupt in enumerate((whole[: len(whole) // 2], bytes(flipped), b"", b"\x7fELF" + bytes(100)), start=2):
        entry.write_bytes(corrupt)
        _run_divergent_sum(rng, variant)
        assert len(builds) == n  # rebuilt, and the rebuilt library is the one that ran
        stored = entry.read_bytes()
        assert cache.unseal("msl-cpu", entry.name, stored) is not None  # whole, and this key's
    assert variant.artifacts["msl-cpu"].path.read_bytes() == cache.unseal("msl-cpu", entry.name, entry.read_bytes())


def test_two_processes_building_one_library_share_the_cache(tmp_path):
    """Both compile the kernel into an empty cache at once (each in its own folder) and run it; the entry is whole."""
    code = ("import numpy as np; from tests.codegen_msl import msl_cpu_kernels as MK; x = np.arange(128, "
            "dtype=np.float32); out = np.full_like(x, np.nan); MK.divergent_simd_sum[128, 64](x, out, 8, "
            "backend='msl-cpu'); w = x.reshape(-1, 32).astype(np.float64); w[:, :8] = w[:, :8].sum(1, keepdims=True);"
            " assert np.array_equal(out, w.reshape(-1)), out")
    env = {**os.environ, "IRON_CACHE_DIR": str(tmp_path), "IRON_CACHE": "1", "IRON_MSL_CPU_SIMD_WIDTH": "32"}
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stdout.read()
    (entry,) = (tmp_path / "msl-cpu").iterdir()
    assert cache.unseal("msl-cpu", entry.name, entry.read_bytes()) is not None


@pytest.mark.parametrize("half", [16, 5])
def test_simd_sum_in_a_divergent_branch_sums_the_active_lanes(half, rng):
    n, width = 256, get_backend("msl-cpu").simd_width()
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full_like(x, np.nan)
    MK.divergent_simd_sum[n, 128](x, out, half, backend="msl-cpu")
    lanes = x.astype(np.float64).reshape(-1, width)
    want = lanes.copy()
    want[:, :half] = lanes[:, :half].sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out.reshape(-1, width), want, rtol=1e-6, atol=1e-6)


def test_a_barrier_after_a_return_waits_for_the_threads_still_running(rng):
    """Iron's rule (issue 15, B1): thread 0 of each group returned, the other 63 meet at the barrier (before, the
    model reported a divergent barrier while the interpreter and Vulkan ran it)."""
    x = rng.standard_normal(128).astype(np.float32)
    out = np.full_like(x, np.nan)
    MK.skipped_barrier[128, 64](x, out, backend="msl-cpu")
    lid = np.arange(128) % 64
    read = (np.arange(128) // 64) * 64 + 63 - lid  # the thread whose x lands where this one reads
    ok = (lid != 0) & (lid != 63)  # thread 0 returned; thread 63 reads the slot thread 0 never wrote
    np.testing.assert_array_equal(out[ok], x[read[ok]])
    assert np.isnan(out[lid == 0]).all()


def test_arrays_other_than_numpy_are_refused_naming_the_argument():
    out = np.zeros(64, np.float32)
    with pytest.raises(iron.LaunchError, match=r"argument 'x' must be an array"):
        MK.skipped_barrier[64, 64]([0.0] * 64, out, backend="msl-cpu")
    with pytest.raises(iron.LaunchError, match=r"argument 'x' is not C-contiguous"):
        MK.skipped_barrier[64, 64](np.zeros(128, np.float32)[::2], out, backend="msl-cpu")


def test_without_clang_the_reason_is_given(monkeypatch):
    from iron.runtime import msl_cpu

    monkeypatch.setenv("IRON_CLANGXX", "no-such-clang++")
    assert msl_cpu.probe() == "no clang++ (install Debian's clang-16, or set IRON_CLANGXX)"


def test_simd_width_setting_is_checked(monkeypatch):
    monkeypatch.setenv("IRON_MSL_CPU_SIMD_WIDTH", "12")
    with pytest.raises(iron.LaunchError, match="IRON_MSL_CPU_SIMD_WIDTH must be 8, 16, 32 or 64, got 12"):
        get_backend("msl-cpu").simd_width()
