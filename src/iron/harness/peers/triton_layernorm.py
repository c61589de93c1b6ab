"""LayerNorm forward in Triton, the layer-norm tutorial's design: one program per row, statistics in f32 (the mean,
then the biased variance around it, so a large mean costs no digits), ``rsqrt``, times the weight, plus the optional
bias, one store in the output's dtype.

Rows up to the tutorial's 64 KB feature limit (``MAX_FUSED_BYTES // itemsize`` columns, BLOCK =
``next_power_of_2(cols)``) are held whole in registers and read once. Longer rows take the tutorial's looping kernel:
three passes over the row in ``CHUNK``-column blocks (sum, centred sum of squares, write), the later reads mostly
served from L2.

Imports Triton at import time: only :mod:`iron.harness.peers` imports this module, when a row runs the peer.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

#: the tutorial's limit on a row held whole: 64 KB of input features
MAX_FUSED_BYTES = 65536
#: block of the looping kernel for longer rows
CHUNK = 4096


@triton.jit
def _layer_norm_fused(x_ptr, w_ptr, b_ptr, out_ptr, x_row_stride, out_row_stride, ncols, eps,
                      BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < ncols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / ncols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / ncols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layer_norm_looped(x_ptr, w_ptr, b_ptr, out_ptr, x_row_stride, out_row_stride, ncols, eps,
                       CHUNK: tl.constexpr, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    cols = tl.arange(0, CHUNK)
    # pass 1: the mean (per-lane partial sums, reduced once)
    acc = tl.zeros([CHUNK], tl.float32)
    for start in range(0, ncols, CHUNK):
        acc += tl.load(x_row + start + cols, mask=start + cols < ncols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / ncols
    # pass 2: the biased variance around the mean
    acc = tl.zeros([CHUNK], tl.float32)
    for start in range(0, ncols, CHUNK):
        mask = start + cols < ncols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        acc += xc * xc
    rstd = tl.rsqrt(tl.sum(acc, axis=0) / ncols + eps)
    # pass 3: normalise, scale, shift, write
    for start in range(0, ncols, CHUNK):
        mask = start + cols < ncols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w
        if HAS_BIAS:
            y += tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _warps(block: int) -> int:
    """Enough warps that each thread holds at most a few dozen values of the row (no spills), no more."""
    return 4 if block <= 2048 else 8 if block <= 4096 else 16


def layer_norm(d: dict[str, Any], *, eps: float = 1e-5, x: str = "x", w: str = "w", b: str | None = "b") -> None:
    """``ref_out[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * w (+ b)`` for a (rows, cols) tensor whose rows are
    contiguous; var is the biased (1/cols) variance, as torch's layer_norm. No bias when ``b`` is None or not among
    the arrays."""
    src, weight, out = d[x], d[w], d["ref_out"]
    bias = d.get(b) if b is not None else None
    has_bias = bias is not None
    rows, ncols = src.shape
    if src.stride(-1) != 1 or out.stride(-1) != 1:
        raise ValueError("layer_norm peer: rows must be contiguous")
    args = (src, weight, bias if has_bias else weight, out, src.stride(0), out.stride(0), ncols, eps)
    block = triton.next_power_of_2(ncols)
    if block <= MAX_FUSED_BYTES // src.element_size():
        _layer_norm_fused[(rows,)](*args, BLOCK=block, HAS_BIAS=has_bias, num_warps=_warps(block))
    else:
        _layer_norm_looped[(rows,)](*args, CHUNK=CHUNK, HAS_BIAS=has_bias, num_warps=8)
