"""RMSNorm in Triton, in the style of the layer-norm tutorial: one program per row, the row held in registers and
read once (sum of squares in f32, ``rsqrt``, times the weight, one store). Rows too long to hold (more than
``MAX_FUSED`` columns) are read twice in chunks: once for the sum of squares, once to scale and write.

Imports Triton at import time: only :mod:`iron.harness.peers` imports this module, when a row runs the peer.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

MAX_FUSED = 16384
CHUNK = 4096


@triton.jit
def _rms_norm_fused(x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, ncols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < ncols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / ncols + eps)
    tl.store(out_ptr + row * out_row_stride + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_chunked(x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, ncols, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    cols = tl.arange(0, CHUNK)
    acc = tl.zeros([CHUNK], tl.float32)
    for start in range(0, ncols, CHUNK):
        x = tl.load(x_row + start + cols, mask=start + cols < ncols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / ncols + eps)
    out_row = out_ptr + row * out_row_stride
    for start in range(0, ncols, CHUNK):
        mask = start + cols < ncols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + start + cols, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(d: dict[str, Any], *, eps: float = 1e-6, x: str = "x", w: str = "w") -> None:
    """``ref_out[r, c] = x[r, c] * rsqrt(mean(x[r, :]^2) + eps) * w[c]`` for a (rows, cols) tensor."""
    src, weight, out = d[x], d[w], d["ref_out"]
    rows, ncols = src.shape
    if ncols <= MAX_FUSED:
        block = triton.next_power_of_2(ncols)
        warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
        _rms_norm_fused[(rows,)](src, weight, out, src.stride(0), out.stride(0), ncols, eps, BLOCK=block,
                                 num_warps=warps)
    else:
        _rms_norm_chunked[(rows,)](src, weight, out, src.stride(0), out.stride(0), ncols, eps, CHUNK=CHUNK,
                                   num_warps=8)
