"""Differential testing across backends: random kernels (every op and control-flow form whose result every backend
must compute bit for bit alike) run on the interpreter, Vulkan (lavapipe) and the CPU model of Metal, and every
output element must agree.

The kernels come from the pass tests' generator in its ``exact`` profile: integer arithmetic with C's wrapping,
shifts, division and remainder; IEEE add/sub/mul/min/max, neg/abs/floor/ceil; casts; comparisons and selects;
if/else, dynamic/static/while loops with break/continue/return; variables; atomics; and SIMD reductions (integer
sums, min/max) in uniform code. Left out on purpose, because backends may legitimately differ there: float
division/remainder and transcendentals (ulp-level precision rules), fma (Vulkan need not fuse), float SIMD sums
(summation order) and SIMD ops under divergence after loops (reconvergence is implementation-defined).

Allowed differences: lavapipe ignores the sign of zero in places (see tests/frontend/test_kernels.py), so on Vulkan
+0.0 and -0.0 compare equal, and kernels that add or multiply a float by a zero the driver folds to a constant are not
compared on lavapipe (it folds them: ``_folds_on_lavapipe``). NaNs compare equal to NaNs.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from iron.errors import LaunchError
from iron.frontend.analysis import COLLECTIVE_OPS
from iron.frontend.kernel import Variant
from iron.interp.executor import run_kernel
from iron.ir import print_kernel
from iron.ir.rewrite import clone_kernel
from iron.passes import PassManager, default_pipeline
from iron.runtime import get_backend, unavailable_reason

from ..passes import passes_kernel_gen as gen

SIMD = 8  # msl-cpu is set to it (lavapipe's subgroup size too); the interpreter follows the backend compared
GROUP = 8
BACKENDS = [b for b in ("vulkan", "msl-cpu") if unavailable_reason(b) is None]
pytestmark = pytest.mark.skipif(not BACKENDS, reason="no second backend (Vulkan or msl-cpu) to compare with")


def _inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261130)
    n = gen.N_THREADS
    xi = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    xi[:6] = [0, 1, -1, 7, -(2**31), 2**31 - 1]
    xu = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    xu[:4] = [0, 1, 2**31, 2**32 - 1]
    xf = (rng.standard_normal(n) * 10).astype(np.float32)
    xf[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -3.5, 2.0**20]
    return {"xi": xi, "xu": xu, "xf": xf}


def _fresh(inputs) -> dict[str, np.ndarray]:
    size = gen.N_THREADS * gen.SITES
    return {**{k: v.copy() for k, v in inputs.items()}, "oi": np.full(size, -12345, np.int32),
            "ou": np.full(size, 0xDEADBEEF, np.uint32), "of": np.full(size, np.nan, np.float32)}


def _on(backend: str, kernel, inputs, simd: int = SIMD) -> dict[str, np.ndarray]:
    arrays = _fresh(inputs)
    grid = (gen.N_THREADS, 1, 1)
    if backend == "cpu":
        run_kernel(kernel, {**arrays, "n": np.int32(gen.N_THREADS)}, grid, (GROUP,), simd)
        return arrays
    be = get_backend(backend)
    variant = Variant(kernel, None, [], 0.0, any(op.opcode in COLLECTIVE_OPS for op in kernel.walk()), [])
    bound = {k: be.check_array(k, v, lambda: None) for k, v in arrays.items()}
    be.launch(variant, bound, {"n": gen.N_THREADS}, grid, (GROUP, 1, 1))
    return arrays


def _differences(want: np.ndarray, got: np.ndarray, zero_sign: bool) -> np.ndarray:
    if want.dtype.kind != "f":
        return np.flatnonzero(want != got)
    both_nan = np.isnan(want) & np.isnan(got)
    if zero_sign:
        same = want.view(np.uint32) == got.view(np.uint32)
    else:
        same = want == got
    return np.flatnonzero(~(same | both_nan))


@pytest.fixture(autouse=True)
def _simd_width(monkeypatch):
    monkeypatch.setenv("IRON_MSL_CPU_SIMD_WIDTH", str(SIMD))


def _lavapipe() -> bool:
    return "llvmpipe" in str(get_backend("vulkan").info().get("name", ""))


#: ops whose result is their first operand when that is one constant in every lane, as the driver folds them
_UNIFORM_OF_CONSTANT = {"simd_shuffle", "simd_shuffle_xor", "simd_broadcast", "simd_shuffle_up", "simd_shuffle_down",
                        "simd_min", "simd_max"}
#: an int compared with itself, as the driver folds it
_SELF_COMPARE = {"eq": True, "le": True, "ge": True, "ne": False, "lt": False, "gt": False}


def _driver_constant(v, depth: int = 0):
    """The constant lavapipe's own folding makes of ``v`` (None: not one): constants, pure ops of constants (the raw
    IR's ``sub 2.0, 2.0``: fuzz seed 704530995), SIMD exchanges and min/max of a constant (``simd_shuffle(0, lane)``:
    fuzz seed 704530347) and an int compared with itself (``u < u``: fuzz seed 450045308), which Iron's IR keeps."""
    from iron.interp.semantics import eval_pure
    from iron.ir import ops as O

    owner = v.owner
    code = getattr(owner, "opcode", None)
    if code is None or depth > 32:
        return None
    if code == "const":
        return owner.attrs["value"]
    if code in _UNIFORM_OF_CONSTANT:
        return _driver_constant(owner.operands[0], depth + 1)
    if code in _SELF_COMPARE and len(owner.operands) == 2 and owner.operands[0] is owner.operands[1] \
            and not owner.operands[0].type.is_float:
        return _SELF_COMPARE[code]
    info = O.OPS.get(code)
    if info is None or not info.pure or owner.result is None or not owner.operands:
        return None
    args = [_driver_constant(x, depth + 1) for x in owner.operands]
    if any(a is None for a in args):
        return None
    try:
        arrays = [np.asarray(a, dtype=x.type.np_dtype) for a, x in zip(args, owner.operands)]
        return eval_pure(code, arrays, owner.result.type, owner.attrs)[()].item()
    except Exception:  # noqa: BLE001 - an op the evaluator lacks is simply not a constant here
        return None


