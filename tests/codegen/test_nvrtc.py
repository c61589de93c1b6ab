"""NVRTC beyond the every-variant check (that is the nvrtc-sm_90 row of tests/backends/test_compile_targets.py, with
the random kernels): older architectures, PTX, vector accesses, fmad, errors, and nvcc's second opinion. No GPU or
driver needed; skipped with the reason when NVRTC cannot be loaded."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import iron
from iron import CompileError
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import (
    compile_cuda,
    default_options,
    nvrtc_version,
    supported_archs,
    unavailable_reason,
)

from . import kernels as codegen_kernels

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")


def _sample_sources():
    from iron.std.softmax import softmax
    from iron.std.unary import iron_exp

    return [
        emit_cuda(iron_exp.variant(iron.bf16).kernel),
        emit_cuda(iron_exp.variant(iron.f16).kernel),
        emit_cuda(softmax.variant(iron.bf16, (256,)).kernel),
        emit_cuda(codegen_kernels.control_flow.variant(iron.bf16).kernel),
        emit_cuda(codegen_kernels.warp_tile.variant(iron.bf16, (256,)).kernel),
    ]


@pytest.mark.parametrize("arch", ["sm_70", "sm_75", "sm_80"])
def test_older_architectures_compile(arch):
    """Below sm_80 the bf16 rounding takes its integer-arithmetic path; it must compile too."""
    if arch not in supported_archs():
        pytest.skip(f"this NVRTC ({nvrtc_version()}) does not target {arch}")
    for src in _sample_sources():
        assert compile_cuda(src, arch=arch)[:4] == b"\x7fELF"


def test_ptx_target():
    ptx = compile_cuda(_sample_sources()[0], arch="compute_90").decode()
    assert ".target sm_90" in ptx and ".entry iron_exp" in ptx
    assert "cvt.rn.bf16.f32" in ptx


def test_vector_entry_uses_16_byte_accesses():
    ptx = compile_cuda(_sample_sources()[0], arch="compute_90").decode()  # exp bf16
    assert ".entry iron_exp_x8" in ptx
    assert "ld.global.nc.v4.u32" in ptx and "st.global.v4.u32" in ptx


def test_fmad_is_off_unless_asked(monkeypatch):
    monkeypatch.delenv("IRON_FMAD", raising=False)
    assert "--fmad=false" in default_options()
    monkeypatch.setenv("IRON_FMAD", "1")
    assert "--fmad=true" in default_options()
    src = emit_cuda(codegen_kernels.warp_tile.variant(iron.f32, (256,)).kernel)
    ptx_off = compile_cuda(src, arch="compute_90", options=default_options(fmad=False)).decode()
    ptx_on = compile_cuda(src, arch="compute_90", options=default_options(fmad=True)).decode()
    assert "fma.rn.f32" not in ptx_off and "fma.rn.f32" in ptx_on  # left * pair - first + ... contracts


def test_rejected_source_raises_compile_error_with_the_log():
    with pytest.raises(CompileError, match=r"NVRTC rejected the CUDA source of kernel 'broken'[\s\S]*error"):
        compile_cuda('extern "C" __global__ void broken(int* p) { p[0] = undeclared; }', name="broken")


def test_bad_target_is_refused():
    with pytest.raises(CompileError, match="bad CUDA target"):
        compile_cuda(_sample_sources()[0], arch="gfx90a")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_nvcc_agrees(tmp_path):
    """A second opinion from the full toolkit: nvcc -arch=sm_90 -c, with every warning an error."""

    def build(i_src):
        i, src = i_src
        path = tmp_path / f"k{i}.cu"
        path.write_text(src.source)
        cmd = ["nvcc", "-arch=sm_90", "-c", "--fmad=false", "-Werror", "all-warnings",
               "-o", str(path.with_suffix(".o")), str(path)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "LC_ALL": "C"})

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(build, enumerate(_sample_sources())))
    for r in results:
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr
