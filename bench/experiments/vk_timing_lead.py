"""Issue 16: how much of the Vulkan rows' gap to CUDA is the timer starting each dispatch on an idle GPU?

CUDA's timer queues a sleep kernel ahead of each repeat (cuda_timing); Vulkan's records each timed dispatch in a
submission of its own, after a host wait. Commit c2626c5 tried a busy lead for Vulkan (runtime/vulkan_lead.py there:
one invocation spinning, then a barrier, ahead of each timed dispatch; IRON_VULKAN_TIMING_LEAD=1 / 0). For a few bench
rows (bf16, inputs cycled through 8 copies), this prints in one process: CUDA with the sleep and from idle
(``idle_start=True``), Vulkan with the lead and without, two rounds. Measured on an H100 (2026-12-07,
bench/results/2026-12-07-h100-s32-vk-lead/): the lead left the Vulkan rows of 28-34 us within 0.7 % and made the
5 us one 0.2 us slower (the timestamps already leave the idle start out), so it was removed: the Vulkan rows' gap
to CUDA is the kernels' own time. At later commits the two Vulkan columns time the same thing.

    python bench/experiments/vk_timing_lead.py [out.json]
    (VK_ROWS="rope,softmax": those rows; VK_PARTS="vulkan": that backend; VK_LEAD_FLAGS="1 0 1 0": the Vulkan rounds)
"""

from __future__ import annotations

import json
import os
import sys

import ml_dtypes
import numpy as np

from iron.harness.measure import ramp
from iron.runtime import get_backend
from iron.runtime.device_array import asarray
from iron.std.elementwise import launch_unary
from iron.std.layer_norm import launch_layer_norm
from iron.std.rope import launch_rope, rope_tables
from iron.std.softmax import launch_softmax

BF = ml_dtypes.bfloat16
COPIES = 8


def cases(rng):
    """(name, inputs, launch(arrays, backend)) of each row."""
    x = rng.standard_normal((4096, 32, 128)).astype(BF)
    cos, sin = rope_tables(4096, 128)
    yield ("rope rotate_half 4096x32x128", {"x": x, "out": np.zeros_like(x), "cos": cos, "sin": sin,
                                             "pos": np.arange(4096, dtype=np.int32)},
           lambda a, be: launch_rope(a["x"], a["out"], a["cos"], a["sin"], a["pos"], backend=be))
    m = rng.standard_normal((4096, 4096)).astype(BF)
    yield ("softmax 4096x4096", {"x": m, "out": np.zeros_like(m)},
           lambda a, be: launch_softmax(a["x"], a["out"], backend=be))
    w, b = (rng.standard_normal(4096).astype(BF) for _ in range(2))
    yield ("layer_norm 4096x4096", {"x": m, "w": w, "b": b, "out": np.zeros_like(m)},
           lambda a, be: launch_layer_norm(a["x"], a["w"], a["b"], a["out"], backend=be))
    for log in (24, 20):
        e = rng.standard_normal(1 << log).astype(BF)
        yield (f"exp 2^{log}", {"a": e, "out": np.zeros_like(e)},
               lambda a, be: launch_unary("exp", a["a"], a["out"], backend=be))


def cycler(sets, launch, be):
    count = [0]

    def step():
        launch(sets[count[0] % len(sets)], be)
        count[0] += 1
    return step


def cuda_times(inputs, launch) -> dict:
    import torch

    from iron.runtime.cuda_timing import event_seconds

    def dev(v):  # bf16 through an int16 view (torch.from_numpy has no bfloat16)
        t = torch.from_numpy(v.view(np.int16) if v.dtype == BF else v).cuda()
        return t.view(torch.bfloat16) if v.dtype == BF else t

    sets = [{k: dev(v) for k, v in inputs.items()} for _ in range(COPIES)]
    step = cycler(sets, launch, "cuda")
    step()
    torch.cuda.synchronize()
    return {"cuda_sleep_us": event_seconds(step, 40) * 1e6,
            "cuda_idle_us": event_seconds(step, 40, idle_start=True) * 1e6}


def vulkan_times(inputs, launch) -> dict:
    be = get_backend("vulkan")
    sets = [{k: asarray(v, backend="vulkan") for k, v in inputs.items()} for _ in range(COPIES)]
    step = cycler(sets, launch, "vulkan")
    ramp(step, be.synchronize)
    out = {}
    for flag in os.environ.get("VK_LEAD_FLAGS", "1 0 1 0").split():
        os.environ["IRON_VULKAN_TIMING_LEAD"] = flag
        out.setdefault(f"vulkan_lead{flag}_us", []).append(be.gpu_time(step, 40) * 1e6)
    os.environ.pop("IRON_VULKAN_TIMING_LEAD", None)
    return out


def main(path: str | None) -> None:
    try:
        import torch

        torch.zeros(1, device="cuda")  # a CUDA context first: Vulkan alone ran at low clocks (hold_cuda_context)
    except Exception:  # noqa: BLE001 - no torch or no CUDA (lavapipe): Vulkan alone
        pass
    rows = []
    only = os.environ.get("VK_ROWS")  # "rope,softmax": rows whose names hold one of these
    parts = [p for p in (cuda_times, vulkan_times) if p.__name__.split("_")[0] in os.environ.get("VK_PARTS",
                                                                                                "cuda vulkan")]
    for name, inputs, launch in cases(np.random.default_rng(0)):
        if only and not any(w in name for w in only.split(",")):
            continue
        row = {"row": name}
        for part in parts:
            try:
                row.update(part(inputs, launch))
            except Exception as e:  # noqa: BLE001 - a failing part is a result too
                row[part.__name__ + "_error"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(row, default=lambda v: round(v, 2)), flush=True)
        rows.append(row)
    if path:
        with open(path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
