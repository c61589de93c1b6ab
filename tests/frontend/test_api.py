"""Introspection and the kernel object: ``k.ir``, ``k.passes``, ``iron inspect`` (in process and as a subprocess),
lazy compilation and the per-variant cache."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import iron
from iron.cli.main import cli
from iron.frontend import codegen

from . import kernels as K

REPO = Path(__file__).resolve().parents[2]
KERNELS_SPEC = "tests/frontend/kernels.py"
PIPELINE_START = ["frontend", "unroll", "fold", "simplify", "cse"]
STAGES = {"frontend", "unroll", "fold", "simplify", "cse", "dce"}


# ---------------------------------------------------------------------------------------------------------------
# k.ir


@pytest.mark.parametrize(
    ("dtype", "other"), [("f32", ("f16", "bf16")), ("f16", ("f32", "bf16")), ("bf16", ("f32", "f16"))]
)
def test_ir_types_follow_the_variant(dtype, other):
    text = K.iron_exp.ir(dtype=getattr(iron, dtype))
    header = text.splitlines()[0]
    assert header == f"kernel @iron_exp[T={dtype}](%a: buffer<{dtype}> readonly, %out: buffer<{dtype}>) {{"
    load = next(ln for ln in text.splitlines() if " = load %a[" in ln)
    assert load.split("#")[0].rstrip().endswith(f": {dtype}")
    exp_line = next(ln for ln in text.splitlines() if " = exp " in ln)
    assert exp_line.split("#")[0].rstrip().endswith(": f32"), "half math runs in f32 unless native_half"
    if dtype != "f32":
        casts = [ln.split("#")[0].rstrip() for ln in text.splitlines() if " = cast " in ln]
        assert any(c.endswith(": f32") for c in casts) and any(c.endswith(f": {dtype}") for c in casts)
    for o in other:
        if o != "f32":
            assert not re.search(rf"(?<![a-z]){o}\b", text), f"{o} appears in the {dtype} variant"


@pytest.mark.parametrize("spelling", ["bf16", iron.bf16, ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16)])
def test_ir_accepts_dtype_spellings(spelling):
    assert K.iron_exp.ir(dtype=spelling) == K.iron_exp.ir(dtype=iron.bf16)


def test_ir_defaults_to_f32_and_is_deterministic():
    assert K.iron_exp.ir() == K.iron_exp.ir(dtype="f32")
    assert "[T=f32]" in K.iron_exp.ir()


def test_ir_of_a_non_generic_kernel_refuses_a_dtype():
    text = K.int_arith_u32.ir()
    assert "buffer<u32>" in text and "[T=" not in text
    with pytest.raises(iron.IronError, match="has no dtype variants"):
        K.int_arith_u32.ir(dtype="f16")


def test_ir_needs_every_constexpr():
    assert "BLOCK=64" in K.block_sum.ir(BLOCK=64)
    with pytest.raises(iron.IronError, match="give constexpr values for BLOCK"):
        K.block_sum.ir()


# ---------------------------------------------------------------------------------------------------------------
# k.passes


def _check_stage_names(names: list[str]) -> None:
    assert names[:5] == PIPELINE_START, names
    assert names[-1] == "dce", names
    assert set(names) <= STAGES, names


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_passes_stage_names_in_order(dtype):
    snapshots = K.iron_exp.passes(dtype=dtype)
    _check_stage_names([name for name, _ in snapshots])
    for _, text in snapshots:
        assert text.startswith(f"kernel @iron_exp[T={dtype}]")
    assert snapshots[-1][1] == K.iron_exp.ir(dtype=dtype), "the last snapshot is the optimised IR"


def test_passes_show_the_unrolling():
    snapshots = dict(K.static_dot.passes(dtype="f16", K=3))
    assert "static_range(" in snapshots["frontend"]
    assert "static_range(" not in snapshots["unroll"]
    assert snapshots["unroll"].count("load %w[") == 3, "three iterations, three loads of w"


# ---------------------------------------------------------------------------------------------------------------
# iron inspect


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def test_cli_inspect_ir(in_repo):
    result = CliRunner().invoke(cli, ["inspect", f"{KERNELS_SPEC}:iron_exp", "--dtype", "bf16", "--ir"])
    assert result.exit_code == 0, result.output
    assert result.output == K.iron_exp.ir(dtype="bf16")


def test_cli_inspect_passes(in_repo):
    result = CliRunner().invoke(cli, ["inspect", f"{KERNELS_SPEC}:iron_exp", "--dtype", "bf16", "--passes"])
    assert result.exit_code == 0, result.output
    names = re.findall(r"^// ----- after (\w+) -----$", result.output, re.M)
    _check_stage_names(names)
    assert result.output.count("kernel @iron_exp[T=bf16]") == len(names)


def test_cli_inspect_constexpr(in_repo):
    result = CliRunner().invoke(cli, ["inspect", f"{KERNELS_SPEC}:block_sum", "--dtype", "f16", "-D", "BLOCK=64"])
    assert result.exit_code == 0, result.output
    assert result.output == K.block_sum.ir(dtype="f16", BLOCK=64)


def test_cli_inspect_unknown_kernel_lists_the_kernels(in_repo):
    result = CliRunner().invoke(cli, ["inspect", f"{KERNELS_SPEC}:no_such_kernel"])
    assert result.exit_code == 2
    assert "no attribute 'no_such_kernel'" in result.output and "iron_exp" in result.output


def test_cli_inspect_compile_error_is_located(tmp_path):
    src = tmp_path / "broken.py"
    src.write_text(
        "from iron import T, Tensor, kernel, program_id\n\n\n@kernel\ndef k(x: Tensor[T]):\n    x[program_id(0)] = y\n"
    )
    result = CliRunner().invoke(cli, ["inspect", f"{src}:k"])
    assert result.exit_code == 1
    assert f"{src}:6:24: error: unknown name 'y'" in result.output
    assert "Traceback" not in result.output


IRON_EXE = Path(sys.executable).with_name("iron")


@pytest.mark.skipif(not IRON_EXE.exists(), reason=f"no console script at {IRON_EXE} (package not installed?)")
@pytest.mark.parametrize("view", ["--ir", "--passes"])
def test_iron_console_script(view):
    proc = subprocess.run(
        [str(IRON_EXE), "inspect", f"{KERNELS_SPEC}:iron_exp", "--dtype", "bf16", view],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    if view == "--ir":
        assert proc.stdout == K.iron_exp.ir(dtype="bf16")
    else:
        _check_stage_names(re.findall(r"^// ----- after (\w+) -----$", proc.stdout, re.M))


# ---------------------------------------------------------------------------------------------------------------
# lazy compilation and the variant cache


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """Records the kernel name of every front-end build (one per compiled variant)."""
    calls: list[str] = []
    original = codegen.FunctionCodegen.build

    def counting_build(self, params):
        calls.append(self.name)
        return original(self, params)

    monkeypatch.setattr(codegen.FunctionCodegen, "build", counting_build)
    return calls


def test_decoration_does_not_compile(builds):
    k = iron.kernel(K.iron_exp.fn)
    assert builds == []
    k.ir(dtype="f16")
    assert builds == ["iron_exp"]


def test_variants_are_cached(builds):
    k = iron.kernel(K.constexpr_affine.fn)
    v = k.variant(iron.f16, (2, True))
    assert k.variant(iron.f16, (2, True)) is v
    assert len(builds) == 1
    k.ir(dtype="f16", SCALE=2, SQUARE=True)
    x = np.ones(64, np.float16)
    k[64](x, np.empty_like(x), 2, True, backend="cpu")
    k[64](x, np.empty_like(x), 2, True, backend="cpu")
    assert len(builds) == 1, "ir() and launches of a compiled variant reuse it"
    assert k.variant(iron.bf16, (2, True)) is not v
    assert k.variant(iron.f16, (3, True)) is not v
    assert len(builds) == 3, "each (dtype, constexpr values) compiles once"


def test_launch_compiles_the_variant_of_the_arguments(builds):
    k = iron.kernel(K.iron_exp.fn)
    for dt in (np.float32, np.float16, ml_dtypes.bfloat16, np.float16):
        a = np.ones(10, dt)
        k[10](a, np.empty_like(a), backend="cpu")
    assert len(builds) == 3


def test_kernel_decorator_forms():
    assert K.native_half_muladd.native_half is True
    assert K.default_muladd.native_half is False
    assert isinstance(K.iron_exp, iron.KernelFunction)
    assert K.iron_exp.dtypes == (iron.f32, iron.f16, iron.bf16)
    assert K.int_arith_i32.dtypes == ()


def test_builtins_refuse_to_run_in_python():
    with pytest.raises(RuntimeError, match="can only be used inside an @iron.kernel"):
        iron.exp(1.0)


def test_inspect_a_file_inside_a_package_with_relative_imports():
    """src/iron/std/unary.py uses relative imports: loading it by path imports it as iron.std.unary."""
    from click.testing import CliRunner

    import iron.std.unary
    from iron.cli.main import cli

    spec = f"{iron.std.unary.__file__}:iron_exp"
    result = CliRunner().invoke(cli, ["inspect", spec, "--dtype", "bf16", "--backend", "cuda"])
    assert result.exit_code == 0, result.output
    assert 'extern "C" __global__ void iron_exp(' in result.output
