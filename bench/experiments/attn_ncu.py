"""One std/attention prefill launch (bf16, 2048 tokens, 32 query / 8 kv heads, D 64, causal: a Llama-3.2-1B layer;
ATTN_SHAPE="tokens,HQ,HKV,D" changes it),
for ``ncu`` (scripts/gpu_check.sh ncu): warm-up launches first, then the profiled one; prints its time by events."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, "src")
from iron.std.attention import launch_prefill  # noqa: E402

n, hq, hkv, d = (int(x) for x in os.environ.get("ATTN_SHAPE", "2048,32,8,64").split(","))
q = torch.randn(n, hq, d, dtype=torch.bfloat16, device="cuda")
k = torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda")
v = torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda")
out = torch.empty_like(q)
for _ in range(3):
    launch_prefill(q, k, v, out, causal=True, backend="cuda")
torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record()
launch_prefill(q, k, v, out, causal=True, backend="cuda")
end.record()
torch.cuda.synchronize()
ms = start.elapsed_time(end)
flops = 4 * n * n * d * hq / 2
print(f"attn_prefill {n} tokens: {ms:.3f} ms, {flops / ms / 1e9:.1f} TF/s")
