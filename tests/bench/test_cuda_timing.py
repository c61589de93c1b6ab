"""CUDA event timing keeps the host's launch latency out: a sleep kernel is queued ahead of every timed repeat, and a
repeat whose start event the GPU reached before the host had submitted everything is taken again with a longer sleep.
No GPU here: a stand-in torch records the order of what is queued."""

from __future__ import annotations

import sys
import types

from iron.bench import cuda_timing


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


def test_each_repeat_is_queued_behind_a_sleep(monkeypatch):
    log = _fake_torch(monkeypatch)
    assert cuda_timing.event_seconds(lambda: log.append("work"), repeats=3, warmup=1) == 0.01
    assert log[:2] == ["work", "sync"]
    timed = log[2:]
    assert timed == [("sleep", cuda_timing.LEAD_CYCLES), "start", "work", "end"] * 3


def test_a_sleep_too_short_is_doubled_and_its_sample_dropped(monkeypatch):
    log = _fake_torch(monkeypatch, reached_early=2)
    cuda_timing.event_seconds(lambda: log.append("work"), repeats=2, warmup=0)
    sleeps = [e[1] for e in log if isinstance(e, tuple)]
    base = cuda_timing.LEAD_CYCLES
    assert sleeps == [base, 2 * base, 4 * base, 4 * base]  # two retries, then two kept samples
    assert log.count("work") == 4


def test_idle_start_queues_no_sleep(monkeypatch):
    log = _fake_torch(monkeypatch)
    cuda_timing.event_seconds(lambda: log.append("work"), repeats=2, warmup=0, idle_start=True)
    assert not any(isinstance(e, tuple) for e in log)
