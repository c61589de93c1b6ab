"""The std library's conformance cases on device arrays (issue 16): every tested kernel, its first dtype and shape,
with inputs ``iron.asarray``-ed to the backend and the launch run on them in place (IRON_TEST_ARRAYS=device)."""

from __future__ import annotations

import pytest

from iron.harness.check_case import run_case
from iron.std.registry import load_all

ENTRIES = [e for e in load_all() if e.tested and e.shapes]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_std_kernel_on_device_arrays(backend, entry, rng, monkeypatch):
    monkeypatch.setenv("IRON_TEST_ARRAYS", "device")
    dtype = "bf16" if "bf16" in entry.dtypes else entry.dtypes[0]
    row = run_case(entry, backend, dtype, entry.shapes[0], rng)
    assert row.ok, row.describe()
