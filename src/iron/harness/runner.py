"""``iron bench``: every registered kernel, shape and dtype beside its reference, checked against its oracle.

The sweep runs in workers (:mod:`iron.harness.worker`, each row measured by :mod:`iron.harness.measure`); this module
renders the rows as a table, writes the JSON (the last-run file and ``--json``) and the roofline chart.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from rich.console import Console
from rich.table import Table

from ..ir import types as t
from ..runtime import best_backend, get_backend
from .baseline import save_last_run
from .measure import ROTATE_L2_FACTOR, launch_overhead, on_gpu_arrays, on_torch_device, timing_of
from .progress import sweep_progress
from .registry import selected
from .roofline import COMPUTE_INTENSITY, SIZED_COPY_PCT, Ceiling, copy_ceiling, sized_copy_gbps, verdict, write_plot
from .worker import run_cases

COLUMNS = ["Kernel", "Shape", "dtype", "Iron(µs)", "Ref(µs)", "Iron(GB/s)", "Ref(GB/s)", "Iron %", "GFLOP/s", "max err",
           "ok"]

#: the columns of each peer beside the primary reference (its time, bandwidth and Iron's speed relative to it)
PEER_COLUMNS = {"triton": ["Triton(µs)", "Triton(GB/s)", "Iron % Triton"],
                "compile": ["compiled(µs)", "compiled(GB/s)", "Iron % compiled"]}  # torch.compile (model rows)


def _git_sha() -> str:
    """``IRON_GIT_SHA`` when set (a copy of the tree whose .git is not the source's, e.g. on a lent GPU machine),
    else the checkout's HEAD."""
    env = os.environ.get("IRON_GIT_SHA")
    if env and env != "unknown":
        return env
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip()
    except OSError:
        return "unknown"


def _device_fields(backend: str) -> dict:
    """GPU and driver for the JSON (what ``iron snap`` records with a baseline)."""
    try:
        info = get_backend(backend).info()
    except Exception:
        info = {}
    return {"gpu": info.get("name", platform.processor() or platform.machine()),
            "driver": info.get("driver", info.get("driver_version", "n/a"))}


@dataclass
class Sweep:
    """What ``iron bench`` measured: the cases sent to the workers and their answers, with how the rows were run."""

    backend: str
    repeats: int
    device: bool  # rows on torch device tensors beside the torch reference
    entries: dict  # name -> Registration
    cases: list[dict]
    answers: list[dict]

    @property
    def peers(self) -> list[str]:
        """The peer families with columns of their own (Triton), where some selected entry declares one: on CUDA."""
        if not self.device:
            return []
        return [f for f in PEER_COLUMNS if any(f in e.references for e in self.entries.values())]

    @property
    def timing(self) -> str:
        used = {a["timing"] for a in self.answers if "timing" in a}
        return " / ".join(sorted(used)) if used else timing_of(self.backend)


def measure_sweep(pattern: str | None, backend: str, dtypes: tuple[str, ...], repeats: int) -> Sweep:
    """Run every selected kernel x dtype x shape in workers (one random seed per case)."""
    device = on_torch_device(backend) or on_gpu_arrays(backend)  # a GPU: the device shapes
    entries = selected(pattern, benched=True)
    rng = np.random.default_rng()
    cases = [{"kernel": entry.name, "dtype": dname, "shape": list(shape), "seed": int(rng.integers(1 << 63))}
             for entry in entries for dname in entry.dtypes if not dtypes or dname in dtypes
             for shape in ((entry.device_shapes or entry.shapes) if device else entry.shapes)]
    labels = [f"{c['kernel']} {c['dtype']} {'x'.join(map(str, c['shape']))}" for c in cases]
    with sweep_progress(len(cases), f"iron bench on {backend}", labels) as advance:
        answers = run_cases("bench", cases, backend, entries, {"repeats": repeats}, on_done=advance)
    return Sweep(backend, repeats, device, {entry.name: entry for entry in entries}, cases, answers)


def _row(entry, dname: str, shape: tuple[int, ...], answer: dict, verbose: bool, ceiling: Ceiling | None,
         launch_s: float | None, sized=None) -> dict:
    """One measured row as the JSON records it (with the -v columns when ``verbose``)."""
    extra = {"device": answer["device"]} if "device" in answer else {}
    if answer.get("error"):
        return {"kernel": entry.name, "shape": list(shape), "dtype": dname, "ok": False, "error": answer["error"],
                **extra}
    itemsize = t.SCALAR_TYPES[dname].np_dtype.itemsize
    nbytes, flops = entry.count_bytes(shape, itemsize), entry.count_flops(shape)
    iron_s, ref_s = answer["iron_s"], answer["ref_s"]
    row = {"kernel": entry.name, "shape": list(shape), "dtype": dname, "iron_us": iron_s * 1e6,
           "ref_us": ref_s * 1e6 if ref_s else None, "iron_gbps": nbytes / iron_s / 1e9,
           "ref_gbps": nbytes / ref_s / 1e9 if ref_s else None, "gflops": flops / iron_s / 1e9,
           "intensity": flops / nbytes if nbytes else None, "max_err": answer["max_abs"], "ok": answer["ok"],
           "timing": answer["timing"], "input_copies": answer.get("input_copies"), **extra}
    if answer.get("config"):  # the configuration autotuning chose for this row
        row["config"] = answer["config"]
    refs = answer.get("refs") or {}
    if refs:  # every reference timed on the row, by family (torch and triton on CUDA)
        row["refs"] = {family: {"us": s * 1e6, "gbps": nbytes / s / 1e9, "gflops": flops / s / 1e9}
                       for family, s in refs.items()}
    if answer.get("ref_errors"):
        row["ref_errors"] = answer["ref_errors"]
    if verbose:
        stats = answer.get("stats") or {}
        row["pct_bw"] = 100.0 * row["iron_gbps"] / ceiling.copy_gbps
        row["pct_flop"] = 100.0 * row["gflops"] / ceiling.matrix_gflops if ceiling.matrix_gflops else None
        copy_gbps = sized(nbytes) if sized and nbytes and flops / nbytes < COMPUTE_INTENSITY else None
        if copy_gbps:  # a memory-side row against a copy of its own bytes (sized_copy_gbps)
            row["sized_copy_gbps"] = copy_gbps
            row["pct_copy"] = 100.0 * row["iron_gbps"] / copy_gbps
        if stats:
            row["stats"] = stats
        row["verdict"] = verdict(iron_s, nbytes, flops, ceiling.copy_gbps, launch_s, ceiling.matrix_gflops,
                                 stats.get("occupancy_pct"), stats.get("groups"), stats.get("processors"),
                                 row.get("pct_copy"))
    return row


def _peer_cells(row: dict, family: str) -> list[str]:
    """A peer's cells: its time, GB/s and peer time / Iron time; ``wrong`` where its output failed the oracle (or
    it raised), ``-`` where it did not run (not declared, not installed)."""
    timed = (row.get("refs") or {}).get(family)
    if timed is None:
        failed = family in (row.get("ref_errors") or {}) and "not installed" not in row["ref_errors"][family]
        return ["wrong" if failed else "-", "-", "-"]
    return [f"{timed['us']:.0f}", f"{timed['gbps']:.3f}", f"{100 * timed['us'] / row['iron_us']:.1f}%"]


def _cells(row: dict, answer: dict, verbose: bool, with_stats: bool, peers: list[str], with_copy: bool = False
           ) -> list[str]:
    """The table cells of a measured row (all but the final ok column)."""
    ref = row["ref_us"] is not None
    cells = [row["kernel"], "x".join(map(str, row["shape"])), row["dtype"], f"{row['iron_us']:.0f}",
             f"{row['ref_us']:.0f}" if ref else "-", f"{row['iron_gbps']:.3f}",
             f"{row['ref_gbps']:.3f}" if ref else "-", f"{100 * row['ref_us'] / row['iron_us']:.1f}%" if ref else "-"]
    for family in peers:
        cells += _peer_cells(row, family)
    cells += [f"{row['gflops']:.3f}", f"{row['max_err']:.2e}"]
    if verbose:
        stats = answer.get("stats") or {}
        cells += [f"{row['pct_bw']:.1f}%", *([f"{row['pct_copy']:.1f}%" if "pct_copy" in row else "-"]
                                             if with_copy else []),
                  f"{row['pct_flop']:.2f}%" if row["pct_flop"] is not None else "-",
                  f"{row['intensity']:.2f}" if row["intensity"] is not None else "-"]
        if with_stats:
            cells += [str(stats.get("vector_registers", stats.get("registers", "-"))) if stats else "-",
                      f"{stats['occupancy_pct']:.0f}%" if stats else "-"]
        cells.append(row["verdict"])
    return cells


def render_rows(sweep: Sweep, console: Console, verbose: bool, ceiling: Ceiling | None, launch_s: float | None
                ) -> tuple[list[dict], bool]:
    """Print the table (and each failure under it); return the JSON rows and whether every row ran and matched."""
    table = Table(title=f"iron bench — backend {sweep.backend} (Iron: {sweep.timing}, median of {sweep.repeats})")
    cols = list(COLUMNS)
    peers = sweep.peers
    for family in reversed(peers):
        cols[cols.index("Iron %") + 1:cols.index("Iron %") + 1] = PEER_COLUMNS[family]
    with_stats = verbose and any(a.get("stats") for a in sweep.answers)
    sized = (lambda nbytes: sized_copy_gbps(sweep.backend, nbytes)) if verbose and sweep.device else None
    rows = [_row(sweep.entries[c["kernel"]], c["dtype"], tuple(c["shape"]), a, verbose, ceiling, launch_s, sized)
            for c, a in zip(sweep.cases, sweep.answers)]
    with_copy = any("pct_copy" in r for r in rows)
    if verbose:
        cols[-1:-1] = ["%BW", *(["%copy"] if with_copy else []), "%FLOP", "FLOP/B",
                       *(["regs", "occ%"] if with_stats else []), "verdict"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("Kernel", "ok", "verdict") else "right")
    all_ok = True
    for case, answer, row in zip(sweep.cases, sweep.answers, rows):
        entry, dname, shape = sweep.entries[case["kernel"]], case["dtype"], tuple(case["shape"])
        all_ok &= row["ok"]
        if answer.get("error"):
            table.add_row(entry.name, "x".join(map(str, shape)), dname, *["-"] * (len(cols) - 4), "[red]ERROR")
            console.print(f"{entry.name} {dname} {shape}: {row['error']}", markup=False, highlight=False)
            continue
        table.add_row(*_cells(row, answer, verbose, with_stats, peers, with_copy),
                      "[green]ok" if row["ok"] else "[red]FAIL")
        if answer.get("failure"):
            console.print(f"{entry.name} {dname} {shape}: {answer['failure']}", markup=False, highlight=False)
        for family, why in (answer.get("ref_errors") or {}).items():
            if "not installed" not in why:  # a missing package is said once, under the table
                console.print(f"{entry.name} {dname} {shape}: {family} reference {why}", markup=False,
                              highlight=False)
    console.print(table)
    return rows, all_ok


def _reference(device: bool) -> tuple[str, str]:
    return ("torch on the same GPU", "CUDA events") if device else ("NumPy on the host CPU", "host wall-clock")


def print_notes(sweep: Sweep, console: Console, ceiling: Ceiling | None, launch_s: float | None,
                rows: list[dict] | None = None) -> None:
    """The lines under the table: what the reference is, how CUDA rows were timed, what the -v columns mean."""
    for case, answer in zip(sweep.cases, sweep.answers):
        if answer.get("config"):
            shape = "x".join(map(str, case["shape"]))
            console.print(f"Configuration: {case['kernel']} {shape} {case['dtype']} ran "
                          + ", ".join(f"{k}={v}" for k, v in answer["config"].items()), markup=False)
    named = sorted({a["reference"] for a in sweep.answers if a.get("reference")})
    ref_name, ref_how = _reference(sweep.device)
    shown = " / ".join(named) if named else f"{ref_name} ({ref_how})"
    console.print(f"Reference: {shown}. Iron % = reference time / Iron time.")
    for family in sweep.peers:
        missing = {why for a in sweep.answers for f, why in (a.get("ref_errors") or {}).items()
                   if f == family and "not installed" in why}
        console.print(f"{family.capitalize()}: its own kernels on the same tensors, timed the same way, each checked "
                      f"against the oracle first (a wrong one is reported, not timed); Iron % {family.capitalize()} = "
                      f"{family.capitalize()} time / Iron time." + (f" Not run here: {missing.pop()}." if missing
                                                                    else ""))
    if sweep.device and on_gpu_arrays(sweep.backend):
        console.print(f"{sweep.backend} timing: Iron on device arrays ({timing_of(sweep.backend)}), each launch "
                      f"dispatched alone; the repeats cycle through copies of the inputs spanning >= "
                      f"{ROTATE_L2_FACTOR}x a 64 MiB L2 (row field input_copies).")
    elif sweep.device:
        console.print(f"CUDA timing: events around each repeat with a sleep kernel queued ahead, so the interval is "
                      f"the GPU's time and not the host's launch; the repeats cycle through copies of the inputs "
                      f"spanning >= {ROTATE_L2_FACTOR}x the L2 cache (row field input_copies), so L2 does not serve "
                      "them.")
    has_copy = any("pct_copy" in r for r in rows or ())
    copy_rule = f" (or >= {SIZED_COPY_PCT:.0f}% %copy)" if has_copy else ""
    if ceiling is not None and launch_s is not None:
        ridge = f"{ceiling.matrix_gflops / ceiling.copy_gbps:.0f}" if ceiling.matrix_gflops else "8"
        console.print(f"%BW: of the measured copy ceiling {ceiling.copy_gbps:.1f} GB/s ({ceiling.how}). %FLOP: of the "
                      f"measured matrix rate {ceiling.matrix_gflops or 0:.0f} GFLOP/s ({ceiling.matrix_how}). Launch "
                      f"overhead {launch_s * 1e6:.0f} µs (an empty kernel). Verdict: launch-bound below 3x that, "
                      f"memory-bound at >= 50% BW{copy_rule}, compute-bound at >= 50% FLOP or >= {ridge} "
                      "FLOP/B (the ridge), "
                      "under-occupied below 25% occupancy or with fewer groups than multiprocessors (where the "
                      "backend reports them: regs, occ%), else latency-bound.")
    if has_copy:
        console.print("%copy (rows below 8 FLOP/B, on a GPU torch reaches): of torch's copy of the row's own bytes "
                      "(half read, half written) on the same GPU, timed as the rows are (repeats cycling through "
                      "copies spanning 4x the L2): what a kernel of that size can reach once launch, ramp-up and tail "
                      "are paid; %BW's 4 GiB copy hides them.")


def bench_document(sweep: Sweep, rows: list[dict], ceiling: Ceiling | None, launch_s: float | None) -> dict:
    """The JSON of a run: where and how it ran (date, host, GPU, driver, git sha, command, timing) and its rows."""
    ref_name, ref_how = _reference(sweep.device)
    doc = {"date": datetime.now(UTC).isoformat(), "backend": sweep.backend, "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), **_device_fields(sweep.backend), "git_sha": _git_sha(),
           "command": "iron " + " ".join(sys.argv[1:]) if sys.argv[0].endswith("iron") else "iron bench",
           "timing": f"{sweep.timing} median", "reference": f"{ref_name} ({ref_how})", "rows": rows}
    if ceiling is not None and launch_s is not None:
        doc["ceiling"] = {"copy_gbps": ceiling.copy_gbps, "how": ceiling.how, "launch_us": launch_s * 1e6,
                          "matrix_gflops": ceiling.matrix_gflops, "matrix_how": ceiling.matrix_how}
    return doc


def write_outputs(doc: dict, console: Console, json_path: str | None, plot_path: str | None,
                  ceiling: Ceiling | None) -> bool:
    """Save the last-run file, ``json_path`` and the roofline chart; False when the chart could not be drawn."""
    save_last_run(doc)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(doc, f, indent=2)
    if not plot_path:
        return True
    try:
        write_plot(doc["rows"], ceiling, plot_path, title=f"iron bench — {doc['backend']} ({doc['gpu']})")
        console.print(f"roofline chart written to {plot_path}", markup=False, highlight=False)
    except ImportError as e:
        console.print(f"--plot: {e}", markup=False, highlight=False)
        return False
    return True


def run_bench(pattern: str | None = None, backend: str | None = None, dtypes: tuple[str, ...] = (),
              json_path: str | None = None, repeats: int = 5, verbose: bool = False,
              plot_path: str | None = None) -> bool:
    """Run the bench, print a table, write JSON (always to the last-run file, which ``iron snap``/``iron diff``
    read; also to ``json_path``) and, with ``plot_path`` (or ``IRON_BENCH_PLOT``), a roofline chart. Each row runs
    in a worker subprocess (:mod:`iron.harness.worker`). Returns whether every row ran and matched its oracle."""
    backend = backend or best_backend()
    plot_path = plot_path or os.environ.get("IRON_BENCH_PLOT") or None
    console = Console(width=None if sys.stdout.isatty() else 200)
    sweep = measure_sweep(pattern, backend, dtypes, repeats)
    ceiling = copy_ceiling(backend) if verbose or plot_path else None
    launch_s = launch_overhead(backend, repeats) if verbose else None
    rows, all_ok = render_rows(sweep, console, verbose, ceiling, launch_s)
    print_notes(sweep, console, ceiling if verbose else None, launch_s, rows)
    doc = bench_document(sweep, rows, ceiling if verbose else None, launch_s)
    return write_outputs(doc, console, json_path, plot_path, ceiling) and all_ok
