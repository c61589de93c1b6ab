"""``iron test``: every registered kernel with an oracle, in every dtype and host shape, against that oracle."""

from __future__ import annotations

import sys

import numpy as np
from rich.console import Console
from rich.table import Table

from ..runtime import best_backend
from .check_case import TestRow, run_case, test_case
from .checking import Comparison
from .progress import sweep_progress
from .registry import selected
from .worker import run_cases

__all__ = ["TestRow", "print_tests", "run_case", "run_tests", "test_case"]


def _row(case: dict, backend: str, answer: dict) -> TestRow:
    shape = tuple(case["shape"])
    if answer.get("error"):
        return TestRow(case["kernel"], backend, case["dtype"], shape, None, answer["error"])
    res = dict(answer["result"], worst=tuple(answer["result"]["worst"]))
    return TestRow(case["kernel"], backend, case["dtype"], shape, Comparison(**res))


def run_tests(pattern: str | None = None, backend: str | None = None, dtypes: tuple[str, ...] = (),
              rng: np.random.Generator | None = None) -> list[TestRow]:
    """Every case of the selected entries, each run in a worker subprocess (see :mod:`iron.harness.worker`): a kernel
    that kills its worker is a failed row and the others still run. Each case gets its own seed drawn from ``rng``."""
    backend = backend or best_backend()
    rng = rng or np.random.default_rng()
    entries = selected(pattern, tested=True)
    cases = [{"kernel": entry.name, "dtype": dtype, "shape": list(shape), "seed": int(rng.integers(1 << 63))}
             for entry in entries for dtype in entry.dtypes if not dtypes or dtype in dtypes
             for shape in entry.shapes]
    labels = [f"{c['kernel']} {c['dtype']} {'x'.join(map(str, c['shape']))}" for c in cases]
    with sweep_progress(len(cases), f"iron test on {backend}", labels) as advance:
        answers = run_cases("test", cases, backend, entries, on_done=advance)
    return [_row(case, backend, answer) for case, answer in zip(cases, answers)]


def print_tests(rows: list[TestRow], backend: str) -> None:
    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"iron test — backend {backend}, against the float64 oracles")
    for col in ("Kernel", "dtype", "Shape", "max abs", "max rel", "worst", "ok"):
        table.add_column(col, justify="left" if col in ("Kernel", "ok") else "right")
    for row in rows:
        res = row.result
        table.add_row(row.kernel, row.dtype, "x".join(map(str, row.shape)),
                      f"{res.max_abs:.2e}" if res else "-", f"{res.max_rel:.2e}" if res else "-",
                      ",".join(map(str, res.worst)) if res else "-", "[green]ok" if row.ok else "[red]FAIL")
    console.print(table)
    failed = [r for r in rows if not r.ok]
    for row in failed:
        shape = "x".join(map(str, row.shape))
        console.print(f"FAIL {row.kernel} {row.dtype} {shape} on {row.backend}: {row.describe()}", markup=False,
                      highlight=False)
    console.print(f"{len(rows) - len(failed)} passed, {len(failed)} failed", highlight=False)
