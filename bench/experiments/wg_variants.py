"""What the std GEMM's wgmma kernel (gemm_wg) spends its time on, on the H200: the emitted CUDA source is edited
textually (diagnostic variants, some deliberately wrong, e.g. with no barrier) and each variant is timed at
4096^3 and 8192^3 bf16 beside torch (cuBLAS). One variant per subprocess (clean caches).

    python bench/experiments/wg_variants.py OUT.json            # every variant below
    python bench/experiments/wg_variants.py --one NAME BM BN STAGES DEEP EDITS

Edits (comma-separated): nofence (no fence.proxy.async before the loop's barrier), nobar (no barrier: racy),
noload (no cp.async: garbage), nostore (no epilogue), lb1 / lb2 (__launch_bounds__(threads, 1 or 2)).
Wrong variants are marked (rel_err) and only bound what the right one could reach.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

VARIANTS = [  # (name, BM, BN, STAGES, DEEP, edits)
    ("base", 128, 256, 4, 0, ""),
    ("deep", 128, 256, 4, 1, ""),
    ("deep_s3", 128, 256, 3, 1, ""),
    ("deep_nostore", 128, 256, 4, 1, "nostore"),
    ("deep_noload", 128, 256, 4, 1, "noload"),
    ("deep_nofence", 128, 256, 4, 1, "nofence"),
    ("deep_lb1", 128, 256, 4, 1, "lb1"),
    ("deep_t128x192", 128, 192, 4, 1, ""),
]
FENCE_BAR = 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); __syncthreads();'


def edit(source: str, edits: list[str], threads: int) -> str:
    if "nofence" in edits:
        assert FENCE_BAR in source
        source = source.replace(FENCE_BAR, "__syncthreads();")
    if "nobar" in edits:
        source = source.replace("__syncthreads();", "")
    if "noload" in edits:
        source = source.replace("iron_cp_async<16>(&", "if (M < 0) iron_cp_async<16>(&")
    if "nostore" in edits:
        source = source.replace("iron_wg_store_bf16(C,", "if (M < 0) iron_wg_store_bf16(C,")
    for n in (1, 2):
        if f"lb{n}" in edits:
            source = source.replace('extern "C" __global__ void gemm_wg(',
                                    f'extern "C" __global__ void __launch_bounds__({threads}, {n}) gemm_wg(')
    return source


def one(name: str, bm: int, bn: int, stages: int, deep: int, edits: list[str]) -> None:
    import torch

    sys.path.insert(0, "src")
    import iron.codegen as cg
    from iron.std import gemm as G

    threads = bm // 64 * 128
    real = cg.emit_cuda

    def patched(kernel, *a, **kw):
        src = real(kernel, *a, **kw)
        return replace(src, source=edit(src.source, edits, threads))

    cg.emit_cuda = patched
    for m in (4096, 8192):
        copies = 4 if m == 4096 else 1
        a = [torch.randn(m, m, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        b = [torch.randn(m, m, dtype=torch.bfloat16, device="cuda") for _ in range(copies)]
        c = torch.empty(m, m, dtype=torch.bfloat16, device="cuda")
        grid = (-(-m // bn) * threads, -(-m // bm), 1)

        def run(i, m=m, a=a, b=b, c=c, grid=grid):
            G.gemm_wg[grid, (threads, 1, 1)](a[i].view(-1), b[i].view(-1), c.view(-1), m, m, m, 0, 0, 0, bm, bn,
                                              stages, deep, False, backend="cuda")

        c.fill_(float("nan"))
        run(0)
        torch.cuda.synchronize()
        ref = a[0].float() @ b[0].float()
        rel = float((c.float() - ref).norm() / ref.norm())
        times = []
        for _rep in range(3):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ev[0].record()
            for i in range(12):
                run(i % copies)
            ev[1].record()
            torch.cuda.synchronize()
            times.append(ev[0].elapsed_time(ev[1]) / 12)
        ms = min(times)
        tref = []
        for _rep in range(3):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
            ev[0].record()
            for i in range(12):
                torch.matmul(a[i % copies], b[i % copies], out=c)
            ev[1].record()
            torch.cuda.synchronize()
            tref.append(ev[0].elapsed_time(ev[1]) / 12)
        print(json.dumps({"variant": name, "config": [bm, bn, stages, deep], "edits": edits, "m": m, "rel_err": rel,
                          "us": ms * 1e3, "tflops": 2 * m**3 / ms / 1e9, "torch_tflops": 2 * m**3 / min(tref) / 1e9}),
              flush=True)


def main(out: str) -> None:
    rows = []
    only = os.environ.get("WGVAR_ONLY")
    for name, bm, bn, stages, deep, edits in VARIANTS:
        if only and name not in only.split(","):
            continue
        p = subprocess.run([sys.executable, __file__, "--one", name, str(bm), str(bn), str(stages), str(deep),
                            edits or "-"],
                           capture_output=True, text=True, timeout=150)
        got = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        if not got:
            got = [{"variant": name, "error": (p.stderr or p.stdout)[-800:]}]
        for r in got:
            print(r if "error" in r else f"{r['variant']:26s} {r['m']:5d} {r['tflops']:7.1f} TF/s "
                  f"(torch {r['torch_tflops']:.0f}) rel_err {r['rel_err']:.2g}", flush=True)
        rows += got
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        n, bm, bn, st, dp, ed = sys.argv[2:8]
        one(n, int(bm), int(bn), int(st), int(dp), [] if ed == "-" else ed.split(","))
    else:
        main(sys.argv[1])
