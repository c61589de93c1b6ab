"""The H200 measurements of issue #3, in one process: exp over 256M elements (f32/f16/bf16) against the measured
device-to-device copy ceiling and torch.exp; host overhead of launching a cached kernel from Python on torch tensors
(Iron, torch, Triton); CUDA-graph replay of 100 launches against 100 launches. Writes JSON to argv[1].

Timing: CUDA events around the region with a sleep kernel queued ahead (the GPU's time, not the host's submission:
iron.runtime.cuda_timing), warm-up first, median of repeats; exp rows also timed from an idle GPU, as sessions 1-3 did;
inputs rotated among several buffers so the 60 MB L2 cannot serve them (each exp buffer is >= 512 MB anyway).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

import torch

import iron
import iron.cuda
import iron.runtime
from iron import T, Tensor, exp, kernel, program_id
from iron.runtime.cuda_timing import event_seconds


@kernel
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    out[idx] = exp(a[idx])


@kernel
def tiny(a: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = a[i] + 1.0


DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def event_time_ms(fn, repeats: int = 20, warmup: int = 3, idle_start: bool = False) -> float:
    """Median GPU milliseconds of ``fn`` by CUDA events, with a sleep kernel queued ahead so that the host's launch
    latency is not in the interval (iron.runtime.cuda_timing); ``idle_start=True``: without it, as before."""
    return event_seconds(fn, repeats, warmup, idle_start=idle_start) * 1e3


def copy_ceiling_gbps(n_bytes: int = 4 << 30) -> float:
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = event_time_ms(lambda: dst.copy_(src), repeats=30)
    return 2 * n_bytes / (ms * 1e-3) / 1e9


def exp_row(name: str, dt, n: int, ceiling: float) -> dict:
    sets = [torch.randn(n, dtype=dt, device="cuda") for _ in range(2)]
    outs = [torch.full_like(sets[0], float("nan")) for _ in range(2)]
    turn = [0]

    def run_iron():
        k = turn[0] % 2
        turn[0] += 1
        iron_exp[n](sets[k], outs[k])

    def run_torch():
        k = turn[0] % 2
        turn[0] += 1
        torch.exp(sets[k], out=outs[k])

    iron_exp[n](sets[0], outs[0])
    torch.cuda.synchronize()
    ref = torch.exp(sets[0].double())
    err = (outs[0].double() - ref).abs()
    tol = {"f32": 2e-6, "f16": 1e-3, "bf16": 8e-3}[name]
    ok = bool(torch.isfinite(outs[0]).all()) and bool((err <= tol * ref.abs() + 1e-30).all())
    t_iron = event_time_ms(run_iron)
    t_torch = event_time_ms(run_torch)
    # the same timed from an idle GPU (the host's submission in the interval), as sessions 1-3 measured
    idle = {"iron": event_time_ms(run_iron, idle_start=True), "torch": event_time_ms(run_torch, idle_start=True)}
    nbytes = 2 * n * sets[0].element_size()

    def run_copy():  # a copy that moves the same bytes as this row: the ceiling at this size
        k = turn[0] % 2
        turn[0] += 1
        outs[k].copy_(sets[k])

    t_copy = event_time_ms(run_copy)

    def ten(fn):  # ten launches between one pair of events: launch latency overlaps the previous kernel
        return lambda: [fn() for _ in range(10)]

    b2b = {what: event_time_ms(ten(fn), repeats=10) / 10 for what, fn in
           (("iron", run_iron), ("torch", run_torch), ("copy", run_copy))}
    return {
        "kernel": "std/unary/exp", "shape": [n], "dtype": name, "iron_ms": t_iron, "torch_ms": t_torch,
        "iron_gbps": nbytes / t_iron / 1e6, "torch_gbps": nbytes / t_torch / 1e6,
        "iron_pct_of_copy": 100 * nbytes / t_iron / 1e6 / ceiling, "max_rel_err": float((err / ref.abs()).max()),
        "ok": ok,
        # the same bytes copied (torch), timed the same way; and all three timed back to back (10 per event pair)
        "same_size_copy_ms": t_copy, "iron_pct_of_same_size_copy": 100 * t_copy / t_iron,
        "idle_start_ms": idle, "iron_pct_of_copy_idle_start": 100 * nbytes / idle["iron"] / 1e6 / ceiling,
        "back_to_back_ms": b2b, "iron_pct_of_copy_back_to_back": 100 * nbytes / b2b["iron"] / 1e6 / ceiling,
    }


def bench_exp(rows: list, ceiling: float) -> None:
    for name, dt in DT.items():
        rows.append(exp_row(name, dt, 256 << 20, ceiling))
        torch.cuda.empty_cache()


def sweep_exp_groups(ceiling: float) -> list:
    """Iron's exp at several group sizes, three rounds interleaved with torch, to separate tuning from noise."""
    n = 256 << 20
    out = []
    for name, dt in DT.items():
        a = torch.randn(n, dtype=dt, device="cuda")
        o = torch.empty_like(a)
        nbytes = 2 * n * a.element_size()
        for rnd in range(3):
            row = {"dtype": name, "round": rnd,
                   "torch_pct": 100 * nbytes / event_time_ms(lambda a=a, o=o: torch.exp(a, out=o)) / 1e6 / ceiling}
            for g in (128, 256, 512, 1024):
                ms = event_time_ms(lambda a=a, o=o, g=g: iron_exp[n, g](a, o))
                row[f"iron_pct_g{g}"] = 100 * nbytes / ms / 1e6 / ceiling
            out.append(row)
        del a, o
        torch.cuda.empty_cache()
    return out


