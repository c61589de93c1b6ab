"""CUDA event timing keeps the host's launch latency out: a sleep kernel is queued ahead of every timed repeat, and a
repeat whose start event the GPU reached before the host had submitted everything is taken again with a longer sleep.
No GPU here: a stand-in torch records the order of what is queued."""

from __future__ import annotations

import sys
import types

from iron.runtime import cuda_timing


def _fake_torch(monkeypatch, reached_early: int = 0):
    log = []
    state = {"early": reached_early, "clock": 0.0}

    class Event:
        def __init__(self, enable_timing):
            assert enable_timing
            self.t = None

        def record(self):
            state["clock"] += 1.0
            self.t = state["clock"]
            log.append("start" if not log or log[-1] != "work" else "end")

        def query(self):  # has the GPU reached this (start) event yet?
            if state["early"]:
                state["early"] -= 1
                return True
            return False

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 10.0  # ms

    cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: log.append("sync"),
                                 _sleep=lambda cycles: log.append(("sleep", cycles)))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    return log


def test_each_repeat_and_the_warm_up_are_queued_behind_a_sleep(monkeypatch):
    log = _fake_torch(monkeypatch)
    assert cuda_timing.event_seconds(lambda: log.append("work"), repeats=3, warmup=1) == 0.01
    one = [("sleep", cuda_timing.LEAD_CYCLES), "start", "work", "end"]
    assert log == one + ["sync"] + one * 3
    assert cuda_timing.last_lead_ok


def test_the_warm_up_settles_the_sleep_and_a_timed_repeat_too_short_is_taken_again(monkeypatch):
    log = _fake_torch(monkeypatch, reached_early=2)  # the warm-up's and the first timed repeat's sleeps are short
    cuda_timing.event_seconds(lambda: log.append("work"), repeats=2, warmup=1)
    sleeps = [e[1] for e in log if isinstance(e, tuple)]
    base = cuda_timing.LEAD_CYCLES
    assert sleeps == [base, 2 * base, 4 * base, 4 * base]  # warm-up, a dropped repeat, then two kept samples
    assert log.count("work") == 4 and cuda_timing.last_lead_ok


def test_a_function_no_sleep_can_cover_is_flagged(monkeypatch):
    log = _fake_torch(monkeypatch, reached_early=10**6)
    cuda_timing.event_seconds(lambda: log.append("work"), repeats=2, warmup=0)
    assert not cuda_timing.last_lead_ok
    assert max(e[1] for e in log if isinstance(e, tuple)) == cuda_timing.MAX_LEAD_CYCLES


def test_idle_start_queues_no_sleep(monkeypatch):
    log = _fake_torch(monkeypatch)
    cuda_timing.event_seconds(lambda: log.append("work"), repeats=2, warmup=0, idle_start=True)
    assert not any(isinstance(e, tuple) for e in log)
    assert not cuda_timing.last_lead_ok
