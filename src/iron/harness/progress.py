"""The progress of ``iron bench`` / ``iron test`` sweeps: a rich progress bar when stdout is a terminal; with
``IRON_PROGRESS=lines`` (or when stdout is not a terminal and that is set), one line per finished case on stderr
with the elapsed time, for logs of long unattended runs (e.g. a GPU job)."""

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
    """Yields ``advance(index)``: call it once per finished case (``labels[index]`` names it in line mode)."""
    if os.environ.get(PROGRESS_ENV, "").strip().lower() == "lines":
        start, count = time.perf_counter(), [0]

        def line(i: int | None = None, *_) -> None:
            count[0] += 1
            name = labels[i] if labels is not None and i is not None else ""
            print(f"{description}: {count[0]}/{total} {name} ({time.perf_counter() - start:.1f} s)",
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
