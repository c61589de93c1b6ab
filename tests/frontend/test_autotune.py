"""Autotuning (issue 14 point 6): the fastest configuration is chosen once per bucket and remembered on disk;
IRON_AUTOTUNE=0 takes the first; a configuration the device refuses is skipped."""

from __future__ import annotations

import json

import pytest

from iron import LaunchError
from iron.frontend import autotune


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("IRON_AUTOTUNE", raising=False)
    monkeypatch.delenv("IRON_CACHE", raising=False)
    autotune.forget()
    return tmp_path


def _slow_runner(delays: dict, calls: list):
    import time

    def run(cfg):
        calls.append(cfg["x"])
        if delays[cfg["x"]] is None:
            raise LaunchError("does not fit this device")
        time.sleep(delays[cfg["x"]])

    return run


def test_fastest_is_chosen_and_remembered(cache):
    configs = [{"x": 0}, {"x": 1}, {"x": 2}]
    calls: list = []
    run = _slow_runner({0: 0.004, 1: 0.0, 2: None}, calls)
    chosen = autotune.tune("demo", configs, run, backend="cpu", dtype="f32", key=(100, 7))
    assert chosen == {"x": 1} and set(calls) == {0, 1, 2}  # config 2 raised and was skipped
    stored = json.loads((cache / "autotune.json").read_text())
    assert list(stored.values()) == [1] and "(128, 8)" in next(iter(stored))  # the bucket, not the shape
    calls.clear()
    autotune.forget()  # a new process: read from disk, time nothing
    assert autotune.tune("demo", configs, run, backend="cpu", dtype="f32", key=(120, 5)) == {"x": 1}
    assert calls == []
    assert autotune.CHOSEN["demo|f32|120x5"] == {"x": 1}


def test_disabled_takes_the_first(cache, monkeypatch):
    monkeypatch.setenv("IRON_AUTOTUNE", "0")
    calls: list = []
    run = _slow_runner({0: 0.01, 1: 0.0}, calls)
    assert autotune.tune("demo2", [{"x": 0}, {"x": 1}], run, backend="cpu", dtype="f16", key=(4,)) == {"x": 0}
    assert calls == [] and not (cache / "autotune.json").exists()


def test_the_log_prints_every_candidates_time(cache, monkeypatch, capsys):
    monkeypatch.setenv("IRON_AUTOTUNE_LOG", "1")
    run = _slow_runner({0: 0.003, 1: 0.0, 2: None}, [])
    autotune.tune("demo3", [{"x": 0}, {"x": 1}, {"x": 2}], run, backend="cpu", dtype="f32", key=(8,))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("iron autotune demo3:")]
    assert len(lines) == 3 and lines[2].endswith("inf us {'x': 2}")
    assert float(lines[0].split()[3]) >= 3000 > float(lines[1].split()[3])


def test_each_runs_every_candidate_once_and_takes_the_first_that_runs(cache, monkeypatch):
    monkeypatch.setenv("IRON_AUTOTUNE", "each")
    calls: list = []
    run = _slow_runner({0: None, 1: 0.003, 2: 0.0}, calls)
    assert autotune.tune("demo4", [{"x": 0}, {"x": 1}, {"x": 2}], run, backend="cpu", dtype="f32", key=(8,)) == {"x": 1}
    assert calls == [0, 1, 2] and not (cache / "autotune.json").exists()
    with pytest.raises(LaunchError, match="does not fit"):
        autotune.tune("demo4", [{"x": 0}, {"x": 0}], run, backend="cpu", dtype="f32", key=(8,))


def test_a_damaged_cache_file_is_tuned_again(cache):
    (cache / "autotune.json").write_text("{not json")
    calls: list = []
    run = _slow_runner({0: 0.003, 1: 0.0}, calls)
    assert autotune.tune("demo3", [{"x": 0}, {"x": 1}], run, backend="cpu", dtype="f32", key=(3,)) == {"x": 1}
    assert json.loads((cache / "autotune.json").read_text())


