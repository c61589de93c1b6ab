"""std/quant/gemv_q4's configurations one by one on CUDA (scripts/gpu_check.sh q4cfg): every configuration
``gemv_q_configs`` offers at each shape (gemv_q, gemv_q_warp and the matrix-unit gemv_q4_mma), checked against a
float64 oracle and torch's dequantize-then-mv, and timed by CUDA events behind a sleep kernel with the L2 flushed
ahead of each repeat (``cuda_timing.event_seconds``: GPU time, cold weights as a decode step streams them); printed
as GB/s of packed weight bytes (the issue's measure), with torch's time. Q4_SHAPES: "N,K;N,K" (default the bench's
device shapes); Q4_ONLY=i runs configuration i of the first shape alone, 4 times (for ncu). Q4_PATH ("group", "warp",
"xs", "mma" or "mv") keeps one kernel's configurations; Q4_BOUNDS="T,G" rebuilds gemv_q_warp with launch_bounds (T,
G) (T threads a group at most, G groups an SM: 80 registers at "128,6" against 128 unbounded, no spills at R 8), to
see whether the occupancy it buys pays; Q4_WARP="R,KV,WARPS,NS;..." times those gemv_q_warp configurations instead
(NS = 1: the next step's loads in raw registers); Q4_XS="R,MOST,X8[,NS];..." gemv_q4_xs configurations (NS >= 2:
staged). Q4_FLUSH=read evicts L2 by reading 256 MiB instead of the backend's memset (whose dirty lines the
timed kernel would otherwise write back while it runs)."""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, "src")
from iron.frontend.kernel import KernelFunction  # noqa: E402
from iron.runtime import get_backend  # noqa: E402
from iron.runtime.cuda_timing import event_seconds  # noqa: E402
from iron.std import quant as Q  # noqa: E402
from iron.std import quant_gemv as QV  # noqa: E402

if os.environ.get("Q4_BOUNDS"):
    QV.gemv_q_warp = KernelFunction(QV.gemv_q_warp.fn, launch_bounds=tuple(
        int(v) for v in os.environ["Q4_BOUNDS"].split(",")))

shapes = [tuple(int(v) for v in s.split(",")) for s in os.environ.get(
    "Q4_SHAPES", "16384,16384;4096,4096;14336,4096").split(";")]
only = os.environ.get("Q4_ONLY")
group = int(os.environ.get("Q4_GROUP", "64"))
flush = get_backend("cuda").l2_flush()  # the function that queues the eviction
if os.environ.get("Q4_FLUSH") == "read":  # evict by reading 256 MiB: the memset's flush leaves L2 full of dirty
    _evict = torch.zeros(64 << 20, dtype=torch.float32, device="cuda")  # lines the timed kernel then writes back

    def flush():
        _evict.sum()
rng = np.random.default_rng(0)


def measure(n: int, k: int) -> None:
    """Every configuration at (n, k), then torch's dequantize + mv (or, with Q4_ONLY, one configuration 4 times)."""
    p, s, b = Q.quantize(rng.standard_normal((n, k)) / np.sqrt(k), 4, group, np.float16)
    x = rng.standard_normal(k).astype(np.float32)
    dev = {"w": torch.from_numpy(p).cuda(), "x": torch.from_numpy(x).to("cuda", torch.bfloat16),
           "scales": torch.from_numpy(s.astype(np.float32)).to("cuda", torch.bfloat16),
           "biases": torch.from_numpy(b.astype(np.float32)).to("cuda", torch.bfloat16)}
    y = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    configs = QV.gemv_q_configs("cuda", n, k, 4, group, 2, dtype="bf16", path=os.environ.get("Q4_PATH"))
    if os.environ.get("Q4_WARP"):  # "R,KV,WARPS,NS;...": gemv_q_warp configurations of one's own instead
        configs = [dict(zip(("R", "KV", "WARPS", "NS"), (int(v) for v in c.split(","))), PATH="warp")
                   for c in os.environ["Q4_WARP"].split(";")]
    if os.environ.get("Q4_XS"):  # "R,MOST,X8[,NS];...": gemv_q4_xs configurations of one's own instead
        configs = [dict(zip(("R", "MOST", "X8", "NS"), (int(v) for v in c.split(","))), PATH="xs")
                   for c in os.environ["Q4_XS"].split(";")]

    def run(cfg):
        QV.launch_gemv_q(dev["w"], dev["scales"], dev["biases"], dev["x"], y, 4, group, "cuda", config=cfg)

    if only is not None:
        for _ in range(4):
            run(configs[int(only)])
        torch.cuda.synchronize()
        return
    want = Q.dequantize(p, dev["scales"].float().cpu().numpy(), dev["biases"].float().cpu().numpy(), 4, group) \
        @ dev["x"].float().cpu().numpy().astype(np.float64)
    nbytes = n * k // 2
    for i, cfg in enumerate(configs):
        y.fill_(float("nan"))
        run(cfg)
        torch.cuda.synchronize()
        err = np.abs(y.float().cpu().numpy() - want).max() / (1 + np.abs(want).max())
        us = event_seconds(lambda cfg=cfg: run(cfg), 10, before=flush) * 1e6
        print(f"q4 {n}x{k} config {i}: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s, rel err {err:.2g}: {cfg}")
    deq = Q.torch_dequantize(dev["w"], dev["scales"], dev["biases"], 4, group)
    both = event_seconds(lambda: torch.mv(Q.torch_dequantize(dev["w"], dev["scales"], dev["biases"], 4, group),
                                          dev["x"]), 10, before=flush) * 1e6
    mv = event_seconds(lambda: torch.mv(deq, dev["x"]), 10, before=flush) * 1e6
    print(f"q4 {n}x{k} torch dequantize + mv: {both:.1f} us; mv alone on the dequantized bf16: {mv:.1f} us")


for n, k in shapes[:1] if only is not None else shapes:
    measure(n, k)
