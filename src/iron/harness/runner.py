"""``iron bench``: every registered kernel, shape and dtype beside its reference, checked against its oracle.

On the CPU backends: host wall-clock (median of repeats after a warm-up) against NumPy. On CUDA: inputs live on the
device as torch tensors, both Iron and the torch reference are timed with CUDA events (median after a warm-up), and
the output is copied back only to check it against the float64 oracle.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import time
from datetime import UTC, datetime

import numpy as np
from rich.console import Console
from rich.table import Table

from ..frontend import kernel
from ..ir import types as t
from ..lang import Tensor, f32, program_id
from .checking import compare


def _time(fn, repeats: int) -> float:
    fn()  # warm-up: compiles the variant
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _to_torch(arr: np.ndarray):
    import torch

    if arr.dtype == t.bf16.np_dtype:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(arr).cuda()


def _to_numpy(tensor, like: np.ndarray) -> np.ndarray:
    import torch

    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().numpy().view(like.dtype).reshape(like.shape)
    return tensor.cpu().numpy().reshape(like.shape)


def _event_time(fn, repeats: int) -> float:
    """Median GPU seconds of ``fn`` by CUDA events, the host's launch latency kept out (``cuda_timing``)."""
    from .cuda_timing import event_seconds

    return event_seconds(fn, repeats)


#: the inputs of a timed row are cycled through enough copies to span this many times the GPU's L2 cache, so that
#: no repeat reads what the previous one left in L2 (rows larger than that need no copies)
ROTATE_L2_FACTOR = 4
MAX_COPIES = 64


def _rotated_event_time(fns: list, repeats: int) -> float:
    """``_event_time`` with repeat i running ``fns[i % len(fns)]`` (one per copy of the inputs)."""
    count = [0]

    def step():
        fn = fns[count[0] % len(fns)]
        count[0] += 1
        fn()

    return _event_time(step, repeats)


