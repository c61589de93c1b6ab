"""What an MFMA instruction does, independently of Iron's code: AMD's register layout of V_MFMA_F32_16X16X16F16 and
V_MFMA_F32_16X16X16BF16_1K as its matrix instruction calculator prints it (data/mfma_16x16x16_layout.csv), and the
instruction on a wavefront's registers, D = A B + C, reading each operand where that layout puts it.

Registers of a wavefront are NumPy arrays indexed [lane, item]: four 16-bit values (as floats) per lane for A and B
(item 2g + h is VGPR g, half h, as in an ``ext_vector_type(4)`` of 16-bit values), four floats for C and D.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "mfma_16x16x16_layout.csv"
INSTRUCTIONS = {"f16": "v_mfma_f32_16x16x16f16", "bf16": "v_mfma_f32_16x16x16bf16_1k"}
_ENTRY = re.compile(r"v(\d+)\{(\d+)\}(?:\.\[(\d+):(\d+)\])?")


@cache
def calculator_layout(instruction: str) -> dict[str, dict[tuple[int, int], tuple[int, int]]]:
    """Per matrix ("A", "B", "D"): element (row, col) -> (lane, item), from the calculator's tables."""
    out: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    current = None
    for line in DATA.read_text().splitlines():
        head = re.match(r"# instruction (\S+), matrix (\w)", line)
        if head:
            current = out.setdefault(head.group(2), {}) if head.group(1) == instruction else None
            continue
        if current is None or not re.match(r"\d+,", line):
            continue
        row, *cells = line.split(",")
        for col, cell in enumerate(cells):
            gpr, lane, hi, lo = _ENTRY.fullmatch(cell).groups()
            item = int(gpr) if hi is None else 2 * int(gpr) + int(lo) // 16
            current[(int(row), col)] = (int(lane), item)
    if set(out) != {"A", "B", "D"} or any(len(m) != 256 for m in out.values()):
        raise ValueError(f"{DATA} lacks a full A/B/D table for {instruction}")
    return out


def mfma(instruction: str, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The D registers [64, 4] of one 16x16x16 MFMA on A, B, C registers: D = A B + C in float64, each operand
    read (and D written) where AMD's layout puts it; C has D's layout."""
    lay = calculator_layout(instruction)
    am, bm, cm = (np.zeros((16, 16)) for _ in range(3))
    for (r, k), (lane, item) in lay["A"].items():
        am[r, k] = a[lane, item]
    for (k, n), (lane, item) in lay["B"].items():
        bm[k, n] = b[lane, item]
    for (r, n), (lane, item) in lay["D"].items():
        cm[r, n] = c[lane, item]
    dm = am.astype(np.float64) @ bm.astype(np.float64) + cm
    d = np.full((64, 4), np.nan)
    for (r, n), (lane, item) in lay["D"].items():
        d[lane, item] = dm[r, n]
    return d


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), rounded to nearest even (finite inputs)."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_value(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def random_bits(rng: np.random.Generator, elem: str, shape) -> np.ndarray:
    """Random 16-bit matrices of ``elem`` (f16 or bf16) in [-1, 1), as their bit patterns."""
    x = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    return x.astype(np.float16).view(np.uint16) if elem == "f16" else bf16_bits(x)


def value(bits: np.ndarray, elem: str) -> np.ndarray:
    """16-bit patterns of ``elem`` -> float64."""
    return (bits.view(np.float16) if elem == "f16" else bf16_value(bits)).astype(np.float64)
