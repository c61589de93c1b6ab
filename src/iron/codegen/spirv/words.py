"""16-byte words: ``vload``/``vstore``/``async_copy`` (IR ``vcopy``) move their bytes as ``uvec4`` words where one
side of the copy is a storage buffer or a shared array (a mixin of ``SpirvEmitter``, emit.py; the lanes module,
lanes.py, uses the same conversions).

- a storage buffer gets a second variable on its binding typed ``uvec4[]`` (its *view*, made on first use); a copy of
  n elements of 16 bytes in all (4 x f32, 8 x f16/bf16) is one load or store of word ``index / n`` through it. The
  alignment rule of ``vload`` (index a multiple of n, checked by the interpreter) is what makes that word exact. Both
  variables of a written buffer that the kernel also reaches element by element are decorated Aliased (it may read
  through one what it wrote through the other); no other buffer is (``_element_accesses``);
- a shared array that such a copy touches with 16 bytes of its storage or more (4 elements of 4 bytes: shared halves
  are held as f32) is declared ``uvec4[]`` itself ("packed"): element i is component i % 4 of word i / 4, so its
  element accesses stay single 32-bit accesses and its vector copies whole words. (Without
  SPV_KHR_workgroup_memory_explicit_layout, which lavapipe lacks, a Workgroup variable has no second view.)

Everything else (register arrays, 16-bit shared arrays, narrower copies) moves element by element.
"""

from __future__ import annotations

from ...ir import ops as O
from ...ir.core import Op