def _folds_on_lavapipe(kernel) -> bool:
    """Whether ``kernel`` adds, subtracts, multiplies or divides a float by a zero lavapipe knows and Iron leaves to
    it: lavapipe's gallivm (Mesa 22.3, lp_bld_arit.c) returns x for x + 0.0 and 0.0 for x * 0.0 and 0.0 / x when an
    operand is its constant +0.0, even with SignedZeroInfNanPreserve and NoContraction (a driver bug, documented in
    docs/backends/vulkan.md), so such kernels are not compared there. Where the SPIR-V emitter spells such an operand
    without the zero (``values.is_plus_zero``: the zeros ``_driver_constant`` finds), only zeros it misses count."""
    try:
        from iron.codegen.spirv.values import is_plus_zero as spelled
    except ImportError:  # an emitter without the workaround: every zero the driver knows counts
        spelled = None

    def zero(v) -> bool:
        c = _driver_constant(v)
        return c is not None and float(c) == 0.0 and not (spelled is not None and spelled(v))

    return any(op.opcode in ("add", "sub", "mul", "div") and op.result is not None and op.result.type.is_float
               and any(zero(v) for v in op.operands) for op in kernel.walk())


def _check(kernel, backend: str) -> None:
    if backend not in BACKENDS:
        pytest.skip(f"backend {backend} unavailable: {unavailable_reason(backend)}")
    # the interpreter runs at the backend's SIMD width: 8 on lavapipe (and msl-cpu, set so), 32 on NVIDIA's Vulkan
    # driver, where a group of 8 threads is a partial subgroup (its lanes are the active ones)
    simd = get_backend("vulkan").simd_width() if backend == "vulkan" else SIMD
    inputs = _inputs()
    # the optimised IR (what launches compile) and the front-end's raw IR (more shapes for the emitters)
    for k in (PassManager(default_pipeline()).run(clone_kernel(kernel)), kernel):
        if backend == "vulkan" and _lavapipe() and _folds_on_lavapipe(k):
            continue
        want, got = _on("cpu", k, inputs, simd), _on(backend, k, inputs)
        for name in ("oi", "ou", "of"):
            bad = _differences(want[name], got[name], zero_sign=backend != "vulkan")
            assert bad.size == 0, (
                f"{backend} disagrees with the interpreter on {name}[{bad[0]}] (thread {bad[0] // gen.SITES}, "
                f"site {bad[0] % gen.SITES}): {got[name][bad[0]]!r} != {want[name][bad[0]]!r} ({bad.size} "
                f"elements)\n{print_kernel(k)}")


def _seeds(count: int) -> list[int]:
    """``count`` generator seeds: fixed under IRON_CI=1 (the CI verdict depends on the commit), else drawn fresh for
    each run (``IRON_FUZZ_SEED=<first seed>`` replays a run)."""
    import os

    first = os.environ.get("IRON_FUZZ_SEED")
    if first is None:
        first = "0" if os.environ.get("IRON_CI") == "1" else str(int(np.random.SeedSequence().entropy) % 10**9)
    return [int(first) + i for i in range(count)]


VULKAN_SEEDS = _seeds(400)
MSL_SEEDS = _seeds(24)


@pytest.mark.parametrize("seed", VULKAN_SEEDS[:1])
def test_vulkan_agrees_with_the_interpreter(seed):
    """400 kernels in one test (each takes milliseconds on lavapipe); the failing seed is named."""
    for s in VULKAN_SEEDS:
        try:
            _check(gen.random_kernel(s, budget=60, exact=True), "vulkan")
        except (AssertionError, LaunchError) as e:  # LaunchError: a dispatch past IRON_VULKAN_TIMEOUT
            raise AssertionError(f"seed {s} (IRON_FUZZ_SEED={s} replays it first): {e}") from None


@pytest.mark.parametrize("seed", MSL_SEEDS)
def test_msl_cpu_agrees_with_the_interpreter(seed):
    """Fewer kernels: each compiles C++ (about a second)."""
    _check(gen.random_kernel(seed, budget=60, exact=True), "msl-cpu")


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(kernel=gen.kernels(budget=40, exact=True))
def test_hypothesis_kernels_agree_on_vulkan(kernel):
    """The hypothesis-drawn kernels too: they favour edge cases (empty loops, early returns) that shrink well."""
    _check(kernel, "vulkan")
