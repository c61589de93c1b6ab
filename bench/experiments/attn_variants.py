"""Where attn_prefill_wg's time goes, on the H200: its emitted CUDA source (NC 2, WG 2, STAGES 2, PIPE 0, causal, bf16)
is edited textually and each variant is timed beside torch SDPA at 4096 x 32 x 8 x 128 and 2048 x 32 x 8 x 64 (CUDA
events, median of 20 after 3 warm-ups), checked against SDPA first. One variant per subprocess (clean caches).

    python bench/experiments/attn_variants.py OUT.json          # every variant below
    python bench/experiments/attn_variants.py --one NAME EDITS

Edits (comma-separated):
- ``maskall``: every block masked, as before d8e82ed (``if (j < nfree)`` made false): what skipping the mask on whole
  blocks gained;
- ``pingpong``: FlashAttention-3's warpgroup ping-pong with named barriers (``bar.sync``/``bar.arrive``, ids 1 and 2,
  256 threads): warpgroup 1 issues its S = Q K^T after warpgroup 0 has issued its own, so one's softmax overlaps the
  other's GEMMs (the per-block ``__syncthreads`` stays: the stage release). Scheduling only: results unchanged;
- ``nobar``: no per-block ``__syncthreads`` (racy: a stage may be refilled while the other warpgroup reads it): a
  bound on what releasing stages per warpgroup (a producer warp, mbarrier ``empty`` barriers) could give.
Wrong variants are marked by their error and only bound what a right one could reach.
"""

# ruff: noqa: B023 - the closures run in the iteration that defines them
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace

VARIANTS = [("base", ""), ("maskall", "maskall"), ("pingpong", "pingpong"), ("nobar", "nobar"),
            ("pingpong_nobar", "pingpong,nobar")]
SHAPES = [(4096, 32, 8, 128), (2048, 32, 8, 64)]
CFG = (2, 2, 2, 0)  # NC, WG, STAGES, PIPE: the bench's configuration (std/attention.py WG_CONFIGS)
LOOP = "    for (int j = 0; j < nblk; ++j) {\n"
SCORES = "        // line 160: c0 = scores("
WAIT = "        // line 164: warpgroup_wait(0)\n"
BLOCK_BARRIER = "        // line 155: barrier()"


def edit(source: str, edits: list[str]) -> str:
    if "maskall" in edits:
        assert source.count("if (j < nfree) {") == 1
        source = source.replace("if (j < nfree) {", "if (false && j < nfree) {")
    if "pingpong" in edits:
        for mark in (LOOP, SCORES, WAIT):
            assert source.count(mark) == 1, mark
        source = source.replace(LOOP, '    if (wg == 1) asm volatile("bar.arrive 1, 256;" ::: "memory");\n' + LOOP)
        source = source.replace(SCORES, '        asm volatile("bar.sync %0, 256;" :: "r"(1 + wg) : "memory");\n'
                                + SCORES)
        source = source.replace(WAIT, '        if (wg == 0 || j + 1 < nblk) asm volatile("bar.arrive %0, 256;" :: '
                                      '"r"(2 - wg) : "memory");\n' + WAIT)
    if "nobar" in edits:
        at = source.index(BLOCK_BARRIER)
        end = source.index("__syncthreads();", at)
        source = source[:end] + source[end + len("__syncthreads();"):]
    return source


def one(name: str, edits: list[str]) -> None:
    import torch
    import torch.nn.functional as F
    from attn_wg_sweep import timed  # this folder is on sys.path when the script runs

    sys.path.insert(0, "src")
    import iron.codegen as cg
    from iron.std.attention_wg import attn_prefill_wg

    real = cg.emit_cuda

    def patched(kernel, *a, **kw):
        src = real(kernel, *a, **kw)
        return replace(src, source=edit(src.source, edits)) if kernel.name == "attn_prefill_wg" else src

    cg.emit_cuda = patched
    nc, wg, stages, pipe = CFG
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
        out = torch.full_like(q, float("nan"))
        g = wg * 128
        grid = (-(-n // (64 * wg)) * g, hq)

        def run():
            attn_prefill_wg[grid, (g, 1)](q, k, v, out, n, hq * d, hkv * d, hq, hkv, 1 / math.sqrt(d), d, nc, wg,
                                          stages, True, pipe, backend="cuda")

        run()
        torch.cuda.synchronize()
        err = (out.float() - ref).abs().max().item()
        ms, ref_ms = timed(run), timed(sdpa)
        print(json.dumps({"variant": name, "edits": edits, "shape": [n, hq, hkv, d], "ms": ms,
                          "tflops": flops / ms / 1e9, "sdpa_tflops": flops / ref_ms / 1e9,
                          "max_err_vs_sdpa": err}), flush=True)


def main(out: str) -> None:
    rows = []
    only = os.environ.get("ATTNVAR_ONLY")
    for name, edits in VARIANTS:
        if only and name not in only.split(","):
            continue
        try:
            p = subprocess.run([sys.executable, __file__, "--one", name, edits or "-"], capture_output=True, text=True,
                               timeout=120)
            got = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
            err = (p.stderr or p.stdout)[-800:]
        except subprocess.TimeoutExpired:  # a variant that hangs (a named barrier never met)
            got, err = [], "timed out after 120 s"
        rows += got or [{"variant": name, "error": err}]
        for r in got or rows[-1:]:
            print(r if "error" in r else f"{r['variant']:16s} {r['shape']} {r['tflops']:7.1f} TF/s "
                  f"(SDPA {r['sdpa_tflops']:.0f}) max err {r['max_err_vs_sdpa']:.3g}", flush=True)
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one(sys.argv[2], [] if sys.argv[3] == "-" else sys.argv[3].split(","))
    else:
        main(sys.argv[1])
