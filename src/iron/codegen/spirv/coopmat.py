"""Matrix fragments as cooperative matrices (SPV_KHR_cooperative_matrix; a mixin of ``SpirvEmitter``, emit.py), for
devices that report a subgroup-scope 16 x 16 x 16 configuration with f16 (or bf16) A and B and f32 C
(``VK_KHR_cooperative_matrix``; NVIDIA's driver does). Elsewhere fragments take the scalar fallback
(``codegen/lower_fragments.py``).

A fragment of ``MT x NT`` tiles of 16 x 16 is ``MT * NT`` cooperative matrices (an A-fragment MT, a B-fragment NT):
``frag_load`` is one ``OpCooperativeMatrixLoadKHR`` per tile (row-major, or column-major for ``trans``), ``mma`` one
``OpCooperativeMatrixMulAddKHR`` per accumulator tile and k-step, fragment variables are Function variables of the
matrix types.

Where the hardware cannot take Iron's semantics directly, a per-SIMD-group scratch tile in shared memory (a
``uint`` array of 256 words per SIMD group, its length a specialization constant of the group size) is the way round:

- Vulkan requires the pointer and the stride of a cooperative load or store to be 16-byte aligned; a ``frag_load``
  whose ``index`` or ``ld`` is not a multiple of 8 halves copies its tiles into the scratch element by element (each
  lane whole 32-bit words) and loads them from there;
- ``frag_store`` writes only the elements inside ``rows x cols`` and rounds to the target's dtype as the interpreter
  does: a whole, aligned tile of an f32 target is one ``OpCooperativeMatrixStoreKHR``; any other tile (an edge, an
  f16/bf16 target, an unaligned one) is stored to the scratch as f32, and each lane copies its elements that are
  inside, rounded (``round_to``: NVIDIA's f32 -> f16 conversions need not round to nearest even).

The extension requires SPIR-V 1.6 and the Vulkan memory model: the module declares both, and every load and store
of buffers and shared memory is NonPrivatePointer (so barriers order them between invocations), ``barrier()``
makes them available and visible (emit.py).
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Op, Value

TILE = 16  # M = N = K of every fragment tile (ir.types.MMA_SHAPE)
SCRATCH_WORDS = TILE * TILE  # per SIMD group: an f32 tile, or a 16-bit tile in half of it
_USE = {"a": "MatrixAKHR", "b": "MatrixBKHR", "acc": "MatrixAccumulatorKHR"}
_ROW_MAJOR, _COLUMN_MAJOR = 0, 1
_SUBGROUP_SCOPE = 3
_ACQ_REL_WORKGROUP = 0x8 | 0x100  # AcquireRelease | WorkgroupMemory
_AVAILABLE_VISIBLE = 0x2000 | 0x4000  # MakeAvailable | MakeVisible (Vulkan memory model)


#: the fragment ops spelled here (warpgroup_mma is expanded into them first: codegen/warpgroup.py)
FRAGMENT_OPS = frozenset({"frag_load", "frag_zero", "mma", "frag_store"})


def uses_cooperative_matrices(kernel, dtypes) -> bool:
    """Whether ``kernel`` (warpgroup ops expanded) has matrix fragments, all of input dtypes in ``dtypes`` (names:
    "f16", "bf16"), and no matrix op but the four fragment ops."""
    matrix_ops = {op.opcode for op in kernel.walk() if op.opcode in O.MATRIX}
    inputs = {op.result.type.elem.name for op in kernel.walk() if op.opcode == "frag_load"}
    return bool(dtypes) and bool(matrix_ops) and matrix_ops <= FRAGMENT_OPS and inputs <= set(dtypes)


class CoopMatrixOps:
    """Fragment values (``self.frags``: IR value uid -> the ids of its tiles), fragment variables and the four
    matrix ops."""

    # -- types -----------------------------------------------------------------------------------------------------

    def _component_type(self, elem: t.ScalarType) -> int:
        b = self.b
        if elem == t.f16:
            self.capability("Float16")
            self.features.add("float16")
            return b.type_float(16)
        if elem == t.bf16:
            self.capability("BFloat16TypeKHR", "BFloat16CooperativeMatrixKHR")
            b.extension("SPV_KHR_bfloat16")
            self.features.add("cooperative_matrix_bf16")
            return b.type_float(16, "BFloat16KHR")
        return b.type_float(32)

    def _tile_type(self, ty: t.FragType) -> int:
        if self.emulate:
            return self._emu_tile_type()
        return self.b.type_cooperative_matrix(self._component_type(ty.elem), TILE, TILE, _USE[ty.role])

    def _zero_tile(self, ty: t.FragType) -> int:
        tty, zero = self._tile_type(ty), self.b.const_float(0.0)
        # a cooperative matrix constant has one constituent for all its elements (SPV_KHR_cooperative_matrix)
        return self.b.const_composite(tty, *([zero] * self._emu_slots() if self.emulate else [zero]))

    @staticmethod
    def _tile_count(ty: t.FragType) -> int:
        if ty.role == "a":
            return ty.rows // TILE
        if ty.role == "b":
            return ty.cols // TILE
        return (ty.rows // TILE) * (ty.cols // TILE)

    def _tile_vars(self, ty: t.FragType, name: str | None = None) -> list[int]:
        """One Function variable per tile of a fragment of type ``ty``."""
        b = self.b
        ptr = b.type_pointer("Function", self._tile_type(ty))
        out = []
        for k in range(self._tile_count(ty)):
            vid = b.new_id()
            self.fvars.append(b.instruction("OpVariable", ptr, vid, b.enum("StorageClass", "Function")))
            if name:
                b.name(vid, f"{name}_{k}")
            out.append(vid)
        return out

    # -- dispatch --------------------------------------------------------------------------------------------------

    def _fragment_op(self, op: Op) -> bool:
        """Emit ``op`` if it is a matrix op or a variable of fragments; False otherwise."""
        code = op.opcode
        if code in ("var", "get", "set"):
            ty = op.result.type.elem if code == "var" else op.operands[0].type.elem
            if not isinstance(ty, t.FragType):
                return False
            if code == "var":
                self.frag_vars[op.result.uid] = self._tile_vars(ty, op.result.name)
            elif code == "get":
                tty = self._tile_type(op.result.type)
                self.frags[op.result.uid] = [self.inst("OpLoad", tty, v) for v in self.frag_vars[op.operands[0].uid]]
            else:
                for var, tile in zip(self.frag_vars[op.operands[0].uid], self._tiles_of(op.operands[1])):
                    self.stmt("OpStore", var, tile)
            return True
        if code not in FRAGMENT_OPS:
            return False
        if code == "frag_zero":
            self.frags[op.result.uid] = [self._zero_tile(op.result.type)] * self._tile_count(op.result.type)
        elif code == "frag_load":
            self._frag_load(op)
        elif code == "mma":
            self._mma(op)
        else:
            self._frag_store(op)
        return True

    def _tiles_of(self, v: Value) -> list[int]:
        tiles = self.frags.get(v.uid)
        if tiles is None:
            raise CompileError(f"internal error in the spirv emitter: fragment {v!r} used before it is defined",
                               self.k.loc)
        return tiles

    # -- helpers ---------------------------------------------------------------------------------------------------

    def _i32(self, v: Value) -> int:
        """An integer operand as an i32 register."""
        x = self.value(v)
        return x if v.type.is_signed else self.inst("OpBitcast", self.b.type_int(32, True), x)

    def _iadd(self, *xs: int) -> int:
        """The i32 sum of ``xs`` (terms that are the constant 0 left out)."""
        zero = self.b.const_int(0)
        terms = [x for x in xs if x != zero] or [zero]
        out = terms[0]
        for x in terms[1:]:
            out = self.inst("OpIAdd", self.b.type_int(32, True), out, x)
        return out

    def _imul(self, x: int, y: int) -> int:
        zero = self.b.const_int(0)
        return zero if zero in (x, y) else self.inst("OpIMul", self.b.type_int(32, True), x, y)

    def _multiple_of(self, x: int, n: int) -> int:
        i32 = self.b.type_int(32, True)
        low = self.inst("OpBitwiseAnd", i32, x, self.b.const_int(n - 1))
        return self.inst("OpIEqual", self.b.type_bool(), low, self.b.const_int(0))

    def _all(self, *conds: int) -> int:
        out = conds[0]
        for c in conds[1:]:
            out = self.inst("OpLogicalAnd", self.b.type_bool(), out, c)
        return out

    def _when(self, cond: int, then_fn, else_fn=None) -> None:
        """A structured selection: ``then_fn()`` where ``cond`` holds, ``else_fn()`` otherwise."""
        b = self.b
        then_l, merge = b.new_id(), b.new_id()
        else_l = b.new_id() if else_fn is not None else merge
        self.stmt("OpSelectionMerge", merge, 0)
        self.stmt("OpBranchConditional", cond, then_l, else_l)
        self.label(then_l)
        then_fn()
        self.branch(merge)
        if else_fn is not None:
            self.label(else_l)
            else_fn()
            self.branch(merge)
        self.label(merge)

    def _subgroup_barrier(self) -> None:
        """The SIMD group's scratch writes before it are visible to its lanes after it."""
        b = self.b
        scope = b.const_uint(_SUBGROUP_SCOPE)
        self.stmt("OpControlBarrier", scope, scope, b.const_uint(_ACQ_REL_WORKGROUP | _AVAILABLE_VISIBLE))

    def _scratch_base(self) -> tuple[int, int]:
        """(the scratch variable, the first word of this SIMD group's tile); the variable is made on first use."""
        b = self.b
        if self.scratch is None:
            u32 = b.type_int(32, False)
            sx, sy, sz = self.group_dims
            invocations = b.spec_op(u32, "OpIMul", b.spec_op(u32, "OpIMul", sx, sy), sz)
            groups = b.spec_op(u32, "OpUDiv", b.spec_op(u32, "OpIAdd", invocations,
                                                        b.const_uint(self.simd_width - 1)),
                               b.const_uint(self.simd_width))
            length = b.spec_op(u32, "OpIMul", groups, b.const_uint(SCRATCH_WORDS))
            self.scratch = b.global_variable("Workgroup", b.type_array_of(u32, length))
            b.name(self.scratch, "iron_tile_scratch")
        base = self._imul(self.thread("simd_group", None), self.b.const_int(SCRATCH_WORDS))
        return self.scratch, base

    def _scratch_pointer(self, word: int) -> int:
        ptr_t = self.b.type_pointer("Workgroup", self.b.type_int(32, False))
        return self.inst("OpAccessChain", ptr_t, self.scratch, word)

    def _range(self, start: int, stop: int, step: int, body) -> None:
        """``for (i = start; i < stop; i += step) body(i)`` as a structured loop (start, stop, step: i32 ids)."""
        b = self.b
        i32 = b.type_int(32, True)
        var = b.new_id()
        self.fvars.append(b.instruction("OpVariable", b.type_pointer("Function", i32), var,
                                        b.enum("StorageClass", "Function")))
        self.stmt("OpStore", var, start)

        def check() -> int:
            return self.inst("OpSLessThan", b.type_bool(), self.inst("OpLoad", i32, var), stop)

        def loop_body():
            body(self.inst("OpLoad", i32, var))
            return lambda: self.stmt("OpStore", var, self.inst("OpIAdd", i32, self.inst("OpLoad", i32, var), step))

        self._loop(check, loop_body)

    def _lane_slots(self, count: int, body) -> None:
        """``body(slot)`` for this lane's slots lane, lane + W, ... below ``count`` (a loop; the trip count is the
        same in every lane where W divides ``count``)."""
        b = self.b
        self._range(self.thread("simd_lane", None), b.const_int(count), b.const_int(self.simd_width), body)

    def _target_pointer(self, target: tuple[int | None, int]) -> tuple[int, str]:
        """(pointer, storage class) of a target: (buffer uid, element index) or (None, scratch word)."""
        uid, index = target
        if uid is None:
            return self._scratch_pointer(index), "Workgroup"
        m, ptr = self._pointer(uid, index)
        return ptr, m.storage

    def _coop_load(self, ty: t.FragType, target: tuple[int | None, int], layout: int, stride: int) -> int:
        """A tile of a fragment of type ``ty`` loaded from ``target`` (``_target_pointer``); ``stride`` counts the
        memory's element type (uint words in the scratch)."""
        if self.emulate:
            return self._emu_load(ty, target, layout, stride)
        ptr, storage = self._target_pointer(target)
        return self.inst("OpCooperativeMatrixLoadKHR", self._tile_type(ty), ptr, self.b.const_uint(layout), stride,
                         *self._mem_access(storage))

    def _coop_store(self, target: tuple[int | None, int], tile: int, layout: int, stride: int) -> None:
        """An accumulator tile stored to ``target``."""
        if self.emulate:
            return self._emu_store(target, tile, layout, stride)
        ptr, storage = self._target_pointer(target)
        self.stmt("OpCooperativeMatrixStoreKHR", ptr, tile, self.b.const_uint(layout), stride,
                  *self._mem_access(storage))

    # -- frag_load -------------------------------------------------------------------------------------------------

    def _frag_load(self, op: Op) -> None:
        buf, index, ld = op.operands
        ty: t.FragType = op.result.type
        trans = op.attrs.get("trans", False)
        idx, ldv = self._i32(index), self._i32(ld)
        tiles = self._tile_count(ty)
        tty = self._tile_type(ty)
        out = self._tile_vars(ty)
        per16 = 16 // self._storage_size(self.mem[buf.uid])  # elements in 16 bytes of the buffer's storage
        aligned = self._all(self._multiple_of(idx, per16), self._multiple_of(ldv, per16))

        # halves two to a word (pairs.py): the matrices read the words, the stride counts words
        stride = ldv
        if self.mem[buf.uid].kind == "pairs" and not self.emulate:
            stride = self._pair_word(ldv, True)

        def direct():
            # tile k's first element: A advances 16 rows (trans: 16 columns), B 16 columns (trans: 16 rows)
            along_ld = (ty.role == "a") != trans
            for k in range(tiles):
                step = self._imul(ldv, self.b.const_int(TILE * k)) if along_ld else self.b.const_int(TILE * k)
                layout = _COLUMN_MAJOR if trans else _ROW_MAJOR
                self.stmt("OpStore", out[k], self._coop_load(ty, (buf.uid, self._iadd(idx, step)), layout, stride))

        def through_scratch():
            for k in range(tiles):
                self.stmt("OpStore", out[k], self._load_via_scratch(buf, ty, trans, idx, ldv, k))

        self._when(aligned, direct, through_scratch)
        self.frags[op.result.uid] = [self.inst("OpLoad", tty, v) for v in out]

    def _element_address(self, ty: t.FragType, trans: bool, idx: int, ldv: int, k: int, r: int, c: int) -> int:
        """Index of element (r, c) of tile k (r, c: i32 registers within the 16 x 16 tile): A's (row, k) is at
        ``idx + row*ld + k`` (trans: ``idx + k*ld + row``), B's (k, n) at ``idx + k*ld + n`` (trans: ``idx + n*ld +
        k``)."""
        b = self.b
        origin = b.const_int(TILE * k)
        if ty.role == "a":
            row, col = self._iadd(r, origin), c
        else:
            row, col = r, self._iadd(c, origin)
        if trans:  # the stored matrix is the transpose of the logical one
            row, col = col, row
        return self._iadd(idx, self._imul(row, ldv), col)

    def _load_via_scratch(self, buf: Value, ty: t.FragType, trans: bool, idx: int, ldv: int, k: int) -> int:
        """Tile k of a fragment copied row-major into this SIMD group's scratch (two halves per 32-bit word, each
        lane whole words), then loaded from there (aligned)."""
        b = self.b
        i32 = b.type_int(32, True)
        _, base = self._scratch_base()
        kind = "f16" if ty.elem == t.f16 else "bf16"

        def copy(word: int) -> None:
            r = self.inst("OpShiftRightArithmetic", i32, word, b.const_uint(3))
            c = self.inst("OpShiftLeftLogical", i32, self.inst("OpBitwiseAnd", i32, word, b.const_int(7)),
                          b.const_uint(1))
            pair = [self._load_at(buf.uid, self._element_address(ty, trans, idx, ldv, k, r, cc))
                    for cc in (c, self._iadd(c, b.const_int(1)))]
            self.stmt("OpStore", self._scratch_pointer(self._iadd(base, word)), self._pack_halves(kind, pair),
                      *self._mem_access("Workgroup"))

        self._lane_slots(SCRATCH_WORDS // 2, copy)
        self._subgroup_barrier()
        # 16 halves a row: a stride of 8 words (strides count the pointer's type, here uint)
        tile = self._coop_load(ty, (None, base), _ROW_MAJOR, b.const_int(TILE // 2))
        self._subgroup_barrier()  # every lane has its tile before the scratch is written again
        return tile

    # -- mma -------------------------------------------------------------------------------------------------------

    def _mma(self, op: Op) -> None:
        a, bb, c = (self._tiles_of(v) for v in op.operands)
        tty = self._tile_type(op.result.type)
        nt = len(bb)
        out = []
        for i in range(len(a)):
            for j in range(nt):
                if self.emulate:
                    out.append(self._emu_muladd(a[i], bb[j], c[i * nt + j]))
                else:
                    out.append(self.inst("OpCooperativeMatrixMulAddKHR", tty, a[i], bb[j], c[i * nt + j]))
        self.frags[op.result.uid] = out

    # -- frag_store ------------------------------------------------------------------------------------------------

    def _frag_store(self, op: Op) -> None:
        buf, index, ld, acc, rows, cols = op.operands
        tiles = self._tiles_of(acc)
        nt = acc.type.cols // TILE
        idx, ldv, rows_v, cols_v = (self._i32(v) for v in (index, ld, rows, cols))
        m = self.mem[buf.uid]
        # a whole tile of an f32 target goes straight to memory where Vulkan's 16-byte alignment holds
        direct = buf.type.elem == t.f32 and not m.packed
        aligned = self._all(self._multiple_of(idx, 4), self._multiple_of(ldv, 4)) if direct else None
        b = self.b
        bool_t = b.type_bool()
        for n, tile in enumerate(tiles):
            i, j = divmod(n, nt)
            rows_left = self._iadd(rows_v, b.const_int(-TILE * i))
            cols_left = self._iadd(cols_v, b.const_int(-TILE * j))
            origin = self._iadd(idx, self._imul(ldv, b.const_int(TILE * i)), b.const_int(TILE * j))

            def masked(tile=tile, rows_left=rows_left, cols_left=cols_left, origin=origin):
                self._store_via_scratch(buf, tile, origin, ldv, rows_left, cols_left)

            if not direct:
                masked()
                continue
            whole = self._all(aligned, self.inst("OpSGreaterThanEqual", bool_t, rows_left, b.const_int(TILE)),
                              self.inst("OpSGreaterThanEqual", bool_t, cols_left, b.const_int(TILE)))

            def straight(tile=tile, origin=origin):
                self._coop_store((buf.uid, origin), tile, _ROW_MAJOR, ldv)

            self._when(whole, straight, masked)

    def _store_via_scratch(self, buf: Value, tile: int, origin: int, ldv: int, rows_left: int,
                           cols_left: int) -> None:
        """An accumulator tile through this SIMD group's scratch: each lane stores its elements (r, c) with r <
        rows_left and c < cols_left to ``origin + r*ld + c``, rounded to the buffer's dtype."""
        b = self.b
        i32, f32, u32, bool_t = b.type_int(32, True), b.type_float(32), b.type_int(32, False), b.type_bool()
        _, base = self._scratch_base()
        self._coop_store((None, base), tile, _ROW_MAJOR, b.const_int(TILE))
        self._subgroup_barrier()

        def element(slot: int) -> None:
            r = self.inst("OpShiftRightArithmetic", i32, slot, b.const_uint(4))
            c = self.inst("OpBitwiseAnd", i32, slot, b.const_int(TILE - 1))
            inside = self._all(self.inst("OpSLessThan", bool_t, r, rows_left),
                               self.inst("OpSLessThan", bool_t, c, cols_left))

            def put():
                word = self.inst("OpLoad", u32, self._scratch_pointer(self._iadd(base, slot)),
                                 *self._mem_access("Workgroup"))
                value = self.rounded(self.inst("OpBitcast", f32, word), buf.type.elem)
                self._store_at(buf.uid, self._iadd(origin, self._imul(r, ldv), c), value)

            self._when(inside, put)

        self._lane_slots(SCRATCH_WORDS, element)
        self._subgroup_barrier()  # the scratch is free for the next tile