def driver_floor_us() -> float:
    """The floor: cuLaunchKernel through ctypes on a prebuilt argv, nothing else (same batches as the others)."""
    import ctypes

    from iron.runtime.cuda_fast import _libcuda

    a = torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    tiny[1024](a, out)
    be = iron.runtime.get_backend("cuda")
    variant = tiny.variant(None, ())
    kern, blocks, block = be.geometry(variant, (1024, 1, 1), (256, 1, 1))
    slots = [ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int32(1024),
             ctypes.c_int32(1), ctypes.c_int32(1)]
    argv = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.pointer(x), ctypes.c_void_p) for x in slots])
    lib = _libcuda()
    stream = torch.cuda.current_stream().cuda_stream
    func = int(kern.handle)
    return host_overhead_us(lambda: lib.cuLaunchKernel(func, *blocks, *block, 0, stream, argv, None))


def host_overhead_us(fn, batches: int = 40, batch: int = 250) -> float:
    """Host time per launch: launches are enqueued in batches shorter than the driver's queue and the GPU is
    drained between batches, so the figure is the host's cost, not the GPU's throughput on tiny kernels."""
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        per.append((time.perf_counter() - t0) / batch * 1e6)
    torch.cuda.synchronize()
    return statistics.median(per)


def loop_us(fn, n: int = 10000, repeats: int = 5) -> dict:
    """The issue's own method: ``n`` launches in a row, host wall-clock per launch (median of ``repeats`` loops);
    beside it the GPU's time per launch over the same loop (CUDA events), which shows whether the GPU, not the host,
    set the pace (the two would then be equal)."""
    for _ in range(200):
        fn()
    host, gpu = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host.append((time.perf_counter() - t0) / n * 1e6)
        end.record()
        end.synchronize()
        gpu.append(start.elapsed_time(end) * 1e3 / n)
    return {"host_us": statistics.median(host), "gpu_us": statistics.median(gpu)}


