"""The source fuzzer's CI sample: random Python kernel sources (tests/fuzz/source_gen.py) through the whole pipeline
(front-end, passes, every emitter) on the interpreter and every other backend present, compared as
tests/fuzz/runner.py does. Fixed seeds under IRON_CI=1, fresh ones locally (``IRON_FUZZ_SEED=<first seed>`` replays a
run); ``scripts/fuzz.sh N --kind source`` runs as many as you like.

Each kernel runs on Vulkan; msl-cpu (a C++ compile each, about a second) takes every fourth, so the sample costs well
under a minute on two cores.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from . import runner
from .test_differential import _seeds

SEEDS = _seeds(30)
BACKENDS = runner.available_backends(["vulkan", "msl-cpu"])


@pytest.fixture(autouse=True)
def _lavapipe_width(monkeypatch):
    """The interpreter and msl-cpu at lavapipe's subgroup size for these tests only (runner.SIMD_ENV)."""
    for name, value in runner.SIMD_ENV.items():
        monkeypatch.setenv(name, value)


def _backends(i: int) -> list[str]:
    return [b for b in BACKENDS if b != "msl-cpu" or i % 4 == 0]


@pytest.mark.parametrize("chunk", range(3))
def test_source_kernels_agree_with_the_interpreter(chunk):
    """30 kernels in three tests of ten; a failure names each seed, its messages and its saved reproducer."""
    folder = Path(tempfile.gettempdir()) / "iron-fuzz-failures"
    failures = []
    for i in range(chunk * 10, chunk * 10 + 10):
        report = runner.fuzz_source(SEEDS[i], _backends(i), folder)
        if report["outcome"] not in ("ok", "known"):
            failures.append(f"seed {SEEDS[i]} ({report['outcome']}, saved in {report.get('saved')}; "
                            f"IRON_FUZZ_SEED={SEEDS[i]} replays it first):\n" + "\n".join(report["messages"]))
    assert not failures, "\n\n".join(failures)


def test_the_generator_is_deterministic():
    from .source_gen import random_source

    assert random_source(7).source == random_source(7).source
    assert random_source(7).source != random_source(8).source


def test_the_generator_covers_the_language():
    """Every construct the generator promises appears in its first 150 kernels (generation alone: milliseconds)."""
    import re

    from .source_gen import CAST_TYPES, random_source

    text = "\n".join(random_source(s).source for s in range(150))
    for construct in ("@iron.func", "static_range(", "range(", "while ", "break", "continue", "return\n", "elif ",
                      "else:", "shared(", "barrier()", "simd_sum(", "simd_shuffle_xor(", "simd_ballot(", "atomic_add(",
                      "atomic_cas(", "Tensor[T]", "cast(", " if ", "where(", " and ", "(not ", "//", "%", "<<", ">>",
                      "umulhi(", "bitcast(", "**", "+=", "exp(", "fma(", "C"):
        assert construct in text, construct
    for src in CAST_TYPES:  # a cast from every type to every type (f16/bf16 values are casts or loads of them)
        for dst in CAST_TYPES:
            if src in ("f16", "bf16"):
                ok = re.search(rf"(iron\.{dst}|cast|bool|int)\((iron\.)?{src}\(", text) or dst == "f32"
            else:
                ok = f"iron.{dst}(" in text or dst == "bool"
            assert ok, (src, dst)


def test_zero_sign_sensitive_arguments_are_sent_to_positive_zero():
    """atan2's arguments, pow's base and rsqrt's argument never see a zero whose sign a driver may lose
    (source_gen.ZERO_SIGN_ARGS): each such argument is `where(a == 0.0, 0.0, a)`."""
    import ast

    from .source_gen import ZERO_SIGN_ARGS, random_source

    seen = 0
    for seed in range(150):
        for node in ast.walk(ast.parse(random_source(seed).source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ZERO_SIGN_ARGS:
                for i in ZERO_SIGN_ARGS[node.func.id]:
                    arg = node.args[i]
                    assert isinstance(arg, ast.Call) and arg.func.id == "where", (seed, ast.unparse(node))
                    seen += 1
    assert seen > 20


@pytest.mark.skipif("vulkan" not in BACKENDS, reason="needs Vulkan")
def test_a_zero_lavapipe_folds_does_not_reach_atan2(tmp_path):
    """Fuzz seed 450045308: `cast(u < u, f16) + x` with x = -0.0 is +0.0, but lavapipe folds it to x (a zero only
    the driver's own folding reveals; docs/backends/vulkan.md), and atan2(+0, -0) = pi against atan2(+0, +0) = 0."""
    report = runner.fuzz_source(450045308, ["vulkan"], tmp_path)
    assert report["outcome"] == "ok" and report["compared"] == 1, report["messages"]


@pytest.mark.skipif("msl-cpu" not in BACKENDS, reason="needs msl-cpu")
def test_ir_kernels_report_a_zero_sign_difference_as_the_known_min_max_row(tmp_path):
    """IR fuzz seed 964067387 (the 10,000-kernel run): min(0.0, -0.0) stored, -0.0 on the interpreter and +0.0 on
    msl-cpu. Which zero min/max return is unspecified (docs/dsl.md): the IR runner tags zero-sign-only differences as
    the source runner does, and the run counts it as the known row, not a mismatch."""
    report = runner.fuzz_ir(964067387, ["msl-cpu"], tmp_path)
    assert report["outcome"] == "known", report["messages"]
    assert all("[zero signs only]" in m for m in report["messages"])


def test_a_backend_of_another_simd_width_is_compared_with_the_interpreter_at_its_width(monkeypatch, tmp_path):
    """The reference runs at each backend's SIMD width: on the H200 (CUDA and NVIDIA's Vulkan, 32 lanes) the
    runner compared them with the interpreter at lavapipe's 8 and reported 375 of 1,000 source kernels as
    mismatches (seed 708000004: simd ops, simd_size() and shuffles see 32 lanes there). msl-cpu at 32 here."""
    monkeypatch.setenv("IRON_MSL_CPU_SIMD_WIDTH", "32")
    if "msl-cpu" not in runner.available_backends(["msl-cpu"]):
        pytest.skip("msl-cpu is not available")
    program = runner.sg.random_source(708000004)
    module = runner.load_program(program)
    inputs = runner.source_inputs(program)
    at8 = runner.run_source(module, program, "cpu", inputs)
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", "32")
    at32 = runner.run_source(module, program, "cpu", inputs)
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", "8")
    assert any(not np.array_equal(at8[k], at32[k], equal_nan=True) for k in at8)  # the kernel sees the width
    report = runner.fuzz_source(708000004, ["msl-cpu"], tmp_path)
    assert report["outcome"] in ("ok", "known") and report["compared"] == 1, report["messages"]
