"""Row softmax in Triton, the fused design: one program per row, the row held in registers and read from memory
once (max, exponentials, sum and scaling all on the registers), f32 arithmetic, one store. Rows too long to hold
(more than ``MAX_FUSED`` columns) take an online pass instead (running max and rescaled sum over chunks, then a
second read to write), the best a kernel can do when the row does not fit.

Imports Triton at import time: only :mod:`iron.harness.peers` imports this module, when a row runs the peer.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

#: the widest row kept whole in registers: 16384 f32 over 16 warps is 32 values a thread
MAX_FUSED = 16384
#: chunk of the online pass for longer rows
CHUNK = 4096


@triton.jit
def _softmax_fused(x_ptr, out_ptr, x_row_stride, out_row_stride, ncols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < ncols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online(x_ptr, out_ptr, x_row_stride, out_row_stride, ncols, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    cols = tl.arange(0, CHUNK)
    # per lane: a running max and a sum of exponentials relative to it, merged across lanes at the end
    m = tl.full([CHUNK], -float("inf"), tl.float32)
    s = tl.zeros([CHUNK], tl.float32)
    for start in range(0, ncols, CHUNK):
        mask = start + cols < ncols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes still at -inf (no element seen yet) keep a zero sum instead of exp(nan)
        s = tl.where(m_new == -float("inf"), 0.0, s * tl.exp(m - m_new) + tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    inv = 1.0 / total
    out_row = out_ptr + row * out_row_stride
    for start in range(0, ncols, CHUNK):
        mask = start + cols < ncols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_row + start + cols, (tl.exp(x - row_max) * inv).to(out_ptr.dtype.element_ty), mask=mask)


def _warps(block: int) -> int:
    """Enough warps that each thread holds at most a few dozen values of the row (no spills), no more."""
    return 4 if block <= 2048 else 8 if block <= 4096 else 16


def softmax(d: dict[str, Any], *, x: str = "x") -> None:
    """``ref_out[r, :] = softmax(x[r, :])`` for a (rows, cols) tensor whose rows are contiguous."""
    src, out = d[x], d["ref_out"]
    rows, ncols = src.shape
    if ncols <= MAX_FUSED:
        block = triton.next_power_of_2(ncols)
        _softmax_fused[(rows,)](src, out, src.stride(0), out.stride(0), ncols, BLOCK=block, num_warps=_warps(block))
    else:
        _softmax_online[(rows,)](src, out, src.stride(0), out.stride(0), ncols, CHUNK=CHUNK, num_warps=8)
