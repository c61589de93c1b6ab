"""``iron bench``: every std kernel, shape and dtype beside its reference, checked against its oracle.

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

from ..ir import types as t


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
    got = out.astype(np.float64)
    err = np.abs(got - expected)
    ok = bool(np.all(np.isfinite(got)) and np.all(err <= tol[0] + tol[1] * np.abs(expected)))
    return ok, float(np.nanmax(err)) if err.size else 0.0


def _git_sha() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "unknown"


def run_bench(pattern: str | None = None, backend: str | None = None, dtypes: tuple[str, ...] = (),
              json_path: str | None = None, repeats: int = 5) -> bool:
    """Run the bench, print a table, optionally write JSON. Returns whether every row matched its oracle."""
    from ..runtime import best_backend
    from ..std.registry import load_all

    backend = backend or best_backend()
    import sys

    console = Console(width=None if sys.stdout.isatty() else 160)
    device = backend == "cuda" and _have_torch()
    timing = "CUDA events" if device else "host wall-clock"
    table = Table(title=f"iron bench — backend {backend} ({timing}, median of {repeats})")
    for col in ("Kernel", "Shape", "dtype", "Iron(µs)", "Ref(µs)", "Iron(GB/s)", "Ref(GB/s)", "Iron %", "max err",
                "ok"):
        table.add_column(col, justify="right" if col not in ("Kernel", "ok") else "left")
    rows, all_ok = [], True
    rng = np.random.default_rng()
    for entry in load_all():
        if pattern and pattern not in entry.name:
            continue
        for dname in entry.dtypes:
            if dtypes and dname not in dtypes:
                continue
            dtype = t.SCALAR_TYPES[dname].np_dtype
            for shape in (entry.device_shapes or entry.shapes) if device else entry.shapes:
                inputs = entry.make(shape, dtype, rng)
                iron_s, ref_s, out = measure(entry, inputs, backend, repeats)
                ok, err = check(out, entry.oracle(inputs), entry.tolerance[dname])
                all_ok &= ok
                nbytes = entry.bytes_moved(shape, dtype.itemsize)
                row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "iron_us": iron_s * 1e6,
                       "ref_us": ref_s * 1e6, "iron_gbps": nbytes / iron_s / 1e9, "ref_gbps": nbytes / ref_s / 1e9,
                       "max_err": err, "ok": ok}
                rows.append(row)
                table.add_row(entry.name, "x".join(map(str, shape)), dname, f"{row['iron_us']:.0f}",
                              f"{row['ref_us']:.0f}", f"{row['iron_gbps']:.3f}", f"{row['ref_gbps']:.3f}",
                              f"{100 * ref_s / iron_s:.1f}%", f"{err:.2e}", "[green]ok" if ok else "[red]FAIL")
    console.print(table)
    ref_name = "torch on the same GPU" if device else "NumPy on the host CPU"
    console.print(f"Reference: {ref_name}. Iron % = reference time / Iron time.")
    if json_path:
        doc = {"date": datetime.now(UTC).isoformat(), "backend": backend, "host": platform.node(),
               "cpu": platform.processor() or platform.machine(), "git_sha": _git_sha(), "command": "iron bench",
               "timing": f"{timing} median", "reference": ref_name, "rows": rows}
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=2)
    return all_ok
