"""The scalar fallback of matrix fragments: fragment values become per-lane register arrays and ``mma`` a loop of
fmas, for targets without a matrix-unit spelling (lavapipe's Vulkan, the Metal model, HIP for now).

An accumulator of R x C is cut into a GR x GC grid of blocks, one block of RB x CB = (R / GR) x (C / GC) elements per
lane of a SIMD group of W = GR * GC lanes (GR the largest power of two with GR * GR <= W): lane l owns rows
(l // GC) * RB ... and columns (l % GC) * CB .... An A-fragment of R rows holds, per lane, the RB rows its blocks need
(RB x K values), a B-fragment of C columns the CB columns (CB x K); ``mma`` adds the K products of each owned element
in f32 (fma), in k order. So every lane
loads only what it uses and the results are those of the interpreter within f32 accumulation error. The SIMD width
must be the one the kernel runs at (the emitter's target width).
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import ops as O
from ..ir import types as t
from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from ..ir.rewrite import clone_kernel, const_value
from .warpgroup import expand_warpgroup_mma


def to_a_column(op: Op) -> int:
    """frag_to_a's first column, which every lowering needs at compile time: a constant once static_range loops are
    unrolled (a literal, a constexpr, a static_range index), a multiple of 16 inside the accumulator."""
    col0, cols = const_value(op.operands[1]), op.operands[0].type.cols
    if type(col0) is not int:
        raise CompileError("frag_to_a's col0 must be known at compile time (a literal, a constexpr or a static_range "
                           "index), not a run-time value", op.loc)
    if col0 % 16 or not 0 <= col0 <= cols - 16:
        raise CompileError(f"frag_to_a's col0 is {col0}: it must be a multiple of 16 from 0 to {cols - 16}", op.loc)
    return col0


def needs_fallback(kernel: Kernel, matrix: object | None) -> bool:
    """Whether a dialect with fragment spelling ``matrix`` (None: none) must take the scalar fallback for
    ``kernel``: it has no spelling, or the kernel uses element-wise fragment ops and the spelling has no lane layout
    for them (``elementwise``: only NVIDIA's mma.sync / wgmma layouts today), or it uses ``mma_q4`` and the spelling
    has no element order of its own for it (``permuted``: NVIDIA's)."""
    if matrix is None:
        return True
    codes = {op.opcode for op in kernel.walk()}
    if codes & O.FRAG_PERMUTED and not getattr(matrix, "permuted", False):
        return True
    return not getattr(matrix, "elementwise", False) and bool(codes & O.FRAG_LAYOUT)


def lower_fragments(kernel: Kernel, width: int) -> Kernel:
    """``kernel`` itself when it has no fragment ops, else a lowered copy for SIMD groups of ``width`` lanes
    (warpgroup_mma calls are first expanded into fragment ops: ``codegen/warpgroup.py``)."""
    kernel = expand_warpgroup_mma(kernel)
    if not any(op.opcode in O.MATRIX for op in kernel.walk()):
        return kernel
    if width < 1 or width & (width - 1) or width > 256:
        raise ValueError(f"the fragment fallback needs a power-of-two SIMD width up to 256, not {width}")
    lowered = clone_kernel(kernel)
    _Lowering(lowered, width).run()
    return lowered


class _Lowering:
    def __init__(self, kernel: Kernel, width: int):
        self.k = kernel
        gr = 1
        while (gr * 2) * (gr * 2) <= width:
            gr *= 2
        self.gr, self.gc = gr, width // gr
        self.kk = t.MMA_SHAPE["f16"][2]
        self.arrays: dict[Value, Value] = {}  # fragment value or var -> its local array
        self.top: list[Op] = []  # local arrays and the lane's block coordinates, put at the top of the kernel
        b = Builder(Block())
        lane = b.thread("simd_lane")
        self.lane_row = b.binary("div", lane, b.const(self.gc, t.i32))
        self.lane_col = b.binary("rem", lane, b.const(self.gc, t.i32))
        self.top += b.block.ops

    def _rb(self, rows: int) -> int:
        return max(1, rows // self.gr)

    def _cb(self, cols: int) -> int:
        return max(1, cols // self.gc)

    def _origin(self, b: Builder, coord: Value, block: int) -> Value:
        return b.binary("mul", coord, b.const(block, t.i32))

    def run(self) -> None:
        self._block(self.k.body)
        for op in reversed(self.top):
            op.parent = self.k.body
            self.k.body.ops.insert(0, op)

    def _block(self, block: Block) -> None:
        for op in list(block.ops):
            for region in op.regions:
                self._block(region)
            if self._lowers(op):
                b = Builder(Block(), op.loc)
                self._lower(b, op)
                i = block.ops.index(op)
                for new in b.block.ops:
                    new.parent = block
                block.ops[i:i + 1] = b.block.ops

    @staticmethod
    def _lowers(op: Op) -> bool:
        if op.opcode in O.MATRIX:
            return True
        if op.opcode not in ("var", "get", "set"):
            return False
        ty = op.result.type if op.opcode == "var" else op.operands[0].type
        return isinstance(ty.elem, t.FragType)

    # -- storage ----------------------------------------------------------------------------------------------------

    def _shape(self, ty: t.FragType) -> tuple[t.ScalarType, int]:
        if ty.role == "a":
            return ty.elem, self._rb(ty.rows) * self.kk
        if ty.role == "b":
            return ty.elem, self._cb(ty.cols) * self.kk
        if ty.role == "row":
            return t.f32, self._rb(ty.rows)
        return t.f32, self._rb(ty.rows) * self._cb(ty.cols)

    def _new_array(self, ty: t.FragType, name: str | None) -> Value:
        elem, size = self._shape(ty)
        b = Builder(Block())
        arr = b.op("local", [], t.BufferType(elem, "local", size), {"elem": elem, "size": size}, name=name).result
        self.top += b.block.ops
        return arr

    def _copy(self, b: Builder, src: Value, dst: Value) -> None:
        for i in range(dst.type.size):
            idx = b.const(i, t.i32)
            b.store(dst, idx, b.load(src, idx))

    # -- the ops ----------------------------------------------------------------------------------------------------

    def _lower(self, b: Builder, op: Op) -> None:
        code = op.opcode
        if code == "var":
            self.arrays[op.result] = self._new_array(op.result.type.elem, op.result.name)
        elif code == "set":
            self._copy(b, self.arrays[op.operands[1]], self.arrays[op.operands[0]])
        elif code == "get":
            arr = self._result(op)
            self._copy(b, self.arrays[op.operands[0]], arr)
        elif code == "frag_zero":
            arr = self._result(op)
            for i in range(arr.type.size):
                b.store(arr, b.const(i, t.i32), b.const(0.0, t.f32))
        elif code == "frag_load":
            self._load(b, op)
        elif code == "mma":
            self._mma(b, op)
        elif code in O.FRAG_ELEMENTWISE:
            self._elementwise(b, op)
        elif code == "frag_to_a":
            self._to_a(b, op)
        elif code == "mma_q4":
            self._mma_q4(b, op)
        elif code == "mv_q4":
            self._mv_q4(b, op)
        else:
            self._store(b, op)

    def _result(self, op: Op) -> Value:
        arr = self._new_array(op.result.type, op.result.name)
        self.arrays[op.result] = arr
        return arr

    def _address(self, b: Builder, index: Value, ld: Value, row: Value, col: int | Value, trans: bool) -> Value:
        """index + row * ld + col (trans: index + col * ld + row), in the index's type."""
        ty = index.type
        ld = b.cast(ld, ty)
        row = b.cast(row, ty)
        col = b.const(col, ty) if isinstance(col, int) else b.cast(col, ty)
        if trans:
            row, col = col, row
        off = b.binary("add", b.binary("mul", row, ld), col)
        return b.binary("add", index, off)

    def _load(self, b: Builder, op: Op) -> None:
        buf, index, ld = op.operands
        ty, trans = op.result.type, op.attrs.get("trans", False)
        arr = self._result(op)
        # A: rows r0 + i, all k; B: columns c0 + j, all k (element (k, n) of B is at row k, column n)
        if ty.role == "a":
            lines = self._rb(ty.rows)
            origin = self._origin(b, self.lane_row, lines)
        else:
            lines = self._cb(ty.cols)
            origin = self._origin(b, self.lane_col, lines)
        for i in range(lines):
            line = b.binary("add", origin, b.const(i, t.i32))
            for k in range(self.kk):
                if ty.role == "a":
                    addr = self._address(b, index, ld, line, k, trans)
                else:  # B is K x N: row k, column line; trans: B stored as B^T
                    addr = self._address(b, index, ld, b.const(k, t.i32), line, trans)
                b.store(arr, b.const(i * self.kk + k, t.i32), b.load(buf, addr))

    def _mma(self, b: Builder, op: Op) -> None:
        a, bb, c = (self.arrays[v] for v in op.operands)
        out = self._result(op)
        rb, cb = self._rb(op.result.type.rows), self._cb(op.result.type.cols)
        for i in range(rb):
            for j in range(cb):
                s = b.load(c, b.const(i * cb + j, t.i32))
                for k in range(self.kk):
                    x = b.cast(b.load(a, b.const(i * self.kk + k, t.i32)), t.f32)
                    y = b.cast(b.load(bb, b.const(j * self.kk + k, t.i32)), t.f32)
                    s = b.op("fma", [x, y, s], t.f32).result
                b.store(out, b.const(i * cb + j, t.i32), s)

    def _mma_q4(self, b: Builder, op: Op) -> None:
        """mma_q4 as a loop over the 128 k: this lane's rows of A, its columns' codes times their scales rounded to
        A's dtype (the product is exact in f32, so one rounding), fmas into its block in k order."""
        a, ai, lda, w, wi, ldw, s, si, lds, acc = op.operands
        group, elem = op.attrs["group"], a.type.elem
        out = self._result(op)
        self._copy(b, self.arrays[acc], out)
        rb, cb = self._rb(acc.type.rows), self._cb(acc.type.cols)
        r0, c0 = self._origin(b, self.lane_row, rb), self._origin(b, self.lane_col, cb)
        _, body = b.for_(b.const(0, t.i32), b.const(128, t.i32), b.const(1, t.i32), "k")
        k = body.args[0]
        with b.at(body):
            xs = [b.cast(b.load(a, self._address(b, ai, lda, b.binary("add", r0, b.const(i, t.i32)), k, False)),
                         t.f32) for i in range(rb)]
            shift = b.cast(b.binary("mul", b.binary("rem", k, b.const(8, t.i32)), b.const(4, t.i32)), t.u32)
            ds = []
            for j in range(cb):
                n = b.binary("add", c0, b.const(j, t.i32))
                d = self._q4_weight(b, w, wi, ldw, s, si, lds, n, k, shift, group)
                ds.append(b.cast(b.cast(d, elem), t.f32))
            for i in range(rb):
                for j in range(cb):
                    idx = b.const(i * cb + j, t.i32)
                    b.store(out, idx, b.op("fma", [xs[i], ds[j], b.load(out, idx)], t.f32).result)

    def _store(self, b: Builder, op: Op) -> None:
        buf, index, ld, acc, rows, cols = op.operands
        arr = self.arrays[acc]
        rb, cb = self._rb(acc.type.rows), self._cb(acc.type.cols)
        r0, c0 = self._origin(b, self.lane_row, rb), self._origin(b, self.lane_col, cb)
        for i in range(rb):
            row = b.binary("add", r0, b.const(i, t.i32))
            for j in range(cb):
                col = b.binary("add", c0, b.const(j, t.i32))
                inside = b.binary("and", b.op("lt", [row, b.cast(rows, t.i32)], t.bool_).result,
                                  b.op("lt", [col, b.cast(cols, t.i32)], t.bool_).result)
                _, then, _ = b.if_(inside)
                with b.at(then):
                    v = b.cast(b.load(arr, b.const(i * cb + j, t.i32)), buf.type.elem)
                    b.store(buf, self._address(b, index, ld, row, col, False), v)


    # -- element-wise ops: lane (row block R, column block C) holds rows R*rb .. and columns C*cb .. ------------------

    def _element(self, b: Builder, v: Value, i: int, j: int) -> Value:
        """Element (i, j) of this lane's block of v: an accumulator, a row fragment (row i) or a scalar."""
        if not isinstance(v.type, t.FragType):
            return v
        index = i * self._cb(v.type.cols) + j if v.type.role == "acc" else i
        return b.load(self.arrays[v], b.const(index, t.i32))

    def _elementwise(self, b: Builder, op: Op) -> None:
        code, ty = op.opcode, op.result.type
        out = self._result(op)
        rb, cb = self._rb(ty.rows), (self._cb(ty.cols) if ty.role == "acc" else 1)
        if code == "frag_reduce":
            self._reduce(b, op, out)
            return
        r0, c0 = self._origin(b, self.lane_row, rb), self._origin(b, self.lane_col, cb)
        for i in range(rb):
            for j in range(cb):
                xs = [self._element(b, x, i, j) for x in op.operands]
                if code == "frag_fill":
                    v = xs[0]
                elif code == "frag_mask":
                    v = self._masked(b, op, xs, b.binary("add", r0, b.const(i, t.i32)),
                                     b.binary("add", c0, b.const(j, t.i32)))
                elif code == "frag_binary":
                    v = b.binary(op.attrs["fn"], xs[0], xs[1])
                else:
                    v = b.op(op.attrs["fn"], xs, t.f32).result
                b.store(out, b.const(i * cb + j, t.i32), v)

    @staticmethod
    def _masked(b: Builder, op: Op, xs: list[Value], row: Value, col: Value) -> Value:
        value, row0, col0, cols, fill = xs
        c = b.binary("add", col0, col)
        out = b.op("ge", [c, cols], t.bool_).result
        if op.attrs["causal"]:
            out = b.binary("or", out, b.op("gt", [c, b.binary("add", row0, row)], t.bool_).result)
        return b.select(out, fill, value)

    def _reduce(self, b: Builder, op: Op, out: Value) -> None:
        """Each row over this lane's columns, then over the gc lanes sharing the row block (consecutive lanes)."""
        acc = op.operands[0]
        fn = op.attrs["fn"]
        for i in range(self._rb(acc.type.rows)):
            v = self._element(b, acc, i, 0)
            for j in range(1, self._cb(acc.type.cols)):
                v = b.binary(fn, v, self._element(b, acc, i, j))
            m = 1
            while m < self.gc:
                v = b.binary(fn, v, b.op("simd_shuffle_xor", [v, b.const(m, t.i32)], t.f32).result)
                m *= 2
            b.store(out, b.const(i, t.i32), v)

    def _to_a(self, b: Builder, op: Op) -> None:
        """Columns col0 .. col0 + 15 of an accumulator as an A fragment: this lane's rows, all 16 k, each element
        from the lane that holds it (a shuffle per element)."""
        acc = op.operands[0]
        out = self._result(op)
        src = self.arrays[acc]
        rb, cb, col0 = self._rb(acc.type.rows), self._cb(acc.type.cols), to_a_column(op)
        base = b.binary("mul", self.lane_row, b.const(self.gc, t.i32))
        for i in range(rb):
            for k in range(self.kk):
                col = col0 + k
                v = b.load(src, b.const(i * cb + col % cb, t.i32))
                lane = b.binary("add", base, b.const(col // cb, t.i32))
                v = b.op("simd_shuffle", [v, lane], t.f32).result
                b.store(out, b.const(i * self.kk + k, t.i32), b.cast(v, op.result.type.elem))

    def _mv_q4(self, b: Builder, op: Op) -> None:
        """mv_q4 as a loop over the 128 k: for each of this lane's rows, code times scale (exact in f32) fma'd with
        x[k] into each of its columns, in k order."""
        w, wi, ldw, s, si, lds, x, xi, acc = op.operands
        group = op.attrs["group"]
        out = self._result(op)
        self._copy(b, self.arrays[acc], out)
        rb, cb = self._rb(acc.type.rows), self._cb(acc.type.cols)
        r0 = self._origin(b, self.lane_row, rb)
        _, body = b.for_(b.const(0, t.i32), b.const(128, t.i32), b.const(1, t.i32), "k")
        k = body.args[0]
        with b.at(body):
            xk = b.cast(b.load(x, b.binary("add", xi, b.cast(k, xi.type))), t.f32)
            shift = b.cast(b.binary("mul", b.binary("rem", k, b.const(8, t.i32)), b.const(4, t.i32)), t.u32)
            for i in range(rb):
                r = b.binary("add", r0, b.const(i, t.i32))
                d = self._q4_weight(b, w, wi, ldw, s, si, lds, r, k, shift, group)
                for j in range(cb):
                    idx = b.const(i * cb + j, t.i32)
                    b.store(out, idx, b.op("fma", [d, xk, b.load(out, idx)], t.f32).result)

    def _q4_weight(self, b: Builder, w: Value, wi: Value, ldw: Value, s: Value, si: Value, lds: Value, row: Value,
                   k: Value, shift: Value, group: int) -> Value:
        """Code k of ``row``'s words times its group's scale, in f32 (exact: 4 bits times an f16/bf16 scale)."""
        word = b.load(w, self._address(b, wi, ldw, row, b.binary("div", k, b.const(8, t.i32)), False))
        code = b.binary("and", b.binary("shr", word, shift), b.const(15, t.u32))
        scale = b.load(s, self._address(b, si, lds, row, b.binary("div", k, b.const(group, t.i32)), False))
        return b.binary("mul", b.cast(code, t.f32), b.cast(scale, t.f32))