def bench_launch(result: dict) -> None:
    a = torch.randn(1024, device="cuda")
    out = torch.empty_like(a)
    import iron.runtime.cuda_fast as cf

    result["iron_launch_us"] = host_overhead_us(lambda: tiny[1024](a, out))
    result["iron_launcher"] = "c" if cf.compiled_module() is not None else f"python ({cf.EXT_REASON})"
    k = tiny[1024]  # what k[grid] is after the first launch (the compiled Direct launcher where it builds)
    result["iron_launch_held_object_us"] = host_overhead_us(lambda: k(a, out))
    result["iron_k_grid_type"] = type(k).__name__
    # the same with the generated-Python launcher, for comparison (a fresh k[grid] object: a fresh fast launcher)
    os.environ["IRON_CUDA_LAUNCHER"] = "python"
    tiny._launchers.clear()
    result["iron_launch_python_us"] = host_overhead_us(lambda: tiny[1024](a, out))
    del os.environ["IRON_CUDA_LAUNCHER"]
    tiny._launchers.clear()
    b = torch.randn(1024, device="cuda")
    out.fill_(float("nan"))
    tiny[1024](b, out)  # the fast path again, on another tensor: must read b, not a stale pointer
    torch.cuda.synchronize()
    result["fast_path_correct"] = bool(torch.equal(out, b + 1.0))
    result["torch_launch_us"] = host_overhead_us(lambda: torch.add(a, 1.0, out=out))
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def tiny_triton(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) + 1.0, mask=m)

        result["triton_launch_us"] = host_overhead_us(lambda: tiny_triton[(1,)](a, out, 1024, BLOCK=1024))
        result["loop_10k"] = {"triton": loop_us(lambda: tiny_triton[(1,)](a, out, 1024, BLOCK=1024))}
        result["triton_version"] = triton.__version__
    except Exception as e:  # Triton missing or broken: say so, do not fail the run
        result["triton_launch_us"] = None
        result["triton_error"] = f"{type(e).__name__}: {e}"
    loops = result.setdefault("loop_10k", {})
    loops["iron"] = loop_us(lambda: tiny[1024](a, out))
    loops["torch"] = loop_us(lambda: torch.add(a, 1.0, out=out))
    # graph replay of 100 launches vs 100 launches
    tiny[1024](a, out)
    torch.cuda.synchronize()
    with iron.cuda.graph() as g:
        for _ in range(100):
            tiny[1024](a, out)
    iron.cuda.synchronize()

    def hundred():
        for _ in range(100):
            tiny[1024](a, out)

    def wall(fn, reps=50):
        fn()
        torch.cuda.synchronize()
        iron.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        iron.cuda.synchronize()
        return (time.perf_counter() - t0) / reps * 1e6

    result["hundred_launches_us"] = wall(hundred)
    result["graph_replay_100_us"] = wall(g.launch)
    a.fill_(2.0)
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    g.launch()
    iron.cuda.synchronize()
    result["graph_replay_correct"] = bool((out == 3.0).all())


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--launch-only"]
    path = args[0] if args else "gpu_bench.json"
    if "--launch-only" in sys.argv:  # only the launch figures (scripts/gpu_check.sh launch)
        launch: dict = {"gpu": torch.cuda.get_device_name(), "git_sha": os.environ.get("IRON_GIT_SHA"),
                        "date": datetime.now(UTC).isoformat(),
                        "command": "scripts/gpu_check.sh launch (python3 scripts/gpu_bench.py --launch-only)"}
        bench_launch(launch)
        with open(path, "w") as f:
            json.dump(launch, f, indent=2)
        print(json.dumps(launch, indent=1))
        return
    ceiling = copy_ceiling_gbps()
    rows: list = []
    bench_exp(rows, ceiling)
    launch: dict = {}
    bench_launch(launch)
    launch["driver_floor_us"] = driver_floor_us()
    sweep = sweep_exp_groups(ceiling)
    be = iron.runtime.get_backend("cuda")
    doc = {
        "date": datetime.now(UTC).isoformat(), "gpu": torch.cuda.get_device_name(), "device": be.info(),
        "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip(),
        "torch": torch.__version__, "python": platform.python_version(), "git_sha": os.environ.get("IRON_GIT_SHA"),
        "command": "scripts/gpu_check.sh (python3 scripts/gpu_bench.py)", "copy_ceiling_gbps": ceiling,
        "exp": rows, "exp_group_sweep": sweep, "launch": launch,
        "exp_stats": {name: be.kernel_stats(iron_exp.variant(getattr(iron, name)), 256) for name in DT},
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    print(f"copy ceiling {ceiling:.0f} GB/s")
    for r in rows:
        print(f"exp {r['dtype']:>4}: iron {r['iron_gbps']:7.0f} GB/s ({r['iron_pct_of_copy']:.1f}% of copy), "
              f"torch {r['torch_gbps']:7.0f} GB/s, ok={r['ok']}, max rel err {r['max_rel_err']:.2e}; "
              f"{r['iron_pct_of_same_size_copy']:.1f}% of a same-size copy, "
              f"{r['iron_pct_of_copy_back_to_back']:.1f}% of copy back to back, "
              f"{r['iron_pct_of_copy_idle_start']:.1f}% timed from an idle GPU")
    print(json.dumps(launch, indent=1))
    for r in sweep:
        print({k: round(v, 1) if isinstance(v, float) else v for k, v in r.items()})


if __name__ == "__main__":
    main()
