"""Every kernel Iron ships or tests, in every dtype variant, compiles through hipRTC -- the runtime's own compile
path -- for gfx90a (CDNA2, wavefront 64) and gfx1030 (RDNA2, wavefront 32) to a non-empty code object, with no
compiler warnings (issue 7, point 3). No GPU needed; skipped with the reason when hipRTC cannot be loaded.

The variants are test_nvrtc's (its constexpr table), so a kernel added there is compiled here too. All compiles run
up front on a thread pool (hipRTC releases the GIL), and each variant's test checks its result.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

import iron
from iron.codegen import hiprtc
from iron.runtime.hip import HipBackend

from ..codegen import test_nvrtc as nv

_REASON = hiprtc.unavailable_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=f"hipRTC unavailable: {_REASON}")

TARGETS = ("gfx90a", "gfx1030")
_CASES = [(p.values, p.id) for p in nv._variants()]


def _emit(values, target):
    """(source, None), or (None, why the variant is skipped); the front end and printer run on one thread."""
    kernel, dtype, constexprs = values
    cv = tuple(constexprs[c] for c in kernel.constexpr_names)
    try:
        variant = kernel.variant(dtype, cv)
    except iron.IronError as e:
        if nv._GUESS not in cv:
            raise
        return None, f"{kernel.__name__} needs constexpr values in CONSTEXPRS: {e.message}"
    return HipBackend().emitted(variant, target), None


def _compile(src, target):
    code, log = hiprtc.compile_hip_log(src, target=target)
    return code, log, src.source


@pytest.fixture(scope="module")
def compiled():
    sources = {f"{target}-{case_id}": (_emit(values, target), target) for values, case_id in _CASES
               for target in TARGETS}
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        return {key: pool.submit(_compile, src, target) if src is not None else why
                for key, ((src, why), target) in sources.items()}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", [c[1] for c in _CASES])
def test_every_variant_compiles_to_a_code_object(compiled, case, target):
    job = compiled[f"{target}-{case}"]
    if isinstance(job, str):
        pytest.fail(job)  # a kernel without constexpr values in test_nvrtc.CONSTEXPRS: add them there
    code, log, source = job.result()
    assert code[:4] == b"\x7fELF" and len(code) > 1000
    assert not hiprtc.warnings_in(log), f"hipRTC warnings for {case} on {target}:\n{log}\n{source}"
