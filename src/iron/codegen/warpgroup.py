"""Warpgroup matrix multiply (``warpgroup_mma``/``warpgroup_wait``, IR ``wg_mma``/``wg_wait``) for the emitters.

Two lowerings of one definition (``interp/warpgroup.py``):

- ``expand_warpgroup_mma``: for every target without wgmma, each call becomes 4 rounds of ``frag_a``/``frag_b``/
  ``mma`` by each SIMD group on its 16 rows (then whatever the target does with fragments: mma.sync, MFMA,
  simdgroup_matrix, cooperative matrices, the scalar fallback); ``wg_wait`` disappears (the calls are synchronous).
- ``plan_wgmma`` + ``swizzle_shared``: for NVIDIA sm_90 (``cuda_wgmma.py``). wgmma reads its tiles from shared
  memory through descriptors in the 128-byte swizzled layout; Iron keeps the kernel's *logical* indexing and moves
  the arrays instead: every access to an operand array goes through ``phys``, a bijection of the array's indices:

  - an A array (and a B array with trans_b), rows of 64 elements (128 bytes): element i at
    ``i ^ (((i >> 6) & 7) << 3)`` (the 16-byte chunk XOR the row's low 3 bits: wgmma's 128-byte swizzle, K-major);
    ``frag_store`` may write such an array (attention's P tile): it applies phys per element itself;
  - a B array without trans_b, rows of L = ldb elements (L a multiple of 64): blocks of 64 rows; within a block,
    element (k, n) at panel n // 64 (64 x 64 elements, 8 KiB), row k, chunk ((n % 64) // 8) ^ (k % 8) (MN-major,
    128-byte swizzle; LBO = 8 KiB between panels, SBO = 1 KiB between 8-row groups: checked on the H200,
    bench/results/2026-12-01-h200-wgmma-proto.json).

  A 16-byte (8-element, aligned) access stays contiguous under ``phys``, and the tile origins the alignment rules
  allow are fixed points of it, so a descriptor is the array's base plus the logical index. The arrays start on
  1024-byte boundaries (the swizzle pattern repeats every 8 rows of 128 bytes).

A kernel qualifies for wgmma when every ``wg_mma`` has a compile-time ldb (and ldb % 64 == 0 unless trans_b), each
operand array has one layout, its size is a whole number of layout blocks, and it is accessed only by loads, stores,
vector copies, async copies, fragment stores (A arrays only), tile copies (``tile_load``: the copy engine writes the
swizzled layout itself, ``cfamily/cuda_tma.py``, or it is expanded into stores first) and ``wg_mma``; otherwise it is
expanded (correct, slower).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir import ops as O
from ..ir import types as t
from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import clone_kernel, const_value, replace_all_uses

K = 64
#: ops that may touch an operand array of a wgmma kernel (their index operands are remapped)
_ACCESS = {"load": (1,), "store": (1,), "atomic_add": (1,), "atomic_max": (1,)}
_COPIES = {"vcopy": ((0, 1), (2, 3)), "async_copy": ((0, 1), (2, 3))}


@dataclass(frozen=True)
class Layout:
    """How an operand array is stored: ``ld`` None for 64-element rows (A, trans B), else B's row length."""

    ld: int | None

    @property
    def block(self) -> int:
        return 8 * K if self.ld is None else K * self.ld


def has_warpgroup(kernel: Kernel) -> bool:
    return any(op.opcode in O.WARPGROUP for op in kernel.walk())


def expand_warpgroup_mma(kernel: Kernel) -> Kernel:
    """``kernel`` itself without warpgroup ops, else a copy with each call written as fragment ops."""
    if not has_warpgroup(kernel):
        return kernel
    out = clone_kernel(kernel)
    _expand_block(out, out.body)
    return out


def _expand_block(kernel: Kernel, block: Block) -> None:
    for op in list(block.ops):
        for region in op.regions:
            _expand_block(kernel, region)
        if op.opcode not in O.WARPGROUP:
            continue
        i = block.ops.index(op)
        new: list[Op] = []
        if op.opcode == "wg_mma":
            b = Builder(Block(), op.loc)
            result = _expand_call(b, op)
            replace_all_uses(kernel, op.result, result)
            new = b.block.ops
        for n in new:
            n.parent = block
        block.ops[i:i + 1] = new


