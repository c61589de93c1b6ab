"""The interpreter's tile copies (``tile_load`` / ``tile_commit`` / ``tile_wait``): the definition NVIDIA's bulk
tensor copies (``codegen/cfamily/cuda_tma.py``) and the element-by-element expansion elsewhere
(``codegen/tile_copy.py``) must match, and the checks that catch a kernel that would hang or race on a GPU.

Per group and stage (0..7): the loads issued since the stage's last commit (*open*), then the committed phases in
order. A load reads its source when issued and lands in shared memory only at the ``tile_wait`` that retires its
phase, so a kernel that reads a stage before waiting for it sees the old contents. Faults: a group that only partly
reaches one of these ops; operands that differ between a group's threads; a view whose ld / bstride is not a
multiple of 16 bytes; a destination offset that is not a multiple of ROWS * DST_LD; a stage outside 0..7; a read
inside the view but past the end of the buffer; ``tile_wait`` on a stage with no committed phase (a GPU waits
forever) or with loads not yet committed.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .memory import Target
from .threads import Fault, Geometry, Mask

STAGES = 8


class TileCopies:
    def __init__(self):
        # (group, stage) -> open loads / committed phases; a load is (dst, flat start, rows, cols, dst_ld, box)
        self.open: dict[tuple[int, int], list[tuple]] = {}
        self.committed: dict[tuple[int, int], deque[list[tuple]]] = {}

    def issue(self, dst: Target, src: Target, values: list[np.ndarray], attrs: dict, geom: Geometry,
              mask: Mask) -> None:
        """``values``: j, rows, cols, ld, bstride, batch, row, col, stage (per thread or 0-d)."""
        rb, cb, dld = attrs["rows_box"], attrs["cols_box"], attrs["dst_ld"]
        itemsize = src.data.dtype.itemsize
        for g, first in _groups(geom, mask, "tile_load", values):
            j, rows, cols, ld, bstride, batch, row, col, stage = (int(_at(v, first)) for v in values)
            _check_stage(stage)
            if (ld * itemsize) % 16 or (bstride * itemsize) % 16:
                raise Fault(f"tile_load's view has ld {ld} and batch stride {bstride}: each times {itemsize} bytes "
                            "must be a multiple of 16 bytes", first)
            if j % (rb * dld):
                raise Fault(f"tile_load's destination offset {j} is not a multiple of ROWS * DST_LD "
                            f"({rb} x {dld})", first)
            if j + (rb - 1) * dld + cb > dst.size:
                raise Fault(f"tile_load to {dst.desc} at index {j}: the {rb} x {cb} box (row stride {dld}) ends "
                            f"past its size {dst.size}", first)
            box = _read_box(src, rows, cols, ld, bstride, batch, row, col, rb, cb, first)
            self.open.setdefault((g, stage), []).append((dst, g * dst.size + j, rb, cb, dld, box))

    def commit(self, stage_v: np.ndarray, geom: Geometry, mask: Mask) -> None:
        for g, first in _groups(geom, mask, "tile_commit", [stage_v]):
            stage = int(_at(stage_v, first))
            _check_stage(stage)
            loads = self.open.pop((g, stage), [])
            self.committed.setdefault((g, stage), deque()).append(loads)

    def wait(self, stage_v: np.ndarray, geom: Geometry, mask: Mask) -> None:
        for g, first in _groups(geom, mask, "tile_wait", [stage_v]):
            stage = int(_at(stage_v, first))
            _check_stage(stage)
            if self.open.get((g, stage)):
                raise Fault(f"tile_wait({stage}) with tile_loads to stage {stage} not yet committed "
                            f"(tile_commit({stage}) first): their phase would never complete", first)
            phases = self.committed.get((g, stage))
            if not phases:
                raise Fault(f"tile_wait({stage}) in group {g} with no committed phase of stage {stage} in flight: "
                            "on a GPU it would wait forever", first)
            for dst, start, rb, cb, dld, box in phases.popleft():
                for r in range(rb):
                    dst.data[start + r * dld:start + r * dld + cb] = box[r]


def _check_stage(stage: int) -> None:
    if not 0 <= stage < STAGES:
        raise Fault(f"tile stage {stage} is outside 0..{STAGES - 1}")


def _at(v: np.ndarray, thread: int):
    return v if np.ndim(v) == 0 else v[thread]


def _groups(geom: Geometry, mask: Mask, what: str, values: list[np.ndarray]):
    """(group, its first thread) of each group that reaches the op, after checking that the whole group reached
    it with the same operands."""
    gt = geom.group_threads
    if mask is None:
        active = np.ones(geom.n, dtype=bool)
    elif mask is False:
        return
    else:
        active = np.asarray(mask)
    live = geom.in_grid
    live = np.ones(geom.n, dtype=bool) if live is None else np.asarray(live)
    per_group = active.reshape(-1, gt)
    for g in np.flatnonzero(per_group.any(axis=1)):
        threads = slice(g * gt, (g + 1) * gt)
        if (live[threads] & ~active[threads]).any():
            raise Fault(f"{what} reached by only part of group {g} (divergent control flow): it is a collective of "
                        "the whole group", g * gt)
        first = g * gt + int(np.argmax(active[threads]))
        for v in values:
            if np.ndim(v) and (v[threads][active[threads]] != v[first]).any():
                raise Fault(f"{what}'s operands differ between the threads of group {g}: every thread passes the "
                            "same values", first)
        yield int(g), first


def _read_box(src: Target, rows: int, cols: int, ld: int, bstride: int, batch: int, row: int, col: int, rb: int,
              cb: int, thread: int) -> np.ndarray:
    box = np.zeros((rb, cb), dtype=src.data.dtype)
    r = np.arange(row, row + rb)
    c = np.arange(col, col + cb)
    rin = (r >= 0) & (r < rows)
    cin = (c >= 0) & (c < cols)
    if not rin.any() or not cin.any():
        return box
    flat = batch * bstride + r[rin][:, None] * ld + c[cin][None, :]
    if flat.min() < 0 or flat.max() >= src.size:
        bad = int(flat.max() if flat.max() >= src.size else flat.min())
        raise Fault(f"tile_load from {src.desc} at index {bad} is out of bounds (size {src.size}): the view "
                    f"({rows} x {cols}, ld {ld}, batch stride {bstride}) at batch {batch} lies past the buffer",
                    thread)
    box[np.ix_(rin, cin)] = src.data[flat]
    return box
