"""The source fuzzer's kernels through every compile-only target of tests/backends/compile_targets.py (NVRTC sm_90
and sm_90a, hipRTC gfx90a and gfx1030, spirv-val of both SPIR-V forms, clang against the Metal model), each target's
batch in a child process (tests/fuzz/compile_child.py), so a compiler that aborts the process fails this test naming
the seed instead of killing the worker. Why: the runtime fuzzer compares the backends
CI runs (interpreter, lavapipe, msl-cpu); the s36 compile sweep of its kernels found hipRTC's LLVM aborting on
``simd_ballot(isnan(v))`` with v chosen by a branch (tests/codegen_hip/test_hip_votes_compile.py). Fixed seeds under
IRON_CI=1 (as test_source_fuzz.py), fresh ones locally."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..backends.compile_targets import COMPILE_ROWS
from .test_differential import _seeds

SEEDS = _seeds(24)
ROOT = Path(__file__).resolve().parents[2]
TARGETS = [pytest.param(name, marks=pytest.mark.skipif(row.unavailable_reason() is not None,
                                                       reason=f"{name}: {row.unavailable_reason()}"))
           for name, row in COMPILE_ROWS.items()]


@pytest.mark.parametrize("target", TARGETS)
def test_source_kernels_compile(target):
    run = subprocess.run([sys.executable, "-m", "tests.fuzz.compile_child", target, *map(str, SEEDS)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    lines = run.stdout.splitlines()
    errors = [line for line in lines if line.startswith("error ")]
    if not lines or lines[-1] != "done":
        last = next((line for line in reversed(lines) if line.startswith("try ")), "try ?")
        said = [line for line in run.stderr.splitlines() if "ERROR" in line or "rror:" in line][:3]
        pytest.fail(f"the {target} compiler ended the process at seed {last.split()[1]} (rc {run.returncode}; "
                    f"IRON_FUZZ_SEED replays a sample): {said or run.stderr[-1500:]}")
    assert not errors, "\n".join(errors)
    assert sum(line.startswith("ok ") for line in lines) == len(SEEDS)
