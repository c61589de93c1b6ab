"""``iron snap`` and ``iron diff``: save the last bench run as a baseline; compare the last run with one.

Both read JSON files that a crash, a full disk or a hand edit may have cut short or mangled: every file is checked
before use (valid UTF-8 JSON, an object whose ``rows`` are objects with a kernel, a shape and a dtype), and a bad one
is one line naming the file and what is wrong with it (exit code 1), never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


class BadFile(Exception):
    """A bench JSON file that is missing, unreadable or not what ``iron bench`` writes; the message names it."""


def load_doc(path: Path, what: str) -> dict:
    """The bench document at ``path`` (``what``: "last run" or "baseline"), checked; BadFile naming it otherwise."""
    again = "run `iron bench` again" if what == "last run" else "save it again with `iron snap NAME`"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        hint = "run `iron bench` first" if what == "last run" else "save one with `iron snap NAME`"
        raise BadFile(f"no {what} at {path}; {hint}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadFile(f"cannot read the {what} {path}: {e}; {again}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadFile(f"the {what} {path} is not valid JSON (truncated or corrupt?): {e.msg} at line {e.lineno}, "
                      f"column {e.colno}; {again}") from None
    problem = _problem(doc)
    if problem:
        raise BadFile(f"the {what} {path} is not an `iron bench` result: {problem}; {again}")
    return doc


def _problem(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return f"it holds a JSON {type(doc).__name__}, not an object"
    rows = doc.get("rows", [])
    if not isinstance(rows, list):
        return "'rows' is not a list"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"row {i} is not an object"
        if not isinstance(row.get("kernel"), str) or not isinstance(row.get("dtype"), str):
            return f"row {i} has no kernel or dtype name"
        if not isinstance(row.get("shape"), list):
            return f"row {i} has no shape list"
        us = row.get("iron_us")
        if us is not None and (isinstance(us, bool) or not isinstance(us, int | float)):
            return f"row {i} has a non-numeric iron_us ({us!r})"
    return None


@click.command(short_help="Save the last bench run as a named baseline.")
@click.argument("name", default="default")
def snap(name: str) -> None:
    """Save the last `iron bench` run as the baseline NAME (default: "default"), with GPU, driver, git sha and date."""
    from ..harness import baseline

    try:
        load_doc(baseline.last_run_path(), "last run")
        path = baseline.snap(name)
        doc = load_doc(path, "baseline")
    except (BadFile, FileNotFoundError, ValueError, OSError) as e:
        click.echo(f"iron snap: {e}", err=True)
        sys.exit(1)
    click.echo(f"saved baseline '{name}' ({len(doc.get('rows', []))} rows, backend {doc.get('backend')}, "
               f"{doc.get('gpu', '?')}, git {str(doc.get('git_sha', '?'))[:12]}, {doc.get('date', '?')}) to {path}")


@click.command(short_help="Compare the last bench run with a baseline; flag regressions.")
@click.argument("name", default="default")
@click.option("--threshold", default=10.0, show_default=True, metavar="PCT",
              help="Percent change in Iron time beyond which a row is a regression (slower) or an improvement.")
def diff(name: str, threshold: float) -> None:
    """Compare the last `iron bench` run with the baseline NAME, row by row (kernel x shape x dtype).

    Exits 1 if any row is slower by more than the threshold or fails its oracle where the baseline passed.
    """
    from ..harness import baseline

    try:
        base = load_doc(baseline.baseline_path(name), "baseline")
        now = load_doc(baseline.last_run_path(), "last run")
    except (BadFile, ValueError) as e:
        click.echo(f"iron diff: {e}", err=True)
        sys.exit(1)
    rows = baseline.diff(base, now, threshold)
    _print_table(rows, name, base, now)
    bad = [r for r in rows if r.verdict in ("regression", "fails now")]
    better = [r for r in rows if r.verdict == "improvement"]
    for r in bad:
        detail = f"{r.change_pct:+.1f}% slower" if r.verdict == "regression" else "fails its oracle now"
        click.echo(f"{r.verdict.upper()}: {r.key}: {detail}")
    click.echo(f"{len(bad)} regressions, {len(better)} improvements beyond {threshold:g}% "
               f"({len(rows)} rows compared)")
    sys.exit(1 if bad else 0)


def _print_table(rows, name: str, base: dict, now: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"iron diff — last run ({now.get('date', '?')}) vs baseline '{name}' ({base.get('date', '?')})")
    for col in ("Row", "base(µs)", "now(µs)", "change", "verdict"):
        table.add_column(col, justify="left" if col in ("Row", "verdict") else "right")
    colour = {"regression": "red", "fails now": "red", "improvement": "green"}
    for r in rows:
        table.add_row(r.key, f"{r.base_us:.1f}" if r.base_us is not None else "-",
                      f"{r.now_us:.1f}" if r.now_us is not None else "-",
                      f"{r.change_pct:+.1f}%" if r.change_pct is not None else "-",
                      f"[{colour[r.verdict]}]{r.verdict}" if r.verdict in colour else r.verdict)
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    if base.get("backend") != now.get("backend") or base.get("gpu") != now.get("gpu"):
        click.echo(f"note: baseline ran on {base.get('backend')} / {base.get('gpu')}, the last run on "
                   f"{now.get('backend')} / {now.get('gpu')}")
