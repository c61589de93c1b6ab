"""simd_ballot/any/all of ``isnan`` of a value a branch chose, compiled by hipRTC for gfx90a and gfx1030.

AMD's LLVM folds ``__ballot`` of a float comparison into its ``amdgcn.fcmp`` intrinsic, and for an unordered one
whose operand is a phi its instruction selection failed ("LLVM ERROR: Cannot select ... setuo"), which aborts the
process hipRTC runs in (found by the source fuzzer's compile sweep, seed 217, in s36). The HIP votes now ballot
``iron_vote_pred(c)`` (cfamily/simd_lanes.py). Each compile runs in a child process, so the old failure is a failed
assertion here and not a dead test worker."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from iron.codegen.hiprtc import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"hipRTC: {unavailable_reason()}")

KERNEL = """\
import iron
from iron import *  # noqa: F403


@iron.kernel
def k(xf: Tensor[iron.f32], ou: Tensor[iron.u32]):
    gid = program_id(0)
    v = xf[(gid * 7) & 63] if gid > -5 else xf[gid]
    ou[gid] = simd_ballot(isnan(v)) + iron.u32(simd_any(isnan(v))) + iron.u32(simd_all(isnan(v)))
"""

CHILD = """\
import importlib.util, sys
from iron.codegen.hiprtc import compile_hip
spec = importlib.util.spec_from_file_location("votes_kernel", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
src = module.k.source("hip")
assert "iron_vote_pred" in str(src)
compile_hip(src, sys.argv[2])
print("compiled")
"""


@pytest.mark.parametrize("target", ["gfx90a", "gfx1030"])
def test_votes_of_isnan_of_a_branch_value_compile(target, tmp_path):
    (tmp_path / "votes_kernel.py").write_text(KERNEL)
    run = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "votes_kernel.py"), target],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "compiled" in run.stdout, textwrap.shorten(run.stderr, 2000)
