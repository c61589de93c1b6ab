"""Fused residual add + RMSNorm (issue 18), the pre-norm step of every decoder layer: ``h = x + residual`` (written,
the next layer's residual) and ``out = rms_norm(h) * w``, reading x and the residual once.

The register path is norm.py's (``plan_rows``, one group per row, the row in f32 registers from 16-byte loads):
the sum is rounded to T, stored with ``vstore`` and normalised from those rounded values, so ``out`` is exactly
``rms_norm(h)`` of the ``h`` written (as torch's unfused pair computes it). Rows too long for one group (the split
path) run the two steps unfused: ``std/elementwise`` add, then ``launch_rms_norm``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..frontend import kernel
from ..harness.registry import InputGen, bench, test_kernel
from ..lang import T, Tensor, cast, constexpr, f32, group_id, local_array, local_id, rsqrt, shared, static_range, vstore
from . import elementwise
from .norm import EPS, launch_rms_norm, store_scaled, sum_squares
from .softmax import BLOCK, PER, VEC, RowPlan, group_total, load_vectors, tuned_rows

__all__ = ["BLOCK", "PER", "VEC", "add_rms_norm_rows", "launch_add_rms_norm"]  # BLOCK, PER, VEC: iron build's


@kernel
def add_rms_norm_rows(x: Tensor[T], res: Tensor[T], w: Tensor[T], h: Tensor[T], out: Tensor[T], ncols: int,
                      eps: float, BLOCK: constexpr, VEC: constexpr, PER: constexpr):
    """h = x + res (rounded to T), out = h * rsqrt(mean(h^2) + eps) * w per row; one group of BLOCK threads per row
    (ncols <= BLOCK * PER * VEC, a multiple of VEC). Sums in f32."""
    start = group_id(0) * ncols
    nvec = ncols // VEC
    tid = local_id(0)
    vals = local_array(f32, PER * VEC)
    rv = local_array(f32, PER * VEC)
    wv = local_array(T, PER * VEC)
    load_vectors(x, vals, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(res, rv, start, nvec, 0.0, BLOCK, VEC, PER)
    load_vectors(w, wv, 0, nvec, 0.0, BLOCK, VEC, PER)
    for k in static_range(PER):
        v = k * BLOCK + tid
        if v < nvec:
            o = local_array(T, VEC)
            for j in static_range(VEC):
                o[j] = cast(vals[k * VEC + j] + rv[k * VEC + j], T)
                vals[k * VEC + j] = cast(o[j], f32)
            vstore(h, start + v * VEC, o)
    total = group_total(sum_squares(vals, PER, VEC), shared(f32, BLOCK), BLOCK)
    scale = rsqrt(total / cast(ncols, f32) + eps)
    store_scaled(out, vals, wv, start, nvec, scale, BLOCK, VEC, PER)


def launch_add_rms_norm(x: Any, res: Any, w: Any, h: Any, out: Any, eps: float = EPS,
                        backend: str | None = None) -> RowPlan:
    """h = x + res; out = rms_norm(h) * w over the rows of C-contiguous (rows, ncols) matrices; returns the plan."""
    return tuned_rows("std/add_rms_norm", x, backend, lambda p: _launch_plan(x, res, w, h, out, eps, p, backend))


def _launch_plan(x: Any, res: Any, w: Any, h: Any, out: Any, eps: float, p: RowPlan, backend: str | None) -> None:
    rows, ncols = x.shape
    if p.chunks == 1:
        add_rms_norm_rows[rows * p.block, p.block](x, res, w, h, out, ncols, eps, p.block, p.vec, p.per,
                                                   backend=backend)
        return
    elementwise.launch_binary("add", x, res, h, backend)
    launch_rms_norm(h, w, out, eps, backend)


def _setup(gen: InputGen) -> dict[str, np.ndarray]:
    return {"x": gen.random(), "res": gen.random(), "w": gen.random(shape=gen.shape[1:]), "h": gen.poisoned(),
            "out": gen.poisoned()}


def _oracle(d) -> np.ndarray:
    """float64, from the inputs alone (not from the kernel's h)."""
    hh = d["x"].astype(np.float64) + d["res"].astype(np.float64)
    return hh / np.sqrt(np.mean(hh * hh, axis=1, keepdims=True) + EPS) * d["w"].astype(np.float64)


def _reference(d) -> np.ndarray:
    hh = (d["x"].astype(np.float32) + d["res"].astype(np.float32)).astype(d["x"].dtype).astype(np.float32)
    w = d["w"].astype(np.float32)
    return (hh / np.sqrt(np.mean(hh * hh, axis=1, keepdims=True) + np.float32(EPS)) * w).astype(d["x"].dtype)


def _torch_reference(d):
    """torch's unfused pair: the add, then its fused rms_norm."""
    import torch

    hh = torch.add(d["x"], d["res"])
    return torch.nn.functional.rms_norm(hh, hh.shape[1:], d["w"], eps=EPS)


bench("std/norm/add_rms_norm", setup=_setup,
      launch=lambda d, be: launch_add_rms_norm(d["x"], d["res"], d["w"], d["h"], d["out"], EPS, be),
      references={"numpy": _reference, "torch": _torch_reference},
      bytes_moved=lambda shape, itemsize: (4 * int(np.prod(shape)) + shape[1]) * itemsize,
      flops=lambda shape: 5 * int(np.prod(shape)),
      device_shapes=[(4096, 4096), (16384, 8192), (32, 128256)])(add_rms_norm_rows)
# h's rounding to T propagates into out: one more rounding than rms_norm's allowance
test_kernel(oracle=_oracle, domain="signed", shapes=[(64, 1024), (33, 100), (4, 40000)],
            tolerance={"f32": (1e-6, 2e-5), "f16": (2e-3, 4e-3), "bf16": (2e-2, 3.2e-2)})(add_rms_norm_rows)
