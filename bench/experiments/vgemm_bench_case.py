"""The bench's own path for the std GEMM row on Vulkan (measure.bench_case, as a bench worker calls it), with every
timed sample printed: why does the 4096^3 row read 5.0 ms when gemm_rs alone runs it in 1.1 ms
(bench/experiments/vgemm_alone.py)? (scripts/gpu_check.sh valone)

    python bench/experiments/vgemm_bench_case.py [N ...]

With VCASE_TORCH=1 a CUDA context (torch) exists before the first row: does its presence change the clocks the
Vulkan rows run at? (The 4096 row was slow before torch's first use in the process and fast after.)
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, "src")
from iron.harness import measure, registry  # noqa: E402
from iron.runtime import backend as B  # noqa: E402

original = B.LaunchRecorder.median


def median(self, fn, repeats):
    """LaunchRecorder.median, printing each call's samples."""
    fn()
    seen = []
    try:
        for _ in range(repeats):
            self.samples = []
            fn()
            seen.append(list(self.samples))
    finally:
        self.samples = None
    print("  samples (us):", [[round(s * 1e6, 1) for s in call if s is not None] for call in seen], flush=True)
    sums = [sum(s for s in call if s is not None) for call in seen]
    return statistics.median(sums) if sums else None


B.LaunchRecorder.median = median
if os.environ.get("VCASE_TORCH") == "1":
    import torch

    torch.zeros(1, device="cuda")
    print("a CUDA context exists (torch)", flush=True)
entry = next(e for e in registry.load_all() if e.name == "std/gemm/gemm")
for n in [int(v) for v in sys.argv[1:]] or [4096, 8192, 4096]:
    row = measure.bench_case(entry, "vulkan", "bf16", (n, n, n), 0, {"repeats": 5})
    print(n, {k: row.get(k) for k in ("iron_s", "config", "input_copies", "timing", "ok", "error")}, flush=True)
