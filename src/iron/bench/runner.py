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
    import torch

    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(samples)


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def measure(entry, inputs: dict, backend: str, repeats: int) -> tuple[float, float | None, np.ndarray]:
    """(Iron seconds, reference seconds, Iron's output as NumPy) for one row."""
    if backend == "cuda" and entry.torch_reference is not None and _have_torch():
        dev = {k: _to_torch(v) for k, v in inputs.items()}
        dev["ref_out"] = dev[entry.output].clone()
        iron_s = _event_time(lambda: entry.launch(dev, backend), repeats)
        out = _to_numpy(dev[entry.output], inputs[entry.output])
        ref_s = _event_time(lambda: entry.torch_reference(dev), repeats)
        return iron_s, ref_s, out
    iron_s = _time(lambda: entry.launch(inputs, backend), repeats)
    ref_s = _time(lambda: entry.reference(inputs), repeats)
    return iron_s, ref_s, inputs[entry.output]


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
    return _time(lambda: _empty[1](out, backend=backend), repeats)


def _git_sha() -> str:
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
              json_path: str | None = None, repeats: int = 5, verbose: bool = False) -> bool:
    """Run the bench, print a table, write JSON (always to the last-run file, which ``iron snap``/``iron diff``
    read; also to ``json_path``). Returns whether every row matched its oracle."""
    from ..runtime import best_backend
    from .baseline import save_last_run
    from .registry import selected
    from .roofline import copy_ceiling, verdict

    backend = backend or best_backend()
    import sys

    console = Console(width=None if sys.stdout.isatty() else 200)
    device = backend == "cuda" and _have_torch()
    timing = "CUDA events" if device else "host wall-clock"
    table = Table(title=f"iron bench — backend {backend} ({timing}, median of {repeats})")
    cols = ["Kernel", "Shape", "dtype", "Iron(µs)", "Ref(µs)", "Iron(GB/s)", "Ref(GB/s)", "Iron %", "GFLOP/s",
            "max err", "ok"]
    if verbose:
        cols[-1:-1] = ["%BW", "FLOP/B", "verdict"]
        ceiling = copy_ceiling(backend)
        launch_s = launch_overhead(backend, repeats)
    for col in cols:
        table.add_column(col, justify="left" if col in ("Kernel", "ok", "verdict") else "right")
    rows, all_ok = [], True
    rng = np.random.default_rng()
    for entry in selected(pattern, benched=True):
        for dname in entry.dtypes:
            if dtypes and dname not in dtypes:
                continue
            dtype = t.SCALAR_TYPES[dname].np_dtype
            for shape in (entry.device_shapes or entry.shapes) if device else entry.shapes:
                inputs = entry.make(shape, dtype, rng)
                nbytes, flops = entry.count_bytes(shape, dtype.itemsize), entry.count_flops(shape)
                try:
                    iron_s, ref_s, out = measure(entry, inputs, backend, repeats)
                    result = compare(out, entry.oracle(inputs), entry.tolerance[dname]) if entry.oracle else None
                except Exception as e:  # a faulting kernel is a failed row; the sweep goes on
                    all_ok = False
                    row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "ok": False,
                           "error": f"{type(e).__name__}: {e}"}
                    rows.append(row)
                    table.add_row(entry.name, "x".join(map(str, shape)), dname, *["-"] * (len(cols) - 4),
                                  "[red]ERROR")
                    console.print(f"{entry.name} {dname} {shape}: {row['error']}", markup=False, highlight=False)
                    continue
                ok = result.ok if result else True
                err = result.max_abs if result else float("nan")
                all_ok &= ok
                row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "iron_us": iron_s * 1e6,
                       "ref_us": ref_s * 1e6 if ref_s else None, "iron_gbps": nbytes / iron_s / 1e9,
                       "ref_gbps": nbytes / ref_s / 1e9 if ref_s else None, "gflops": flops / iron_s / 1e9,
                       "max_err": err, "ok": ok}
                cells = [entry.name, "x".join(map(str, shape)), dname, f"{row['iron_us']:.0f}",
                         f"{row['ref_us']:.0f}" if ref_s else "-", f"{row['iron_gbps']:.3f}",
                         f"{row['ref_gbps']:.3f}" if ref_s else "-", f"{100 * ref_s / iron_s:.1f}%" if ref_s else "-",
                         f"{row['gflops']:.3f}", f"{err:.2e}"]
                if verbose:
                    row["pct_bw"] = 100.0 * row["iron_gbps"] / ceiling.copy_gbps
                    row["intensity"] = flops / nbytes if nbytes else None
                    row["verdict"] = verdict(iron_s, nbytes, flops, ceiling.copy_gbps, launch_s)
                    cells += [f"{row['pct_bw']:.1f}%", f"{row['intensity']:.2f}" if nbytes else "-", row["verdict"]]
                rows.append(row)
                table.add_row(*cells, "[green]ok" if ok else "[red]FAIL")
                if result and not ok:
                    console.print(f"{entry.name} {dname} {shape}: {result.describe()}", markup=False, highlight=False)
    console.print(table)
    ref_name = "torch on the same GPU" if device else "NumPy on the host CPU"
    console.print(f"Reference: {ref_name}. Iron % = reference time / Iron time.")
    doc = {"date": datetime.now(UTC).isoformat(), "backend": backend, "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), **_device_fields(backend), "git_sha": _git_sha(),
           "command": "iron " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("iron") else "iron bench",
           "timing": f"{timing} median", "reference": ref_name, "rows": rows}
    if verbose:
        doc["ceiling"] = {"copy_gbps": ceiling.copy_gbps, "how": ceiling.how, "launch_us": launch_s * 1e6}
        console.print(f"%BW: of the measured copy ceiling {ceiling.copy_gbps:.1f} GB/s ({ceiling.how}). "
                      f"Launch overhead {launch_s * 1e6:.0f} µs (an empty kernel); verdict: launch-bound below "
                      f"3x that, memory-bound at >= 50% BW, compute-bound at >= 8 FLOP/B, else latency-bound.")
    save_last_run(doc)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=2)
    return all_ok
