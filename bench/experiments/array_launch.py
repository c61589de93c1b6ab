"""Issue 16: host time per launch on device arrays (10,000 launches of a 1,024-element kernel), per backend, beside
torch's own launch of the same operation where torch has the GPU. Host wall-clock around the loop, then one wait
(the figure is what the host pays per launch; the GPU's time per launch is far below it). Writes JSON to argv[1].

    python bench/experiments/array_launch.py out.json [backend ...]   (default: every backend present but the CPU ones)
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import iron
from iron import Tensor, f32, program_id
from iron.runtime import unavailable_reason

N, LAUNCHES = 1024, 10_000


@iron.kernel
def scale_add(x: Tensor[f32], out: Tensor[f32], a: float, n: int):
    i = program_id(0)
    if i < n:
        out[i] = out[i] + a * x[i]


def per_launch_us(backend: str) -> dict:
    x = iron.asarray(np.ones(N, np.float32), backend=backend)
    out = iron.zeros(N, f32, backend=backend)
    for _ in range(50):  # compile, fast launcher, warm queue
        scale_add[N](x, out, 1.0, N)
    iron.synchronize(backend)
    t0 = time.perf_counter()
    for _ in range(LAUNCHES):
        scale_add[N](x, out, 1.0, N)
    host = time.perf_counter() - t0
    iron.synchronize(backend)
    total = time.perf_counter() - t0
    got = out.numpy()
    return {"backend": backend, "host_us_per_launch": host / LAUNCHES * 1e6,
            "with_wait_us_per_launch": total / LAUNCHES * 1e6, "result_ok": bool((got == 50 + LAUNCHES).all())}  # every launch counted


def torch_us() -> dict | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x, out = torch.ones(N, device="cuda"), torch.zeros(N, device="cuda")
    for _ in range(50):
        out.add_(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(LAUNCHES):
        torch.add(out, x, out=out)  # one kernel per call
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    return {"backend": "torch", "host_us_per_launch": host / LAUNCHES * 1e6,
            "with_wait_us_per_launch": (time.perf_counter() - t0) / LAUNCHES * 1e6}


def main() -> None:
    names = sys.argv[2:] or [b for b in ("cuda", "vulkan", "hip", "metal") if not unavailable_reason(b)]
    rows = []
    for b in names:
        try:
            rows.append(per_launch_us(b))
        except Exception as e:  # a backend that fails is reported, the rest still run
            rows.append({"backend": b, "error": f"{type(e).__name__}: {e}"})
        print(rows[-1], flush=True)
    t = torch_us()
    if t:
        rows.append(t)
        print(t, flush=True)
    dev = {b: iron.runtime.get_backend(b).info().get("name") for b in names if not unavailable_reason(b)}
    with open(sys.argv[1], "w") as f:
        json.dump({"kernel": f"out = out + a * x, {N} f32 elements", "launches": LAUNCHES, "devices": dev,
                   "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
