"""Every kernel Iron ships or tests, in every variant, through every compile-only target (tests/backends/
compile_targets.py): an sm_90 cubin from NVRTC with no warnings, gfx90a and gfx1030 code objects from hipRTC with no
warnings, SPIR-V modules (plain and lanes) that spirv-val accepts, MSL that clang accepts against the project's model
of Metal. No GPU needed; a target whose toolchain is absent skips with the reason.

Each target emits and builds every variant once, up front (a thread pool, or a few clang processes for many files),
and each variant's test checks its own result. The pass tests' random kernels (every op and control-flow form) go
through the targets that ask for them, raw and optimised.
"""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings

from iron import CompileError
from iron.ir.rewrite import clone_kernel
from iron.passes import PassManager, default_pipeline

from ..passes import passes_kernel_gen as random_kernels
from .compile_targets import COMPILE_ROWS, CompileRow
from .variants import make_variant, variants

VARIANTS = variants()
_BY_ID = {case.id: case.values for case in VARIANTS}
assert len(_BY_ID) == len(VARIANTS), "two kernel variants share a test id"


def _row(request) -> CompileRow:
    row = COMPILE_ROWS[request.param]
    reason = row.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return row


@pytest.fixture(params=list(COMPILE_ROWS))
def target(request) -> CompileRow:
    """A compile-only target, skipped with the reason where its toolchain is absent."""
    return _row(request)


@cache
def _built(name: str) -> dict[str, tuple]:
    """case id -> (emitted, result) for every variant the target emits (refusals and front-end errors excluded: the
    case's own test reports those)."""
    row = COMPILE_ROWS[name]
    emitted = {}
    for case, (kernel, dtype, constexprs) in _BY_ID.items():
        if case in row.refuses:
            continue
        try:
            variant = kernel.variant(dtype, tuple(constexprs[c] for c in kernel.constexpr_names))
            emitted[case] = row.emit(variant)
        except Exception:
            continue
    results = row.build_all(emitted)
    return {case: (emitted[case], results[case]) for case in emitted}


@pytest.mark.parametrize("case", list(_BY_ID))
def test_every_variant_compiles(target, case):
    variant = make_variant(*_BY_ID[case])
    if case in target.refuses:
        with pytest.raises(CompileError, match=target.refuses[case]):
            target.emit(variant)
        return
    built = _built(target.name)
    if case not in built:
        target.emit(variant)  # raises what the batch met
    emitted, result = built[case]
    if isinstance(result, Exception):
        raise result
    target.check(case, variant, emitted, result)


@pytest.fixture(params=[name for name, row in COMPILE_ROWS.items() if row.random_examples])
def random_target(request) -> CompileRow:
    return _row(request)


def test_random_kernels_compile(random_target):
    """The pass tests' random-kernel generator (every op and control-flow form), raw and optimised."""

    @settings(max_examples=random_target.random_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(kernel=random_kernels.kernels())
    def check(kernel):
        optimised = PassManager(default_pipeline()).run(clone_kernel(kernel))
        for k in (kernel, optimised):
            random_target.check_random(k)

    check()
