"""Dequantizing GEMV (decode): y = W x for a 4-bit or 8-bit affine group-wise quantized W (layout: ``quant``).

W is (N, K): packed u32 words (N, K * BITS / 32), scales and biases (N, K / GROUP) in T; x (K,) and y (N,) in T;
sums in f32. The structure is ``gemv``'s: a group of ``BLOCK`` threads owns ``ROWS`` consecutive rows; each step a
thread loads, for ``UNROLL`` chunks, one 16-byte vector of 4 words per row (32 elements at 4 bits, 16 at 8 bits, all
in one quantization group since GROUP >= 32) with that group's scale and bias, and the chunk's x (16-byte loads,
converted to f32 once for all ROWS rows), all before any arithmetic. Per chunk and row:

    sum_j (s q_j + b) x_j = s * sum_j q_j x_j + b * sum_j x_j

(MLX's factoring: sum_j x_j is shared by the rows). q_j is made a float without a shift or an int-to-float
conversion: the low and high 16 bits of a word each hold 16 / BITS elements; OR-ing ``word & (MASK << BITS*p)``
into the mantissa of 2^23 (0x4B000000) and subtracting 2^23 gives 2^(BITS*p) * q exactly, so each element costs one
logic op, one subtraction and one FMA into the accumulator of its position p; the positions are combined with their
2^(-BITS*p) once per chunk. Rows are reduced with ``simd_sum`` and a shared combine; the last group's missing rows
re-read the last row and store nothing. K must be a multiple of GROUP (so of 32).

Bytes: the bench counts the packed weight bytes only (N K BITS / 8, the issue's "GB/s of packed weight bytes");
scales and biases add 2 * 2 / (GROUP * BITS / 8) of that in f16/bf16 (12.5% at 4 bits, group 64), x and y ~0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..frontend.autotune import table_for, tune
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    bitcast,
    constexpr,
    f32,
    group_id,
    local_array,
    local_id,
    shared,
    simd_group,
    simd_lane,
    simd_size,
    simd_sum,
    static_range,
    u32,
    vload,
)
from ..runtime import get_backend
from . import quant as Q
from .softmax import dtype_label

#: iron build's defaults (valid for every dtype)
BITS = 4
GROUP = 64
BLOCK = 128
ROWS = 4
UNROLL = 2
XV = 4
MAGIC = 0x4B000000  # the bits of f32 2^23: an integer below 2^23 OR-ed into its mantissa is added to 2^23
TWO23 = 8388608.0


@kernel
def gemv_q(w: Tensor[u32], scales: Tensor[T], biases: Tensor[T], x: Tensor[T], y: Tensor[T], nrows: int,
           ncols: int, BITS: constexpr, GROUP: constexpr, BLOCK: constexpr, ROWS: constexpr, UNROLL: constexpr,
           XV: constexpr):
    """y[r] = sum_c W[r, c] x[c], W quantized (BITS, GROUP); launch ceil(nrows / ROWS) * BLOCK threads in groups of
    BLOCK. XV: x elements per 16-byte load (16 / itemsize)."""
    PER = 32 // BITS  # elements per word
    EPV = 4 * PER  # elements per 16-byte vector of words
    POS = 16 // BITS  # elements per 16-bit half of a word
    MASK = (1 << BITS) - 1
    tid = local_id(0)
    row0 = group_id(0) * ROWS
    nvec = ncols // EPV
    wrow = ncols // PER
    grow = ncols // GROUP
    acc = local_array(f32, ROWS)
    for r in static_range(ROWS):
        acc[r] = 0.0
    xs = local_array(f32, UNROLL * EPV)
    wv = local_array(u32, UNROLL * ROWS * 4)
    sv = local_array(f32, UNROLL * ROWS)
    bv = local_array(f32, UNROLL * ROWS)
    part = local_array(f32, POS)
    for v0 in range(tid, nvec, BLOCK * UNROLL):
        for u in static_range(UNROLL):
            v = v0 + u * BLOCK
            if v < nvec:
                for c in static_range(EPV // XV):
                    xv = vload(x, v * EPV + c * XV, XV)
                    for j in static_range(XV):
                        xs[u * EPV + c * XV + j] = xv[j]
                for r in static_range(ROWS):
                    rr = min(row0 + r, nrows - 1)  # rows past the end re-read the last row (never stored)
                    wr = vload(w, rr * wrow + v * 4, 4)
                    for j in static_range(4):
                        wv[(u * ROWS + r) * 4 + j] = wr[j]
                    g = rr * grow + (v * EPV) // GROUP
                    sv[u * ROWS + r] = scales[g]
                    bv[u * ROWS + r] = biases[g]
            else:
                for j in static_range(EPV):
                    xs[u * EPV + j] = 0.0
                for r in static_range(ROWS):
                    sv[u * ROWS + r] = 0.0
                    bv[u * ROWS + r] = 0.0
                    for j in static_range(4):
                        wv[(u * ROWS + r) * 4 + j] = 0
        for u in static_range(UNROLL):
            xsum = 0.0
            for j in static_range(EPV):
                xsum += xs[u * EPV + j]
            for r in static_range(ROWS):
                for p in static_range(POS):
                    part[p] = 0.0
                for i in static_range(4):
                    word = wv[(u * ROWS + r) * 4 + i]
                    hi = word >> 16
                    for p in static_range(POS):
                        m = MASK << (BITS * p)
                        q_lo = bitcast((word & m) | MAGIC, f32) - TWO23  # 2^(BITS p) * element p
                        q_hi = bitcast((hi & m) | MAGIC, f32) - TWO23  # 2^(BITS p) * element POS + p
                        part[p] += q_lo * xs[u * EPV + i * PER + p]
                        part[p] += q_hi * xs[u * EPV + i * PER + POS + p]
                dot = part[0]
                for p in static_range(1, POS):
                    dot += part[p] * (1.0 / (1 << (BITS * p)))
                acc[r] += sv[u * ROWS + r] * dot + bv[u * ROWS + r] * xsum
    partial = shared(f32, ROWS * BLOCK)  # one slot per (row, SIMD group)
    for r in static_range(ROWS):
        s = simd_sum(acc[r])
        if simd_lane() == 0:
            partial[r * BLOCK + simd_group()] = s
    barrier()
    if simd_group() == 0:
        for r in static_range(ROWS):
            t = 0.0
            for i in range(simd_lane(), (BLOCK + simd_size() - 1) // simd_size(), simd_size()):
                t += partial[r * BLOCK + i]
            t = simd_sum(t)
            if simd_lane() == 0 and row0 + r < nrows:
                y[row0 + r] = t


def _pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def plan(nrows: int, ncols: int, bits: int) -> tuple[int, int, int]:
    """(BLOCK, ROWS, UNROLL): a group just wide enough for a row's vectors in UNROLL steps (32..128 threads); 4 rows
    per group once there are enough rows to fill the GPU, fewer below."""
    nvec = ncols * bits // 128
    block = min(max(_pow2(-(-nvec // UNROLL)), 32), 128)
    rows = 4 if nrows >= 2048 else 2 if nrows >= 512 else 1
    return block, rows, UNROLL


#: (BLOCK, ROWS, UNROLL) autotuning times on CUDA beside plan's choice: more rows share each x chunk and its
#: conversion; more unrolling (or wider groups) puts more loads in flight
TUNING = {"cuda": [(128, 8, 1), (64, 8, 2), (256, 4, 1), (128, 4, 1), (64, 4, 2), (128, 2, 2), (256, 2, 2)]}


def launch_gemv_q(w: Any, scales: Any, biases: Any, x: Any, y: Any, bits: int, group: int,
                  backend: str | None = None) -> dict:
    """y = dequantize(w, scales, biases) @ x; returns the configuration it ran."""
    nrows = w.shape[0]
    ncols = w.shape[1] * 32 // bits
    if bits not in Q.BITS or group not in Q.GROUPS or ncols % group or tuple(scales.shape) != (nrows, ncols // group):
        raise ValueError(f"gemv_q: bits {bits}, group {group}, packed {tuple(w.shape)}, scales "
                         f"{tuple(scales.shape)} do not describe a quantized (N, K) matrix")
    block, rows, unroll = plan(nrows, ncols, bits)
    be = backend or get_backend(None).name
    configs = [{"BLOCK": block, "ROWS": rows, "UNROLL": unroll}]
    configs += [{"BLOCK": b, "ROWS": r, "UNROLL": u} for b, r, u in (table_for(TUNING, be) or [])
                if (b, r, u) != (block, rows, unroll)]
    xv = 16 // x.dtype.itemsize

    def run(cfg: dict) -> None:
        groups = -(-nrows // cfg["ROWS"])
        gemv_q[groups * cfg["BLOCK"], cfg["BLOCK"]](w, scales, biases, x, y, nrows, ncols, bits, group, cfg["BLOCK"],
                                                    cfg["ROWS"], cfg["UNROLL"], xv, backend=backend)

    cfg = tune(f"std/quant/gemv_q{bits}", configs, run, backend=be, dtype=dtype_label(x), key=(nrows, ncols, group))
    run(cfg)
    return cfg


class _Variant:
    """``gemv_q`` registered once per bit width (the registry keeps one entry per object)."""

    def __init__(self, bits: int):
        self.fn = gemv_q.fn
        self.kernel = gemv_q
        self.bits = bits

    def __repr__(self) -> str:
        return f"<iron kernel gemv_q ({self.bits}-bit)>"


def _setup(gen: InputGen, bits: int, group: int) -> dict[str, np.ndarray]:
    n, k = gen.shape
    w, s, b = Q.quantize(Q.random_weight(gen.rng, n, k), bits, group, gen.dtype)
    return {"w": w, "scales": s, "biases": b, "x": gen.random(shape=(k,)), "y": gen.poisoned(shape=(n,))}


def oracle(d: dict, bits: int, group: int) -> np.ndarray:
    """float64: the dequantized weights times x."""
    return Q.dequantize(d["w"], d["scales"], d["biases"], bits, group) @ d["x"].astype(np.float64)


def _torch_mv(d: dict, bits: int, group: int):
    """torch's dequantize-then-mv: W dequantized to T (on the device), then ``torch.mv``."""
    import torch

    return torch.mv(Q.torch_dequantize(d["w"], d["scales"], d["biases"], bits, group), d["x"], out=d["ref_out"])


