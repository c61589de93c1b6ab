"""The source fuzzer's CI sample: random Python kernel sources (tests/fuzz/source_gen.py) through the whole pipeline
(front-end, passes, every emitter) on the interpreter and every other backend present, compared as
tests/fuzz/runner.py does. Fixed seeds under IRON_CI=1, fresh ones locally (``IRON_FUZZ_SEED=<first seed>`` replays a
run); ``scripts/fuzz.sh N --kind source`` runs as many as you like.

Each kernel runs on Vulkan; msl-cpu (a C++ compile each, about a second) takes every fourth, so the sample costs well
under a minute on two cores.
"""

from __future__ import annotations

import dataclasses
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
                      "umulhi(", "bitcast(", "**", "+=", "exp(", "fma(", "C", "local_array(", "vload(", "vstore(",
                      "dp4a(", ") & 7] = "):
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


class _FakeVulkan:
    """What the runner asks of a Vulkan device: NVIDIA's H200 (32 lanes, no ``denorm_preserve``) by default."""

    def __init__(self, features=(), name="NVIDIA H200"):
        self._info = {"name": name, "features": list(features)}

    def info(self):
        return self._info

    def simd_width(self):
        return 32


def _on_a_flushing_device(monkeypatch, tmp_path, features=(), wrong=None, where=216):
    """``vulkan`` is the interpreter at 32 lanes on the kernel and inputs with f32 subnormals flushed (what NVIDIA's
    driver did on the H200); every other backend is itself. ``wrong(subnormal_in_inputs)``: whether the fake device
    also writes 12345.0 to oa[where], a value neither reference gives (oa[216], thread 9's, reads the subnormal
    xf[9] in seed 708000032; oa[0] does not)."""
    import iron.runtime

    fake = _FakeVulkan(features)
    real_get, real_run = iron.runtime.get_backend, runner.run_source
    monkeypatch.setattr(iron.runtime, "get_backend", lambda name: fake if name == "vulkan" else real_get(name))

    def run_source(module, program, backend, inputs):
        if backend != "vulkan":
            return real_run(module, program, backend, inputs)
        tiny = bool(((np.abs(inputs["xf"]) < 1.2e-38) & (inputs["xf"] != 0)).any())
        flushed = dataclasses.replace(program, source=program.source.replace("1e-40", "0.0"))
        module = runner.load_program(flushed, tmp_path / "fake-device")
        inputs = dict(inputs, xf=np.where(np.abs(inputs["xf"]) < 1.2e-38, np.float32(0), inputs["xf"]))
        with monkeypatch.context() as m:
            m.setenv("IRON_CPU_SIMD_WIDTH", "32")
            out = real_run(module, flushed, "cpu", inputs)
        if wrong is not None and wrong(tiny):
            out["oa"][where] = 12345.0
        return out

    monkeypatch.setattr(runner, "run_source", run_source)


def test_a_device_that_flushes_subnormals_gets_an_allowance_not_a_mismatch(monkeypatch, tmp_path):
    """H200 fuzz seed 708000032: `log(min(max(xf[gid], -30.0), 30.0))` at xf[9] = 1e-40 is -92.1, but NVIDIA's Vulkan
    driver (no denorm_preserve) flushed the subnormal and gave log(0) = -inf: 22 of 706 source kernels were counted
    as mismatches that way. Such an element agrees with the interpreter on flushed inputs: an allowance."""
    _on_a_flushing_device(monkeypatch, tmp_path)
    report = runner.fuzz_source(708000032, ["vulkan"], tmp_path)
    assert report["outcome"] == "ok" and report["compared"] == 1, report["messages"]
    assert any("oa[216]" in a and "subnormals flushed" in a for a in report["allowed"]), report["allowed"]


def test_a_device_that_keeps_subnormals_is_compared_strictly(monkeypatch, tmp_path):
    """The same device results where the device reports denorm_preserve are a mismatch: nothing allows them."""
    _on_a_flushing_device(monkeypatch, tmp_path, features=["denorm_preserve"])
    report = runner.fuzz_source(708000032, ["vulkan"], tmp_path)
    assert report["outcome"] == "mismatch" and "oa[216]" in report["messages"][0], report
    assert not report["allowed"]


