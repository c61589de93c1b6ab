"""The interpreter's element-wise fragment ops (``frag_unary``, ``frag_binary``, ``frag_reduce``, ``frag_fill``,
``frag_mask``): the definition the targets' lane layouts must match.

Fragments are whole matrices held by every lane (``interp/matrix.py``): an accumulator is (threads or 1, rows, cols)
f32, a row fragment (threads or 1, rows, 1), so NumPy broadcasting is the broadcast of a row along the columns.
Element-wise arithmetic is the scalar ops' own semantics (``semantics.pure_fn``: f32 arithmetic, float math as the
float64 reference rounded once); a row sum is exact (float64) and rounded once, as ``mma`` is; hardware sums in f32 in
its own order. Scalars, bounds and fills must agree across the SIMD group (a lane owns only some elements, so a
per-lane scalar would make the result depend on the layout) and every lane must take part (the row reductions
exchange values between lanes): both faults, like the other fragment ops.
"""

from __future__ import annotations

import numpy as np

from ..ir import types as t
from ..ir.core import Op
from .matrix import _uniform, whole_groups
from .semantics import from_f64, pure_fn
from .threads import Fault, Geometry, Mask, first_fault


def _operand(value: np.ndarray, is_frag: bool) -> np.ndarray:
    """A fragment as is; a scalar (0-d or per thread) as (threads or 1, 1, 1)."""
    return value if is_frag else np.asarray(value, np.float32).reshape(-1, 1, 1)


def evaluate(op: Op, values: list[np.ndarray], geom: Geometry, mask: Mask) -> np.ndarray:
    """The result of element-wise fragment op ``op`` for operand values ``values``."""
    code = op.opcode
    whole_groups(geom, code, mask)
    frags = [isinstance(x.type, t.FragType) for x in op.operands]
    for v, is_frag in zip(values, frags):
        if not is_frag:
            _uniform(geom, f"{_NAMES[code]}'s scalar operand", np.asarray(v), mask)
    ty = op.result.type
    with np.errstate(all="ignore"):
        if code in ("frag_unary", "frag_binary"):
            fn = pure_fn(op.attrs["fn"], [t.f32] * len(values), t.f32)
            return np.asarray(fn(*(_operand(v, f) for v, f in zip(values, frags))), np.float32)
        if code == "frag_reduce":
            acc = values[0]
            if op.attrs["fn"] == "max":  # NaNs made quiet: NumPy's scalar fmax (glibc) keeps a signalling one
                acc = np.where(np.isnan(acc), np.float32(np.nan), acc)
                return np.fmax.reduce(acc, axis=2, keepdims=True).astype(np.float32)
            return from_f64(acc.astype(np.float64).sum(axis=2, keepdims=True), t.f32)
        if code == "frag_to_a":
            col0 = _to_a_column(op, values[1], geom, mask)
            return from_f64(values[0][..., :, col0:col0 + 16].astype(np.float64), ty.elem)
        if code == "frag_fill":
            return np.broadcast_to(_operand(values[0], False), (geom.n if np.ndim(values[0]) else 1, ty.rows, ty.cols)
                                   ).astype(np.float32)
        return _mask(op, values, geom, mask)


def _to_a_column(op: Op, col0: np.ndarray, geom: Geometry, mask: Mask) -> int:
    """frag_to_a's first column (uniform, checked above): a multiple of 16 inside the accumulator, else a fault."""
    c = np.asarray(col0).reshape(-1)
    live = c if mask is None or c.size == 1 else c[np.asarray(mask, bool)]
    if live.size == 0:
        return 0
    col = int(live[0])
    if col % 16 or not 0 <= col <= op.operands[0].type.cols - 16:
        bad = first_fault(np.ones(geom.n, bool), mask, geom.n)
        raise Fault(f"frag_to_a's col0 is {col}: it must be a multiple of 16 from 0 to "
                    f"{op.operands[0].type.cols - 16}", *bad)
    return col


def _mask(op: Op, values: list[np.ndarray], geom: Geometry, mask: Mask) -> np.ndarray:
    acc, row0, col0, cols, fill = values
    for name, v in (("row0", row0), ("col0", col0), ("cols", cols)):
        _uniform(geom, f"frag_mask's {name}", np.asarray(v), mask)
    rows_n, cols_n = acc.shape[-2:]
    r = np.arange(rows_n, dtype=np.int64)[None, :, None] + np.asarray(row0, np.int64).reshape(-1, 1, 1)
    c = np.arange(cols_n, dtype=np.int64)[None, None, :] + np.asarray(col0, np.int64).reshape(-1, 1, 1)
    out = c >= np.asarray(cols, np.int64).reshape(-1, 1, 1)
    if op.attrs["causal"]:
        out = out | (c > r)
    return np.where(out, _operand(fill, False), acc).astype(np.float32)


_NAMES = {"frag_to_a": "frag_to_a", "frag_unary": "fragment math", "frag_binary":
          "fragment arithmetic", "frag_reduce": "frag_row_max/sum", "frag_fill": "frag_rows", "frag_mask": "frag_mask"}


def elementwise_step(ex, op: Op):
    """The executor's step for an element-wise fragment op (``executor._COMPILERS``)."""
    env, geom = ex.env, ex.geom
    slots = [ex._slot(v) for v in op.operands]
    frag_slots = [s for s, v in zip(slots, op.operands) if isinstance(v.type, t.FragType)]
    out = ex._slot(op.result)

    def step(mask: Mask) -> Mask:
        ex.wg.check_ready(frag_slots, _NAMES[op.opcode], mask, geom.n)
        env[out] = evaluate(op, [env[s] for s in slots], geom, mask)
        return mask

    return step
