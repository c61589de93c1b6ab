"""Issue 14 on the H200, in one process: Iron's std GEMM (matrix fragments, mma.sync) beside cuBLAS (torch.matmul)
and Triton's tl.dot peer, bf16 and f16, A @ B and A @ B^T, at 4096^3 and 8192^3; the SASS of the GEMM (HMMA count,
registers, spills); each kernel checked against an f32 torch reference. Writes JSON to argv[1].

Timing: iron.runtime.cuda_timing.event_seconds (CUDA events with a sleep kernel queued ahead: the GPU's time), median
of repeats after warm-up; inputs rotated between two sets so the 60 MB L2 never holds the next run's operands.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime

import torch

import iron
from iron.codegen import emit_cuda, nvrtc
from iron.runtime.cuda_timing import event_seconds
from iron.std import gemm as G

DT = {"bf16": torch.bfloat16, "f16": torch.float16}


def tflops(m: int, n: int, k: int, seconds: float) -> float:
    return 2 * m * n * k / seconds / 1e12


def triton_peer():
    try:
        from iron.harness.peers import resolve

        return resolve("triton", ("gemm", {}))
    except Exception as e:  # no Triton here, or the peer failed to import: the column stays empty
        print("triton peer unavailable:", type(e).__name__, e, flush=True)
        return None


def row(dtype: str, m: int, n: int, k: int, trans_b: bool, peer) -> dict:
    dt = DT[dtype]
    sets = [(torch.randn(m, k, dtype=dt, device="cuda"),
             torch.randn(n, k, dtype=dt, device="cuda") if trans_b else torch.randn(k, n, dtype=dt, device="cuda"))
            for _ in range(2)]
    outs = [torch.full((m, n), float("nan"), dtype=dt, device="cuda") for _ in range(2)]
    a, b = sets[0]
    ref = a.float() @ (b.float().T if trans_b else b.float())
    G.launch(a, b, outs[0], trans_b, "cuda")
    torch.cuda.synchronize()
    err = float((outs[0].float() - ref).norm() / ref.norm())
    state = {"i": 0}

    def run_iron():
        i = state["i"] = state["i"] ^ 1
        G.launch(sets[i][0], sets[i][1], outs[i], trans_b, "cuda")

    def run_torch():
        i = state["i"] = state["i"] ^ 1
        x, y = sets[i]
        torch.matmul(x, y.T if trans_b else y, out=outs[i])

    out = {"dtype": dtype, "shape": [m, n, k], "trans_b": trans_b, "iron_rel_err": err}
    out.update(_wg_row(a, b, outs, ref, trans_b, run_iron, (m, n, k)))
    for name, fn in (("iron", run_iron), ("torch", run_torch)):
        s = event_seconds(fn, 10, 3)
        out[f"{name}_ms"] = s * 1e3
        out[f"{name}_tflops"] = tflops(m, n, k, s)
    if peer is not None and not trans_b:
        try:
            got = peer({"a": a, "b": b, "ref_out": outs[1]})
            got = outs[1] if got is None else got
            out["triton_rel_err"] = float((got.float() - ref).norm() / ref.norm())

            def run_triton():
                i = state["i"] = state["i"] ^ 1
                peer({"a": sets[i][0], "b": sets[i][1], "ref_out": outs[i]})

            s = event_seconds(run_triton, 10, 3)
            out["triton_ms"], out["triton_tflops"] = s * 1e3, tflops(m, n, k, s)
        except Exception as e:
            out["triton_error"] = f"{type(e).__name__}: {e}"[:300]
    print(json.dumps(out), flush=True)
    return out


def _wg_row(a, b, outs, ref, trans_b: bool, run_iron, mnk) -> dict:
    """The wgmma path (gemm_wg, IRON_WGMMA=1), checked and timed like the rest; an error is recorded, not raised."""
    out: dict = {}
    os.environ["IRON_WGMMA"] = "1"
    try:
        outs[0].fill_(float("nan"))
        G.launch(a, b, outs[0], trans_b, "cuda")
        torch.cuda.synchronize()
        out["iron_wg_rel_err"] = float((outs[0].float() - ref).norm() / ref.norm())
        s = event_seconds(run_iron, 10, 3)
        out["iron_wg_ms"], out["iron_wg_tflops"] = s * 1e3, tflops(*mnk, s)
        out["iron_wg_config"] = dict(__import__("iron.frontend.autotune", fromlist=["LAST"]).LAST)
    except Exception as e:
        out["iron_wg_error"] = f"{type(e).__name__}: {e}"[:600]
    finally:
        os.environ["IRON_WGMMA"] = "0"
    return out


def sass() -> dict:
    """HMMA/HGMMA counts, registers and spills of the bf16 GEMM variants the bench launches: gemm (mma.sync, NVRTC
    sm_90) and gemm_wg (wgmma, sm_90a), through cuobjdump."""
    variant = G.gemm.variant(iron.bf16, (*G.CONFIGS["cuda"][0], False))
    info = _sass_of(emit_cuda(variant.kernel), "sm_90")
    try:
        info["gemm_wg"] = _sass_of(emit_cuda(G.gemm_wg.variant(iron.bf16, (*G.HOPPER[0][:4], False)).kernel,
                                            arch="sm_90"),
                               "sm_90a")
    except Exception as e:
        info["gemm_wg"] = {"error": f"{type(e).__name__}: {e}"[:600]}
    return info


def _sass_of(source, arch: str) -> dict:
    info = {"arch": arch, "resources": nvrtc.resource_report(source, arch)}
    tool = shutil.which("cuobjdump")
    if tool:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gemm.cubin")
            with open(path, "wb") as f:
                f.write(nvrtc.compile_cuda(source, arch))
            text = subprocess.run([tool, "--dump-sass", path], capture_output=True, text=True).stdout
        info["hgmma"] = text.count("HGMMA")
        info["hmma"] = text.count("HMMA")  # "HGMMA" does not contain "HMMA"
        info["lds"] = text.count("LDS")
        info["ldg_128"] = text.count("LDG.E.128")
        info["ldgsts"] = text.count("LDGSTS")
        info["ldsm"] = text.count("LDSM")
        info["sass_lines"] = len(text.splitlines())
    return info


def sweep(size: int, configs) -> list[dict]:
    """Each (BM, BN, BK, WM, WN, STAGES) of the mma.sync GEMM timed alone at size^3 bf16 (A @ B), checked first."""
    rows = []
    sets = [(torch.randn(size, size, dtype=torch.bfloat16, device="cuda"),
             torch.randn(size, size, dtype=torch.bfloat16, device="cuda")) for _ in range(2)]
    out = torch.empty(size, size, dtype=torch.bfloat16, device="cuda")
    ref = sets[0][0].float() @ sets[0][1].float()
    for cfg in configs:
        rows.append(_time_config(cfg, size, sets, out, ref))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _time_config(cfg, size: int, sets, out, ref) -> dict:
    bm, bn, bk, wm, wn, st = cfg
    g = wm * wn * 32
    grid = (-(-size // bn) * g, -(-size // bm))
    state = {"i": 0}

    def run(i=None):
        i = state["i"] = state["i"] ^ 1 if i is None else i
        G.gemm[grid, (g, 1)](sets[i][0], sets[i][1], out, size, size, size, 0, 0, 0, bm, bn, bk, wm, wn, st, False,
                             backend="cuda")
    try:
        out.fill_(float("nan"))
        run(0)
        torch.cuda.synchronize()
        err = float((out.float() - ref).norm() / ref.norm())
        s = event_seconds(run, 5, 2)
        return {"config": cfg, "size": size, "rel_err": err, "ms": s * 1e3, "tflops": tflops(size, size, size, s)}
    except Exception as e:
        return {"config": cfg, "size": size, "error": f"{type(e).__name__}: {e}"[:300]}


def wg_sweep(size: int, configs) -> list[dict]:
    """Each (BM, BN, STAGES, DEEP, PERSIST) of gemm_wg (wgmma) timed alone at size^3 bf16 (A @ B), checked first
    (DEEP and PERSIST 0 where left out)."""
    rows = []
    sets = [(torch.randn(size, size, dtype=torch.bfloat16, device="cuda"),
             torch.randn(size, size, dtype=torch.bfloat16, device="cuda")) for _ in range(2)]
    out = torch.empty(size, size, dtype=torch.bfloat16, device="cuda")
    ref = sets[0][0].float() @ sets[0][1].float()
    for bm, bn, st, *rest in configs:
        deep, persist = (list(rest) + [0, 0])[:2]
        g = bm // 64 * 128
        grid = (-(-size // bn) * g, -(-size // bm), 1)
        kern = G.gemm_wg
        if persist:  # gemm_wgp: one group per multiprocessor
            grid, kern = (min(grid[0] // g * grid[1], G._processors("cuda")) * g, 1, 1), G.gemm_wgp
        state = {"i": 0}

        def run(i=None, bm=bm, bn=bn, st=st, deep=deep, g=g, grid=grid, state=state, kern=kern):
            i = state["i"] = state["i"] ^ 1 if i is None else i
            kern[grid, (g, 1, 1)](sets[i][0].reshape(-1), sets[i][1].reshape(-1), out.reshape(-1), size, size,
                                  size, 0, 0, 0, bm, bn, st, deep, False, backend="cuda")
        try:
            out.fill_(float("nan"))
            run(0)
            torch.cuda.synchronize()
            err = float((out.float() - ref).norm() / ref.norm())
            s = event_seconds(run, 5, 2)
            rows.append({"wg_config": [bm, bn, st, deep, persist], "size": size, "rel_err": err, "ms": s * 1e3,
                         "tflops": tflops(size, size, size, s)})
        except Exception as e:
            rows.append({"wg_config": [bm, bn, st, deep, persist], "size": size,
                         "error": f"{type(e).__name__}: {e}"[:600]})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def f32_row(size: int) -> dict:
    """std/gemm_f32 (FFMA, no TF32) beside torch.matmul with TF32 off, size^3, A @ B."""
    from iron.std import gemm_f32 as G32

    torch.backends.cuda.matmul.allow_tf32 = False
    sets = [(torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")) for _ in range(2)]
    outs = [torch.full((size, size), float("nan"), device="cuda") for _ in range(2)]
    ref = sets[0][0].double() @ sets[0][1].double()
    out = {"dtype": "f32", "shape": [size] * 3}
    try:
        G32.launch(sets[0][0], sets[0][1], outs[0], False, "cuda")
        torch.cuda.synchronize()
        out["iron_rel_err"] = float((outs[0].double() - ref).norm() / ref.norm())
        state = {"i": 0}

        def run_iron():
            i = state["i"] = state["i"] ^ 1
            G32.launch(sets[i][0], sets[i][1], outs[i], False, "cuda")

        def run_torch():
            i = state["i"] = state["i"] ^ 1
            torch.matmul(sets[i][0], sets[i][1], out=outs[i])

        for name, fn in (("iron", run_iron), ("torch", run_torch)):
            s = event_seconds(fn, 10, 3)
            out[f"{name}_ms"], out[f"{name}_tflops"] = s * 1e3, tflops(size, size, size, s)
        out["iron_config"] = dict(__import__("iron.frontend.autotune", fromlist=["LAST"]).LAST)
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"[:600]
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    result = {"date": datetime.now(UTC).isoformat(), "gpu": torch.cuda.get_device_name(),
              "git_sha": os.environ.get("IRON_GIT_SHA", "unknown"), "command": " ".join(sys.argv),
              "torch": torch.__version__, "rows": []}
    if os.environ.get("IRON_TILE_SWEEP"):
        extra = [(128, 256, 64, 2, 4, 3), (256, 128, 64, 4, 2, 3), (128, 128, 64, 2, 4, 4), (128, 128, 32, 2, 4, 4)]
        result["sweep"] = sweep(8192, G.CONFIGS["cuda"] + extra) + sweep(4096, G.CONFIGS["cuda"][:3])
    if os.environ.get("IRON_WG_SWEEP"):  # only the gemm_wg configurations, at the sizes given (e.g. "4096,8192")
        extra = [(128, 256, 4, 1, 0), (128, 256, 3, 1, 0), (128, 256, 4, 1, 1), (128, 256, 3, 1, 1),
                 (128, 192, 4, 1, 0)]
        result["wg_sweep"] = [r for n in os.environ["IRON_WG_SWEEP"].split(",")
                              for r in wg_sweep(int(n), G.HOPPER + extra)]
        with open(sys.argv[1], "w") as f:
            json.dump(result, f, indent=1)
        return
    result["wg_sweep"] = wg_sweep(8192, G.HOPPER + [(128, 192, 4, 1, 0)])
    result["sass"] = sass()
    print(json.dumps(result["sass"]), flush=True)
    peer = triton_peer()
    for dtype in ("bf16", "f16"):
        for size in (4096, 8192):
            for trans_b in (False, True):
                if dtype == "f16" and trans_b:
                    continue
                result["rows"].append(row(dtype, size, size, size, trans_b, peer))
    result["f32"] = [f32_row(4096)]
    with open(sys.argv[1], "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
