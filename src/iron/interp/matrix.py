"""The interpreter's matrix fragments: the definition the targets' matrix units and the scalar fallback must match.

A fragment value is the whole matrix, held by every lane of its SIMD group: an array of shape (threads, rows, cols)
(f16/bf16 inputs in their dtype, accumulators in f32). ``frag_load``/``frag_store`` are SIMD-group collectives:
every active lane of a group must pass the same buffer index and leading dimension (a GPU's lanes each hold a part
of the matrix, so disagreeing lanes would read a mix of two matrices): the interpreter faults otherwise. ``mma``
computes acc + a @ b exactly (float64 products and sums of f16/bf16/f32 inputs) and rounds once to f32; hardware
and the fallback accumulate in f32 in their own order, so compiled results differ by f32 accumulation error.
"""

from __future__ import annotations

import numpy as np

from ..ir import types as t
from .memory import Target, _flat_index
from .semantics import from_f64
from .threads import Fault, Geometry, Mask, first_fault


def whole_groups(geom: Geometry, what: str, mask: Mask) -> None:
    """Fault unless every SIMD group that reaches the op has all its lanes there: a matrix unit needs them all."""
    width = geom.simd_width
    if not geom.simd_divides:
        raise Fault(f"{what} needs whole SIMD groups, but the group of {geom.group_threads} threads is not a "
                    f"multiple of the SIMD width {width}", 0, geom.n)
    if mask is None:
        return
    lanes = np.broadcast_to(mask, (geom.n,)).reshape(-1, width)
    partial = lanes.any(axis=1) & ~lanes.all(axis=1)
    if partial.any():
        group = int(np.flatnonzero(partial)[0])
        thread = group * width + int(np.flatnonzero(lanes[group])[0])
        raise Fault(f"{what} is reached by only part of a SIMD group (an early return, a divergent branch, or "
                    "threads past the grid): every lane must take part", thread, int(partial.sum()))


def _uniform(geom: Geometry, what: str, value: np.ndarray, mask: Mask) -> None:
    """Fault when the active lanes of a SIMD group disagree on ``value``."""
    if value.ndim == 0:
        return
    lead = value[geom.simd_base]  # lane 0's value; compare the active lanes with their group's first active lane
    if mask is not None:
        first = np.where(mask, geom.thread_index, geom.n)
        base_first = np.minimum.reduceat(first, geom.simd_starts)[geom.simd_segment]
        lead = value[np.minimum(base_first, geom.n - 1)]
    bad = first_fault(value != lead, mask, geom.n)
    if bad is not None:
        raise Fault(f"{what} differs across the lanes of a SIMD group (the whole group must pass the same value)",
                    *bad)


