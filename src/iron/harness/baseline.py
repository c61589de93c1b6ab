"""Baselines: ``iron bench`` leaves its JSON in the cache (``last_run_path``); ``iron snap`` copies it as a named
baseline with the GPU, driver, git sha and date; ``iron diff`` compares the last run with a baseline row by row."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ..runtime.cache import cache_dir, store_file

#: a change within this many percent is noise, not a regression or an improvement
DEFAULT_THRESHOLD = 10.0


def bench_dir() -> Path:
    return cache_dir() / "bench"


def last_run_path() -> Path:
    return bench_dir() / "last.json"


def baseline_path(name: str) -> Path:
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ValueError(f"baseline name {name!r}: use letters, digits, '.', '_' and '-'")
    return bench_dir() / "baselines" / f"{name}.json"


def write_json(path: Path, doc: dict) -> Path:
    """Write ``doc`` to ``path`` through a file of this process's own and ``os.replace`` (``store_file``): a reader
    sees a whole file, and concurrent writers all succeed (two ``iron bench`` runs at once, one a GPU; tests on
    parallel workers). A fixed temporary name let one writer move another's half-written file into place and then
    fail to find its own."""
    if not store_file(path, json.dumps(doc, indent=2).encode()):
        raise OSError(f"iron: could not write {path}")
    return path


def save_last_run(doc: dict) -> Path:
    """Write the bench's JSON as the last run (a concurrent ``snap`` never reads half a file)."""
    return write_json(last_run_path(), doc)


def load(path: Path, what: str) -> dict:
    if not path.exists():
        hint = "run `iron bench` first" if what == "last run" else "save one with `iron snap NAME`"
        raise FileNotFoundError(f"no {what} at {path}; {hint}")
    return json.loads(path.read_text())


def snap(name: str = "default") -> Path:
    """Copy the last bench run to the baseline ``name`` (its JSON already names GPU, driver, git sha and date)."""
    doc = load(last_run_path(), "last run")
    doc["baseline"] = {"name": name, "saved": datetime.now(UTC).isoformat()}
    return write_json(baseline_path(name), doc)


@dataclass
class RowDiff:
    key: str
    base_us: float | None
    now_us: float | None
    #: positive: slower now (a regression); negative: faster
    change_pct: float | None
    verdict: str  # "regression", "improvement", "same", "new", "gone", "fails now"


def _key(row: dict) -> str:
    return f"{row['kernel']} {'x'.join(map(str, row['shape']))} {row['dtype']}"


def diff(base: dict, now: dict, threshold: float = DEFAULT_THRESHOLD) -> list[RowDiff]:
    """Row-by-row comparison of Iron times (kernel × shape × dtype); beyond ``threshold`` percent is a regression
    (slower) or an improvement (faster); a row that matched its oracle in the baseline and fails now is flagged."""
    base_rows = {_key(r): r for r in base.get("rows", [])}
    now_rows = {_key(r): r for r in now.get("rows", [])}
    out = []
    for key, row in now_rows.items():
        old = base_rows.get(key)
        if old is None:
            out.append(RowDiff(key, None, row.get("iron_us"), None, "new"))
            continue
        b, n = old.get("iron_us"), row.get("iron_us")
        change = 100.0 * (n - b) / b if b and n is not None else None
        if old.get("ok", True) and not row.get("ok", True):
            verdict = "fails now"
        elif change is None:
            verdict = "same"
        elif change > threshold:
            verdict = "regression"
        elif change < -threshold:
            verdict = "improvement"
        else:
            verdict = "same"
        out.append(RowDiff(key, b, n, change, verdict))
    out += [RowDiff(key, r.get("iron_us"), None, None, "gone") for key, r in base_rows.items() if key not in now_rows]
    return out
