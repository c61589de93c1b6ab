"""attn_prefill_wg's configurations (NC, WG, STAGES, PIPE) timed one by one beside torch SDPA (bf16, causal), each checked
against SDPA first; CUDA events, median of 20 launches after 3 warm-ups. Prints one JSON line per (shape, config)
and writes them to argv[1] (scripts/gpu_check.sh attnwg)."""

# ruff: noqa: B023 - the closures run in the iteration that defines them
from __future__ import annotations

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, "src")
from iron.std.attention_wg import attn_prefill_wg  # noqa: E402

SHAPES = [(2048, 32, 8, 64), (4096, 32, 8, 128), (8192, 32, 8, 64), (4096, 32, 32, 128)]
CFGS = [tuple(int(x) for x in c.split(",")) for c in os.environ.get(
    "ATTN_CFGS", "1,1,2,0 1,1,3,0 2,1,2,0 2,2,2,0 1,1,3,1").split()]


def timed(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main() -> None:
    rows = []
    for n, hq, hkv, d in SHAPES:
        q = torch.randn(n, hq, d, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(n, hkv, d, dtype=torch.bfloat16, device="cuda")
        flops = 4 * n * n * hq * d / 2

        def sdpa():
            o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                               v.transpose(0, 1)[None], is_causal=True, enable_gqa=hq != hkv)
            return o[0].transpose(0, 1)

        ref = sdpa().float()
        ms = timed(sdpa)
        row = {"shape": [n, hq, hkv, d], "impl": "torch_sdpa", "ms": ms, "tflops": flops / ms / 1e9}
        print(json.dumps(row), flush=True)
        rows.append(row)
        for nc, wg, stages, pipe in CFGS:
            out = torch.full_like(q, float("nan"))
            g = wg * 128
            grid = (-(-n // (64 * wg)) * g, hq)

            def run():
                attn_prefill_wg[grid, (g, 1)](q, k, v, out, n, hq * d, hkv * d, hq, hkv, 1 / math.sqrt(d), d, nc, wg,
                                              stages, True, pipe, backend="cuda")

            try:
                run()
                torch.cuda.synchronize()
                err = (out.float() - ref).abs().max().item()
                ms = timed(run)
                row = {"shape": [n, hq, hkv, d], "impl": "iron_wg", "cfg": [nc, wg, stages, pipe], "ms": ms,
                       "tflops": flops / ms / 1e9, "max_err_vs_sdpa": err}
            except Exception as e:  # noqa: BLE001 - a configuration that does not fit is reported, not fatal
                row = {"shape": [n, hq, hkv, d], "impl": "iron_wg", "cfg": [nc, wg, stages, pipe],
                       "error": str(e)[:300]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    with open(sys.argv[1], "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