class WordOps:
    """Conversions between ``uvec4`` words and registers, the views, and ``vcopy``."""

    # -- which arrays move whole words -----------------------------------------------------------------------------

    def _packed_shared(self) -> set[int]:
        """Shared arrays declared as ``uvec4[]``: a vector copy moves 16 bytes of their storage or more, and no
        atomic updates them (atomics need a scalar variable of their own type)."""
        packed, atomic = set(), set()
        for op in self.k.walk():
            if op.opcode in ("vcopy", "async_copy"):
                for buf in (op.operands[0], op.operands[2]):
                    if buf.type.space == "shared" and op.attrs["n"] >= 4 and buf.type.elem.itemsize in (2, 4):
                        packed.add(buf.uid)
            elif op.opcode in O.ATOMICS:
                atomic.add(op.operands[0].uid)
        return packed - atomic

    @staticmethod
    def _storage_size(m) -> int:
        """Bytes one element occupies in ``m``'s storage (halves: 2 in buffers and 16-bit arrays, 4 elsewhere)."""
        return 2 if m.kind in ("f16", "bf16", "pairs") else 4

    def _words_on_side(self, uid: int, n: int) -> int:
        """How many 16-byte words a copy of ``n`` elements moves on this side (0: it goes element by element)."""
        m = self.mem[uid]
        if m.elem.itemsize not in (2, 4):
            return 0
        nbytes = n * self._storage_size(m)
        if m.storage == "StorageBuffer":
            return 1 if nbytes == 16 else 0
        if m.storage == "Workgroup" and m.packed:
            return nbytes // 16
        return 0

    # -- views and word pointers -----------------------------------------------------------------------------------

    def _buffer_view(self, uid: int) -> int:
        """The ``uvec4[]`` view of a buffer parameter (declared on first use)."""
        view = self.views.get(uid)
        if view is None:
            binding, readonly, name = self.param_info[uid]
            view = self.views[uid] = self._vector_view(binding, readonly, name)
            if not readonly and self._element_accesses(uid):
                # vector copies and element accesses of one buffer may meet in one invocation (vstore, then out[i])
                self.b.decorate(view, "Aliased")
                self.b.decorate(self.mem[uid].var, "Aliased")
        return view

    def _element_accesses(self, uid: int) -> bool:
        """Whether the kernel reaches buffer ``uid`` through its element variable too (any access but a 16-byte word
        copy). Only a written buffer reached through both variables has them declared Aliased: Aliased variables may
        alias every other Aliased one, so declaring a read-only buffer's views so (as before 2026-12-07) told the
        driver a store to ``out`` might change ``x`` (CUDA's parameters are ``__restrict__``, Vulkan's otherwise
        distinct too)."""
        for op in self.k.walk():
            if op.opcode in ("vcopy", "async_copy"):
                if any(op.operands[i].uid == uid and self._words_on_side(uid, op.attrs["n"]) == 0 for i in (0, 2)):
                    return True
            elif any(getattr(v, "uid", None) == uid for v in op.operands):
                return True
        return False

    def _word_pointers(self, uid: int, index: int, index_signed: bool, n: int) -> list[int]:
        """Pointers to the 16-byte words of elements ``index ... index + n - 1`` (index a multiple of n)."""
        b, m = self.b, self.mem[uid]
        count = self._words_on_side(uid, n)
        per_word = 16 // self._storage_size(m)  # elements in one word
        ity = b.type_int(32, index_signed)
        shift = "OpShiftRightArithmetic" if index_signed else "OpShiftRightLogical"
        first = self.inst(shift, ity, index, b.const_uint(per_word.bit_length() - 1))
        words = [first] + [self.inst("OpIAdd", ity, first, self.const_of(ity, k)) for k in range(1, count)]
        uvec4 = b.type_vector(b.type_int(32, False), 4)
        if m.storage == "StorageBuffer":
            ptr_t, var, lead = b.type_pointer("StorageBuffer", uvec4), self._buffer_view(uid), (b.const_int(0),)
        else:
            ptr_t, var, lead = b.type_pointer("Workgroup", uvec4), m.var, ()
        return [self.inst("OpAccessChain", ptr_t, var, *lead, w) for w in words]

    def const_of(self, type_id: int, value: int) -> int:
        return self.b.const_int(value) if type_id == self.b.type_int(32, True) else self.b.const_uint(value)

    # -- words <-> registers ---------------------------------------------------------------------------------------

    def _decode_words(self, m, word4: int) -> list[int]:
        """The register values (f32 for halves) of the elements in one ``uvec4`` of ``m``'s storage."""
        b = self.b
        u32, f32 = b.type_int(32, False), b.type_float(32)
        values = []
        for j in range(4):
            word = self.inst("OpCompositeExtract", u32, word4, j)
            if m.kind == "f16":
                pair = self.inst("OpBitcast", b.type_vector(m.elem_type, 2), word)
                values += [self.inst("OpFConvert", f32, self.inst("OpCompositeExtract", m.elem_type, pair, h))
                           for h in (0, 1)]
            elif m.kind == "bf16":  # the upper 16 bits of an f32
                low = self.inst("OpShiftLeftLogical", u32, word, b.const_uint(16))
                high = self.inst("OpBitwiseAnd", u32, word, b.const_uint(0xFFFF0000))
                values += [self.inst("OpBitcast", f32, low), self.inst("OpBitcast", f32, high)]
            else:
                values.append(self._from_u32(word, self.reg_type(m.elem)))
        return values

    def _encode_words(self, m, values: list[int]) -> int:
        """One ``uvec4`` of ``m``'s storage holding the register values ``values`` (already of ``m``'s dtype)."""
        b = self.b
        per_word = 4 // self._storage_size(m)
        words = []
        for j in range(4):
            part = values[j * per_word:(j + 1) * per_word]
            if m.kind in ("f16", "bf16"):
                words.append(self._pack_halves(m.kind, part))
            else:
                words.append(self._to_u32(part[0], self.reg_type(m.elem)))
        return self.inst("OpCompositeConstruct", b.type_vector(b.type_int(32, False), 4), *words)

    def _pack_halves(self, kind: str, pair: list[int]) -> int:
        """Two registers holding f16 (``kind`` "f16") or bf16 values as one u32 word, the first in the low half."""
        b = self.b
        u32 = b.type_int(32, False)
        if kind == "f16":
            f16 = b.type_float(16)
            halves = [self.inst("OpFConvert", f16, v) for v in pair]  # exact: already f16 values
            return self.inst("OpBitcast", u32, self.inst("OpCompositeConstruct", b.type_vector(f16, 2), *halves))
        # bf16: the upper 16 bits of each f32 (already a bf16 value)
        low = self.inst("OpShiftRightLogical", u32, self.inst("OpBitcast", u32, pair[0]), b.const_uint(16))
        high = self.inst("OpBitwiseAnd", u32, self.inst("OpBitcast", u32, pair[1]), b.const_uint(0xFFFF0000))
        return self.inst("OpBitwiseOr", u32, low, high)

    def _from_u32(self, word: int, rtype: int) -> int:
        return word if rtype == self.b.type_int(32, False) else self.inst("OpBitcast", rtype, word)

    def _to_u32(self, value: int, rtype: int) -> int:
        u32 = self.b.type_int(32, False)
        return value if rtype == u32 else self.inst("OpBitcast", u32, value)

    # -- the copy --------------------------------------------------------------------------------------------------

    def _vcopy(self, op: Op) -> None:
        """``attrs.n`` consecutive elements from ``src[si]`` to ``dst[di]``: whole words where a side has them (the
        same words straight across when both sides store the elements alike), element by element elsewhere."""
        if self._pair_copy(op):  # into halves held two to a word (pairs.py)
            return
        dst, di, src, si = op.operands
        n = op.attrs["n"]
        d0, s0 = self.value(di), self.value(si)
        dm, sm = self.mem[dst.uid], self.mem[src.uid]
        uvec4 = self.b.type_vector(self.b.type_int(32, False), 4)
        values = None
        if self._words_on_side(src.uid, n):
            words = [self.inst("OpLoad", uvec4, p, *self._mem_access(sm.storage))
                     for p in self._word_pointers(src.uid, s0, si.type.is_signed, n)]
            if self._words_on_side(dst.uid, n) and self._storage_size(dm) == self._storage_size(sm):
                for p, w in zip(self._word_pointers(dst.uid, d0, di.type.is_signed, n), words):
                    self.stmt("OpStore", p, w, *self._mem_access(dm.storage))
                return
            values = [v for w in words for v in self._decode_words(sm, w)]
        if values is None:
            values = [self._load_at(src.uid, self._offset(si, s0, k), si.type.is_signed) for k in range(n)]
        count = self._words_on_side(dst.uid, n)
        if count:
            per = n // count
            for c, p in enumerate(self._word_pointers(dst.uid, d0, di.type.is_signed, n)):
                self.stmt("OpStore", p, self._encode_words(dm, values[c * per:(c + 1) * per]),
                          *self._mem_access(dm.storage))
            return
        for k, v in enumerate(values):
            self._store_at(dst.uid, self._offset(di, d0, k), v, di.type.is_signed)

    def _offset(self, index_value, index: int, k: int) -> int:
        """``index + k`` in the index's type."""
        return index if k == 0 else self.inst("OpIAdd", self.reg_type(index_value.type), index,
                                              self.const(k, index_value.type))
