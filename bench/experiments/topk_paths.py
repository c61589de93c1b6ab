"""std/sample/topk's paths one by one on CUDA (scripts/gpu_check.sh topkncu): each (path, elements a thread) of
``topk.PATH_TUNING``, checked against torch.topk (the same indices: the order is total) and timed by CUDA events
behind a sleep kernel with the L2 flushed ahead of each repeat (GPU time, cold logits); printed as GB/s of logits
read, beside torch.topk. TOPK_SHAPE "rows,cols" (default 32,128256), TOPK_K (64). TOPK_ONLY=i runs path i alone,
4 times (for ncu). TOPK_INPUT=bench: the registered entry's logits (``topk._setup``: a quarter on a coarse grid, k + 1
distinct values above the rest) and f32 indices, as ``iron bench`` runs it, instead of normal logits and i32."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, "src")
from iron.runtime import get_backend  # noqa: E402
from iron.runtime.cuda_timing import event_seconds  # noqa: E402
from iron.std import topk as K  # noqa: E402

rows, cols = (int(v) for v in os.environ.get("TOPK_SHAPE", "32,128256").split(","))
k = int(os.environ.get("TOPK_K", "64"))
if os.environ.get("TOPK_INPUT") == "bench":
    import ml_dtypes
    import numpy as np

    from iron.harness.registry import InputGen

    k = K.K_REGISTERED
    host = K._setup(InputGen((rows, cols), np.dtype(ml_dtypes.bfloat16), np.random.default_rng(0)))["x"]
    x = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16).cuda()
    indices = torch.empty(rows, k, dtype=torch.float32, device="cuda")
else:
    x = torch.randn(rows, cols, device="cuda").to(torch.bfloat16)
    indices = torch.empty(rows, k, dtype=torch.int32, device="cuda")
values = torch.empty(rows, k, dtype=torch.bfloat16, device="cuda")
paths = K.PATH_TUNING["cuda"]
flush = get_backend("cuda").l2_flush()  # the function that queues the eviction


def run(path, ept):
    K.launch_path(x, values, indices, k, path, "cuda", ept)


only = os.environ.get("TOPK_ONLY")
if only is not None:
    for _ in range(4):
        run(*paths[int(only)])
    torch.cuda.synchronize()
    sys.exit(0)
tv, ti = torch.topk(x, k, dim=1, sorted=True)
nbytes = x.numel() * x.element_size()
for i, (path, ept) in enumerate(paths):
    indices.fill_(-1)
    run(path, ept)
    torch.cuda.synchronize()
    same = bool((indices.long() == ti).all()) and bool((values == tv).all())
    us = event_seconds(lambda path=path, ept=ept: run(path, ept), 20, before=flush) * 1e6
    print(f"topk path {i} {path} EPT {ept}: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s, equal to torch.topk: {same}")
us = event_seconds(lambda: torch.topk(x, k, dim=1, sorted=True), 20, before=flush) * 1e6
print(f"torch.topk: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")
# the floors this method puts under any kernel at this shape: a one-block kernel (the launch as events see it) and
# torch's max over the last axis (every logit read once, 32 values written)
tiny = torch.empty(1, device="cuda")
us = event_seconds(lambda: tiny.zero_(), 20, before=flush) * 1e6
print(f"floor, a one-element kernel: {us:.1f} us")
us = event_seconds(lambda: torch.amax(x, dim=1), 20, before=flush) * 1e6
print(f"floor, torch.amax over the rows: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")
