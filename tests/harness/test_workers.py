"""Workers (``iron.harness.worker``): a kernel that kills its process is a failed row and the sweep goes on; with
several GPUs (a fake count here) one worker per GPU; ``IRON_BENCH_INPROCESS=1`` keeps everything in one process.
Also Vulkan timestamp timing, the roofline chart (``--plot``) and the sweep progress bar."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from iron.harness import baseline, worker
from iron.harness.progress import sweep_progress
from iron.harness.roofline import Ceiling, write_plot
from iron.runtime import unavailable_reason

from .test_cli import run


def _rows():
    return {r["kernel"]: r for r in json.loads(baseline.last_run_path().read_text())["rows"]}


def test_bench_survives_kernels_that_kill_their_worker(broken_kernels):
    result = run("bench", "--backend", "cpu", "--filter", "crash/")
    assert result.exit_code == 1, result.output
    rows = _rows()
    assert rows["crash/exit"]["ok"] is False and rows["crash/exit"]["error"].startswith("worker died: exit code 3")
    assert rows["crash/segv"]["ok"] is False and "worker died: signal 11 (SIGSEGV)" in rows["crash/segv"]["error"]
    assert rows["crash/good"]["ok"] is True and rows["crash/good"]["iron_us"] > 0
    assert "worker died: exit code 3" in result.output and "ERROR" in result.output


def test_test_command_survives_kernels_that_kill_their_worker(broken_kernels):
    result = run("test", "--backend", "cpu", "--filter", "crash/", "--seed", "3")
    assert result.exit_code == 1
    assert "FAIL crash/exit f32 64 on cpu: error: worker died: exit code 3" in result.output
    assert "FAIL crash/segv f32 64 on cpu: error: worker died: signal 11 (SIGSEGV)" in result.output
    assert "1 passed, 2 failed" in result.output


@pytest.mark.parametrize("command", ["bench", "test"])
def test_a_sticky_device_error_replaces_the_worker(broken_kernels, command):
    """After an error that poisons a GPU context for good (CUDA's illegal address, simulated: every later launch of
    that process fails the same way) the rows after it run in a fresh worker and pass."""
    result = run(command, "--backend", "cpu", "--filter", "sticky/", *(["--seed", "5"] if command == "test" else []))
    assert result.exit_code == 1, result.output
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in result.output and "sticky, simulated" not in result.output
    if command == "bench":
        rows = _rows()
        assert rows["sticky/fault"]["ok"] is False and rows["sticky/after"]["ok"] is True
        assert "restart" not in rows["sticky/fault"]
    else:
        assert "1 passed, 1 failed" in result.output


def test_a_real_gpu_fault_replaces_the_worker(broken_kernels):
    """On CUDA: a kernel that writes 4 GiB past its output faults the context; the row says so and the next row,
    in a fresh worker, passes."""
    if unavailable_reason("cuda"):
        pytest.skip(f"cuda unavailable: {unavailable_reason('cuda')}")
    result = run("bench", "--backend", "cuda", "--filter", "gpufault/")
    assert result.exit_code == 1, result.output
    rows = _rows()
    assert rows["gpufault/oob"]["ok"] is False and rows["gpufault/after"]["ok"] is True, rows


def test_one_worker_per_gpu_in_parallel(broken_kernels, monkeypatch):
    monkeypatch.setenv(worker.GPUS_ENV, "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    result = run("bench", "--backend", "cpu", "--filter", "crash/")
    assert result.exit_code == 1
    rows = json.loads(baseline.last_run_path().read_text())["rows"]
    assert [r["kernel"] for r in rows] == ["crash/exit", "crash/segv", "crash/good"]  # in order, whatever finished 1st
    assert [r["device"] for r in rows] == ["4", "6", "4"]  # round-robin; the parent's visible devices, one each
    assert rows[2]["ok"] and "worker died" in rows[0]["error"] and "worker died" in rows[1]["error"]


def test_a_hung_case_times_out(broken_kernels, monkeypatch):
    monkeypatch.setenv(worker.TIMEOUT_ENV, "2")
    result = run("bench", "--backend", "cpu", "--filter", "hang/")
    assert result.exit_code == 1
    assert _rows()["hang/sleep"]["error"] == "worker timed out after 2 s (IRON_BENCH_TIMEOUT)"


@pytest.mark.parametrize("log", ["1", "0"])
def test_autotune_log_reaches_the_bench_output(broken_kernels, monkeypatch, log):
    """IRON_AUTOTUNE_LOG=1: each candidate's time, measured in a worker, is printed by the bench (the worker's other
    stderr is not); unset, none is."""
    monkeypatch.setenv("IRON_AUTOTUNE_LOG", log)
    result = run("bench", "--backend", "cpu", "--filter", "tuned/")
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("iron autotune tuned/two: ")]
    assert len(lines) == (2 if log == "1" else 0), result.output
    assert {ln.split(" us ")[1] for ln in lines} == ({"{'SPLIT': 1}", "{'SPLIT': 2}"} if log == "1" else set())
    assert "noise from a launch" not in result.output


def test_gpu_count(monkeypatch):
    monkeypatch.delenv(worker.GPUS_ENV, raising=False)
    assert worker.gpu_count("cpu") == 1 and worker.gpu_count("vulkan") == 1
    monkeypatch.setenv(worker.GPUS_ENV, "3")
    assert worker.gpu_count("cuda") == 3
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert worker._visible_devices(3) == ["0", "1", "2"]


def test_inprocess_mode_still_reports_a_raising_kernel(broken_kernels, monkeypatch):
    monkeypatch.setenv(worker.INPROCESS_ENV, "1")
    result = run("bench", "--backend", "cpu", "--filter", "broken/fault")
    assert result.exit_code == 1
    assert "RuntimeError: device lost (simulated)" in _rows()["broken/fault"]["error"]


def test_entry_registered_at_run_time_is_a_failed_row_in_a_worker():
    from iron.harness.registry import bench, unregister

    def runtime_kernel():
        pass

    bench("runtime/only", setup=lambda gen: {"out": gen.poisoned()}, launch=lambda d, b: None, shapes=[(4,)],
          dtypes=("f32",))(runtime_kernel)
    try:
        result = run("bench", "--backend", "cpu", "--filter", "runtime/only")
    finally:
        unregister("runtime/only")
    assert result.exit_code == 1
    assert "not registered in the worker" in _rows()["runtime/only"]["error"]


def test_vulkan_rows_are_timed_with_timestamps():
    if unavailable_reason("vulkan"):
        pytest.skip(f"vulkan unavailable: {unavailable_reason('vulkan')}")
    result = run("bench", "--backend", "vulkan", "--filter", "std/binary/add", "--dtype", "f32")
    assert result.exit_code == 0, result.output
    doc = json.loads(baseline.last_run_path().read_text())
    assert doc["timing"] == "Vulkan timestamp queries median"
    assert all(r["timing"] == "Vulkan timestamp queries" and r["iron_us"] > 0 for r in doc["rows"])
    assert "Vulkan timestamp queries" in result.output


def test_cpu_rows_keep_host_timing():
    assert run("bench", "--backend", "cpu", "--filter", "std/binary/add", "--dtype", "f32").exit_code == 0
    assert json.loads(baseline.last_run_path().read_text())["timing"] == "host wall-clock median"


def _plot_rows():
    return [{"kernel": "std/gemv", "shape": [256, 256], "dtype": "f32", "gflops": 1.5, "iron_gbps": 3.0, "ok": True},
            {"kernel": "std/unary/exp", "shape": [1024], "dtype": "f32", "gflops": 0.2, "iron_gbps": 1.6, "ok": False},
            {"kernel": "copy", "shape": [8], "dtype": "f32", "gflops": 0.0, "iron_gbps": 2.0, "ok": True},
            {"kernel": "bad", "shape": [8], "dtype": "f32", "ok": False, "error": "worker died: signal 11"}]


def test_write_plot_makes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "roof.png"
    write_plot(_plot_rows(), Ceiling(20.0, "test"), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


def test_bench_plot_through_the_environment(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    path = tmp_path / "bench.png"
    monkeypatch.setenv("IRON_BENCH_PLOT", str(path))
    result = run("bench", "--backend", "cpu", "--filter", "std/gemv", "--dtype", "f32")
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 1000 and "roofline chart written to" in result.output


def test_write_plot_without_matplotlib_names_the_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        write_plot(_plot_rows(), None, str(tmp_path / "x.png"))


def test_progress_bar_only_on_a_terminal(monkeypatch):
    with sweep_progress(3, "sweep") as advance:  # pytest captures stdout: not a TTY, a no-op
        advance(0)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    with sweep_progress(3, "sweep") as advance:
        for i in range(3):
            advance(i)


def test_line_progress_prints_each_cases_times(monkeypatch, capsys):
    """IRON_PROGRESS=lines: each finished bench case's line carries Iron's time and the reference's, so a run cut
    off at a job's time limit still leaves its figures in the log (an H200 run lost a 160-row table that way)."""
    from iron.harness.runner import measure_sweep

    monkeypatch.setenv("IRON_PROGRESS", "lines")
    sweep = measure_sweep("std/binary/add", "cpu", ("f32",), 2)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("iron bench on cpu:")]
    assert len(lines) == len(sweep.cases) >= 1
    for line, answer in zip(lines, sweep.answers):
        assert f"iron {answer['iron_s'] * 1e6:.1f} us" in line and " us, " in line, line
    with sweep_progress(2, "sweep", ["a", "b"]) as advance:
        advance(0, {"error": "boom"})
        advance(1, {"iron_s": 2e-6, "refs": {"torch": 1e-6, "triton": 4e-6}, "ok": False})
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith(": error") and "a (" in err[0]
    assert err[1].endswith(": iron 2.0 us, torch 1.0 us, triton 4.0 us (wrong result)"), err[1]


def test_rows_keep_their_seeded_inputs_reproducible():
    rng = np.random.default_rng(5)
    a = run("test", "--backend", "cpu", "--filter", "std/binary/add", "--dtype", "f32", "--seed", "5")
    b = run("test", "--backend", "cpu", "--filter", "std/binary/add", "--dtype", "f32", "--seed", "5")
    assert a.exit_code == b.exit_code == 0 and rng is not None
    strip = [ln for ln in a.output.splitlines() if "e-" in ln]
    assert strip == [ln for ln in b.output.splitlines() if "e-" in ln]
