"""The MSL the C-family printer writes (``iron.codegen.cfamily.msl``): the seed's shape, ABI, determinism, and the
Metal backend's behaviour off macOS. Its golden files are one row of tests/backends/test_golden_source.py."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

import iron
from iron import LaunchError
from iron.codegen import emit_msl
from iron.codegen.cfamily.msl import MSL, MSL_3D, dialect_for
from iron.std.softmax import softmax
from iron.std.unary import iron_exp

from ..codegen import kernels as K


def test_seed_kernel_shape():
    src = emit_msl(iron_exp.variant(iron.f32).kernel)
    assert "kernel void iron_exp(\n    const device float *a [[buffer(0)]],\n    device float *out [[buffer(1)]],\n" \
           in src.source
    assert "    uint tid [[thread_position_in_grid]]) {" in src.source
    assert "const int idx = (int)tid;\n" in src.source and "out[idx] = exp(a[idx]);" in src.source
    assert src.vector is None and src.dialect == "msl"


def test_scalars_and_grid_sizes_are_constant_references_at_their_own_buffer_index():
    src = emit_msl(softmax.variant(iron.f16, (256,)).kernel)
    assert "const device half *x [[buffer(0)]]" in src.source
    assert "constant int& ncols [[buffer(2)]]" in src.source
    assert "constant int& iron_n2 [[buffer(5)]]" in src.source
    assert [p.name for p in src.params] == ["x", "out", "ncols", "iron_n0", "iron_n1", "iron_n2"]


def test_shared_memory_barrier_simd_and_atomics_spelling():
    src = emit_msl(K.warp_tile.variant(iron.f32, (256,)).kernel)
    text = src.source
    # threadgroup arrays are parameters the host sizes, in declaration order, before the attribute parameters
    assert "threadgroup float *tile [[threadgroup(0)]],\n    threadgroup uint *count [[threadgroup(1)]]," in text
    assert src.threadgroup == (("tile", 256 * 4), ("count", 4))
    assert [a[2] for a in src.attributes] == ["thread_position_in_grid", "thread_position_in_threadgroup",
                                             "thread_index_in_simdgroup", "threads_per_simdgroup"]
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in text
    for fn in ("simd_sum(v)", "simd_max(v)", "simd_shuffle(v, ", "simd_shuffle_xor(v, "):
        assert fn in text
    assert "atomic_fetch_add_explicit(reinterpret_cast<threadgroup atomic_uint*>(&count[0]), 1u" in text
    assert "uint simd_lane_id [[thread_index_in_simdgroup]]" in text
    cf = emit_msl(K.control_flow.variant(iron.f32).kernel).source
    assert "reinterpret_cast<device atomic_int*>(&hist[" in cf and "iron_atomic_max_device(&peak[0]" in cf


def test_only_used_thread_attributes_are_declared_and_axes_pick_the_vector_width():
    exp_text = emit_msl(iron_exp.variant(iron.f32).kernel).source
    assert "[[thread_position_in_threadgroup]]" not in exp_text and "[[thread_index_in_simdgroup]]" not in exp_text
    assert dialect_for(iron_exp.variant(iron.f32).kernel) is MSL

    @iron.kernel
    def grid2d(out: iron.Tensor[iron.f32], width: int):
        out[iron.program_id(1) * width + iron.program_id(0)] = 1.0

    k2 = grid2d.variant(None).kernel
    assert dialect_for(k2) is MSL_3D
    text = emit_msl(k2).source
    assert "uint3 tid [[thread_position_in_grid]]" in text and "(int)tid.y" in text


def test_emission_is_reproducible():
    first = emit_msl(softmax.variant(iron.bf16, (128,)).kernel).source
    again = emit_msl(softmax.variant(iron.bf16, (128,)).kernel).source
    fresh = emit_msl(softmax._compile(iron.bf16, (128,)).kernel).source
    assert first == again == fresh


def test_cuda_output_is_unchanged_by_the_msl_dialect():
    """The MSL dialect lives beside CUDA's; importing it must not alter CUDA's tables (goldens in tests/backends)."""
    from iron.codegen import emit_cuda

    text = emit_cuda(K.unary_exp.variant(iron.f32).kernel).source
    assert text == (Path(__file__).parents[1] / "backends" / "golden" / "cuda" / "unary_exp_f32.cu").read_text()


@pytest.mark.skipif(platform.system() == "Darwin", reason="checks the behaviour off macOS")
def test_metal_backend_off_macos():
    from iron.runtime.metal import MetalBackend, probe

    assert probe().startswith("backend 'metal' is macOS only")
    be = MetalBackend()
    variant = iron_exp.variant(iron.f32)
    assert be.source(variant) == emit_msl(variant.kernel).source
    with pytest.raises(LaunchError, match="macOS only"):
        be.compile(variant)
    with pytest.raises(LaunchError, match="macOS only"):
        be.launch(variant, {}, {}, (1, 1, 1), (1, 1, 1))
