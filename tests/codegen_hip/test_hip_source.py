"""The HIP source (wavefront handling), hipRTC's error paths, the backend without a device, and the hip->CUDA
compatibility header compiled by NVRTC (issue 7, point 4's compile half). Its golden files are two rows (wavefront
64 and 32) of tests/backends/test_golden_source.py."""

from __future__ import annotations

import re

import numpy as np
import pytest

import iron
from iron import CompileError, LaunchError
from iron.codegen import emit_hip, hiprtc, nvrtc
from iron.codegen.cfamily.hip import HIP_ON_NVIDIA, emit_source, for_nvidia, wavefront_of
from iron.runtime.hip import HipBackend, probe
from iron.std.softmax import softmax
from iron.std.unary import iron_exp

from ..codegen import kernels as K
from ..frontend import kernels as FK

_NO_HIPRTC = hiprtc.unavailable_reason()
needs_hiprtc = pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
_NO_NVRTC = nvrtc.unavailable_reason()


def test_wavefront_follows_the_target():
    assert [wavefront_of(t) for t in ("gfx90a", "gfx908", "gfx942", "gfx1030", "gfx1100")] == [64, 64, 64, 32, 32]
    with pytest.raises(ValueError, match="bad AMD target"):
        wavefront_of("sm_90")
    kernel = K.warp_tile.variant(iron.f32, (256,)).kernel
    wave64, wave32 = emit_hip(kernel, 64).source, emit_hip(kernel, 32).source
    assert "offset = 32" in wave64 and "0xffffffffffffffffull" in wave64 and "wavefront: 64 lanes" in wave64
    assert "offset = 16" in wave32 and "0xffffffffull" in wave32 and "wavefront: 32 lanes" in wave32
    for text in (wave64, wave32):
        assert "_sync(" not in text.replace("__syncthreads(", "") and "asm(" not in text and "__activemask" not in text
    assert emit_hip(kernel, 64).source == wave64  # reproducible


def test_backend_source_and_device_errors():
    backend = HipBackend()
    variant = softmax.variant(iron.f32, (256,))
    assert "wavefront: 64 lanes" in backend.source(variant)
    assert probe() is not None  # no AMD GPU on CI machines or the H200 host
    with pytest.raises(LaunchError, match="cannot launch softmax on the hip backend"):
        backend.launch(variant, {}, {}, (1, 1, 1), (1, 1, 1))
    with pytest.raises(LaunchError, match="bad AMD target"):
        backend.compile(variant, target="sm_90")


