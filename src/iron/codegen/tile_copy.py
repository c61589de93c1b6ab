"""Tile copies (``tile_load``/``tile_commit``/``tile_wait``, semantics in ``interp/tile_copies.py``) for every target
that does not run them on a copy engine: each ``tile_load`` becomes a loop in which the group's threads copy the
box element by element (zeros outside the view), ``tile_wait`` a ``barrier()`` and ``tile_commit`` nothing.

This is exact for every kernel the interpreter accepts: a load lands no later than its wait there, and a kernel
that is correct under the copy engine's rules (nobody reads a stage's buffer between issuing a load into it and
waiting for it, and no load is issued into a buffer others may still read) sees the same values when the copy
happens at once. ``keep`` names tile_loads a target runs itself (NVIDIA's bulk tensor copies: ``cfamily/cuda_tma``);
then the kernel's commits and waits stay as they are too.
"""

from __future__ import annotations

from ..ir import types as t
from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import clone_kernel

TILE_OPS = frozenset({"tile_load", "tile_commit", "tile_wait"})


def has_tile_copies(kernel: Kernel) -> bool:
    return any(op.opcode in TILE_OPS for op in kernel.walk())


def expand_tile_copies(kernel: Kernel, keep: frozenset[int] = frozenset()) -> Kernel:
    """``kernel`` itself when it has no tile copies, else a copy with them expanded. ``keep``: positions (in walk
    order among the kernel's tile_loads) of loads the target runs itself; when every load is kept, nothing changes;
    when only some are, the kept ones stay as they are along with every commit and wait (the target then runs
    those waits, which a barrier follows for the expanded loads)."""
    if not has_tile_copies(kernel):
        return kernel
    loads = [op for op in kernel.walk() if op.opcode == "tile_load"]
    if keep and len(keep) == len(loads):
        return kernel
    out = clone_kernel(kernel)
    order = {id(op): i for i, op in enumerate(o for o in out.walk() if o.opcode == "tile_load")}
    _expand_block(out.body, keep, order, bool(keep))
    return out


def _expand_block(block: Block, keep: frozenset[int], order: dict[int, int], mixed: bool) -> None:
    for op in list(block.ops):
        for region in op.regions:
            _expand_block(region, keep, order, mixed)
        if op.opcode not in TILE_OPS or op.opcode == "tile_load" and order[id(op)] in keep:
            continue
        b = Builder(Block(), op.loc)
        if op.opcode == "tile_load":
            _copy_loop(b, op)
        elif op.opcode == "tile_wait":
            if mixed:  # the target still waits for its own loads of the stage
                b.op("tile_wait", list(op.operands), None)
            b.op("barrier", [], None)
        elif mixed:
            b.op("tile_commit", list(op.operands), None)
        i = block.ops.index(op)
        for n in b.block.ops:
            n.parent = block
        block.ops[i:i + 1] = b.block.ops


def _linear_thread(b: Builder) -> tuple[Value, Value]:
    """The thread's linear index in its group and the group's thread count."""
    lid = [b.thread("local_id", a) for a in range(3)]
    size = [b.thread("group_size", a) for a in range(3)]
    tid = b.binary("add", lid[0], b.binary("mul", size[0], b.binary("add", lid[1], b.binary("mul", size[1],
                                                                                              lid[2]))))
    return tid, b.binary("mul", size[0], b.binary("mul", size[1], size[2]))


def _copy_loop(b: Builder, op: Op) -> None:
    """for v in range(tid, ROWS * COLS, threads): dst[j + r*DST_LD + c] = the view's element (r, c) of the box."""
    dst, j, src, rows, cols, ld, bstride, batch, row, col, _ = op.operands
    rb, cb, dld = op.attrs["rows_box"], op.attrs["cols_box"], op.attrs["dst_ld"]
    tid, nth = _linear_thread(b)
    _, body = b.for_(tid, b.const(rb * cb, t.i32), nth)
    v = body.args[0]
    with b.at(body):
        r = b.binary("div", v, b.const(cb, t.i32))
        c = b.binary("rem", v, b.const(cb, t.i32))
        gr, gc = b.binary("add", row, r), b.binary("add", col, c)
        zero = b.const(0, t.i32)
        inside = b.binary("and", b.binary("and", b.binary("ge", gr, zero), b.binary("lt", gr, rows)),
                          b.binary("and", b.binary("ge", gc, zero), b.binary("lt", gc, cols)))
        at = b.binary("add", j, b.binary("add", b.binary("mul", r, b.const(dld, t.i32)), c))
        _, then, else_ = b.if_(inside)
        with b.at(then):
            base = b.binary("mul", batch, bstride)
            b.store(dst, at, b.load(src, b.binary("add", base, b.binary("add", b.binary("mul", gr, ld), gc))))
        with b.at(else_):
            b.store(dst, at, b.const(0, src.type.elem) if not src.type.elem.is_half else
                    b.cast(b.const(0.0, t.f32), src.type.elem))
