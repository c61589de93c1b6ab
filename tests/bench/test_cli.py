"""``iron bench``, ``iron test``, ``iron snap`` and ``iron diff`` through the CLI, on the CPU backends. No test asserts
a timing: the regression caught by ``diff`` is synthetic (a baseline written with faster times)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from iron.bench import baseline
from iron.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_bench_writes_json_and_last_run(tmp_path):
    out = tmp_path / "bench.json"
    result = run("bench", "--backend", "cpu", "--filter", "std/binary/add", "--dtype", "f32", "--json", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["backend"] == "cpu" and {"gpu", "driver", "git_sha", "date"} <= set(doc)
    assert [r["shape"] for r in doc["rows"]] == [[1 << 16], [1 << 20]] and all(r["ok"] for r in doc["rows"])
    assert json.loads(baseline.last_run_path().read_text())["rows"] == doc["rows"]


def test_bench_verbose_adds_roofline_columns(backend):
    result = run("bench", "--backend", backend, "--filter", "std/gemv", "--dtype", "f32", "-v")
    assert result.exit_code == 0, result.output
    assert "%BW" in result.output and "copy ceiling" in result.output
    rows = json.loads(baseline.last_run_path().read_text())["rows"]
    assert all(r["verdict"] in ("launch-bound", "memory-bound", "compute-bound", "latency-bound") for r in rows)
    assert all(r["intensity"] == pytest.approx(2 * r["shape"][0] * r["shape"][1] / (4 * (r["shape"][0] * r["shape"][1]
               + sum(r["shape"])))) for r in rows)


def test_bench_reports_a_faulting_kernel_and_goes_on(broken_kernels):
    result = run("bench", "--backend", "cpu", "--filter", "broken/")
    assert result.exit_code == 1
    assert "device lost (simulated)" in result.output and "ERROR" in result.output


def test_test_command_passes_on_std(backend):
    result = run("test", "--backend", backend, "--filter", "std/*/add", "--dtype", "f16")
    assert result.exit_code == 0, result.output
    assert "2 passed, 0 failed" in result.output


def test_test_command_fails_with_error_and_worst_index(broken_kernels):
    result = run("test", "--backend", "cpu", "--filter", "broken/", "--seed", "1")
    assert result.exit_code == 1
    assert "FAIL broken/wrong f32 64 on cpu: max abs err 1" in result.output
    assert "worst at [" in result.output and "max rel err" in result.output
    assert "FAIL broken/fault f32 64 on cpu: error: RuntimeError: device lost (simulated)" in result.output


def test_test_command_unknown_filter():
    assert run("test", "--filter", "no/such/kernel").exit_code == 1


def test_snap_needs_a_bench_first():
    result = run("snap")
    assert result.exit_code == 1 and "run `iron bench` first" in result.output


def _bench_exp():
    assert run("bench", "--backend", "cpu", "--filter", "std/unary/exp", "--dtype", "f32").exit_code == 0


def test_snap_then_diff_unchanged():
    _bench_exp()
    result = run("snap", "main")
    assert result.exit_code == 0 and "saved baseline 'main'" in result.output
    doc = json.loads(baseline.baseline_path("main").read_text())
    assert doc["baseline"]["name"] == "main" and {"gpu", "driver", "git_sha", "date"} <= set(doc)
    result = run("diff", "main")
    assert result.exit_code == 0, result.output
    assert "0 regressions, 0 improvements" in result.output


def _write_baseline(name: str, factor: float):
    doc = json.loads(baseline.last_run_path().read_text())
    for row in doc["rows"]:
        row["iron_us"] *= factor
    path = baseline.baseline_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_diff_catches_a_synthetic_regression():
    _bench_exp()
    _write_baseline("fast", 0.5)  # the baseline was twice as fast: now +100%
    result = run("diff", "fast", "--threshold", "20")
    assert result.exit_code == 1
    assert "REGRESSION: std/unary/exp 65536 f32: +100.0% slower" in result.output
    assert "2 regressions, 0 improvements beyond 20%" in result.output


def test_diff_reports_improvements_without_failing():
    _bench_exp()
    _write_baseline("slow", 2.0)
    result = run("diff", "slow")
    assert result.exit_code == 0, result.output
    assert "0 regressions, 2 improvements" in result.output and "improvement" in result.output


def test_diff_flags_a_row_that_fails_now():
    base = {"rows": [{"kernel": "k", "shape": [4], "dtype": "f32", "iron_us": 10.0, "ok": True}]}
    now = {"rows": [{"kernel": "k", "shape": [4], "dtype": "f32", "iron_us": 10.0, "ok": False},
                    {"kernel": "k", "shape": [8], "dtype": "f32", "iron_us": 1.0, "ok": True}]}
    verdicts = {r.key: r.verdict for r in baseline.diff(base, now)}
    assert verdicts == {"k 4 f32": "fails now", "k 8 f32": "new"}


def test_diff_without_baseline():
    _bench_exp()
    result = run("diff", "nothing")
    assert result.exit_code == 1 and "iron snap NAME" in result.output


def test_help_lists_the_commands():
    out = run("--help").output
    for name in ("bench", "test", "snap", "diff"):
        assert name in out