def _register(bits: int, group: int = 64) -> None:
    target = _Variant(bits)
    bench(f"std/quant/gemv_q{bits}", setup=lambda gen: _setup(gen, bits, group), output="y",
          launch=lambda d, be: launch_gemv_q(d["w"], d["scales"], d["biases"], d["x"], d["y"], bits, group, be),
          references={"numpy": lambda d: oracle(d, bits, group).astype(d["x"].dtype),
                      "torch": lambda d: _torch_mv(d, bits, group), "mlx": "mlx.core.quantized_matmul"},
          bytes_moved=lambda shape, itemsize: shape[0] * shape[1] * bits // 8,
          flops=lambda shape: 2 * shape[0] * shape[1],
          device_shapes=[(16384, 16384), (4096, 4096), (14336, 4096)])(target)
    # |y| ~ |x| (rows of norm ~1): f32 sums of K terms; f16/bf16: the output's rounding, and the torch peer's
    # rounding of each dequantized weight to T
    test_kernel(oracle=lambda d: oracle(d, bits, group), domain="signed", shapes=[(37, 256), (64, 512)],
                tolerance={"f32": (1e-5, 1e-5), "f16": (4e-3, 2e-3), "bf16": (3e-2, 1.6e-2)})(target)


_register(4)
_register(8)
