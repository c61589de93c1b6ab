"""``iron inspect --backend cuda --resources`` / ``--sass``: what ptxas made of each variant of a kernel.

Registers, shared memory, stack frame, spills and local memory per compiled function, read from NVRTC's log of a
compile with ptxas's verbose report (:func:`iron.codegen.nvrtc.resource_report`). The point is to see where a
register array went: indexed only by compile-time indices after unrolling it stays in registers (no stack frame); a
run-time index that ptxas cannot resolve puts it in local memory (a stack frame of its size), and a kernel that needs
more registers than the target allows spills (spill stores/loads). ``--sass`` prints the machine code itself
(:mod:`iron.codegen.sass`: nvdisasm of NVRTC's cubin), each function's instruction count and commonest opcodes first.
"""

from __future__ import annotations

import os
from typing import Any

from ..codegen import nvrtc
from ..frontend.kernel import KernelFunction

#: the report's columns: (header, field of :func:`nvrtc.parse_ptxas_log`)
COLUMNS = [("regs", "registers"), ("barriers", "barriers"), ("smem B", "shared_bytes"),
           ("stack B", "stack_frame_bytes"), ("spill st B", "spill_store_bytes"), ("spill ld B", "spill_load_bytes")]


def default_arch() -> str:
    """The target the CUDA runtime compiles for when it has no device to ask: ``IRON_CUDA_ARCH``, else sm_90."""
    return os.environ.get("IRON_CUDA_ARCH", "sm_90")


def _local_memory(res: dict) -> str:
    """Where the function's per-thread memory went, in words (the last column)."""
    if not res["local_memory"]:
        return "none (all in registers)"
    parts = []
    if res["stack_frame_bytes"]:
        parts.append(f"{res['stack_frame_bytes']} B stack frame")
    if res["spill_store_bytes"] or res["spill_load_bytes"]:
        parts.append(f"spills {res['spill_store_bytes']} B stored / {res['spill_load_bytes']} B loaded")
    if res["local_bytes"]:
        parts.append(f"{res['local_bytes']} B lmem")
    return "yes: " + ", ".join(parts)


def _variants(k: KernelFunction, dtypes: list[Any], constexprs: dict[str, Any], arch: str):
    """(label, CUDA source, target) for each dtype of ``dtypes`` (``[None]`` for a kernel without T)."""
    for dtype in dtypes:
        source = k.source("cuda", dtype=dtype, target=arch, **constexprs)  # for arch: no PDL prologue before sm_90
        target = "sm_90a" if arch == "sm_90" and "wgmma.mma_async" in source else arch  # warpgroup_mma as wgmma
        yield variant_label(dtype, constexprs), source, target


def variant_label(dtype: Any, constexprs: dict[str, Any]) -> str:
    """``T=bf16, VEC=8``: the variant a report is of."""
    return ", ".join([*([f"T={dtype}"] if dtype is not None else []), *(f"{n}={v}" for n, v in constexprs.items())])


def variant_reports(k: KernelFunction, dtypes: list[Any], constexprs: dict[str, Any], arch: str
                    ) -> list[tuple[str, dict[str, dict]]]:
    """[(variant label, report per function)] for each dtype of ``dtypes`` (``[None]`` for a kernel without T)."""
    return [(label, nvrtc.resource_report(source, target, name=k.__name__))
            for label, source, target in _variants(k, dtypes, constexprs, arch)]


def render_sass(k: KernelFunction, dtypes: list[Any], constexprs: dict[str, Any], arch: str) -> str:
    """The text ``iron inspect --sass`` prints: per variant a header, each function's instruction count and
    commonest opcodes, then nvdisasm's listing."""
    from ..codegen import sass

    why = sass.unavailable_reason()
    if why is not None:
        raise RuntimeError(f"--sass needs NVRTC and nvdisasm: {why}")
    parts = []
    for label, source, target in _variants(k, dtypes, constexprs, arch):
        text = sass.disassemble(source, target, name=k.__name__)
        parts.append(f"// SASS of {k.__name__}{f' [{label}]' if label else ''} for {target} (nvdisasm)\n"
                     f"{sass.summary(text)}\n{text}")
    return "\n".join(parts)


def _groups(arch: str, group: int, res: dict) -> str:
    """The occupancy cell: groups an SM at ``group`` threads, the share of its warp slots and what limits it."""
    from ..codegen.occupancy import occupancy

    occ = occupancy(arch, group, res["registers"], res["shared_bytes"])
    return f"{occ.groups} ({occ.percent:.0f} %, {occ.limiter})"


def render(k: KernelFunction, reports: list[tuple[str, dict[str, dict]]], arch: str, group: int | None = None
           ) -> str:
    """The text ``iron inspect --resources`` prints: one aligned table per variant, a row per compiled function;
    with ``group`` (threads a group), the groups an SM holds at once (``codegen.occupancy``: static shared memory
    only, as ptxas reports it)."""
    major, minor = nvrtc.nvrtc_version()
    lines = []
    extra = [f"groups/SM at {group}"] if group else []
    headers = ["function", *(h for h, _ in COLUMNS), *extra, "local memory"]
    for label, report in reports:
        lines.append(f"// resources of {k.__name__}{f' [{label}]' if label else ''} for {arch} "
                     f"(NVRTC {major}.{minor}, ptxas -v)")
        rows = [[name, *(str(res[field]) for _, field in COLUMNS), *([_groups(arch, group, res)] if group else []),
                 _local_memory(res)] for name, res in report.items()]
        widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
        for row in [headers, *rows]:
            cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:-1], widths[1:-1])), row[-1]]
            lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
