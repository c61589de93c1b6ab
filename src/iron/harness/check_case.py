"""One ``iron test`` case: a kernel x dtype x shape on a backend, against its oracle (what a worker runs per case)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import numpy as np

from ..ir import types as t
from ..runtime.device_array import Array, asarray
from .checking import Comparison, compare
from .registry import Registration


@dataclass
class TestRow:
    kernel: str
    backend: str
    dtype: str
    shape: tuple[int, ...]
    result: Comparison | None
    error: str | None = None

    __test__ = False  # pytest: a result row, not a test class

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None and self.result.ok

    def describe(self) -> str:
        return f"error: {self.error}" if self.error else self.result.describe()


def device_arrays() -> bool:
    """Whether cases run on device arrays (``IRON_TEST_ARRAYS=device``): inputs ``iron.asarray``-ed to the backend,
    launched there in place, every array copied back before the oracle checks the output."""
    return os.environ.get("IRON_TEST_ARRAYS", "numpy") == "device"


def run_case(entry: Registration, backend: str, dtype: str, shape: tuple[int, ...],
             rng: np.random.Generator) -> TestRow:
    """One kernel × dtype × shape on ``backend``; an exception in the launch becomes a failed row, not a crash."""
    try:
        arrays = entry.make(shape, t.SCALAR_TYPES[dtype].np_dtype, rng)
        if device_arrays():
            dev = {k: asarray(v, backend=backend) if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
            entry.launch(dev, backend)
            arrays.update({k: v.numpy() for k, v in dev.items() if isinstance(v, Array)})
        else:
            entry.launch(arrays, backend)
        result = compare(arrays[entry.output], entry.oracle(arrays), entry.tolerance[dtype])
    except Exception as e:  # a faulting kernel is reported as its row and the run goes on
        return TestRow(entry.name, backend, dtype, tuple(shape), None, f"{type(e).__name__}: {e}")
    return TestRow(entry.name, backend, dtype, tuple(shape), result)


def test_case(entry: Registration, backend: str, dtype: str, shape: tuple[int, ...], seed: int) -> dict:
    """:func:`run_case` as a worker answers it (JSON-able): ``{"result": Comparison fields}`` or ``{"error": ...}``."""
    row = run_case(entry, backend, dtype, shape, np.random.default_rng(seed))
    return {"error": row.error} if row.error else {"result": asdict(row.result)}
