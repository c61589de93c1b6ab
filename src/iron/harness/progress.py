"""The progress of ``iron bench`` / ``iron test`` sweeps: a rich progress bar when stdout is a terminal; with
``IRON_PROGRESS=lines`` (or when stdout is not a terminal and that is set), one line per finished case on stderr
with the elapsed time and, for a bench case, its times (Iron's and each reference's), so a run cut short still
leaves its figures in the log (e.g. a GPU job past its time limit)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

PROGRESS_ENV = "IRON_PROGRESS"


@contextmanager
def sweep_progress(total: int, description: str,
                   labels: Sequence[str] | None = None) -> Iterator[Callable[..., None]]:
    """Yields ``advance(index, result=None)``: call it once per finished case (``labels[index]`` names it in line
    mode, with ``times(result)``)."""
    if os.environ.get(PROGRESS_ENV, "").strip().lower() == "lines":
        start, count = time.perf_counter(), [0]

        def line(i: int | None = None, result: dict | None = None, *_) -> None:
            count[0] += 1
            name = labels[i] if labels is not None and i is not None else ""
            print(f"{description}: {count[0]}/{total} {name} ({time.perf_counter() - start:.1f} s){times(result)}",
                  file=sys.stderr, flush=True)

        yield line
        return
    if not sys.stdout.isatty() or total <= 1:
        yield lambda *_: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda *_: progress.advance(task)


def times(result: dict | None) -> str:
    """``: iron 12.3 us, torch 10.1 us, triton 9.8 us`` for a timed bench result, ``: error`` for a failed one, else
    nothing (a test case, or no result)."""
    if not isinstance(result, dict):
        return ""
    if result.get("error"):
        return ": error"
    if not result.get("iron_s"):
        return ""
    parts = [f"iron {result['iron_s'] * 1e6:.1f} us"]
    refs = result.get("refs") or ({"reference": result["ref_s"]} if result.get("ref_s") else {})
    parts += [f"{family} {s * 1e6:.1f} us" for family, s in refs.items() if s]
    return ": " + ", ".join(parts) + ("" if result.get("ok", True) else " (wrong result)")
