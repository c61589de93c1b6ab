"""Every kernel Iron ships or tests, in every dtype variant, emits a SPIR-V module that ``spirv-val --target-env
vulkan1.2`` accepts (issue 4, points 1 and 4); emission is deterministic. Skipped when spirv-val is missing."""

from __future__ import annotations

import importlib
import pkgutil
import shutil
import sys
from pathlib import Path

import pytest

import iron
import iron.std
from iron.codegen.spirv import disassemble, emit_spirv, validate

from ..codegen import kernels as codegen_kernels

needs_spirv_val = pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val is not on PATH")

# constexpr values per kernel: the one table shared by every backend's every-variant test
from ..codegen.test_nvrtc import _GUESS, CONSTEXPRS  # noqa: E402


def _kernels_of(module) -> list[tuple[str, iron.KernelFunction, object]]:
    return [(f"{module.__name__.rsplit('.', 1)[-1]}.{name}", k, module) for name, k in vars(module).items()
            if isinstance(k, iron.KernelFunction)]


def _frontend_kernels():
    package = __name__.rsplit(".", 2)[0] + "." if __name__.count(".") >= 2 else ""
    for name in (f"{package}frontend.kernels", "frontend.kernels"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _all_kernels():
    found = []
    for info in pkgutil.iter_modules(iron.std.__path__):
        found += _kernels_of(importlib.import_module(f"iron.std.{info.name}"))
    found += _kernels_of(codegen_kernels)
    frontend = _frontend_kernels()
    if frontend is not None:
        found += _kernels_of(frontend)
    return found


def variants():
    cases = []
    for label, k, module in _all_kernels():
        if k.constexpr_names:
            alternatives = CONSTEXPRS.get(k.__name__)
            if alternatives is None and all(hasattr(module, c) for c in k.constexpr_names):
                alternatives = [{c: getattr(module, c) for c in k.constexpr_names}]
            if alternatives is None:
                alternatives = [{c: _GUESS for c in k.constexpr_names}]
        else:
            alternatives = [{}]
        for values in alternatives:
            for dt in k.dtypes or (None,):
                suffix = "".join(f"-{c}={v}" for c, v in values.items())
                cases.append(pytest.param(k, dt, values, id=f"{label}-{dt or 'none'}{suffix}"))
    return cases


def variant_kernel(kernel, dtype, constexprs):
    values = tuple(constexprs[c] for c in kernel.constexpr_names)
    try:
        return kernel.variant(dtype, values).kernel
    except iron.IronError as e:
        if _GUESS not in values:
            raise
        pytest.fail(f"{kernel.__name__} needs constexpr values in CONSTEXPRS ({Path(__file__).name}): {e.message}")


@needs_spirv_val
@pytest.mark.parametrize("kernel,dtype,constexprs", variants())
def test_every_variant_passes_spirv_val(kernel, dtype, constexprs):
    ir = variant_kernel(kernel, dtype, constexprs)
    module = emit_spirv(ir)
    err = validate(module)
    assert err is None, f"spirv-val rejects {kernel.__name__}:\n{err}\n{disassemble(module)}"
    assert module.entry == ir.name
    assert [b.binding for b in module.buffers] == list(range(len(module.buffers)))
    assert [p.name for p in module.push[-3:]] == ["iron_n0", "iron_n1", "iron_n2"]
    assert module.push_size == 4 * len(module.push)
    # emission is a pure function of the IR
    assert emit_spirv(ir).words == module.words


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
        assert {"denorm_preserve", "rounding_rte", "ieee_specials"} <= module.features
        assert ("OpCapability Float64" in text) == (k is sin) and ("RoundingModeRTE 64" in text) == (k is sin)
        assert "Float64" not in disassemble(emit_spirv(k))
        bare = emit_spirv(k, ieee_specials=False)
        assert validate(bare) is None and "SignedZeroInfNanPreserve" not in disassemble(bare)
        assert "ieee_specials" not in bare.features


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


def test_random_kernels_validate():
    """The pass tests' random-kernel generator (every op and control-flow form), raw and optimised."""
    if shutil.which("spirv-val") is None:
        pytest.skip("spirv-val is not on PATH")
    here = Path(__file__).resolve().parents[1] / "passes"
    sys.path.insert(0, str(here))
    try:
        import passes_kernel_gen as gen
    finally:
        sys.path.remove(str(here))
    from hypothesis import HealthCheck, given, settings

    from iron.ir.rewrite import clone_kernel
    from iron.passes import PassManager, default_pipeline

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(kernel=gen.kernels())
    def check(kernel):
        optimised = PassManager(default_pipeline()).run(clone_kernel(kernel))
        for k in (kernel, optimised):
            module = emit_spirv(k)
            err = validate(module)
            assert err is None, f"{err}\n{disassemble(module)}"

    check()


@needs_spirv_val
@pytest.mark.parametrize("kernel,dtype,constexprs", variants())
def test_every_lanes_module_passes_spirv_val(kernel, dtype, constexprs):
    """The lanes module (several elements per invocation) of every kernel that has one."""
    from iron.codegen.spirv import lanes_plan

    ir = variant_kernel(kernel, dtype, constexprs)
    plan = lanes_plan(ir)
    if plan is None:
        return
    module = emit_spirv(ir, lanes=plan)
    err = validate(module)
    assert err is None, f"spirv-val rejects the lanes module of {kernel.__name__}:\n{err}\n{disassemble(module)}"
    assert module.lanes == plan.width > 1
    assert emit_spirv(ir, lanes=plan).words == module.words