def _input_copies(dev: dict, uses: int = MAX_COPIES) -> list[dict]:
    """``dev`` and enough clones of it that together they exceed ``ROTATE_L2_FACTOR`` times the L2 size (no more
    than ``uses``, the launches that will cycle through them)."""
    import torch

    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 64 << 20)
    nbytes = sum(v.numel() * v.element_size() for v in dev.values()) or 1
    copies = min(MAX_COPIES, uses, max(1, -(-ROTATE_L2_FACTOR * l2 // nbytes)))
    return [dev] + [{k: v.clone() for k, v in dev.items()} for _ in range(copies - 1)]


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _recorded_time(fn, repeats: int, be, method: str, seconds_of) -> float | None:
    """Median over ``repeats`` calls of ``fn`` of the GPU seconds that ``be.<method>`` reports for every launch it
    makes (``seconds_of(return value)``, summed), after a warm-up; None when some launch cannot be timed (the
    caller then falls back to host wall-clock)."""
    original, recorded = getattr(be, method), []

    def timed(*args, **kwargs):
        result = original(*args, **kwargs)
        recorded.append(seconds_of(result))
        return result

    setattr(be, method, timed)  # the instance attribute shadows the method for the duration
    try:
        fn()  # warm-up: compiles the variant, builds the pipeline
        samples = []
        for _ in range(repeats):
            recorded.clear()
            fn()
            if not recorded or any(s is None for s in recorded):
                return None
            samples.append(sum(recorded))
    finally:
        delattr(be, method)
    return statistics.median(samples)


def _vulkan_time(fn, repeats: int) -> float | None:
    """Median GPU seconds of ``fn`` from the Vulkan timestamp queries of every dispatch it makes (summed)."""
    from ..runtime import get_backend

    return _recorded_time(fn, repeats, get_backend("vulkan"), "run_spirv", lambda ms: None if ms is None else ms * 1e-3)


def _metal_time(fn, repeats: int) -> float | None:
    """Median GPU seconds of ``fn`` from Metal's command-buffer GPU start/end times (summed over its launches)."""
    from ..runtime import get_backend

    be = get_backend("metal")
    return _recorded_time(fn, repeats, be, "launch", lambda _: be.last_gpu_seconds)


HOST_TIMING = "host wall-clock"
TIMINGS = {"cuda": "CUDA events", "vulkan": "Vulkan timestamp queries", "metal": "Metal GPU times"}
_DEVICE_TIMERS = {"vulkan": _vulkan_time, "metal": _metal_time}


def measure(entry, inputs: dict, backend: str, repeats: int) -> tuple[float, float | None, np.ndarray, str, int]:
    """(Iron seconds, reference seconds, Iron's output as NumPy, how Iron was timed, how many copies of the inputs
    the repeats cycled through) for one row."""
    if backend == "cuda" and entry.torch_reference is not None and _have_torch():
        dev = {k: _to_torch(v) for k, v in inputs.items()}
        dev["ref_out"] = dev[entry.output].clone()
        sets = _input_copies(dev, repeats + 1)  # rotated, so that L2 does not serve a repeat its inputs
        from . import cuda_timing

        iron_s = _rotated_event_time([lambda d=d: entry.launch(d, backend) for d in sets], repeats)
        covered = cuda_timing.last_lead_ok
        out = _to_numpy(dev[entry.output], inputs[entry.output])
        ref_s = _rotated_event_time([lambda d=d: entry.torch_reference(d) for d in sets], repeats)
        timing = TIMINGS["cuda"] if covered and cuda_timing.last_lead_ok else \
            f"{TIMINGS['cuda']} (host launch latency included)"
        return iron_s, ref_s, out, timing, len(sets)
    iron_s, timing = None, HOST_TIMING
    if backend in _DEVICE_TIMERS:
        iron_s = _DEVICE_TIMERS[backend](lambda: entry.launch(inputs, backend), repeats)
        timing = TIMINGS[backend] if iron_s is not None else HOST_TIMING
    if iron_s is None:
        iron_s = _time(lambda: entry.launch(inputs, backend), repeats)
    ref_s = _time(lambda: entry.reference(inputs), repeats) if entry.reference else None
    return iron_s, ref_s, inputs[entry.output], timing, 1


def bench_case(entry, backend: str, dname: str, shape: tuple[int, ...], seed: int, options: dict) -> dict:
    """One row, as a worker answers it (JSON-able): the times and the oracle check, or ``{"error": ...}``."""
    try:
        inputs = entry.make(shape, t.SCALAR_TYPES[dname].np_dtype, np.random.default_rng(seed))
        iron_s, ref_s, out, timing, copies = measure(entry, inputs, backend, options.get("repeats", 5))
        result = compare(out, entry.oracle(inputs), entry.tolerance[dname]) if entry.oracle else None
    except Exception as e:  # a faulting kernel is a failed row; the sweep goes on
        return {"error": f"{type(e).__name__}: {e}"}
    return {"iron_s": iron_s, "ref_s": ref_s, "timing": timing, "input_copies": copies,
            "ok": result.ok if result else True,
            "max_abs": result.max_abs if result else float("nan"),
            "failure": result.describe() if result and not result.ok else None, "stats": launch_stats(backend)}


def launch_stats(backend: str) -> dict | None:
    """Registers and occupancy of the row's kernel where the backend reports them (CUDA), else None."""
    from ..runtime import get_backend

    query = getattr(get_backend(backend), "launch_stats", None)
    if query is None:
        return None
    try:
        return query()
    except Exception:  # noqa: BLE001 - statistics are extra information; a row never fails for them
        return None


def check(out: np.ndarray, expected: np.ndarray, tol: tuple[float, float]) -> tuple[bool, float]:
    """(within atol + rtol*|expected| everywhere, max abs error); NaN anywhere in ``out`` fails."""
    result = compare(out, expected, tol)
    return result.ok, result.max_abs


@kernel
def _empty(out: Tensor[f32]):
    out[program_id(0)] = 0.0


def launch_overhead(backend: str, repeats: int = 5) -> float:
    """Seconds for one launch of a one-thread kernel: the floor under every row's time."""
    out = np.zeros(1, dtype=np.float32)
    if backend == "cuda" and _have_torch():  # rows run on torch tensors, timed by CUDA events: so is the floor
        dev = _to_torch(out)
        return _event_time(lambda: _empty[1](dev, backend=backend), repeats)
    launch = lambda: _empty[1](out, backend=backend)  # noqa: E731
    # timed like the rows it is a floor of
    device_s = _DEVICE_TIMERS[backend](launch, repeats) if backend in _DEVICE_TIMERS else None
    return device_s if device_s is not None else _time(launch, repeats)


def _git_sha() -> str:
    """``IRON_GIT_SHA`` when set (a copy of the tree whose .git is not the source's, e.g. on a lent GPU machine),
    else the checkout's HEAD."""
    import os

    env = os.environ.get("IRON_GIT_SHA")
    if env and env != "unknown":
        return env
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "unknown"


def _device_fields(backend: str) -> dict:
    """GPU and driver for the JSON (what ``iron snap`` records with a baseline)."""
    from ..runtime import get_backend

    try:
        info = get_backend(backend).info() if backend != "cpu" else {}
    except Exception:
        info = {}
    return {"gpu": info.get("name", platform.processor() or platform.machine()),
            "driver": info.get("driver", info.get("driver_version", "n/a"))}


def run_bench(pattern: str | None = None, backend: str | None = None, dtypes: tuple[str, ...] = (),
              json_path: str | None = None, repeats: int = 5, verbose: bool = False,
              plot_path: str | None = None) -> bool:
    """Run the bench, print a table, write JSON (always to the last-run file, which ``iron snap``/``iron diff``
    read; also to ``json_path``) and, with ``plot_path`` (or ``IRON_BENCH_PLOT``), a roofline chart. Each row runs
    in a worker subprocess (:mod:`iron.bench.worker`). Returns whether every row ran and matched its oracle."""
    import os
    import sys

    from ..runtime import best_backend
    from .baseline import save_last_run
    from .progress import sweep_progress
    from .registry import selected
    from .roofline import copy_ceiling, verdict
    from .worker import run_cases

    backend = backend or best_backend()
    plot_path = plot_path or os.environ.get("IRON_BENCH_PLOT") or None
    console = Console(width=None if sys.stdout.isatty() else 200)
    device = backend == "cuda" and _have_torch()
    entries = selected(pattern, benched=True)
    rng = np.random.default_rng()
    cases = [{"kernel": entry.name, "dtype": dname, "shape": list(shape), "seed": int(rng.integers(1 << 63))}
             for entry in entries for dname in entry.dtypes if not dtypes or dname in dtypes
             for shape in ((entry.device_shapes or entry.shapes) if device else entry.shapes)]
    labels = [f"{c['kernel']} {c['dtype']} {'x'.join(map(str, c['shape']))}" for c in cases]
    with sweep_progress(len(cases), f"iron bench on {backend}", labels) as advance:
        answers = run_cases("bench", cases, backend, entries, {"repeats": repeats}, on_done=advance)
    by_name = {entry.name: entry for entry in entries}
    used = {a["timing"] for a in answers if "timing" in a}
    timing = " / ".join(sorted(used)) if used else TIMINGS["cuda"] if device else TIMINGS.get(backend, HOST_TIMING)
    table = Table(title=f"iron bench — backend {backend} (Iron: {timing}, median of {repeats})")
    cols = ["Kernel", "Shape", "dtype", "Iron(µs)", "Ref(µs)", "Iron(GB/s)", "Ref(GB/s)", "Iron %", "GFLOP/s",
            "max err", "ok"]
    ceiling = copy_ceiling(backend) if verbose or plot_path else None
    with_stats = verbose and any(a.get("stats") for a in answers)
    if verbose:
        cols[-1:-1] = ["%BW", "%FLOP", "FLOP/B", *(["regs", "occ%"] if with_stats else []), "verdict"]
        launch_s = launch_overhead(backend, repeats)
    for col in cols:
        table.add_column(col, justify="left" if col in ("Kernel", "ok", "verdict") else "right")
    rows, all_ok = [], True
    for case, answer in zip(cases, answers):
        entry, dname, shape = by_name[case["kernel"]], case["dtype"], tuple(case["shape"])
        extra = {"device": answer["device"]} if "device" in answer else {}
        if answer.get("error"):
            all_ok = False
            row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "ok": False, "error": answer["error"],
                   **extra}
            rows.append(row)
            table.add_row(entry.name, "x".join(map(str, shape)), dname, *["-"] * (len(cols) - 4), "[red]ERROR")
            console.print(f"{entry.name} {dname} {shape}: {row['error']}", markup=False, highlight=False)
            continue
        itemsize = t.SCALAR_TYPES[dname].np_dtype.itemsize
        nbytes, flops = entry.count_bytes(shape, itemsize), entry.count_flops(shape)
        iron_s, ref_s, ok, err = answer["iron_s"], answer["ref_s"], answer["ok"], answer["max_abs"]
        all_ok &= ok
        row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "iron_us": iron_s * 1e6,
               "ref_us": ref_s * 1e6 if ref_s else None, "iron_gbps": nbytes / iron_s / 1e9,
               "ref_gbps": nbytes / ref_s / 1e9 if ref_s else None, "gflops": flops / iron_s / 1e9,
               "intensity": flops / nbytes if nbytes else None, "max_err": err, "ok": ok,
               "timing": answer["timing"], "input_copies": answer.get("input_copies"), **extra}
        cells = [entry.name, "x".join(map(str, shape)), dname, f"{row['iron_us']:.0f}",
                 f"{row['ref_us']:.0f}" if ref_s else "-", f"{row['iron_gbps']:.3f}",
                 f"{row['ref_gbps']:.3f}" if ref_s else "-", f"{100 * ref_s / iron_s:.1f}%" if ref_s else "-",
                 f"{row['gflops']:.3f}", f"{err:.2e}"]
        if verbose:
            stats = answer.get("stats") or {}
            row["pct_bw"] = 100.0 * row["iron_gbps"] / ceiling.copy_gbps
            row["pct_flop"] = 100.0 * row["gflops"] / ceiling.matrix_gflops if ceiling.matrix_gflops else None
            if stats:
                row["stats"] = stats
            row["verdict"] = verdict(iron_s, nbytes, flops, ceiling.copy_gbps, launch_s, ceiling.matrix_gflops,
                                     stats.get("occupancy_pct"), stats.get("groups"), stats.get("processors"))
            cells += [f"{row['pct_bw']:.1f}%", f"{row['pct_flop']:.2f}%" if row["pct_flop"] is not None else "-",
                      f"{row['intensity']:.2f}" if nbytes else "-"]
            if with_stats:
                cells += [str(stats.get("vector_registers", stats.get("registers", "-"))) if stats else "-",
                          f"{stats['occupancy_pct']:.0f}%" if stats else "-"]
            cells.append(row["verdict"])
        rows.append(row)
        table.add_row(*cells, "[green]ok" if ok else "[red]FAIL")
        if answer.get("failure"):
            console.print(f"{entry.name} {dname} {shape}: {answer['failure']}", markup=False, highlight=False)
    console.print(table)
    ref_name = "torch on the same GPU" if device else "NumPy on the host CPU"
    ref_how = "CUDA events" if device else "host wall-clock"
    console.print(f"Reference: {ref_name} ({ref_how}). Iron % = reference time / Iron time.")
    if device:
        console.print(f"CUDA timing: events around each repeat with a sleep kernel queued ahead, so the interval is "
                      f"the GPU's time and not the host's launch; the repeats cycle through copies of the inputs "
                      f"spanning >= {ROTATE_L2_FACTOR}x the L2 cache (row field input_copies), so L2 does not serve "
                      "them.")
    doc = {"date": datetime.now(UTC).isoformat(), "backend": backend, "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), **_device_fields(backend), "git_sha": _git_sha(),
           "command": "iron " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("iron") else "iron bench",
           "timing": f"{timing} median", "reference": f"{ref_name} ({ref_how})", "rows": rows}
    if verbose:
        doc["ceiling"] = {"copy_gbps": ceiling.copy_gbps, "how": ceiling.how, "launch_us": launch_s * 1e6,
                          "matrix_gflops": ceiling.matrix_gflops, "matrix_how": ceiling.matrix_how}
        ridge = f"{ceiling.matrix_gflops / ceiling.copy_gbps:.0f}" if ceiling.matrix_gflops else "8"
        console.print(f"%BW: of the measured copy ceiling {ceiling.copy_gbps:.1f} GB/s ({ceiling.how}). %FLOP: of the "
                      f"measured matrix rate {ceiling.matrix_gflops or 0:.0f} GFLOP/s ({ceiling.matrix_how}). Launch "
                      f"overhead {launch_s * 1e6:.0f} µs (an empty kernel). Verdict: launch-bound below 3x that, "
                      f"memory-bound at >= 50% BW, compute-bound at >= 50% FLOP or >= {ridge} FLOP/B (the ridge), "
                      "under-occupied below 25% occupancy or with fewer groups than multiprocessors (where the "
                      "backend reports them: regs, occ%), else latency-bound.")
    save_last_run(doc)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=2)
    if plot_path:
        from .roofline import write_plot

        try:
            write_plot(rows, ceiling, plot_path, title=f"iron bench — {backend} ({doc['gpu']})")
            console.print(f"roofline chart written to {plot_path}", markup=False, highlight=False)
        except ImportError as e:
            console.print(f"--plot: {e}", markup=False, highlight=False)
            all_ok = False
    return all_ok
