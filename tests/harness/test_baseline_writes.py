"""The bench's JSON files (last run, baselines, ceilings) survive concurrent writers: each writer goes through a file
of its own, so none fails and a reader always sees one writer's whole document; a damaged ceilings cache is measured
again, not a traceback."""

from __future__ import annotations

import json
import threading

import pytest

from iron.harness import baseline, roofline


def test_concurrent_last_runs_all_land_whole():
    docs = [{"backend": "cpu", "writer": i, "rows": [{"kernel": f"k{j}", "pad": "x" * 4000} for j in range(40)]}
            for i in range(6)]
    errors: list[BaseException] = []

    def write(doc: dict) -> None:
        try:
            for _ in range(60):
                baseline.save_last_run(doc)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(d,)) for d in docs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert json.loads(baseline.last_run_path().read_text()) in docs
    assert [p.name for p in baseline.bench_dir().iterdir()] == ["last.json"]  # no temporary left behind


def test_snap_writes_the_baseline_through_the_same_path():
    doc = {"backend": "cpu", "rows": [{"kernel": "k", "shape": [4], "dtype": "f32", "iron_us": 1.0, "ok": True}]}
    baseline.save_last_run(doc)
    saved = json.loads(baseline.snap("main").read_text())
    assert saved["rows"] == doc["rows"] and saved["baseline"]["name"] == "main"


DAMAGED = ['{"cpu:cpu": {"copy_gbps": 1', "[1, 2]", '{"cpu:cpu": {"copy": 1, "matrix_gflops": 2}}', '{"cpu:cpu": 7}']


@pytest.mark.parametrize("content", DAMAGED, ids=["truncated", "a-list", "other-keys", "not-an-entry"])
def test_an_unreadable_ceilings_cache_is_measured_again(content):
    """`iron bench -v` read ceilings.json with json.loads and Ceiling(**entry): a damaged cache was a traceback."""
    path = baseline.bench_dir() / "ceilings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    ceiling = roofline.copy_ceiling("cpu")
    assert ceiling.copy_gbps > 0 and ceiling.matrix_gflops > 0
    assert json.loads(path.read_text())["cpu:cpu"]["copy_gbps"] == ceiling.copy_gbps
