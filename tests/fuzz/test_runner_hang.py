"""The fuzz runner after a launch that does not finish (IRON_VULKAN_TIMEOUT): the runtime then refuses every later
launch of the process ("cannot use it again"). Seed 707002911 of the 10,500-kernel run hung lavapipe, and its worker
reported the ~120 kernels it ran next as mismatches with that message, none of them compared. The hang is its own
outcome, and its worker is replaced, so the kernels after it are compared again.

On the CPU: a fake Vulkan (the interpreter, at lavapipe's 8 lanes) in the worker processes, whose launch of one seed
times out and which then refuses every launch, as the runtime does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iron.errors import LaunchError

from . import runner, workers

HANGS_ON = 3  # the seed whose launch times out
LOST = ("k did not finish within 1 s on Vulkan device fake (an endless loop?); the device is still running it, so "
        "this process cannot use it again (IRON_VULKAN_TIMEOUT sets the limit)")


class _FakeVulkan:
    def __init__(self):
        self.lost: str | None = None  # the runtime's VulkanContext.lost

    def info(self):
        return {"name": "fake", "features": ["denorm_preserve"]}

    def simd_width(self):
        return 8


def _fake_device(monkeypatch) -> _FakeVulkan:
    import iron.runtime

    fake = _FakeVulkan()
    real_get, real_run = iron.runtime.get_backend, runner.run_source
    monkeypatch.setattr(iron.runtime, "get_backend", lambda name: fake if name == "vulkan" else real_get(name))

    def run_source(module, program, backend, inputs):
        if backend != "vulkan":
            return real_run(module, program, backend, inputs)
        if fake.lost:
            raise LaunchError(fake.lost)
        if program.seed == HANGS_ON:
            fake.lost = LOST
            raise LaunchError(LOST)
        return real_run(module, program, "cpu", inputs)

    monkeypatch.setattr(runner, "run_source", run_source)
    monkeypatch.setattr(runner, "_skip_vulkan", lambda module, program: None)
    return fake


_DEVICE = []  # the worker's fake device, made on its first job (a worker process lives as long as its device)


def _run_on_fake_vulkan(job: tuple) -> dict:
    """A worker's job (``workers.reports``'s ``run``): ``runner._one`` with the fake Vulkan."""
    if not _DEVICE:
        _DEVICE.append(_fake_device(pytest.MonkeyPatch()))
    os.environ.update(runner.SIMD_ENV)
    return {**runner._one(job), "pid": os.getpid()}


def test_a_hang_is_its_own_outcome_and_its_worker_is_replaced(tmp_path):
    jobs = [("source", seed, ["vulkan"], str(tmp_path)) for seed in range(1, 7)]
    reports = sorted(workers.reports(jobs, 1, _run_on_fake_vulkan), key=lambda r: r["seed"])
    assert [r["seed"] for r in reports] == list(range(1, 7))
    hang = reports[HANGS_ON - 1]
    assert hang["outcome"] == "hang" and hang["device_lost"] and "cannot use it again" in hang["messages"][0], hang
    assert Path(hang["saved"], "kernel.py").exists()
    others = [r for r in reports if r is not hang]
    assert all(r["outcome"] == "ok" and r["compared"] == 1 for r in others), others  # compared, not refused
    before = {r["pid"] for r in reports[: HANGS_ON]}
    after = {r["pid"] for r in reports[HANGS_ON:]}
    assert len(before) == 1 and len(after) == 1 and before != after  # a fresh process after the hang


def test_in_one_process_later_launches_are_refused_and_also_counted_as_hangs(monkeypatch, tmp_path):
    """Called in-process (as the source-fuzz tests do), the device stays lost: what follows the hang is a hang too,
    never a mismatch."""
    for name, value in runner.SIMD_ENV.items():
        monkeypatch.setenv(name, value)
    _fake_device(monkeypatch)
    outcomes = [runner.fuzz_source(seed, ["vulkan"], tmp_path)["outcome"] for seed in (1, HANGS_ON, 4)]
    assert outcomes == ["ok", "hang", "hang"]


def test_a_worker_that_dies_is_reported_and_replaced(tmp_path):
    jobs = [("source", seed, [], str(tmp_path)) for seed in (1, 2, 3)]
    reports = sorted(workers.reports(jobs, 2, _die_on_two), key=lambda r: r["seed"])
    assert [r["outcome"] for r in reports] == ["ok", "internal", "ok"], reports
    assert "died (exit code 7)" in reports[1]["messages"][0]


def _die_on_two(job: tuple) -> dict:
    if job[1] == 2:
        os._exit(7)
    os.environ.update(runner.SIMD_ENV)
    return runner._one(job)


def test_the_summary_counts_hangs():
    class Args:
        seed, kind, jobs = 1, "source", 1

    reports = [{"kind": "source", "seed": 1, "outcome": "hang", "compared": 0, "messages": [LOST], "saved": "x"},
               {"kind": "source", "seed": 2, "outcome": "ok", "compared": 1, "messages": []}]
    text = runner._summary(reports, Args, ["vulkan"], 1.0)
    assert "hangs 1" in text and "hang: source seed 1" in text, text