def _offsets(rows: int, cols: int, ld: np.ndarray, trans: bool) -> np.ndarray:
    """Element (r, c)'s offset from the fragment's base index, per thread: shape (threads or 1, rows, cols)."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(cols, dtype=np.int64)[None, :]
    ld = np.asarray(ld, dtype=np.int64).reshape(-1, 1, 1)
    return (c * ld + r) if trans else (r * ld + c)


def _addresses(target: Target, geom: Geometry, what: str, index, ld, rows: int, cols: int, trans: bool,
               mask: Mask) -> np.ndarray:
    whole_groups(geom, what, mask)
    _uniform(geom, f"{what}'s index", index, mask)
    _uniform(geom, f"{what}'s leading dimension", ld, mask)
    flat = np.asarray(index, dtype=np.int64).reshape(-1, 1, 1) + _offsets(rows, cols, ld, trans)
    flat = np.broadcast_to(flat, (geom.n, rows, cols))
    # the bounds check of every element a thread touches, with the message of an ordinary load
    worst = np.where((flat < 0) | (flat >= target.size), flat, -1).max(axis=(1, 2))
    where = np.where(worst >= 0, worst, flat[:, 0, 0]).astype(np.int64)
    _flat_index(target, geom, what, where, mask)
    return flat if target.base is None else flat + target.base.reshape(-1, 1, 1)


def frag_load(target: Target, geom: Geometry, index, ld, ty: t.FragType, trans: bool, mask: Mask) -> np.ndarray:
    flat = _addresses(target, geom, "frag load from", index, ld, ty.rows, ty.cols, trans, mask)
    return target.data.take(flat, mode="clip")


def mma(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    exact = np.matmul(a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64))
    return from_f64(exact + acc.astype(np.float64), t.f32)


def _aligned(op: str, checks, geom: Geometry, mask: Mask) -> None:
    """The alignment rule of the 4-bit ops: each (name, value, n) of ``checks`` a multiple of n, else a Fault naming
    the operand (NVIDIA's 16-byte loads)."""
    for name, value, n in checks:
        bad = first_fault(np.asarray(value) % n != 0, mask, geom.n)
        if bad is not None:
            shown = int(value if np.ndim(value) == 0 else np.asarray(value)[bad[0]])
            raise Fault(f"{op}'s {name} is {shown}: it must be a multiple of {n} (16-byte loads)", *bad)


def _codes(words: np.ndarray) -> np.ndarray:
    """The 128 4-bit codes of each row's 16 words (MLX's order): (..., rows, 16) -> (..., rows, 128)."""
    k = np.arange(128)
    return (words.astype(np.uint32)[..., k // 8] >> (4 * (k % 8)).astype(np.uint32)) & 15


def mma_q4(targets: tuple[Target, Target, Target], geom: Geometry, idx: list, acc: np.ndarray, group: int,
           elem: t.ScalarType, mask: Mask) -> np.ndarray:
    """acc + A @ B for mma_q4 (``iron.ir.ops``): A 16 x 128 from a, B's element (k, n) code k of w's row n times
    its group's scale, rounded to ``elem``; exact sums rounded once to f32, as ``mma``. Its alignment rule (the
    16-byte loads of NVIDIA's spelling): A's index and leading dimension multiples of 8, the words' of 4."""
    (a, w, s), (ai, lda, wi, ldw, si, lds) = targets, idx
    cols, scales = acc.shape[-1], 127 // group + 1
    _aligned("mma_q4", (("A index", ai, 8), ("A leading dimension", lda, 8), ("word index", wi, 4),
                        ("word leading dimension", ldw, 4)), geom, mask)
    xa = a.data.take(_addresses(a, geom, "mma_q4's A from", ai, lda, 16, 128, False, mask), mode="clip")
    words = w.data.take(_addresses(w, geom, "mma_q4's words from", wi, ldw, cols, 16, False, mask), mode="clip")
    sc = s.data.take(_addresses(s, geom, "mma_q4's scales from", si, lds, cols, scales, False, mask), mode="clip")
    k = np.arange(128)
    codes = _codes(words)  # (threads, n, k)
    b = from_f64(codes.astype(np.float64) * sc.astype(np.float32).astype(np.float64)[..., k // group], elem)
    exact = np.matmul(xa.astype(np.float32).astype(np.float64), np.swapaxes(b.astype(np.float32), -1, -2))
    return from_f64(exact + acc.astype(np.float64), t.f32)


def mv_q4(targets: tuple[Target, Target, Target], geom: Geometry, idx: list, acc: np.ndarray, group: int,
          mask: Mask) -> np.ndarray:
    """acc + W @ x for mv_q4 (``iron.ir.ops``): W's (16 mt) x 128 codes from w times their groups' scales, x's 128
    elements in every column; the exact sum rounded once to f32. Its alignment rule (NVIDIA's spelling loads x 16
    bytes and the words up to 16 bytes at a time): x's index a multiple of 8, the words' index and leading
    dimension multiples of 4."""
    (w, s, x), (wi, ldw, si, lds, xi) = targets, idx
    rows, scales = acc.shape[-2], 127 // group + 1
    _aligned("mv_q4", (("x index", xi, 8), ("word index", wi, 4), ("word leading dimension", ldw, 4)), geom, mask)
    words = w.data.take(_addresses(w, geom, "mv_q4's words from", wi, ldw, rows, 16, False, mask), mode="clip")
    sc = s.data.take(_addresses(s, geom, "mv_q4's scales from", si, lds, rows, scales, False, mask), mode="clip")
    xv = x.data.take(_addresses(x, geom, "mv_q4's x from", xi, np.int64(0), 1, 128, False, mask), mode="clip")
    k = np.arange(128)
    codes = _codes(words)  # (threads, rows, k)
    scaled = codes.astype(np.float64) * sc.astype(np.float32).astype(np.float64)[..., k // group]
    exact = np.matmul(scaled, xv.astype(np.float32).astype(np.float64)[:, 0, :, None])  # (threads, rows, 1)
    return from_f64(exact + acc.astype(np.float64), t.f32)


def frag_store(target: Target, geom: Geometry, index, ld, acc: np.ndarray, elem: t.ScalarType, valid, mask: Mask
               ) -> None:
    """Write the elements (r, c) with r < valid[0] and c < valid[1] (uniform across the SIMD group)."""
    rows, cols = acc.shape[-2:]
    _uniform(geom, "frag store's row count", valid[0], mask)
    _uniform(geom, "frag store's column count", valid[1], mask)
    inside = ((np.arange(rows)[None, :, None] < np.asarray(valid[0]).reshape(-1, 1, 1))
              & (np.arange(cols)[None, None, :] < np.asarray(valid[1]).reshape(-1, 1, 1)))
    inside = np.broadcast_to(inside, (geom.n, rows, cols))
    # addresses of the elements left out are not checked: they may lie past the end of the buffer
    index = np.asarray(index, dtype=np.int64)
    whole_groups(geom, "frag store to", mask)
    _uniform(geom, "frag store to's index", index, mask)
    _uniform(geom, "frag store to's leading dimension", ld, mask)
    flat = np.broadcast_to(index.reshape(-1, 1, 1) + _offsets(rows, cols, ld, False), (geom.n, rows, cols))
    active = np.zeros(geom.n, bool) if mask is not None else np.ones(geom.n, bool)
    if mask is not None:
        active[np.flatnonzero(mask)] = True
    take = inside & active[:, None, None]
    bad = np.where(take & ((flat < 0) | (flat >= target.size)), flat, -1).max(axis=(1, 2))
    worst = np.where(bad >= 0, bad, np.where(take.any(axis=(1, 2)), flat[:, 0, 0], 0))
    _flat_index(target, geom, "frag store to", worst, mask)
    if target.base is not None:
        flat = flat + target.base.reshape(-1, 1, 1)
    values = np.broadcast_to(from_f64(acc.astype(np.float64), elem), (geom.n, rows, cols))
    target.data[flat[take]] = values[take]