@needs_hiprtc
def test_backend_compile_is_cached_and_per_target(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    variant = K.warp_tile.variant(iron.f16, (256,))
    code64 = HipBackend().compile(variant, target="gfx90a")
    code32 = HipBackend().compile(variant, target="gfx1030")
    assert code64[:4] == code32[:4] == b"\x7fELF" and code64 != code32
    assert b"gfx90a" in code64 and b"gfx1030" in code32
    assert len(list((tmp_path / "hip").iterdir())) == 2
    assert HipBackend().compile(variant, target="gfx90a") == code64


@needs_hiprtc
def test_rejected_source_raises_compile_error_with_the_log():
    with pytest.raises(CompileError, match=r"hipRTC rejected the HIP source of kernel 'broken'[\s\S]*error"):
        hiprtc.compile_hip('extern "C" __global__ void broken(int* p) { p[0] = undeclared; }', name="broken")
    with pytest.raises(CompileError, match="bad AMD target"):
        hiprtc.compile_hip("", target="sm_90")


@needs_hiprtc
def test_warnings_are_reported():
    src = 'extern "C" __global__ void w(int* p) { int unused = p[0] / 0; p[1] = 1; }'
    code, log = hiprtc.compile_hip_log(src, name="w")
    assert code[:4] == b"\x7fELF"
    assert hiprtc.warnings_in(log), log


def _nvidia_sources():
    return [
        emit_source(iron_exp.variant(iron.bf16).kernel, HIP_ON_NVIDIA),
        emit_source(iron_exp.variant(iron.f16).kernel, HIP_ON_NVIDIA),
        emit_source(softmax.variant(iron.bf16, (256,)).kernel, HIP_ON_NVIDIA),
        emit_source(K.control_flow.variant(iron.f16).kernel, HIP_ON_NVIDIA),
        emit_source(K.warp_tile.variant(iron.bf16, (256,)).kernel, HIP_ON_NVIDIA),
        emit_source(FK.block_sum.variant(iron.f32, (64,)).kernel, HIP_ON_NVIDIA),
    ]


@pytest.mark.skipif(_NO_NVRTC is not None, reason=f"NVRTC unavailable: {_NO_NVRTC}")
def test_compat_header_makes_the_hip_source_cuda():
    """The HIP source for the NVIDIA run, behind the compatibility header, compiles with NVRTC without warnings."""
    for src in _nvidia_sources():
        cubin, log = nvrtc.compile_cuda_log(for_nvidia(src.source), arch="sm_90", name=src.entry)
        assert cubin[:4] == b"\x7fELF" and log == "", log
    with pytest.raises(ValueError, match="wavefront 32"):
        for_nvidia(emit_hip(FK.block_sum.variant(iron.f32, (64,)).kernel, 64).source)


def test_numpy_is_the_only_array_type():
    backend = HipBackend()
    assert backend.check_array("x", np.zeros(4, np.float32), lambda: None) is not None
    with pytest.raises(LaunchError, match="takes NumPy arrays"):
        backend.check_array("x", [1.0], lambda: None)


@pytest.mark.parametrize("target,words", [
    ("sm_90", "bad AMD target 'sm_90'"),
    ("gfx9999", "unknown AMD processor 'gfx9999'"),
    ("gfx1030:xnack-", "gfx1030 has no xnack setting"),
    ("gfx90a:fast+", "unknown feature 'fast'"),
    ("gfx90a:xnack+:xnack-", "set twice"),
])
def test_bad_targets_are_refused_before_hiprtc_sees_them(target, words):
    """ROCm 5.2's hipRTC aborts the process on a processor or feature it does not know; Iron refuses them first."""
    with pytest.raises(CompileError, match=re.escape(words)):
        hiprtc.check_target(target)
    with pytest.raises((CompileError, LaunchError), match="AMD"):
        HipBackend().compile(iron_exp.variant(iron.f32), target=target)


def test_known_targets_pass_the_check():
    for target in ("gfx90a", "gfx1030", "gfx906:sramecc-:xnack+", "gfx90a:xnack-"):
        assert hiprtc.check_target(target) == target
    assert {"gfx90a", "gfx1030", "gfx942", "gfx1100"} <= hiprtc.AMD_PROCESSORS


def _rocm_version() -> int | None:
    import ctypes

    try:
        lib = ctypes.CDLL("libamdhip64.so")
    except OSError:
        return None
    v = ctypes.c_int()
    return v.value if lib.hipRuntimeGetVersion(ctypes.byref(v)) == 0 else None


@needs_hiprtc
def test_a_processor_newer_than_hiprtc_is_an_error_not_a_crash():
    """gfx942 (MI300) came after ROCm 5.2, whose hipRTC aborts on it: the check compiles once in a child process,
    so this process survives and says why. A newer hipRTC compiles it."""
    try:
        code = hiprtc.compile_hip(hiprtc._PROBE_SOURCE, target="gfx942", name="iron_probe")
    except CompileError as e:
        assert "cannot compile for gfx942" in e.message and "child process" in e.message
        assert "newer than this ROCm" in (e.hint or "")
    else:
        assert code[:4] == b"\x7fELF" and b"gfx942" in code
        version = _rocm_version()
        assert version is None or version >= 50300000, "ROCm 5.2's hipRTC cannot know gfx942"
