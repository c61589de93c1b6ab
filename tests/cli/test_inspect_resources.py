"""`iron inspect --backend cuda --resources`: the ptxas report per variant, and its flag errors."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.codegen.nvrtc import unavailable_reason

KERNELS = os.path.join(os.path.dirname(__file__), os.pardir, "frontend", "kernels.py")
_REASON = unavailable_reason()
needs_nvrtc = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")


@needs_nvrtc
def test_every_variant_shows_where_its_register_array_went():
    r = CliRunner().invoke(cli, ["inspect", f"{KERNELS}:local_dynamic_index", "--backend", "cuda", "--resources",
                                 "-D", "N=32"])
    assert r.exit_code == 0, r.output
    for dtype in ("f32", "f16", "bf16"):
        assert f"resources of local_dynamic_index [T={dtype}, N=32] for sm_90" in r.output
    assert "regs" in r.output and "stack B" in r.output and "B stack frame" in r.output
    assert "__global__" not in r.output  # the report replaces the source


@needs_nvrtc
def test_one_dtype_an_arch_and_the_vectorised_entry():
    r = CliRunner().invoke(cli, ["inspect", "iron.std.unary:iron_exp", "--backend", "cuda", "--resources",
                                 "--dtype", "bf16", "--arch", "sm_80"])
    assert r.exit_code == 0, r.output
    assert "[T=bf16] for sm_80" in r.output and "f32" not in r.output
    assert "iron_exp_x8 " in r.output and "none (all in registers)" in r.output


@pytest.mark.parametrize("args, message", [
    (["--resources"], "add --backend cuda"),
    (["--backend", "hip", "--resources"], "add --backend cuda"),
    (["--backend", "cuda", "--arch", "sm_80"], "add --resources or --sass"),
])
def test_flag_errors(args, message):
    r = CliRunner().invoke(cli, ["inspect", "iron.std.unary:iron_exp", *args])
    assert r.exit_code == 2 and message in r.output