def _expand_call(b: Builder, op: Op) -> Value:
    """acc += A[16w:16w+16, :] @ B by SIMD group w % 4 of the warpgroup: four k-steps of 16."""
    a, ai, bb, bi, ldb, acc = op.operands
    trans = op.attrs.get("trans_b", False)
    nt = acc.type.cols // 16
    ity = ai.type
    w = b.binary("rem", b.thread("simd_group"), b.const(4, t.i32))
    rows = b.binary("mul", b.cast(w, ity), b.const(16 * K, ity))
    for kk in range(K // 16):
        if isinstance(a.type, t.FragType):  # A in each SIMD group's own accumulator: its columns 16 kk ..
            fa = b.op("frag_to_a", [a, b.const(16 * kk, t.i32)], t.FragType("a", 16, 16, bb.type.elem)).result
        else:
            a_idx = b.binary("add", ai, b.binary("add", rows, b.const(16 * kk, ity)))
            fa = b.op("frag_load", [a, a_idx, b.const(K, ity)], t.FragType("a", 16, 16, a.type.elem),
                      {"role": "a", "trans": False}).result
        if trans:
            b_idx, b_ld = b.binary("add", bi, b.const(16 * kk, bi.type)), b.const(K, ldb.type)
        else:
            b_idx, b_ld = b.binary("add", bi, b.binary("mul", ldb, b.const(16 * kk, ldb.type))), ldb
        fb = b.op("frag_load", [bb, b_idx, b_ld], t.FragType("b", 16, 16 * nt, bb.type.elem),
                  {"role": "b", "trans": trans}).result
        acc = b.op("mma", [fa, fb, acc], acc.type).result
    return acc


# -- the wgmma path ---------------------------------------------------------------------------------------------------


def plan_wgmma(kernel: Kernel) -> dict[int, Layout] | None:
    """The layout of each operand array (by shared-array value uid), or None when the kernel must be expanded."""
    layouts: dict[int, Layout] = {}
    for op in kernel.walk():
        if op.opcode != "wg_mma":
            continue
        a, _, b, _, ldb, acc = op.operands
        ld = const_value(ldb)
        trans = op.attrs.get("trans_b", False)
        if not isinstance(ld, int) or acc.type.cols % 16 or (not trans and (ld % K or ld < acc.type.cols)):
            return None
        for arr, layout in ((a, Layout(None)), (b, Layout(None) if trans else Layout(ld))):
            if isinstance(arr.type, t.FragType):
                continue  # A in registers
            if layouts.setdefault(arr.uid, layout) != layout:
                return None
    if not layouts:
        return None
    for op in kernel.walk():
        if op.opcode in ("mma", "frag_load"):  # wgmma kernels hold wgmma accumulators only (cuda_wgmma.Sm90Matrix)
            return None
        if op.opcode == "shared" and op.result.uid in layouts and op.attrs["size"] % layouts[op.result.uid].block:
            return None
        if op.opcode in ("shared", "wg_mma", "tile_load") or op.opcode in _ACCESS or op.opcode in _COPIES:
            continue
        if op.opcode == "frag_store" and op.operands[0].uid in layouts and layouts[op.operands[0].uid].ld is None:
            continue  # into an A array (64-element rows): the store swizzles its addresses (attrs.swizzle)
        if any(isinstance(x.type, t.BufferType) and x.uid in layouts for x in op.operands):
            return None  # frag_load or anything else on a remapped array: keep it simple, expand
    return layouts


def swizzle_shared(kernel: Kernel, layouts: dict[int, Layout]) -> Kernel:
    """A copy of ``kernel`` whose accesses to the operand arrays go through ``phys`` (the module docstring)."""
    out = clone_kernel(kernel)
    # clone_kernel renumbers values: find the arrays again by their position among the shared ops
    old = [op.result.uid for op in kernel.walk() if op.opcode == "shared"]
    new = [op.result.uid for op in out.walk() if op.opcode == "shared"]
    remap = {n: layouts[o] for o, n in zip(old, new) if o in layouts}
    for op in list(out.walk()):
        if op.opcode == "frag_store" and op.operands[0].uid in remap:
            op.attrs["swizzle"] = True  # an A array: cuda_wgmma's store applies phys to each element's index
        for buf_pos, idx_pos in _index_operands(op):
            buf = op.operands[buf_pos]
            if buf.uid in remap:
                b = Builder(Block(), op.loc)
                phys = _phys(b, op.operands[idx_pos], remap[buf.uid])
                _insert_before(op, b.block.ops)
                op.operands[idx_pos] = phys
    return out


def _index_operands(op: Op) -> list[tuple[int, int]]:
    if op.opcode in _ACCESS:
        return [(0, _ACCESS[op.opcode][0])]
    return list(_COPIES.get(op.opcode, ()))


def _insert_before(anchor: Op, ops: list[Op]) -> None:
    block = anchor.parent
    i = block.ops.index(anchor)
    for n in ops:
        n.parent = block
    block.ops[i:i] = ops


def _phys(b: Builder, i: Value, layout: Layout) -> Value:
    """The physical index of logical index ``i`` (IR arithmetic in i's type). ``phys(q * P + x) = q * P + phys(x)``
    for the layout's power-of-two period P (``block``; all bit operations), so the terms of an index sum that are
    known multiples of P (a stage's base, ``stage * TILE``) are added after the swizzle: what remains is the
    thread's offset within a stage, the same every K step, which the C compiler computes once outside the loop."""
    period = layout.block
    if period & (period - 1) == 0:
        terms = _terms(i)
        outer = [x for x in terms if _known_multiple(x) % period == 0]
        if outer:
            inner = [x for x in terms if _known_multiple(x) % period]
            out = _swizzle(b, _sum(b, inner), layout) if inner else None
            for x in outer:
                out = x if out is None else b.binary("add", out, x)
            return out
    return _swizzle(b, i, layout)


def _terms(i: Value, depth: int = 0) -> list[Value]:
    """The addends of ``i`` through its tree of ``add`` ops (a few levels deep)."""
    owner = i.owner
    if depth < 8 and isinstance(owner, Op) and owner.opcode == "add":
        return _terms(owner.operands[0], depth + 1) + _terms(owner.operands[1], depth + 1)
    return [i]


def _sum(b: Builder, terms: list[Value]) -> Value:
    out = terms[0]
    for x in terms[1:]:
        out = b.binary("add", out, x)
    return out


def _known_multiple(v: Value, depth: int = 0) -> int:
    """A power of two that ``v`` is known to be a multiple of (wrapping arithmetic keeps it true), 1 when unknown;
    0 stands for the constant 0 (a multiple of everything)."""
    c = const_value(v)
    if isinstance(c, int) and not isinstance(c, bool):
        return 0 if c == 0 else c & -c
    owner = v.owner
    if depth > 8 or not isinstance(owner, Op) or owner.opcode not in ("mul", "shl", "add", "sub"):
        return 1
    a, b = (_known_multiple(x, depth + 1) for x in owner.operands[:2])
    if owner.opcode == "mul":
        return 0 if 0 in (a, b) else a * b
    if owner.opcode == "shl":
        s = const_value(owner.operands[1])
        return a << s if isinstance(s, int) and a and 0 <= s < 32 else (0 if a == 0 else 1)
    return b if a == 0 else a if b == 0 else min(a, b)


def _swizzle(b: Builder, i: Value, layout: Layout) -> Value:
    ty = i.type

    def c(v: int) -> Value:
        return b.const(v, ty)

    if layout.ld is None:
        row = b.binary("and", b.binary("shr", i, c(6)), c(7))
        return b.binary("xor", i, b.binary("shl", row, c(3)))
    ld = layout.ld
    blk = b.binary("mul", _div(b, i, K * ld), c(K * ld))
    rest = _rem(b, i, K * ld)
    k = _div(b, rest, ld)
    n = _rem(b, rest, ld)
    panel = b.binary("mul", _div(b, n, K), c(K * K))
    inner = b.binary("add", b.binary("mul", k, c(K)), _rem(b, n, K))
    lin = b.binary("add", b.binary("add", blk, panel), inner)
    return b.binary("xor", lin, b.binary("shl", b.binary("and", k, c(7)), c(3)))


def _div(b: Builder, i: Value, d: int) -> Value:
    """i // d for an index (never negative): a shift where d is a power of two (the C compilers cannot assume the
    sign, and a signed division costs several instructions per shared access in the loaders)."""
    if d & (d - 1) == 0:
        return b.binary("shr", i, b.const(d.bit_length() - 1, i.type))
    return b.binary("div", i, b.const(d, i.type))


def _rem(b: Builder, i: Value, d: int) -> Value:
    if d & (d - 1) == 0:
        return b.binary("and", i, b.const(d - 1, i.type))
    return b.binary("rem", i, b.const(d, i.type))


def phys_index(i: int, layout: Layout) -> int:
    """``phys`` in Python, for tests and the docs."""
    if layout.ld is None:
        return i ^ (((i >> 6) & 7) << 3)
    ld = layout.ld
    blk, rest = divmod(i, K * ld)
    k, n = divmod(rest, ld)
    lin = blk * K * ld + (n // K) * K * K + k * K + n % K
    return lin ^ ((k & 7) << 3)
