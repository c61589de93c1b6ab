"""``iron.frontend.launch.full_path``: launches inside it skip the cached (and backends' direct) launchers, so the
backend records them as it does a first launch — the bench reads a row's registers and occupancy from that record,
and an autotuned helper's winner is otherwise launched by a fast path that leaves the last configuration tried there."""

from __future__ import annotations

import numpy as np

import iron
from iron import Tensor, f32, program_id
from iron.frontend.launch import full_path


@iron.kernel
def add_one(x: Tensor[f32]):
    i = program_id(0)
    x[i] = x[i] + 1.0


def test_full_path_bypasses_the_cached_launcher():
    x = np.zeros(64, np.float32)
    add_one[64](x, backend="cpu")
    cached = add_one[64]
    assert add_one[64] is cached

    def stale(*args, **kwargs):  # what a direct launcher that must not be used would do
        raise AssertionError("the cached launcher ran inside full_path")

    add_one._launchers[64] = stale
    with full_path():
        fresh = add_one[64]
        assert fresh is not stale and add_one[64] is not fresh  # a new one each time, never cached
        fresh(x, backend="cpu")
    assert add_one[64] is stale  # outside, the cache answers again
    add_one._launchers[64] = cached
    assert np.all(x == 2.0)
