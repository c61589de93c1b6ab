"""Step compilers of the tile-level constructs for the interpreter's executor (``executor._COMPILERS``): vector
copies, asynchronous copies, matrix fragments and warpgroup_mma / warpgroup_wait (semantics in ``memory.py``,
``matrix.py`` and ``warpgroup.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import ops as O
from ..ir import types as t
from ..ir.core import Op
from . import matrix, memory, warpgroup
from .threads import Mask
from .tile_copies import TileCopies

Step = Callable[[Mask], Mask]  # executor.Step (not imported: the executor imports this module)


def warpgroup_step(ex: Any, op: Op) -> Step:
    """warpgroup_mma / warpgroup_wait (``interp/warpgroup.py``)."""
    env, geom, state = ex.env, ex.geom, ex.wg
    if op.opcode == "wg_wait":
        pending = op.attrs["pending"]
        return lambda mask: (state.wait(pending, geom, mask), mask)[1]
    in_regs = isinstance(op.operands[0].type, t.FragType)  # A from each SIMD group's accumulator fragment
    a_slot = ex._slot(op.operands[0]) if in_regs else None
    a = None if in_regs else ex.targets[op.operands[0].uid]
    b = ex.targets[op.operands[2].uid]
    ai, bi, ldb, acc = (ex._slot(op.operands[i]) for i in (1, 3, 4, 5))
    out, trans_b, line = ex._slot(op.result), op.attrs.get("trans_b", False), str(op.loc or ex.kernel.loc)

    def wg_mma(mask: Mask) -> Mask:
        if in_regs:
            state.check_ready((a_slot,), "warpgroup_mma's A fragment", mask, geom.n)
        a_arg = env[a_slot] if in_regs else a
        env[out], call = warpgroup.wg_mma(state, geom, a_arg, env[ai], b, env[bi], env[ldb], env[acc], trans_b, mask,
                                          line)
        state.tag(out, (call,))
        return mask

    return wg_mma


def async_step(ex: Any, op: Op) -> Step:
    geom, copies, code = ex.geom, ex.copies, op.opcode
    if code == "async_commit":
        return lambda mask: (copies.commit(), mask)[1]
    if code == "async_wait":
        pending = op.attrs["pending"]
        return lambda mask: (copies.wait(pending, geom), mask)[1]
    env, n = ex.env, op.attrs["n"]
    dst, src = ex.targets[op.operands[0].uid], ex.targets[op.operands[2].uid]
    di, si = ex._slot(op.operands[1]), ex._slot(op.operands[3])

    def async_copy(mask: Mask) -> Mask:
        copies.issue(dst, env[di], src, env[si], n, geom, mask)
        return mask

    return async_copy


def tile_step(ex: Any, op: Op) -> Step:
    """tile_load / tile_commit / tile_wait (``interp/tile_copies.py``)."""
    geom, env = ex.geom, ex.env
    if not hasattr(ex, "tiles"):
        ex.tiles = TileCopies()
    tiles: TileCopies = ex.tiles
    slots = [ex._slot(x) for x in op.operands]
    if op.opcode == "tile_commit":
        return lambda mask: (tiles.commit(env[slots[0]], geom, mask), mask)[1]
    if op.opcode == "tile_wait":
        return lambda mask: (tiles.wait(env[slots[0]], geom, mask), mask)[1]
    dst, src, attrs = ex.targets[op.operands[0].uid], ex.targets[op.operands[2].uid], op.attrs
    rest = [s for k, s in enumerate(slots) if k not in (0, 2)]

    def tile_load(mask: Mask) -> Mask:
        tiles.issue(dst, src, [env[s] for s in rest], attrs, geom, mask)
        return mask

    return tile_load


def vcopy_step(ex: Any, op: Op) -> Step:
    env, geom, n = ex.env, ex.geom, op.attrs["n"]
    dst, src = ex.targets[op.operands[0].uid], ex.targets[op.operands[2].uid]
    di, si = ex._slot(op.operands[1]), ex._slot(op.operands[3])

    def vcopy(mask: Mask) -> Mask:
        memory.vcopy(dst, env[di], src, env[si], n, geom, mask)
        return mask

    return vcopy


def matrix_step(ex: Any, op: Op) -> Step:
    """The matrix fragment ops but the element-wise ones (``interp/matrix.py``; warpgroup ops: ``warpgroup_step``)."""
    env, geom, code = ex.env, ex.geom, op.opcode
    slots = [ex._slot(v) for v in op.operands]
    if code == "frag_zero":
        ty, out = op.result.type, ex._slot(op.result)
        zeros = np.zeros((1, ty.rows, ty.cols), np.float32)  # broadcasts over the threads like other fragments

        def zero(mask: Mask) -> Mask:
            env[out] = zeros
            return mask

        return zero
    if code in O.WARPGROUP:
        return warpgroup_step(ex, op)
    if code == "mma":
        out = ex._slot(op.result)

        def mma(mask: Mask) -> Mask:
            ex.wg.check_ready(slots, "mma", mask, geom.n)
            matrix.whole_groups(geom, "mma", mask)
            a, b, c = (env[s] for s in slots)
            env[out] = matrix.mma(a, b, c)  # every thread, as pure ops are: inactive lanes are never read
            return mask

        return mma
    if code == "mma_q4":
        out, group, elem = ex._slot(op.result), op.attrs["group"], op.operands[0].type.elem
        targets = tuple(ex.targets[op.operands[i].uid] for i in (0, 3, 6))

        def mma_q4(mask: Mask) -> Mask:
            ex.wg.check_ready(slots[9:], "mma_q4", mask, geom.n)
            idx = [env[slots[i]] for i in (1, 2, 4, 5, 7, 8)]
            env[out] = matrix.mma_q4(targets, geom, idx, env[slots[9]], group, elem, mask)
            return mask

        return mma_q4
    if code == "mv_q4":
        out, group = ex._slot(op.result), op.attrs["group"]
        targets = tuple(ex.targets[op.operands[i].uid] for i in (0, 3, 6))

        def mv_q4(mask: Mask) -> Mask:
            ex.wg.check_ready(slots[8:], "mv_q4", mask, geom.n)
            idx = [env[slots[i]] for i in (1, 2, 4, 5, 7)]
            env[out] = matrix.mv_q4(targets, geom, idx, env[slots[8]], group, mask)
            return mask

        return mv_q4
    target = ex.targets[op.operands[0].uid]
    if code == "frag_load":
        out, ty, trans = ex._slot(op.result), op.result.type, op.attrs.get("trans", False)

        def frag_load(mask: Mask) -> Mask:
            env[out] = matrix.frag_load(target, geom, env[slots[1]], env[slots[2]], ty, trans, mask)
            return mask

        return frag_load
    elem = op.operands[0].type.elem

    def frag_store(mask: Mask) -> Mask:
        ex.wg.check_ready(slots[3:4], "frag_store", mask, geom.n)
        valid = (env[slots[4]], env[slots[5]])
        matrix.frag_store(target, geom, env[slots[1]], env[slots[2]], env[slots[3]], elem, valid, mask)
        return mask

    return frag_store
