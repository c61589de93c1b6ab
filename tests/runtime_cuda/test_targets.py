"""The CUDA backends' source per target (no GPU: NVRTC only): a device of one architecture compiling for another,
and hip-on-cuda, which inherits CUDA's compile path with a source of its own."""

from __future__ import annotations

import pytest

import iron
from iron.codegen import nvrtc
from iron.runtime.cuda import CudaBackend
from iron.runtime.hip_on_cuda import HipOnCudaBackend
from iron.std.attention_wg import attn_prefill_wg

from .test_pdl import bump

_REASON = nvrtc.unavailable_reason()
needs_nvrtc = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")
WG = dict(D=64, NC=1, WG=1, STAGES=2, CAUSAL=True, PIPE=0)


@needs_nvrtc
def test_an_sm80_device_compiles_wgmma_code_for_sm90(monkeypatch, tmp_path):
    """The wgmma source emitted for target sm_90 goes to NVRTC as sm_90a whatever the device is (it once went as
    sm_90 unless the device itself was sm_90: NVRTC's #error)."""
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_CUDA_ARCH", "sm_80")
    be = CudaBackend()
    dt, cv, absent = attn_prefill_wg._resolve(iron.bf16, WG)
    variant = attn_prefill_wg.variant(dt, cv, 32, absent)
    assert "wgmma" in be.source(variant, "sm_90") and "wgmma" not in be.source(variant)
    assert len(be.compile(variant, "sm_90")) > 0 and len(be.compile(variant)) > 0


@needs_nvrtc
def test_hip_on_cuda_source_and_compile(monkeypatch, tmp_path):
    """hip-on-cuda's source is the HIP one behind the compatibility header, for any target; it compiles."""
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    be = HipOnCudaBackend()
    variant = bump.variant(None)
    src = be.source(variant)
    assert src == be.source(variant, "sm_80") and "griddepcontrol" not in src
    assert len(be.compile(variant)) > 0 and len(be.compile(variant, "sm_80")) > 0
