"""SPIR-V modules as emitted for particular devices and kernels validate with ``spirv-val --target-env vulkan1.2``
(issue 4, points 1 and 4), and their metadata. That every kernel variant's module (plain and lanes) validates, and the
random kernels', are the spirv-val rows of tests/backends/test_compile_targets.py. Skipped when spirv-val is
missing."""

from __future__ import annotations

import shutil

import pytest

import iron
from iron.codegen.spirv import disassemble, emit_spirv, validate

from ..frontend import kernels as frontend_kernels

needs_spirv_val = pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val is not on PATH")


def _frontend_kernels():
    """tests/frontend/kernels.py (test_lavapipe takes it from here too)."""
    return frontend_kernels


@needs_spirv_val
def test_cas_route_for_float_add_validates():
    frontend = _frontend_kernels()
    assert frontend is not None, "tests/frontend/kernels.py must import"
    ir = frontend.atomic_sum_f32.variant(iron.f32).kernel
    module = emit_spirv(ir, atomic_float_add=False)
    assert validate(module) is None
    assert "atomic_float_add" not in module.features
    assert "OpAtomicCompareExchange" in disassemble(module)
    with_ext = emit_spirv(ir)
    assert "atomic_float_add" in with_ext.features and "OpAtomicFAddEXT" in disassemble(with_ext)


@needs_spirv_val
def test_subgroup_uniform_control_flow_mode_validates():
    """Devices with shaderSubgroupUniformControlFlow get modules that declare it, for kernels with SIMD ops only."""
    from iron.std.unary import iron_exp

    ir = _frontend_kernels().simd_reduce.variant(iron.f32).kernel
    module = emit_spirv(ir, uniform_control_flow=True)
    assert validate(module) is None
    text = disassemble(module)
    assert "SubgroupUniformControlFlowKHR" in text and "SPV_KHR_subgroup_uniform_control_flow" in text
    assert "subgroup_uniform_control_flow" in module.features
    assert "SubgroupUniformControlFlowKHR" not in disassemble(emit_spirv(ir))
    plain = emit_spirv(iron_exp.variant(iron.f32).kernel, uniform_control_flow=True)  # no SIMD ops: no mode
    assert "subgroup_uniform_control_flow" not in plain.features
    assert "SubgroupUniformControlFlowKHR" not in disassemble(plain)


@needs_spirv_val
def test_device_dependent_modes_validate():
    """float64 (sin/cos in double), DenormPreserve and RoundingModeRTE, as emitted for a device that has them, and
    without SignedZeroInfNanPreserve for one that lacks it; float % never needs 64-bit floats (integer reduction)."""
    fk = _frontend_kernels()
    sin = fk.unary_math.variant(iron.f32, (fk.UNARY_OP_CODE["sin"],)).kernel
    rem = fk.float_rem.variant(iron.f32).kernel
    for k in (sin, rem):
        module = emit_spirv(k, float64=True, denorm_preserve=True, rounding_rte=True)
        assert validate(module) is None, disassemble(module)
        text = disassemble(module)
        assert "DenormPreserve 32" in text and "RoundingModeRTE 32" in text
        assert {"denorm_preserve", "rounding_rte"} <= module.features and "SignedZeroInfNanPreserve 32" in text
        assert ("OpCapability Float64" in text) == (k is sin) and ("RoundingModeRTE 64" in text) == (k is sin)
        assert "Float64" not in disassemble(emit_spirv(k))
        bare = emit_spirv(k, ieee_specials=False)
        assert validate(bare) is None and "SignedZeroInfNanPreserve" not in disassemble(bare)


def test_read_only_and_writable_buffers_never_share_a_block_type():
    """NonWritable is a member decoration of a struct only read-only buffers use (as glslang writes it): NVIDIA's
    driver treated a writable buffer as read-only when it shared a struct with a NonWritable-decorated variable."""
    frontend = _frontend_kernels()
    text = disassemble(emit_spirv(frontend.augmented.variant(iron.f32).kernel))
    assert "OpMemberDecorate" in text and " 0 NonWritable" in text
    assert "OpDecorate %x NonWritable" not in text
    lines = [ln for ln in text.splitlines() if "OpVariable" in ln and "StorageBuffer" in ln]
    pointer_of = {ln.split("=")[0].strip(): ln.split()[3] for ln in lines}
    assert pointer_of["%x"] != pointer_of["%acc"]  # different struct (pointer) types


def test_metadata_of_a_std_kernel():
    from iron.std.softmax import softmax

    module = emit_spirv(softmax.variant(iron.f16, (256,)).kernel)
    assert [(b.param, b.binding, b.dtype, b.readonly) for b in module.buffers] == [
        ("x", 0, iron.f16, True), ("out", 1, iron.f16, False)]
    assert [(p.name, p.offset, p.dtype) for p in module.push] == [
        ("ncols", 0, iron.i32), ("iron_n0", 4, iron.i32), ("iron_n1", 8, iron.i32), ("iron_n2", 12, iron.i32)]
    assert module.local_size_spec_ids == (0, 1, 2)
    assert module.shared_bytes == 4 * 256  # half arrays are held as f32 in workgroup memory
    assert {"float16", "storage16"} <= module.features
    assert module.words[:4] == (0x07230203).to_bytes(4, "little")
