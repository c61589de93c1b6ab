"""The progress bar of ``iron bench`` / ``iron test`` sweeps (rich), shown only when stdout is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def sweep_progress(total: int, description: str) -> Iterator[Callable[..., None]]:
    """Yields ``advance(*_)``: call it once per finished case. A no-op when stdout is not a TTY (CI, pipes, tests)."""
    if not sys.stdout.isatty() or total <= 1:
        yield lambda *_: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda *_: progress.advance(task)
