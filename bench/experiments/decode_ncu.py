"""std/attention/decode's split configurations one by one (bf16, B x L x HQ x HKV x D from DECODE_SHAPE, default
the issue's 32,8192,32,8,128; every sequence full), for ``ncu`` (scripts/gpu_check.sh decodencu): each
configuration ``split_configs`` offers CUDA, checked against torch SDPA and timed by CUDA events behind a sleep
kernel (``cuda_timing.event_seconds``, median of 10: GPU time, not the host's launch latency; the 1 GiB of K/V is
20 times the L2, so nothing stays cached), printed with its K/V read rate. ``DECODE_ONLY=i`` runs configuration i
alone, 4 times (the launches ncu profiles); ``pi`` the paged configuration i. Then (unless DECODE_PAGED=0) every
configuration again over a paged cache (pages of ``Dc.PAGE`` positions, a shuffled block table), beside its
contiguous time (issue 18's "paged decode within 90 % of contiguous")."""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, "src")
from iron.runtime.cuda_timing import event_seconds  # noqa: E402
from iron.std import attention_decode as Dc  # noqa: E402

b, n, hq, hkv, d = (int(x) for x in os.environ.get("DECODE_SHAPE", "32,8192,32,8,128").split(","))
q = torch.randn(b, hq, d, dtype=torch.bfloat16, device="cuda")
k = torch.randn(b, n, hkv, d, dtype=torch.bfloat16, device="cuda")
v = torch.randn(b, n, hkv, d, dtype=torch.bfloat16, device="cuda")
lens = torch.full((b,), n, dtype=torch.int32, device="cuda")
out = torch.empty_like(q)
configs = Dc.split_configs(d, hq // hkv, 2, None, n, "cuda")
only = os.environ.get("DECODE_ONLY")


def run(cfg):
    Dc.run_config(cfg, q, k, v, lens, lens, out, n, 0, n, False, None, "cuda")


def paged_cache():
    """K and V in shuffled pages of Dc.PAGE positions: (block table, pages of K, pages of V, pages a sequence)."""
    maxp = n // Dc.PAGE
    table = torch.randperm(b * maxp, device="cuda").to(torch.int32).reshape(b, maxp)
    kp = torch.empty(b * maxp, Dc.PAGE, hkv, d, dtype=k.dtype, device="cuda")
    vp = torch.empty_like(kp)
    kp[table.long()] = k.reshape(b, maxp, Dc.PAGE, hkv, d)
    vp[table.long()] = v.reshape(b, maxp, Dc.PAGE, hkv, d)
    return table, kp, vp, maxp


def run_paged(cfg, cache):
    table, kp, vp, maxp = cache
    Dc.run_config(cfg, q, kp, vp, table, lens, out, Dc.PAGE, maxp, n, True, None, "cuda")


if only is not None:
    if only.startswith("p"):
        cache = paged_cache()
        pcfg = Dc.split_configs(d, hq // hkv, 2, None, n, "cuda", paged=True)[int(only[1:])]
        for _ in range(4):
            run_paged(pcfg, cache)
    else:
        for _ in range(4):
            run(configs[int(only)])
    torch.cuda.synchronize()
    sys.exit(0)
kt, vt = k.transpose(1, 2), v.transpose(1, 2)  # (b, hkv, n, d)
want = torch.nn.functional.scaled_dot_product_attention(q.unsqueeze(2), kt, vt, enable_gqa=True).squeeze(2)
nbytes = 2 * k.numel() * k.element_size()


def timed(fn) -> float:
    """Median GPU time of fn over 10 repeats, in us, with a sleep kernel queued ahead of each so that the host's
    launch latency (run_config's Python: two launches) stays out of the interval (cuda_timing)."""
    return event_seconds(fn, 10) * 1e6


flat = {}
for i, cfg in enumerate(configs):
    out.fill_(float("nan"))  # a configuration that writes nothing shows as NaN, not the previous one's result
    run(cfg)
    torch.cuda.synchronize()
    err = (out.float() - want.float()).abs().max().item()
    us = flat[i] = timed(lambda cfg=cfg: run(cfg))
    print(f"decode config {i}: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s, max |err| vs SDPA {err:.3g}: {cfg}")
if os.environ.get("DECODE_PAGED", "1") != "0":
    cache = paged_cache()
    pconfigs = Dc.split_configs(d, hq // hkv, 2, None, n, "cuda", paged=True)
    for i, cfg in enumerate(pconfigs):
        def runp(cfg=cfg):
            run_paged(cfg, cache)
        out.fill_(float("nan"))
        runp()
        torch.cuda.synchronize()
        err = (out.float() - want.float()).abs().max().item()
        us = timed(runp)
        j = configs.index(cfg) if cfg in configs else None
        ratio = f", {flat[j] / us:.1%} of contiguous config {j}" if j is not None else ""
        print(f"paged config {i}: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s{ratio}, max |err| vs SDPA {err:.3g}: "
              f"{cfg}")
us = timed(lambda: torch.nn.functional.scaled_dot_product_attention(q.unsqueeze(2), kt, vt, enable_gqa=True))
print(f"torch SDPA: {us:.1f} us = {nbytes / us / 1e3:.0f} GB/s")
