"""The ptxas resource report (``nvrtc.resource_report``, ``iron inspect --backend cuda --resources``): a register
array indexed at run time lands in local memory (a stack frame), one indexed only by compile-time indices stays in
registers. NVRTC only: no GPU, no cuobjdump; skipped with the reason when NVRTC cannot be loaded."""

from __future__ import annotations

import pytest

import iron
from iron import CompileError
from iron.codegen import emit_cuda, nvrtc
from iron.codegen.nvrtc import parse_ptxas_log, resource_report, unavailable_reason

from ..frontend import kernels as frontend_kernels

_REASON = unavailable_reason()
needs_nvrtc = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")


@needs_nvrtc
@pytest.mark.parametrize("dtype", [iron.f32, iron.bf16])
def test_run_time_index_puts_the_register_array_on_the_stack(dtype):
    # 32 elements: ptxas keeps smaller arrays in registers even under a run-time index (it selects among them)
    source = emit_cuda(frontend_kernels.local_dynamic_index.variant(dtype, (32,)).kernel)
    report = resource_report(source, "sm_90")
    res = report["local_dynamic_index"]
    assert res["entry"] and res["registers"] > 0
    assert res["stack_frame_bytes"] >= 32 * dtype.np_dtype.itemsize
    assert res["local_memory"]


@needs_nvrtc
def test_static_indices_keep_the_register_array_in_registers():
    source = emit_cuda(frontend_kernels.vector_scale.variant(iron.f32, (4,)).kernel)
    res = resource_report(source, "sm_90")["vector_scale"]
    assert res["registers"] > 0
    assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0
    assert not res["local_memory"]


@needs_nvrtc
def test_shared_memory_and_barriers_are_reported():
    from iron.std.softmax import softmax

    res = resource_report(emit_cuda(softmax.variant(iron.f32, (256,)).kernel), "sm_80")["softmax"]
    assert res["shared_bytes"] == 256 * 4 and res["barriers"] >= 1


@needs_nvrtc
def test_a_ptx_target_has_no_report():
    source = emit_cuda(frontend_kernels.vector_scale.variant(iron.f32, (4,)).kernel)
    with pytest.raises(CompileError, match="sm_XX"):
        resource_report(source, "compute_90")


def test_parse_reads_every_field_of_old_and_new_ptxas_logs():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 256 bytes cumulative stack size
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'old' for 'sm_70'
ptxas info    : Function properties for old
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, 16 bytes lmem, 48 bytes smem, 356 bytes cmem[0]
"""
    report = parse_ptxas_log(log)
    assert list(report) == ["k", "helper", "old"]
    k = report["k"]
    assert (k["registers"], k["barriers"], k["shared_bytes"], k["stack_frame_bytes"], k["spill_store_bytes"],
            k["spill_load_bytes"], k["cumulative_stack_bytes"]) == (255, 1, 4096, 256, 8, 12, 256)
    assert k["entry"] and k["local_memory"]
    assert not report["helper"]["entry"] and not report["helper"]["local_memory"]
    old = report["old"]
    assert (old["registers"], old["local_bytes"], old["shared_bytes"]) == (10, 16, 48) and old["local_memory"]


def test_resource_report_recompiles_when_nvrtc_answers_with_an_empty_log(monkeypatch):
    """NVRTC 13.0 gave an empty log for a source it had compiled before in the process: the report compiles again
    with a distinct trailing comment instead of failing (or inventing figures)."""
    calls = []

    def fake(source, arch, opts, name):
        calls.append(source)
        log = "" if len(calls) == 1 else ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
                                          "ptxas info    : Function properties for k\n"
                                          "ptxas info    : Used 40 registers, used 1 barriers")
        return b"", log

    monkeypatch.setattr(nvrtc, "compile_cuda_log", fake)
    report = nvrtc.resource_report("extern \"C\" __global__ void k() {}", "sm_90")
    assert report["k"]["registers"] == 40
    assert len(calls) == 2 and calls[1].startswith(calls[0]) and "__global__ void iron_resource_report_" in calls[1]


@needs_nvrtc
def test_resource_report_beside_a_marker_kernel_reports_only_the_source():
    """The retry's marker kernel is compiled for real (so the PTX differs) and left out of the report."""
    source = emit_cuda(frontend_kernels.vector_scale.variant(iron.f32, (4,)).kernel)
    first = resource_report(source, "sm_90")
    calls = []
    real = nvrtc.compile_cuda_log

    def empty_once(src, arch, opts, name):
        calls.append(src)
        binary, log = real(src, arch, opts, name)
        return (binary, "") if len(calls) == 1 else (binary, log)

    import unittest.mock
    with unittest.mock.patch.object(nvrtc, "compile_cuda_log", empty_once):
        again = resource_report(source, "sm_90")
    assert list(again) == list(first) == ["vector_scale"] and again["vector_scale"]["registers"] > 0
