"""What NVIDIA's Vulkan driver made of the coopmat2 GEMM pipelines (issue 14: why 45 % of Iron's CUDA GEMM, s26):
registers a thread, shared memory (how many stages the driver's staging keeps) and instruction counts for each bf16
configuration of vk_coopmat2_gemm.py at 4096^3, through VK_KHR_pipeline_executable_properties (runtime/vulkan_stats.py).

    IRON_VULKAN_STATS=1 IRON_VULKAN_COOPMAT2=1 python bench/experiments/vk_gemm_stats.py [out.json]
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("IRON_VULKAN_STATS", "1")
os.environ.setdefault("IRON_VULKAN_COOPMAT2", "1")

from iron.runtime import get_backend  # noqa: E402
from iron.runtime.vulkan_stats import pipeline_statistics  # noqa: E402
from iron.std import gemm_coopmat2 as cm2  # noqa: E402


def main() -> None:
    ctx = get_backend("vulkan").context()
    print("device:", ctx.phys.name, ctx.driver)
    out = []
    for dtype in ("bf16",):
        for cfg in cm2.CONFIGS:
            spk = cm2.spirv_kernel(dtype, cfg)
            try:
                exes = pipeline_statistics(ctx, spk, (cfg[3], 1, 1), (4096, 4096, 4096))
            except Exception as e:  # noqa: BLE001 - an experiment: print what the driver said and go on
                print(dtype, cfg, "failed:", e)
                continue
            for ex in exes:
                stats = {s.name: s.value for s in ex.statistics}
                print(dtype, "x".join(map(str, cfg)), ex.name, f"subgroup {ex.subgroup_size}", stats)
                out.append({"dtype": dtype, "cfg": cfg, "executable": ex.name, "stats": stats})
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
