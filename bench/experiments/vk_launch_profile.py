"""Where the host time of a Vulkan launch on device arrays goes (issue 16: <= 10 us per launch on the H200): 5,000
launches of a 1,024-element kernel timed, then 5,000 more under cProfile (the functions by own time).

    python bench/experiments/vk_launch_profile.py [backend]      (default vulkan)

"host" is wall time per launch; "thread cpu" the launching thread's CPU time per launch (time.thread_time), which
the driver's own threads (lavapipe runs the dispatches on the host's cores) and other load disturb less. Which
launcher served the calls: IRON_VULKAN_LAUNCHER / IRON_CUDA_LAUNCHER (auto, c, python). The compiled launchers run
C, which cProfile does not see: their time shows as the caller's own.
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
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(N):
        scale_add[1024](x, o, 0.5, 1024)
    t1, c1 = time.perf_counter(), time.thread_time()
    iron.synchronize(backend)
    t2 = time.perf_counter()
    print(f"{backend} ({launcher(backend, scale_add[1024])}): host {(t1 - t0) / N * 1e6:.2f} us per launch, "
          f"{(t2 - t0) / N * 1e6:.2f} with the wait; thread cpu {(c1 - c0) / N * 1e6:.2f} us per launch")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        scale_add[1024](x, o, 0.5, 1024)
    iron.synchronize(backend)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(20)


def launcher(backend: str, k_grid) -> str:
    """Which launcher serves repeat calls of ``k_grid``: compiled (C), generated Python, or none (the full path)."""
    fast = getattr(k_grid, "_fast", {}).get(None, [])
    if type(k_grid).__name__ == "Direct" or (fast and type(fast[0]).__name__ == "FastLaunch"):
        return "compiled launcher"
    if fast:
        reason = None
        if backend == "vulkan":
            from iron.runtime import vulkan_fast

            reason = vulkan_fast.EXT_REASON
        return "generated-Python launcher" + (f"; the compiled one did not build: {reason}" if reason else "")
    return "full path"


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vulkan")
