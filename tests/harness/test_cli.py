"""``iron bench``, ``iron test``, ``iron snap`` and ``iron diff`` through the CLI, on the CPU backends. No test asserts
a timing: the regression caught by ``diff`` is synthetic (a baseline written with faster times)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.harness import baseline


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
    assert "%BW" in result.output and "copy ceiling" in result.output and "%FLOP" in result.output
    doc = json.loads(baseline.last_run_path().read_text())
    rows = doc["rows"]
    assert all(r["verdict"] in ("launch-bound", "memory-bound", "compute-bound", "latency-bound", "under-occupied")
               for r in rows)
    matrix = doc["ceiling"]["matrix_gflops"]
    assert matrix > 0 and all(r["pct_flop"] == pytest.approx(100 * r["gflops"] / matrix) for r in rows)
    assert all(r["intensity"] == pytest.approx(2 * r["shape"][0] * r["shape"][1] / (4 * (r["shape"][0] * r["shape"][1]
               + sum(r["shape"])))) for r in rows)


def test_bench_reports_a_faulting_kernel_and_goes_on(broken_kernels):
    result = run("bench", "--backend", "cpu", "--filter", "broken/")
    assert result.exit_code == 1
    assert "device lost (simulated)" in result.output and "ERROR" in result.output


def test_test_command_passes_on_std(backend):
    result = run("test", "--backend", backend, "--filter", "std/binary/add", "--dtype", "f16")
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


def test_verdicts_from_time_traffic_work_and_occupancy():
    from iron.harness.roofline import verdict

    gb, ms = 1e9, 1e-3
    # 1 GB in 1 ms against a 1000 GB/s copy ceiling: at the ceiling
    assert verdict(1 * ms, int(gb), 0, 1000.0, None) == "memory-bound"
    assert verdict(10e-6, 1000, 0, 1000.0, launch_s=5e-6) == "launch-bound"
    # 1e12 FLOP in 1 s against a 1500 GFLOP/s matrix rate: 67% of it
    assert verdict(1.0, 1000, int(1e12), 1000.0, None, matrix_gflops=1500.0) == "compute-bound"
    # intensity above the ridge (matrix / copy = 100 FLOP/B) but slow: still compute-bound; below it: not
    assert verdict(100.0, 1000, 200_000, 1000.0, None, matrix_gflops=100_000.0) == "compute-bound"
    assert verdict(100.0, 1000, 50_000, 1000.0, None, matrix_gflops=100_000.0) == "latency-bound"
    # far from every ceiling with a small grid or low occupancy: under-occupied
    assert verdict(100.0, 1000, 0, 1000.0, None, occupancy_pct=12.5) == "under-occupied"
    assert verdict(100.0, 1000, 0, 1000.0, None, occupancy_pct=100.0, groups=8, processors=132) == "under-occupied"
    assert verdict(100.0, 1000, 0, 1000.0, None, occupancy_pct=100.0, groups=1320, processors=132) == \
        "latency-bound"
    # a small grid at 96 % of a copy of its own bytes (argmax over 32 x 128256 on an H100): memory-bound at its
    # size, not under-occupied; at 39 % of it (top-k there) the occupancy reading stands
    small = dict(occupancy_pct=100.0, groups=32, processors=132)
    assert verdict(11e-6, 8_200_000, 0, 3048.0, 3e-6, **small, copy_pct=96.1) == "memory-bound"
    assert verdict(11e-6, 8_200_000, 0, 3048.0, 3e-6, **small, copy_pct=38.7) == "under-occupied"
    assert verdict(11e-6, 8_200_000, 0, 3048.0, 3e-6, **small) == "under-occupied"


def test_bench_verbose_shows_registers_and_occupancy_where_reported(monkeypatch):
    """A backend that reports launch statistics (CUDA does, from cuFuncGetAttribute and the occupancy API) gets
    regs / occ% columns and the under-occupied verdict; here the interpreter is given a stand-in report."""
    from iron.harness import worker
    from iron.runtime import get_backend

    monkeypatch.setenv(worker.INPROCESS_ENV, "1")
    be = get_backend("cpu")
    monkeypatch.setattr(be, "launch_stats", lambda: {"registers": 40, "blocks_per_sm": 1, "occupancy_pct": 12.5,
                                                     "groups": 4, "processors": 132}, raising=False)
    result = run("bench", "--backend", "cpu", "--filter", "std/gemv", "--dtype", "f32", "-v")
    assert result.exit_code == 0, result.output
    assert "regs" in result.output and "occ%" in result.output and " 12% " in result.output
    rows = json.loads(baseline.last_run_path().read_text())["rows"]
    assert all(r["stats"]["registers"] == 40 for r in rows)
    # none is near a ceiling on this host, so each is launch-bound or (12.5% occupancy) under-occupied
    assert {r["verdict"] for r in rows} <= {"under-occupied", "launch-bound"}
