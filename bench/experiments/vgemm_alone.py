"""Vulkan's gemm_rs configurations timed one by one, outside the bench, at several shapes and input-copy counts: is
the 4096^3 row's 5.0 ms (27 TF/s, while 8192^3 runs at 134 TF/s) the kernel, the configuration, the rotation of
input copies, or the clocks? (scripts/gpu_check.sh valone)

    python bench/experiments/vgemm_alone.py [bf16|f16]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

sys.path.insert(0, "src")
import iron  # noqa: E402
from iron.harness.measure import ramp  # noqa: E402
from iron.lang import types as t  # noqa: E402
from iron.runtime import get_backend  # noqa: E402
from iron.std import gemm as G  # noqa: E402
from iron.std import gemm_staged  # noqa: E402

dname = sys.argv[1] if len(sys.argv) > 1 else "bf16"
dtype = t.SCALAR_TYPES[dname].np_dtype
be = get_backend("vulkan")
width = be.simd_width()
rng = np.random.default_rng(0)
rows = []


def launcher(arrays, m, n, k, cfg):
    a, b, c = arrays
    g = cfg[3] * cfg[4] * width
    grid = (-(-n // cfg[1]) * g, -(-m // cfg[0]), 1)
    return lambda: gemm_staged.gemm_rs[grid, (g, 1, 1)](a, b, c, m, n, k, 0, 0, 0, *cfg, width, False,
                                                        backend="vulkan")


def time_one(m, n, k, cfg, copies):
    sets = []
    for _ in range(copies):
        a = rng.standard_normal((m * k,)).astype(dtype)
        b = rng.standard_normal((k * n,)).astype(dtype)
        sets.append([iron.asarray(a, backend="vulkan"), iron.asarray(b, backend="vulkan"),
                     iron.empty((m * n,), dname, backend="vulkan")])
    fns = [launcher(s, m, n, k, cfg) for s in sets]
    count = [0]

    def step():
        fns[count[0] % copies]()
        count[0] += 1

    step()
    be.synchronize()
    ramp(step, be.synchronize)
    gpu = be.gpu_time(step, 10)
    be.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        step()
    be.synchronize()
    host = (time.perf_counter() - start) / 10
    flop = 2 * m * n * k
    row = {"shape": [m, n, k], "config": cfg, "copies": copies, "gpu_us": gpu * 1e6 if gpu else None,
           "host_us": host * 1e6, "gpu_tflops": flop / gpu / 1e12 if gpu else None, "host_tflops": flop / host / 1e12}
    print(json.dumps(row), flush=True)
    rows.append(row)


shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 8192), (8192, 4096, 4096), (4096, 8192, 4096)]
for shape in shapes[:2]:
    for cfg in G.VULKAN_NVIDIA:
        for copies in (1, 3):
            try:
                time_one(*shape, cfg, copies)
            except Exception as e:  # a configuration the device refuses
                print(json.dumps({"shape": shape, "config": cfg, "error": f"{type(e).__name__}: {e}"}), flush=True)
for shape in shapes[2:]:
    time_one(*shape, (128, 256, 16, 2, 4), 1)
    time_one(*shape, (128, 128, 32, 2, 4), 1)
json.dump(rows, open(sys.argv[2] if len(sys.argv) > 2 else "/tmp/valone.json", "w"), indent=1)
