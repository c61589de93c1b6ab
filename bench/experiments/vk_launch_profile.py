"""Where the host time of a Vulkan launch on device arrays goes (issue 16: <= 10 us per launch on the H200): 5,000
launches of a 1,024-element kernel timed, then 5,000 more under cProfile (the functions by own time).

    python bench/experiments/vk_launch_profile.py [backend]      (default vulkan)
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

import iron
from iron import Tensor, f32, program_id

N = 5000


@iron.kernel
def scale_add(x: Tensor[f32], out: Tensor[f32], a: float, n: int):
    i = program_id(0)
    if i < n:
        out[i] = out[i] + a * x[i]


def main(backend: str) -> None:
    x = iron.asarray(np.ones(1024, np.float32), backend=backend)
    o = iron.zeros(1024, iron.f32, backend=backend)
    for _ in range(100):
        scale_add[1024](x, o, 0.5, 1024)
    iron.synchronize(backend)
    t0 = time.perf_counter()
    for _ in range(N):
        scale_add[1024](x, o, 0.5, 1024)
    t1 = time.perf_counter()
    iron.synchronize(backend)
    t2 = time.perf_counter()
    print(f"{backend}: host {(t1 - t0) / N * 1e6:.2f} us per launch, {(t2 - t0) / N * 1e6:.2f} with the wait")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        scale_add[1024](x, o, 0.5, 1024)
    iron.synchronize(backend)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vulkan")
