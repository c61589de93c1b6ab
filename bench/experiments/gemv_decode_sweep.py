"""The Llama-3.2-1B decode GEMVs (bf16, y = A x) under every configuration launch_gemv's autotuning times on CUDA: the
group kernel's (std/gemv) and the SIMD-group kernel's (std/gemv_warp), each checked against float64 first, then timed
alone beside torch (torch.mv, F.linear; for the GLU shape also silu(gate) * up then torch.mv) and a device copy of A's
bytes (the bandwidth ceiling). CUDA events with a sleep kernel queued ahead (iron.runtime.cuda_timing: no host
latency in a sample), median of REPEATS launches, inputs rotated over copies spanning > 4x the L2 so that no launch
reads what the previous one left there. Prints one JSON line per row and writes them all to argv[1]; without a CUDA
device it says why, writes that, and exits 0.

    python bench/experiments/gemv_decode_sweep.py OUT.json        (GEMV_SWEEP_REPEATS, default 100)
"""

# ruff: noqa: B023 - the closures run in the iteration that defines them
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, "src")
from iron.runtime import unavailable_reason  # noqa: E402

#: (name, rows, columns, glu): the decode step's GEMVs (down multiplies silu(gate) * up, fused)
SHAPES = [("qkv", 3072, 2048, False), ("o", 2048, 2048, False), ("gate_up", 16384, 2048, False),
          ("down", 2048, 8192, True), ("lm_head", 128256, 2048, False)]
REPEATS = max(50, int(os.environ.get("GEMV_SWEEP_REPEATS", "100")))
L2_FACTOR = 4  # the inputs' copies together span this many L2s
MAX_COPIES = 64


def _git_sha() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _emit(rows: list, row: dict) -> None:
    print(json.dumps(row), flush=True)
    rows.append(row)


