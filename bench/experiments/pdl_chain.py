"""Programmatic dependent launch A/B on the H200: a chain of small dependent kernels recorded as one CUDA graph
(``iron.graph``) and replayed, with ``IRON_CUDA_PDL`` off and on, in one process. Each kernel reads what the one before
it wrote, from other groups (a reversal), so the chain is the decode step's shape: many short grids back to back.

    python3 bench/experiments/pdl_chain.py OUT.json

Records, per element count (and the groups its launch takes), the median wall time of a replay divided by the
launches in it. First run (H200, 2026-12-03): 1.08 -> 0.81 us per launch at 4096 elements, 1.24 -> 1.12 at 32768,
1.41 -> 1.32 at 262144, 3.96 -> 3.71 at 2097152 (off -> on).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import iron  # noqa: E402
from iron import Tensor, kernel, program_id  # noqa: E402
from iron.runtime import get_backend  # noqa: E402

LAUNCHES, REPLAYS = 150, 200


@kernel
def flip(src: Tensor[iron.f32], dst: Tensor[iron.f32], n: int):
    i = program_id(0)
    dst[i] = src[n - 1 - i] * 0.5 + 1.0


def per_launch_us(n: int, pdl: bool, row: dict) -> float:
    os.environ["IRON_CUDA_PDL"] = "1" if pdl else "0"
    a = iron.asarray(np.ones(n, np.float32), backend="cuda")
    b = iron.zeros((n,), iron.f32, backend="cuda")
    flip[n](a, b, n)  # compiled and loaded outside the recording
    iron.synchronize("cuda")
    row["groups"] = (get_backend("cuda").launch_stats() or {}).get("groups")
    with iron.graph("cuda") as g:
        for s in range(LAUNCHES):
            src, dst = (a, b) if s % 2 == 0 else (b, a)
            flip[n](src, dst, n)
    g.launch()
    iron.synchronize("cuda")
    times = []
    for _ in range(REPLAYS):
        t = time.perf_counter()
        g.launch()
        iron.synchronize("cuda")
        times.append(time.perf_counter() - t)
    return float(np.median(times)) * 1e6 / LAUNCHES


def main() -> None:
    os.environ["IRON_CUDA_FAST"] = "0"  # every launch through the full path (the recording uses it anyway)
    rec = {"what": __doc__.split("\n\n")[0], "launches": LAUNCHES, "replays": REPLAYS, "rows": []}
    for n in (1 << 12, 1 << 15, 1 << 18, 1 << 21):
        row = {"n": n}
        for _ in range(2):  # off, on, off, on: the second pair is the one reported, the first warms up
            row["off_us_per_launch"] = per_launch_us(n, False, row)
            row["on_us_per_launch"] = per_launch_us(n, True, row)
        rec["rows"].append(row)
        print(json.dumps(row), flush=True)
    Path(sys.argv[1]).write_text(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
