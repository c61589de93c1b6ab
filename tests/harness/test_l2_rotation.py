"""CUDA bench rows cycle through copies of their inputs that together span several times the L2 cache, so a
repeat never reads what the previous one left in L2 (issue 5: "inputs rotated so L2 does not serve them").
No GPU here: a stand-in torch supplies the L2 size and the tensors."""

from __future__ import annotations

import sys
import types

from iron.harness import measure as runner


class _Tensor:
    def __init__(self, nbytes: int, tag: str = "orig"):
        self.nbytes, self.tag = nbytes, tag

    def numel(self):
        return self.nbytes // 4

    def element_size(self):
        return 4

    def clone(self):
        return _Tensor(self.nbytes, "copy")


def _fake_torch(monkeypatch, l2: int):
    cuda = types.SimpleNamespace(current_device=lambda: 0,
                                 get_device_properties=lambda i: types.SimpleNamespace(L2_cache_size=l2))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))


def test_small_rows_get_copies_spanning_four_times_l2(monkeypatch):
    _fake_torch(monkeypatch, 60 << 20)
    dev = {"x": _Tensor(8 << 20), "out": _Tensor(8 << 20)}
    sets = runner._input_copies(dev)
    assert sets[0] is dev and all(s is not dev for s in sets[1:])
    assert len(sets) * (16 << 20) >= runner.ROTATE_L2_FACTOR * (60 << 20)
    assert len(sets) == 15 and all(s["x"].tag == "copy" for s in sets[1:])


def test_rows_larger_than_the_span_are_not_copied_and_tiny_rows_are_capped(monkeypatch):
    _fake_torch(monkeypatch, 60 << 20)
    assert len(runner._input_copies({"x": _Tensor(1 << 30)})) == 1
    assert len(runner._input_copies({"x": _Tensor(64)})) == runner.MAX_COPIES
    assert len(runner._input_copies({"x": _Tensor(64)}, uses=6)) == 6  # no more copies than launches


def test_repeats_cycle_through_the_copies(monkeypatch):
    calls = []

    def fake_event_time(fn, repeats):
        for _ in range(repeats + 1):  # a warm-up, then the timed repeats
            fn()
        return 1.0

    monkeypatch.setattr(runner, "_event_time", fake_event_time)
    assert runner._rotated_event_time([lambda i=i: calls.append(i) for i in range(3)], 5) == 1.0
    assert calls == [0, 1, 2, 0, 1, 2]
