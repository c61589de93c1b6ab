"""std/norm/layer_norm's configurations one by one on CUDA (scripts/gpu_check.sh lncfg): elements per thread x
LATE on the one-group-a-row kernel, and the persistent ``layer_norm_rows_ahead`` at 1, 2 and 4 groups a
multiprocessor, each checked against a float64 oracle and timed by CUDA events behind a sleep kernel with the L2
flushed ahead of each repeat (GPU time), beside torch's layer_norm and the Triton peer (the bench's). LN_SHAPES:
"R,C;R,C" (default 16384 x 8192 and 4096 x 4096), bf16, with bias (LN_BIAS=0: without, torch and Triton too);
LN_EPT="16,32" keeps those elements-per-thread values; std rms_norm (one reduction, a weight) is timed beside them
as the row kernels' own yardstick."""

from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, "src")
from iron.harness import peers  # noqa: E402
from iron.runtime import get_backend  # noqa: E402
from iron.runtime.cuda_timing import event_seconds  # noqa: E402
from iron.std import layer_norm as L  # noqa: E402
from iron.std import norm as N  # noqa: E402
from iron.std.softmax import ROW_TUNING, plan_rows, processors  # noqa: E402

shapes = [tuple(int(v) for v in s.split(",")) for s in os.environ.get("LN_SHAPES", "16384,8192;4096,4096").split(";")]
flush = get_backend("cuda").l2_flush()
bias = os.environ.get("LN_BIAS", "1") != "0"
epts = [int(v) for v in os.environ.get("LN_EPT", ",".join(str(e) for e in ROW_TUNING["cuda"])).split(",")]


def measure(rows: int, ncols: int) -> None:
    x = (torch.randn(rows, ncols, device="cuda") + 3).to(torch.bfloat16)
    w, b = (torch.randn(ncols, device="cuda").to(torch.bfloat16) for _ in range(2))
    out = torch.empty_like(x)
    if not bias:
        b.zero_()
    host = {"x": x.float().cpu().numpy(), "w": w.float().cpu().numpy(), "b": b.float().cpu().numpy()}
    want = L._oracle(host)
    bb = b if bias else None
    nbytes = 2 * x.numel() * 2
    sms = processors("cuda")
    configs = [(e, late, 0) for e in epts for late in (False, True)]
    configs += [(e, False, k * sms) for e in epts for k in (1, 2, 4)
                if plan_rows(rows, ncols, 2, e).chunks == 1 and 2 * k * sms <= rows]
    for ept, late, ahead in configs:
        p = plan_rows(rows, ncols, 2, ept)

        def run(p=p, late=late, ahead=ahead):
            L._launch_plan(x, w, bb, out, L.EPS, p, "cuda", late, ahead)

        out.fill_(float("nan"))
        run()
        torch.cuda.synchronize()
        err = np.abs(out.float().cpu().numpy() - want).max()
        us = event_seconds(run, 20, before=flush) * 1e6
        tag = "" if bias else " (no bias)"
        print(f"layer_norm{tag} {rows}x{ncols} EPT {ept} LATE {int(late)} AHEAD {ahead} "
              f"(block {p.block}, per {p.per}): "
              f"{us:.1f} us = {nbytes / us / 1e3:.0f} GB/s, max err {err:.3g}")
    ref = lambda: torch.nn.functional.layer_norm(x, (ncols,), w, bb, eps=L.EPS)  # noqa: E731
    us = event_seconds(ref, 20, before=flush) * 1e6
    print(f"layer_norm {rows}x{ncols} torch: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")
    try:
        d = {"x": x, "w": w, "b": b, "ref_out": torch.empty_like(x)}
        tri = peers.resolve("triton", ("layer_norm", {"eps": L.EPS, "b": "b" if bias else None}))
        us = event_seconds(lambda: tri(d), 20, before=flush) * 1e6
        print(f"layer_norm {rows}x{ncols} triton: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")
    except Exception as exc:  # noqa: BLE001 - a missing Triton is a line, not a failure
        print(f"layer_norm {rows}x{ncols} triton: not timed ({exc})")

    N.launch_rms_norm(x, w, out, 1e-6, "cuda")  # tuned once
    us = event_seconds(lambda: N.launch_rms_norm(x, w, out, 1e-6, "cuda"), 20, before=flush) * 1e6
    print(f"rms_norm {rows}x{ncols} (std, tuned): {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")


for r, c in shapes:
    measure(r, c)
