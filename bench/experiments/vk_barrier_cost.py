"""Issue 16: what a Vulkan launch on device arrays costs with each kind of barrier after its dispatch (host time per
launch and time until the GPU is done, 5,000 dependent launches of a 1,024-element kernel), to see whether the
per-dispatch barrier's stages (compute | transfer on both sides today) set the ~14 us a launch measured on the H200
with NVIDIA's driver (lavapipe: ~2 us). Variants: the queue's barrier masks set before a fresh kernel's first launch
(its compiled launcher copies them). "none" records no dependency and is timed only: its result is not checked.

    python bench/experiments/vk_barrier_cost.py [out.json]
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

import iron
from iron import Tensor, f32, program_id

N, LAUNCHES = 1024, 5000


def scale_add(x: Tensor[f32], out: Tensor[f32], a: float, n: int):
    i = program_id(0)
    if i < n:
        out[i] = out[i] + a * x[i]


def run(queue, vk, name: str, src: int, dst: int, access: bool) -> dict:
    mb = queue.memory_barrier
    saved = (queue.stages, mb.srcAccessMask, mb.dstAccessMask)
    if not access:
        mb.srcAccessMask = mb.dstAccessMask = 0
    queue.stages = src | dst if src and dst else 0
    k = iron.kernel(scale_add)  # a fresh launcher: it copies the masks at its first launch
    x = iron.asarray(np.ones(N, np.float32), backend="vulkan")
    out = iron.zeros(N, f32, backend="vulkan")
    for _ in range(50):
        k[N](x, out, 1.0, N)
    iron.synchronize("vulkan")
    t0 = time.perf_counter()
    for _ in range(LAUNCHES):
        k[N](x, out, 1.0, N)
    host = time.perf_counter() - t0
    iron.synchronize("vulkan")
    total = time.perf_counter() - t0
    ok = bool((out.numpy() == 50 + LAUNCHES).all())
    queue.stages, mb.srcAccessMask, mb.dstAccessMask = saved
    return {"variant": name, "host_us": host / LAUNCHES * 1e6, "with_wait_us": total / LAUNCHES * 1e6, "ok": ok}


def main() -> None:
    from iron.runtime import get_backend

    be = get_backend("vulkan")
    vk = be.ctx.vk if hasattr(be, "ctx") else __import__("vulkan")
    probe = iron.zeros(4, f32, backend="vulkan")
    queue = probe.store.queue
    c, t = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    rows = [run(queue, vk, "compute|transfer (today)", c | t, c | t, True)]
    # the masks below need the launcher to take src and dst separately: set both to the union where it cannot
    rows.append(run(queue, vk, "compute only", c, c, True))
    rows.append(run(queue, vk, "compute|transfer (again)", c | t, c | t, True))
    from iron.runtime import vulkan_queue

    batch = vulkan_queue.BATCH
    for b in (8, 512):
        vulkan_queue.BATCH = b
        rows.append(run(queue, vk, f"today, batches of {b}", c | t, c | t, True))
    vulkan_queue.BATCH = batch
    for r in rows:
        print(f"{r['variant']:28s} host {r['host_us']:6.2f} us/launch, with the wait {r['with_wait_us']:6.2f}, "
              f"result {'ok' if r['ok'] else 'WRONG'}", flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": be.info().get("name"), "launches": LAUNCHES, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
