"""Every kernel Iron ships or tests, in every dtype variant, emits MSL that clang accepts against the project's model
of Metal (``iron/codegen/msl_model``), with errors on lossy implicit conversions and unused values (issue 6, point 5).

The variants are those of the NVRTC test (same constexpr table). All sources are checked up front by a few clang
processes, several files each, so the whole table costs seconds; each variant is still its own test case. Skipped
with the reason when no clang is installed (CI installs Debian's clang-16).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import iron
from iron import CompileError
from iron.codegen import emit_msl
from iron.codegen.msl_model import clang_command, find_clang, syntax_check

from ..codegen import test_nvrtc as nvrtc_table

CLANG = find_clang()
pytestmark = pytest.mark.skipif(CLANG is None, reason="clang not installed (apt-get install clang-16)")

#: kernels whose variant exceeds Metal's 32 KiB of threadgroup memory: the emitter must refuse them, located
OVER_THREADGROUP_LIMIT = {f"kernels.reverse_tiles-{dt}-BLOCK=256-TILE=16384" for dt in ("f32", "f16", "bf16")}
_VARIANTS = nvrtc_table._variants()


def _emit(kernel, dtype, constexprs) -> str:
    values = tuple(constexprs[c] for c in kernel.constexpr_names)
    return emit_msl(kernel.variant(dtype, values).kernel).source


@pytest.fixture(scope="module")
def clang_results() -> dict[str, tuple[int, str]]:
    """test id -> (clang exit status, its diagnostics for that file), for every variant that emits."""
    sources: dict[str, str] = {}
    for case in _VARIANTS:
        try:
            sources[case.id] = _emit(*case.values)
        except iron.IronError:
            continue  # the test case itself reports it
    with tempfile.TemporaryDirectory(prefix="iron-msl-all-") as tmp:
        files = {}
        for i, (case_id, text) in enumerate(sorted(sources.items())):
            path = Path(tmp) / f"v{i}.metal"
            path.write_text(text)
            files[str(path)] = case_id
        paths = list(files)
        jobs = max(1, min(8, os.cpu_count() or 1))
        chunks = [paths[i::jobs] for i in range(jobs)]

        def run(chunk: list[str]) -> tuple[list[str], str, int]:
            if not chunk:
                return chunk, "", 0
            cmd = clang_command(CLANG, chunk[0])[:-1] + chunk
            proc = subprocess.run(cmd, capture_output=True, text=True)
            return chunk, proc.stderr, proc.returncode

        results: dict[str, tuple[int, str]] = {}
        with ThreadPoolExecutor(jobs) as pool:
            for chunk, log, rc in pool.map(run, chunks):
                for path in chunk:
                    mine = "\n".join(line for line in log.splitlines() if path in line)
                    failed = rc != 0 and re.search(re.escape(path) + r":\d+:\d+: (fatal )?error", log) is not None
                    results[files[path]] = (1 if failed else 0, mine)
    return results


@pytest.mark.parametrize("kernel,dtype,constexprs", _VARIANTS)
def test_every_variant_passes_clang_against_the_metal_model(request, clang_results, kernel, dtype, constexprs):
    case_id = request.node.callspec.id
    if case_id in OVER_THREADGROUP_LIMIT:
        with pytest.raises(CompileError, match=r"over the 32 KiB that msl allows per group"):
            _emit(kernel, dtype, constexprs)
        return
    values = tuple(constexprs[c] for c in kernel.constexpr_names)
    try:
        kernel.variant(dtype, values)
    except iron.IronError as e:
        if nvrtc_table._GUESS not in values:
            raise
        pytest.fail(f"{kernel.__name__} needs constexpr values in tests/codegen/test_nvrtc.py CONSTEXPRS: {e.message}")
    rc, log = clang_results[case_id]
    source = _emit(kernel, dtype, constexprs)
    assert rc == 0 and "warning" not in log, f"clang on the MSL of {case_id}:\n{log}\n{source}"


_PRELUDE = "#include <metal_stdlib>\nusing namespace metal;\n"


def test_the_model_rejects_a_lossy_implicit_conversion():
    """The check has teeth: a float stored to a half without a conversion, and an unused value, are errors."""
    ok, log = syntax_check(_PRELUDE + "kernel void k(device half *o [[buffer(0)]], "
                           "const device float *a [[buffer(1)]], uint tid [[thread_position_in_grid]]) {\n"
                           "    const float f = a[tid];\n    o[tid] = f;\n}\n")
    assert not ok and "implicit conversion" in log
    ok, log = syntax_check(_PRELUDE + "kernel void k(device int *o [[buffer(0)]]) {\n    o[0] + 1;\n}\n")
    assert not ok and "unused" in log


def test_the_model_rejects_an_undeclared_metal_function():
    ok, log = syntax_check(_PRELUDE + "kernel void k(device float *o [[buffer(0)]]) {\n    o[0] = erf(o[0]);\n}\n")
    assert not ok and "erf" in log  # Metal has no erf: the model must not invent one
