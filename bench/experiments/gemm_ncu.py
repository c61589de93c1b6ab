"""Iron's std GEMM (gemm_wg on the H200) and the bench's Triton GEMM at one shape, for ``ncu`` (scripts/gpu_check.sh
gemmncu): both warmed and autotuned first, then one launch each between cudaProfilerStart/Stop (run ncu with
``--profile-from-start off``); prints each one's time by events and Triton's chosen configuration.

    python bench/experiments/gemm_ncu.py [M N K] [bf16|f16]
"""

from __future__ import annotations

import sys

import torch

sys.path.insert(0, "src")
from iron.harness.peers import triton_gemm  # noqa: E402
from iron.std import gemm as G  # noqa: E402

m, n, k = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (4096, 4096, 4096)
dtype = torch.float16 if sys.argv[-1] == "f16" else torch.bfloat16
a = torch.randn(m, k, dtype=dtype, device="cuda")
b = torch.randn(k, n, dtype=dtype, device="cuda")
c = torch.empty(m, n, dtype=dtype, device="cuda")
d = {"a": a, "b": b, "ref_out": torch.empty_like(c)}
runs = {"iron": lambda: G.launch(a, b, c, False, "cuda"), "triton": lambda: triton_gemm.gemm(d)}
for fn in runs.values():
    for _ in range(5):
        fn()
torch.cuda.synchronize()
for name, fn in runs.items():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        fn()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 10
    print(f"{name} {m}x{n}x{k} {dtype}: {ms * 1e3:.1f} us, {2 * m * n * k / ms / 1e9:.1f} TF/s (back to back)")
print("triton config:", getattr(triton_gemm._gemm, "best_config", None))
err = (c.float() - d["ref_out"].float()).abs().max().item()
print(f"max |iron - triton| = {err:.3g}")
torch.cuda.cudart().cudaProfilerStart()
for fn in runs.values():
    fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