def _write(path: str, meta: dict, rows: list) -> None:
    with open(path, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


def _why_not() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return unavailable_reason("cuda")


def _copies(torch, nrows: int, ncols: int, glu: bool) -> list[tuple]:
    """(A, x, y) sets: the first random, the rest clones, together > L2_FACTOR x the L2 (at most MAX_COPIES)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    a = torch.randn(nrows, ncols, device="cuda").to(torch.bfloat16)
    x = torch.randn(2 * ncols if glu else ncols, device="cuda").to(torch.bfloat16)
    nbytes = (a.numel() + x.numel() + nrows) * 2
    count = min(MAX_COPIES, max(1, -(-L2_FACTOR * l2 // nbytes)))
    sets = [(a, x, torch.empty(nrows, dtype=torch.bfloat16, device="cuda"))]
    sets += [(a.clone(), x.clone(), torch.empty(nrows, dtype=torch.bfloat16, device="cuda")) for _ in range(count - 1)]
    return sets


def _rotating(fn, sets: list):
    """A callable that runs fn(*sets[i]) for i = 0, 1, 2, ... cyclically."""
    count = [0]

    def step():
        fn(*sets[count[0] % len(sets)])
        count[0] += 1

    return step


def _oracle(torch, a, x, glu: bool):
    """float64 (want, sum |a||v|, the gated vector as bf16 values) on the device."""
    ncols = a.shape[1]
    xv = x.double()
    if glu:
        g, u = xv[:ncols], xv[ncols:]
        xv = (g / (1.0 + torch.exp(-g)) * u).to(torch.bfloat16).double()  # rounded once, as swiglu stores it
    ad = a.double()
    want = ad @ xv
    size = ad.abs() @ xv.abs()
    del ad
    return want, size


def _error(torch, y, want, size, ncols: int, glu: bool) -> tuple[float, bool]:
    """(max |y - want| / bound, within bound): the f32 sum's error, y's bf16 rounding, one bf16 unit per gated term."""
    bound = size * ((2.0**-7 if glu else 0.0) + ncols * 2.0**-24) + 2.0**-8 * want.abs() + 1e-30
    err = (y.double() - want).abs()
    ratio = float((err / bound).max())
    return ratio, bool(torch.isfinite(y.float()).all()) and ratio <= 1.0


def main(out: str) -> None:
    meta = {"command": " ".join([sys.executable, *sys.argv]), "git_sha": _git_sha(), "repeats": REPEATS,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "timing": "CUDA events, sleep kernel ahead, median"}
    rows: list[dict] = []
    why = _why_not()
    if why is not None:
        meta["skipped"] = why
        print(f"gemv_decode_sweep: skipped ({why})", flush=True)
        _write(out, meta, rows)
        return
    import torch
    import torch.nn.functional as F

    from iron.frontend import autotune
    from iron.runtime import cuda_timing
    from iron.std import gemv as G

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    meta.update({"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
                 "l2_bytes": getattr(props, "L2_cache_size", None), "sms": props.multi_processor_count})
    torch.manual_seed(0)
    total = {}  # the fastest Iron time per shape (the decode step's share)
    for name, nrows, ncols, glu in SHAPES:
        sets = _copies(torch, nrows, ncols, glu)
        a, x, _ = sets[0]
        want, size = _oracle(torch, a, x, glu)
        nbytes = (a.numel() + x.numel() + nrows) * 2
        base = {"shape": name, "rows": nrows, "cols": ncols, "glu": glu, "bytes": nbytes, "copies": len(sets)}

        def timed(fn) -> float:
            return cuda_timing.event_seconds(_rotating(fn, sets), REPEATS, warmup=3)

        def result(impl: str, config, seconds: float, **extra) -> dict:
            return {**base, "impl": impl, "config": config, "us": seconds * 1e6, "gbps": nbytes / seconds / 1e9,
                    "lead_ok": cuda_timing.last_lead_ok, **extra}

        # the bandwidth ceiling: a device copy of A's bytes (read + write: 2 x bytes moved)
        dst = [torch.empty_like(s[0]) for s in sets]
        count = [0]

        def copy(a_, x_, y_):
            dst[count[0] % len(dst)].copy_(a_)
            count[0] += 1

        t = timed(copy)
        _emit(rows, {**base, "impl": "copy", "config": None, "us": t * 1e6, "gbps": 2 * a.numel() * 2 / t / 1e9})
        dst.clear()

        # torch: the GEMV alone (on the gated vector for down), and for down the unfused pair it replaces
        if glu:
            acts = [(F.silu(s[1][:ncols].float()) * s[1][ncols:].float()).to(torch.bfloat16) for s in sets]
            k = [0]

            def mv_act(a_, x_, y_):
                torch.mv(a_, acts[k[0] % len(acts)], out=y_)
                k[0] += 1

            def pair(a_, x_, y_):
                act = (F.silu(x_[:ncols]) * x_[ncols:])
                torch.mv(a_, act, out=y_)

            _emit(rows, result("torch.mv", "on silu(gate)*up", timed(mv_act)))
            _emit(rows, result("torch silu*up + mv", None, timed(pair)))
        else:
            _emit(rows, result("torch.mv", None, timed(lambda a_, x_, y_: torch.mv(a_, x_, out=y_))))
            _emit(rows, result("F.linear", None, timed(lambda a_, x_, y_: F.linear(x_[None], a_))))

        # every configuration autotuning would time, checked then timed
        best = None
        for cfg in G.gemv_configs("cuda", nrows, ncols, 2):
            kernel = "gemv_warp" if "WARPS" in cfg else "gemv"
            y = sets[0][2]
            y.fill_(float("nan"))
            try:
                ran = G.launch_config(cfg, a, x, y, "cuda", glu)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - a configuration the device refuses is reported, not fatal
                _emit(rows, {**base, "impl": kernel, "config": cfg, "error": f"{type(e).__name__}: {e}"})
                continue
            ratio, ok = _error(torch, y, want, size, ncols, glu)
            t = timed(lambda a_, x_, y_: G.launch_config(cfg, a_, x_, y_, "cuda", glu))
            row = result(kernel, cfg, t, ran=list(ran), err_over_bound=ratio, ok=ok)
            _emit(rows, row)
            if ok and (best is None or t < best["us"] * 1e-6):
                best = row
        total[name] = best["us"] if best else None

        # what launch_gemv's own autotuning picks (5 repeats per configuration, cached in autotune.json)
        y = sets[0][2]
        y.fill_(float("nan"))
        ran = G.launch_gemv(a, x, y, "cuda", glu=glu)
        torch.cuda.synchronize()
        ratio, ok = _error(torch, y, want, size, ncols, glu)
        t = timed(lambda a_, x_, y_: G.launch_gemv(a_, x_, y_, "cuda", glu=glu))
        _emit(rows, result("launch_gemv (autotuned)", dict(autotune.LAST), t, ran=list(ran), err_over_bound=ratio,
                           ok=ok, best_config=best["config"] if best else None))
        torch.cuda.empty_cache()
    meta["best_us_per_shape"] = total
    meta["best_us_sum"] = sum(v for v in total.values() if v is not None)
    print(json.dumps({"best_us_per_shape": total, "sum_us": meta["best_us_sum"]}), flush=True)
    _write(out, meta, rows)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
