"""Issue 14's and 18's speed targets against `iron bench --json` results: one line per target row found.

    python scripts/targets.py bench/results/2026-12-03-h200-*.json [--all]

Each target names a bench row (kernel, shape, dtypes), a measure (GB/s, TF/s, or % of the run's measured copy
ceiling) and a threshold, as the issues state them; the targets are CUDA's, so only files run on the cuda backend
are judged (each line names its file). A row found in several files is reported from each, oldest run first (the
files' dates). A row that timed a wrong answer is "wrong result", never met. ``--all`` also lists the targets no
file has a row for. The relative targets (Vulkan against CUDA, paged against contiguous decode, q4 GEMV against
torch) are not judged here. A GB/s line also gives the most one launch could show at that size: its bytes moved at
the run's copy ceiling plus the run's empty-kernel time (``ceiling.launch_us``). Prints; writes nothing.
"""

from __future__ import annotations

import json
import sys
from fnmatch import fnmatchcase

#: (kernel glob, shape or None for every shape, dtypes, measure, threshold, source)
TARGETS = [
    ("std/gemm/gemm", (4096, 4096, 4096), ("bf16", "f16"), "tflops", 600, "14"),
    ("std/gemm/gemm", (8192, 8192, 8192), ("bf16", "f16"), "tflops", 600, "14"),
    ("std/gemm/gemm_f32", (4096, 4096, 4096), ("f32",), "tflops", 45, "14"),
    ("std/softmax/row", (16384, 8192), ("bf16",), "gbps", 4050, "14"),
    ("std/softmax/row", (4096, 4096), ("bf16",), "gbps", 3150, "14"),
    ("std/softmax/row", (32, 128256), ("bf16",), "gbps", 900, "14"),
    ("std/norm/rms_norm", (16384, 8192), ("bf16",), "gbps", 3950, "14"),
    ("std/norm/rms_norm", (4096, 4096), ("bf16",), "gbps", 2900, "14"),
    ("std/norm/rms_norm", (32, 128256), ("bf16",), "gbps", 900, "14"),
    ("std/gemv/gemv", (16384, 16384), ("bf16",), "gbps", 4050, "14"),
    ("std/gemv/gemv", (4096, 4096), ("bf16",), "gbps", 1800, "14"),
    ("std/gemv/gemv", (128256, 4096), ("bf16",), "gbps", 4100, "14"),
    ("std/elementwise/*", (268435456,), ("f32", "f16", "bf16"), "pct_ceiling", 97, "18"),
    ("std/cast/*", (268435456,), ("f32", "f16", "bf16"), "pct_ceiling", 97, "18"),
    ("std/norm/add_rms_norm", (16384, 8192), ("bf16",), "gbps", 3900, "18"),
    ("std/norm/layer_norm", (16384, 8192), ("bf16",), "gbps", 3900, "18"),
    ("std/rope/rotate_half", None, ("bf16",), "gbps", 3900, "18"),
    ("std/rope/interleaved", None, ("bf16",), "gbps", 3900, "18"),
    ("std/reduce/argmax", (32, 128256), ("bf16",), "gbps", 2000, "18"),
    ("std/sample/topk", (32, 128256), ("bf16",), "gbps", 2000, "18"),
    ("std/quant/gemv_q4", (16384, 16384), ("bf16", "f16"), "gbps", 3500, "18"),
    ("std/attention/prefill", (4096, 32, 8, 128), ("bf16",), "tflops", 430, "18"),
    ("std/attention/prefill", (4096, 32, 32, 128), ("bf16",), "tflops", 430, "18"),
    ("std/attention/decode", (32, 8192, 32, 8, 128), ("bf16",), "gbps", 4350, "18"),
]
#: the copy ceiling where a file was run without -v (H200, 2026-12-01)
CEILING_GBPS = 4275.0


def measure(row: dict, what: str, ceiling: float) -> float | None:
    """The row's figure in the target's measure (None where the row did not time Iron)."""
    if row.get("iron_gbps") is None:
        return None
    if what == "tflops":
        return row["gflops"] / 1000.0
    if what == "pct_ceiling":
        return 100.0 * row["iron_gbps"] / ceiling
    return row["iron_gbps"]


def peers(row: dict, what: str) -> str:
    """The references' figures in the same measure (GB/s or TF/s)."""
    refs = row.get("refs") or {}
    key, scale = ("gflops", 1e-3) if what == "tflops" else ("gbps", 1.0)
    return ", ".join(f"{family} {r[key] * scale:.0f}" for family, r in refs.items() if r.get(key))


def attainable(row: dict, ceiling: float, launch_us: float | None) -> str:
    """The GB/s one launch could show at this row's size: its bytes at the copy ceiling plus the run's empty-kernel
    time (what an event-timed launch costs with nothing to do); '' where the row or the run lacks a figure."""
    gbps, us = row.get("iron_gbps"), row.get("iron_us")
    if not gbps or not us or not launch_us:
        return ""
    nbytes = gbps * 1e3 * us  # GB/s x us = bytes / 1e3
    return f" (one launch at this size: <= {nbytes / (nbytes / ceiling / 1e3 + launch_us) / 1e3:.0f})"


def report(paths: list[str], show_all: bool = False) -> list[str]:
    lines, seen = [], set()
    docs = []
    for path in paths:
        with open(path) as f:
            docs.append((json.load(f), path))
    for doc, path in sorted(docs, key=lambda d: str(d[0].get("date", ""))):
        if doc.get("backend", "cuda") != "cuda":
            lines.append(f"(not judged: {path} ran on {doc['backend']})")
            continue
        ceiling = (doc.get("ceiling") or {}).get("copy_gbps") or CEILING_GBPS
        launch_us = (doc.get("ceiling") or {}).get("launch_us")
        for row in doc.get("rows", []):
            for i, (glob, shape, dtypes, what, threshold, issue) in enumerate(TARGETS):
                if not fnmatchcase(row["kernel"], glob) or row["dtype"] not in dtypes:
                    continue
                if shape is not None and tuple(row["shape"]) != shape:
                    continue
                got = measure(row, what, ceiling)
                seen.add(i)
                unit = {"tflops": "TF/s", "gbps": "GB/s", "pct_ceiling": "% of copy ceiling"}[what]
                verdict = ("no figure" if got is None else "wrong result" if row.get("ok") is False
                           else "met" if got >= threshold else "MISSED")
                figure = "-" if got is None else f"{got:.1f}"
                shape_s = "x".join(map(str, row["shape"]))
                bound = attainable(row, ceiling, launch_us) if what == "gbps" else ""
                lines.append(f"#{issue} {row['kernel']} {row['dtype']} {shape_s}: {figure} {unit} (target "
                             f"{threshold}){bound} {verdict}; peers: {peers(row, what) or '-'} [{path}]")
    if show_all:
        lines += [f"#{t[5]} {t[0]} {t[2]} {t[1]}: no row" for i, t in enumerate(TARGETS) if i not in seen]
    return lines


def main(argv: list[str]) -> int:
    paths = [a for a in argv if not a.startswith("--")]
    if not paths:
        print(__doc__)
        return 2
    print("\n".join(report(paths, "--all" in argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
