"""SASS, the machine code ptxas made of a CUDA source, read without a GPU: NVRTC's cubin through NVIDIA's
``nvdisasm`` (the ``nvidia-cuda-nvdisasm`` wheel, or one on PATH).

Why: registers and spills (``resource_report``) do not say what ptxas scheduled. Session 23 (2026-12-06) found from
the SASS alone that a prefetch meant to overlap loads with arithmetic had its loads issued after the arithmetic,
and that ``exp2f`` costs a range test and two predicated multiplies around its one ``MUFU.EX2``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from . import nvrtc
from .cfamily.source import KernelSource

_HINT = "pip install nvidia-cuda-nvdisasm (NVIDIA's disassembler; no GPU needed)"
#: an instruction line of nvdisasm: /*0040*/  [@P0] OPCODE.MODIFIERS operands ;
_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]+)?\b")
_FUNC = re.compile(r"^\s*\.text\.(\S+):")


def nvdisasm_path() -> str | None:
    """nvdisasm on PATH, else the one the ``nvidia-cuda-nvdisasm`` wheel installs (nvidia/cu*/bin); None: neither."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    for root in getattr(nvidia, "__path__", []):
        for cand in sorted(Path(root).glob("cu*/bin/nvdisasm"), reverse=True):
            if os.access(cand, os.X_OK):
                return str(cand)
    return None


def unavailable_reason() -> str | None:
    """Why SASS cannot be read here (no NVRTC, no nvdisasm), or None."""
    why = nvrtc.unavailable_reason()
    if why is not None:
        return why
    return None if nvdisasm_path() else f"nvdisasm not found: {_HINT}"


def disassemble(source: str | KernelSource, arch: str = "sm_90", name: str | None = None) -> str:
    """The SASS of ``source`` compiled by NVRTC for ``arch`` (an sm_XX target), as nvdisasm prints it."""
    tool = nvdisasm_path()
    if tool is None:
        raise RuntimeError(f"nvdisasm not found: {_HINT}")
    cubin = nvrtc.compile_cuda(source, arch, name=name)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        done = subprocess.run([tool, str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"nvdisasm failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def opcode_counts(sass: str) -> dict[str, Counter]:
    """Per function, how many instructions of each opcode (modifiers dropped: ``MUFU.EX2`` counts as ``MUFU``)."""
    out: dict[str, Counter] = {}
    current = None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            current = out.setdefault(m.group(1), Counter())
            continue
        m = _INSN.match(line)
        if m and current is not None:
            current[m.group(1)] += 1
    return out


def summary(sass: str, top: int = 12) -> str:
    """One line per function: its instruction count and most frequent opcodes."""
    lines = []
    for fn, counts in opcode_counts(sass).items():
        common = ", ".join(f"{op} {n}" for op, n in counts.most_common(top))
        lines.append(f"// {fn}: {sum(counts.values())} instructions ({common})")
    return "\n".join(lines)
