"""`iron inspect --backend cuda --sass`: nvdisasm's listing of what ptxas made, and what it proves without a GPU."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.codegen import sass

KERNELS = os.path.join(os.path.dirname(__file__), os.pardir, "frontend")
_REASON = sass.unavailable_reason()
needs_sass = pytest.mark.skipif(_REASON is not None, reason=f"SASS unavailable: {_REASON}")


@needs_sass
def test_fast_exp2_is_one_mufu_ex2():
    """fast_exp / fast_exp2 on CUDA are one MUFU.EX2 each, with no range test around them (exp2f's non-ftz form
    wraps its MUFU.EX2 in an FSETP and two predicated FMULs)."""
    r = CliRunner().invoke(cli, ["inspect", f"{KERNELS}/fast_exp_kernels.py:fast_pair", "--backend", "cuda",
                                 "--sass", "--dtype", "bf16"])
    assert r.exit_code == 0, r.output
    assert "// SASS of fast_pair [T=bf16] for sm_90 (nvdisasm)" in r.output and "__global__" not in r.output
    counts = sass.opcode_counts(r.output)["fast_pair"]
    assert counts["MUFU"] == 2 and counts["FSETP"] == 0, counts
    assert r.output.count("MUFU.EX2") >= 2


@needs_sass
def test_precise_exp2_keeps_its_range_test():
    """The same listing of exp / exp2 (expf, exp2f) shows the FSETP the fast forms drop: the check above can fail."""
    r = CliRunner().invoke(cli, ["inspect", f"{KERNELS}/fast_exp_kernels.py:precise_pair", "--backend", "cuda",
                                 "--sass", "--dtype", "bf16"])
    assert r.exit_code == 0, r.output
    counts = sass.opcode_counts(r.output)["precise_pair"]
    assert counts["FSETP"] >= 1 and counts["MUFU"] >= 2, counts


@pytest.mark.parametrize("args", [["--sass"], ["--backend", "hip", "--sass"]])
def test_sass_needs_cuda(args):
    r = CliRunner().invoke(cli, ["inspect", "iron.std.unary:iron_exp", *args])
    assert r.exit_code == 2 and "add --backend cuda" in r.output