def test_a_difference_that_goes_with_the_subnormals_is_an_allowance(monkeypatch, tmp_path):
    """H200 fuzz seed 710000802: NVIDIA's driver found x = 1e-40 equal to 0.0 and ceil(x) = 1 in one kernel, a mix
    neither reference gives. Run again with no subnormal in the kernel or its inputs, the device agrees with the
    flushed reference bit for bit: the difference came with the subnormals, an allowance."""
    _on_a_flushing_device(monkeypatch, tmp_path, wrong=lambda tiny: tiny)
    report = runner.fuzz_source(708000032, ["vulkan"], tmp_path)
    assert report["outcome"] == "ok" and report["compared"] == 1, report["messages"]
    assert any("only while a subnormal" in a for a in report["allowed"]), report["allowed"]


def test_a_difference_the_subnormals_do_not_reach_is_a_mismatch(monkeypatch, tmp_path):
    """The same mix on an element whose reference value does not change with the subnormals flushed (oa[0]): the
    flushed re-run agreeing is no excuse there."""
    _on_a_flushing_device(monkeypatch, tmp_path, wrong=lambda tiny: tiny, where=0)
    report = runner.fuzz_source(708000032, ["vulkan"], tmp_path)
    assert report["outcome"] == "mismatch" and "oa[0]" in report["messages"][0], report


def test_a_difference_that_stays_without_subnormals_is_a_mismatch(monkeypatch, tmp_path):
    _on_a_flushing_device(monkeypatch, tmp_path, wrong=lambda tiny: True)
    report = runner.fuzz_source(708000032, ["vulkan"], tmp_path)
    assert report["outcome"] == "mismatch" and "oa[216]" in report["messages"][0], report
    assert not any("only while a subnormal" in a for a in report["allowed"]), report["allowed"]


def test_the_flushed_reference_allows_element_by_element():
    """NVIDIA flushes instruction by instruction (seed 708000410: a subnormal compared equal to 0.0 and went through
    ceil unflushed in the same kernel): an element agreeing with either reference passes, one agreeing with neither
    is still a mismatch."""
    want = {"of": np.array([1.0, 2.0, 3.0, -92.1], np.float32)}
    flushed = {"of": np.array([1.0, 7.0, 5.0, -np.inf], np.float32)}
    got = {"of": np.array([1.0, 7.0, 4.0, -92.1], np.float32)}
    allowed: list[str] = []
    messages = runner.compare(want, got, "vulkan", 1, allowed, flushed)
    assert len(messages) == 1 and "of[2]" in messages[0] and "(1 elements)" in messages[0], messages
    assert len(allowed) == 1 and "1 elements (first of[1])" in allowed[0], allowed


def test_subnormal_literals_and_inputs_are_flushed_with_their_sign():
    import ml_dtypes

    program = runner.sg.Program(1, "a = (1e-40 + x) * (-1e-30) + 1e-40\nb = 0x7F7FFFFF | 0x00800000\nc = 1.5e-45\n",
                                False, "", 1)
    assert runner.flushed_program(program).source == ("a = (0.0 + x) * (-1e-30) + 0.0\nb = 0x7F7FFFFF | 0x00800000\n"
                                                      "c = 0.0\n")
    xf = np.array([1e-40, -1e-40, 1e-30, 0.0, np.nan], np.float32)
    xb = np.array([1e-39, -1e-39, 1.0], np.float32).astype(ml_dtypes.bfloat16)
    xi = np.array([1, 2], np.int32)
    out = runner.flush_subnormals({"xf": xf, "xb": xb, "xi": xi})
    assert out["xf"].view(np.uint32).tolist() == np.array([0.0, -0.0, 1e-30, 0.0, np.nan], np.float32
                                                          ).view(np.uint32).tolist()
    assert out["xb"].astype(np.float32).tolist() == [0.0, 0.0, 1.0] and np.signbit(out["xb"].astype(np.float32)[1])
    assert out["xi"] is xi and xf[0] == np.float32(1e-40)  # the inputs themselves are left alone


def test_zero_sign_differences_are_the_known_min_max_row_on_every_backend():
    """H200 seeds 708000261, 708000409, 708000443: CUDA's min/max of +0.0 and -0.0 returned the other zero than the
    interpreter (unspecified, docs/dsl.md): the known row, as on msl-cpu. A zero against a nonzero is not tagged."""
    want = {"of": np.array([0.0, 0.0], np.float32)}
    got = {"of": np.array([-0.0, 0.0], np.float32)}
    report = {"outcome": "mismatch", "messages": runner.compare(want, got, "cuda", 1)}
    runner._known(report)
    assert report["outcome"] == "known", report
    got = {"of": np.array([-0.0, 1e-40], np.float32)}
    messages = runner.compare(want, got, "cuda", 1)
    assert messages and "[zero signs only]" not in messages[0], messages
