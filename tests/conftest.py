"""Fixtures shared by every test directory.

``rng``: a NumPy generator on fresh entropy for each test, so each run checks new data. The seed is printed (pytest
shows it with a failure's captured output) and ``IRON_TEST_SEED=<seed>`` replays a failing run exactly.

Hypothesis (the property tests and the random-kernel generators) explores new examples on every local run; under
``IRON_CI=1`` (set by ``.ci/run``) it runs derandomized, so a CI verdict depends on the commit, not on which rare
example a run happened to draw. Run the suite locally (or with more examples) to keep finding new cases.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("IRON_CI") == "1":
    settings.load_profile("ci")


def _cpu_model() -> str:
    """The host CPU's model and its widest x86 vector extension (lavapipe's code differs between AVX2 and AVX-512)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    widest = next((f for f in ("avx512f", "avx2", "avx", "sse4_1") if f in flags), "none of avx512f/avx2/avx/sse4_1")
    return f"{model} ({widest}, {os.cpu_count()} cores)"


def pytest_sessionstart(session) -> None:
    """Ties a CI log to its host: prints the CPU and the Vulkan device the suite runs on (also under ``-q``)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        for line in _host_lines():
            reporter.write_line(line)


def _host_lines() -> list[str]:
    lines = [f"iron host CPU: {_cpu_model()}"]
    try:
        from iron.runtime import get_backend, unavailable_reason

        reason = unavailable_reason("vulkan")
        info = get_backend("vulkan").info() if not reason else {}
        lines.append(f"iron Vulkan device: {info.get('name')} ({info.get('driver')}), subgroup "
                     f"{info.get('subgroup_size')}" if info else f"iron Vulkan device: none ({reason})")
    except Exception as e:  # the header must never stop the run
        lines.append(f"iron Vulkan device: unknown ({type(e).__name__}: {e})")
    return lines


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("IRON_TEST_SEED") or np.random.SeedSequence().entropy)
    print(f"rng seed: IRON_TEST_SEED={seed}")
    return np.random.default_rng(seed)


def _test_backends() -> list[str]:
    """Backends the conformance suite runs on: ``IRON_TEST_BACKENDS`` (comma-separated), by default every backend,
    each skipping where it cannot run (CI: the interpreter, Vulkan on lavapipe and the CPU model of Metal; a GPU
    machine adds CUDA)."""
    names = os.environ.get("IRON_TEST_BACKENDS", "cpu,vulkan,msl-cpu,cuda")
    return [n.strip() for n in names.split(",") if n.strip()]


@pytest.fixture(params=_test_backends())
def backend(request) -> str:
    """The backend a conformance test launches on (written once, instantiated per backend; what the test may expect
    of it is its row in tests/backends/capabilities.py); skips cleanly where that backend cannot run here (e.g. no
    GPU in CI)."""
    from iron.runtime import unavailable_reason

    from .backends.capabilities import RUN_ROWS

    reason = unavailable_reason(request.param)
    if reason:
        pytest.skip(f"backend {request.param} unavailable: {reason}")
    if request.param not in RUN_ROWS:
        pytest.fail(f"backend {request.param} runs here but has no row in tests/backends/capabilities.py")
    return request.param


@pytest.fixture(params=["f32", "f16", "bf16"])
def dtype(request) -> str:
    """A float dtype a T-generic kernel runs in; on a backend whose capability row does not list it, the test skips."""
    if "backend" in request.fixturenames:
        from .backends.capabilities import caps

        backend = request.getfixturevalue("backend")
        if request.param not in caps(backend).dtypes:
            pytest.skip(f"backend {backend} does not run {request.param}")
    return request.param
