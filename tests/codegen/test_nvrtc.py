"""Every kernel Iron ships or tests, in every dtype variant, compiles through NVRTC to an sm_90 cubin, with no
warnings (issue 3, point 5). No GPU or driver needed; skipped with the reason when NVRTC cannot be loaded."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import iron
import iron.std
from iron import CompileError
from iron.codegen import emit_cuda
from iron.codegen.nvrtc import (
    compile_cuda,
    compile_cuda_log,
    default_options,
    nvrtc_version,
    supported_archs,
    unavailable_reason,
)

from . import kernels as codegen_kernels

_REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")

# constexpr values per kernel name, as lists of alternatives (each is its own variant); a kernel not listed here
# takes the module global of the same name (std kernels define e.g. BLOCK next to the kernel)
CONSTEXPRS = {
    "unary_math": [{"OP": op} for op in range(13)],
    "new_unary_math": [{"OP": op} for op in range(4)],
    "binary_math": [{"OP": op} for op in range(3)],
    "block_sum": [{"BLOCK": 64}],
    "simd_exchange": [{"SHIFT": 1, "MASK": 1}, {"SHIFT": 5, "MASK": 16}],
    "static_dot": [{"K": 3}],
    "static_alternating": [{"K": 2}],
    "constexpr_affine": [{"SCALE": 2, "SQUARE": True}, {"SCALE": 0.5, "SQUARE": False}],
    "ieee_affine": [{"SCALE": 1.0, "BIAS": 0.0}, {"SCALE": 2.0, "BIAS": -0.0}],
    "divide_by_constant": [{"D": 0.0}, {"D": -0.0}],
    "softmax": [{"BLOCK": 256}, {"BLOCK": 32}],
    "warp_tile": [{"BLOCK": 256}],
    "reverse_tiles": [{"BLOCK": 256, "TILE": 16384}, {"BLOCK": 64, "TILE": 1024}],
}


_GUESS = 2
#: NVRTC warnings that unoptimised random IR legitimately triggers: a pointless comparison of an unsigned value with
#: 0 (186), a constant expression that overflows to inf (222), and a loop after an `if` on a constant-true condition
#: that returns (128: "loop is not reachable"); the passes fold all three away in real kernels
BENIGN_ON_RAW_IR = {"186", "222", "128"}


def _kernels_of(module) -> list[tuple[str, iron.KernelFunction, object]]:
    return [(f"{module.__name__.rsplit('.', 1)[-1]}.{name}", k, module) for name, k in vars(module).items()
            if isinstance(k, iron.KernelFunction)]


def _all_kernels() -> list[tuple[str, iron.KernelFunction, object]]:
    found = []
    for info in pkgutil.iter_modules(iron.std.__path__):
        found += _kernels_of(importlib.import_module(f"iron.std.{info.name}"))
    found += _kernels_of(codegen_kernels)
    frontend_kernels = _frontend_kernels()
    if frontend_kernels is not None:
        found += _kernels_of(frontend_kernels)
    return found


def _frontend_kernels():
    """tests/frontend/kernels.py when present (the front-end's suite), under whichever name pytest gave tests/."""
    package = __name__.rsplit(".", 2)[0] + "." if __name__.count(".") >= 2 else ""
    for name in (f"{package}frontend.kernels", "frontend.kernels"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _variants():
    cases = []
    for label, k, module in _all_kernels():
        name = k.__name__
        if k.constexpr_names:
            alternatives = CONSTEXPRS.get(name)
            if alternatives is None and all(hasattr(module, c) for c in k.constexpr_names):
                alternatives = [{c: getattr(module, c) for c in k.constexpr_names}]
            if alternatives is None:  # a guess; the test skips (naming the kernel) if the front-end refuses it
                alternatives = [{c: _GUESS for c in k.constexpr_names}]
        else:
            alternatives = [{}]
        for values in alternatives:
            for dt in k.dtypes or (None,):
                suffix = "".join(f"-{c}={v}" for c, v in values.items())
                cases.append(pytest.param(k, dt, values, id=f"{label}-{dt or 'none'}{suffix}"))
    return cases


@pytest.mark.parametrize("kernel,dtype,constexprs", _variants())
def test_every_variant_compiles_to_sm90_cubin(kernel, dtype, constexprs):
    values = tuple(constexprs[c] for c in kernel.constexpr_names)
    try:
        variant = kernel.variant(dtype, values)
    except iron.IronError as e:
        if _GUESS not in values:
            raise
        pytest.fail(f"{kernel.__name__} needs constexpr values in CONSTEXPRS ({Path(__file__).name}): {e.message}")
    src = emit_cuda(variant.kernel)
    cubin, log = compile_cuda_log(src, arch="sm_90")
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
    assert log == "", f"NVRTC warnings for {kernel.__name__}:\n{log}\n{src.source}"


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


def test_random_kernels_compile():
    """The pass tests' random-kernel generator (every op and control-flow form), raw and optimised."""
    here = Path(__file__).resolve().parents[1] / "passes"
    sys.path.insert(0, str(here))
    try:
        import passes_kernel_gen as gen
    finally:
        sys.path.remove(str(here))
    from hypothesis import HealthCheck, given, settings

    from iron.ir.rewrite import clone_kernel
    from iron.passes import PassManager, default_pipeline

    @settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(kernel=gen.kernels())
    def check(kernel):
        optimised = PassManager(default_pipeline()).run(clone_kernel(kernel))
        for k in (kernel, optimised):
            cubin, log = compile_cuda_log(emit_cuda(k))
            warnings = re.findall(r"warning #(\d+)", log)
            assert cubin[:4] == b"\x7fELF" and set(warnings) <= BENIGN_ON_RAW_IR, log

    check()


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