def test_every_config_refused_raises_the_first_reason(cache):
    run = _slow_runner({0: None, 1: None}, [])
    with pytest.raises(LaunchError, match="does not fit"):
        autotune.tune("demo4", [{"x": 0}, {"x": 1}], run, backend="cpu", dtype="f32", key=(3,))


def test_choices_are_kept_per_code_path(cache, monkeypatch):
    """A backend whose code depends on more than the device (Vulkan's matrix-fragment path, IRON_VULKAN_COOPMAT)
    tunes each path on its own: a configuration chosen for cooperative matrices is not reused where the emulation
    cannot build it (seen on the H200: the emulated module of gemm_rs's larger tile failed to build)."""
    from iron.runtime import get_backend

    be = get_backend("cpu")
    tag = {"value": "auto"}
    monkeypatch.setattr(type(be), "autotune_tag", lambda self: tag["value"], raising=False)
    configs = [{"x": 0}, {"x": 1}]
    calls: list = []
    assert autotune.tune("demo", configs, _slow_runner({0: 0.004, 1: 0.0}, calls), backend="cpu", dtype="f32",
                         key=(64,)) == {"x": 1}
    tag["value"] = "emulate"
    calls.clear()
    assert autotune.tune("demo", configs, _slow_runner({0: 0.0, 1: None}, calls), backend="cpu", dtype="f32",
                         key=(64,)) == {"x": 0}
    assert set(calls) == {0, 1}  # timed again, config 1 refused there
    tag["value"] = "auto"
    assert autotune.tune("demo", configs, _slow_runner({0: 0.0, 1: 0.0}, calls), backend="cpu", dtype="f32",
                         key=(64,)) == {"x": 1}  # the first path's choice, remembered


def test_cold_timings_flush_ahead_of_each_repeat_and_are_kept_apart(cache, monkeypatch):
    """``tune(..., cold=True)`` (a decode step's GEMVs: weights streamed from memory, not the L2 a repeated launch
    finds them in) gives the backend's timer its L2 flush to run ahead of every repeat, outside the interval, and
    keeps the choice apart from a warm one; a backend without a flush times as before."""
    from iron.runtime import get_backend

    be = get_backend("cpu")
    flushes: list = []
    timed: list = []

    def gpu_time(self, fn, repeats, before=None):
        timed.append(before)
        for _ in range(repeats):
            if before is not None:
                before()
            fn()
        return {0: 2.0, 1: 1.0}[fn_config[-1]] if before is not None else {0: 1.0, 1: 2.0}[fn_config[-1]]

    fn_config: list = []
    monkeypatch.setattr(type(be), "gpu_time", gpu_time)
    monkeypatch.setattr(type(be), "l2_flush", lambda self: (lambda: flushes.append(1)), raising=False)
    configs = [{"x": 0}, {"x": 1}]
    run = fn_config.append
    assert autotune.tune("demo", configs, lambda c: run(c["x"]), backend="cpu", dtype="f32", key=(64,)) == {"x": 0}
    assert flushes == [] and timed == [None, None]
    assert autotune.tune("demo", configs, lambda c: run(c["x"]), backend="cpu", dtype="f32", key=(64,),
                         cold=True) == {"x": 1}  # timed again, not the warm choice
    assert timed[2:] != [None, None] and len(flushes) == 2 * autotune._REPEATS
    stored = json.loads((cache / "autotune.json").read_text())
    assert sorted(k.endswith("|cold") for k in stored) == [False, True]
    monkeypatch.delattr(type(be), "l2_flush")
    autotune.forget()
    timed.clear()
    assert autotune.tune("other", configs, lambda c: run(c["x"]), backend="cpu", dtype="f32", key=(64,),
                         cold=True) == {"x": 0} and timed == [None, None]  # no flush here: timed warm
