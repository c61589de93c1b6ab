"""Is Vulkan's ~5 us gap to CUDA a cost per dispatch or a cost of how one dispatch is timed?

On the H100 (2026-12-06, bench/results/2026-12-06-h100-s24-*) NVIDIA's Vulkan trailed CUDA by a near-constant 5-6 us
at every size (RoPE 33.7 vs 28.3 us, softmax 4096^2 31.1 vs 26.3, 16384 x 8192 185.4 vs ~180). This times one copy
kernel at several sizes as 1, 2, 4 and 8 back-to-back dispatches between two timestamps (``time_launch(repeat=n)``:
barriers between them) on Vulkan, and the same launches between two CUDA events behind a sleep kernel
(``cuda_timing.event_seconds``), and fits total = fixed + n * each. A Vulkan ``fixed`` well above CUDA's with equal
``each`` says the bench's one-dispatch interval carries a start-up the kernels do not pay back to back.
Run: python bench/experiments/vk_fixed_cost.py [out.json] (both backends: a GPU with CUDA and NVIDIA's Vulkan);
VKF_SIZES="1024,1048576" picks the sizes."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, "src")
import iron  # noqa: E402
from iron.runtime import get_backend  # noqa: E402

SIZES = tuple(int(v) for v in os.environ.get("VKF_SIZES", "1024,1048576,16777216,67108864").split(","))
REPEATS = (1, 2, 4, 8)


@iron.kernel
def copy(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32], n: int):
    i = iron.program_id(0)
    if i < n:
        out[i] = a[i]


def fit(totals: dict[int, float]) -> tuple[float, float]:
    """(fixed, each) of the least-squares line through (repeats, total us)."""
    n = np.array(list(totals), float)
    t = np.array(list(totals.values()), float)
    each, fixed = np.polyfit(n, t, 1)
    return float(fixed), float(each)


def vulkan_rows(size: int) -> dict[int, float]:
    be = get_backend("vulkan")
    a = np.random.default_rng(0).standard_normal(size).astype(np.float32)
    o = np.full_like(a, np.nan)
    variant = copy.variant(None)
    grid, group = (-(-size // 256) * 256, 1, 1), (256, 1, 1)
    totals = {}
    for r in REPEATS:
        runs = [be.time_launch(variant, {"a": a, "out": o}, {"n": size}, grid, group, repeat=r) for _ in range(5)]
        if any(v is None for v in runs):
            return {}
        totals[r] = float(np.median(runs)) * r * 1e3  # time_launch gives the mean ms of one dispatch
    assert np.array_equal(o, a), "the Vulkan copy is wrong"
    return totals


def cuda_rows(size: int) -> dict[int, float]:
    import torch

    from iron.runtime.cuda_timing import event_seconds

    a = torch.randn(size, device="cuda")
    o = torch.full_like(a, float("nan"))
    launch = copy[-(-size // 256) * 256, 256]
    totals = {}
    for r in REPEATS:
        def run(r=r):
            for _ in range(r):
                launch(a, o, size, backend="cuda")

        totals[r] = event_seconds(run, 5) * 1e6
    assert torch.equal(o, a), "the CUDA copy is wrong"
    return totals


def main() -> None:
    out = {"vulkan_device": get_backend("vulkan").info().get("name"), "rows": []}
    for size in SIZES:
        for name, rows in (("vulkan", vulkan_rows), ("cuda", cuda_rows)):
            try:
                totals = rows(size)
            except Exception as exc:  # noqa: BLE001 - a backend missing here is a line, not a failure
                print(f"{name} {size}: not timed ({type(exc).__name__}: {exc})")
                continue
            if not totals:
                print(f"{name} {size}: no timestamps")
                continue
            fixed, each = fit(totals)
            print(f"{name} copy of {size} f32: " + ", ".join(f"x{r} {t:.1f} us" for r, t in totals.items())
                  + f" -> fixed {fixed:.2f} us + {each:.2f} us a dispatch")
            out["rows"].append({"backend": name, "size": size, "totals_us": totals, "fixed_us": fixed,
                                "each_us": each})
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
