"""Shared arrays of halves stored two to a 32-bit word ("pairs"; a mixin of ``SpirvEmitter``, emit.py).

A shared f16/bf16 array that cooperative matrices load from is declared with 16-bit elements (``shared16``,
memory.py), and a 16-byte vector copy into it (``async_copy``/``vstore``: the GEMM's staged tiles) then moved its
8 halves one 16-bit store at a time, each converted from the f32 register and back (std/gemm_staged.py measured
132 TF/s at 8192^3 bf16 on the H200's Vulkan driver that way). Without SPV_KHR_workgroup_memory_explicit_layout
(lavapipe lacks it) a Workgroup array has one type, so such an array is declared ``uint[]`` instead, element i in
the low (i even) or high half of word i / 2:

- a 16-byte copy into it is four whole-word stores of the words loaded from the buffer's ``uvec4`` view (the bits
  unchanged), or of the registers packed two halves a word;
- a cooperative matrix loads its halves straight from the words (pointer at word index / 2, stride ld / 2 words:
  the per-SIMD-group scratch of coopmat.py is read the same way);
- an element load reads its word and shifts; an element store changes only its half, with an atomic AND (clear)
  then an atomic OR (set) on the word, so that two invocations writing the two halves of one word both land.
"""

from __future__ import annotations

from ...ir import types as t
from ...ir.core import Op
from .memory import _Memory

_WORKGROUP_SCOPE = 2


class PairOps:
    """Which shared arrays hold pairs (``self.pairs``), their declaration, pointers, element and vector access."""

    def _pair_arrays(self) -> set[int]:
        """The ``shared16`` arrays (cooperative matrices load from them) that 16-byte vector copies write."""
        found = set()
        for op in self.k.walk():
            if op.opcode in ("vcopy", "async_copy") and op.attrs["n"] * 2 >= 16:
                dst = op.operands[0]
                if dst.uid in self.shared16 and dst.type.elem.is_half:
                    found.add(dst.uid)
        return found

    def _pair_shared(self, op: Op) -> None:
        b = self.b
        u32 = b.type_int(32, False)
        var = b.global_variable("Workgroup", self._shared_array(op, u32, 2, 2))
        self.mem[op.result.uid] = _Memory(var, "Workgroup", u32, "pairs", op.attrs["elem"])

    def _pair_word(self, idx: int, signed: bool) -> int:
        b = self.b
        ity = b.type_int(32, signed)
        return self.inst("OpShiftRightArithmetic" if signed else "OpShiftRightLogical", ity, idx, b.const_uint(1))

    def _pair_pointer(self, m: _Memory, idx: int, signed: bool) -> int:
        """Pointer to the word holding element ``idx``."""
        b = self.b
        return self.inst("OpAccessChain", b.type_pointer("Workgroup", b.type_int(32, False)), m.var,
                         self._pair_word(idx, signed))

    def _pair_shift(self, idx: int, signed: bool) -> int:
        """16 * (idx & 1) as a u32 (``idx`` an i32 register, or u32 where ``signed`` is False): where element idx
        sits in its word."""
        b = self.b
        u32 = b.type_int(32, False)
        index = self.inst("OpBitcast", u32, idx) if signed else idx
        low = self.inst("OpBitwiseAnd", u32, index, b.const_uint(1))
        return self.inst("OpShiftLeftLogical", u32, low, b.const_uint(4))

    def _pair_load(self, m: _Memory, idx: int, signed: bool) -> int:
        """Element ``idx`` as an f32 register."""
        b = self.b
        u32, f32 = b.type_int(32, False), b.type_float(32)
        word = self.inst("OpLoad", u32, self._pair_pointer(m, idx, signed), *self._mem_access("Workgroup"))
        half = self.inst("OpShiftRightLogical", u32, word, self._pair_shift(idx, signed))
        if m.elem == t.bf16:  # the upper 16 bits of an f32: the shift drops the other half
            return self.inst("OpBitcast", f32, self.inst("OpShiftLeftLogical", u32, half, b.const_uint(16)))
        pair = self.glsl("UnpackHalf2x16", b.type_vector(f32, 2), half)  # the low 16 bits of `half`
        return self.inst("OpCompositeExtract", f32, pair, 0)

    def _pair_bits(self, m: _Memory, value: int) -> int:
        """The 16 bits of an f32 register already holding an f16/bf16 value, in the low half of a u32."""
        b = self.b
        u32, f32 = b.type_int(32, False), b.type_float(32)
        if m.elem == t.bf16:
            return self.inst("OpShiftRightLogical", u32, self.inst("OpBitcast", u32, value), b.const_uint(16))
        packed = self.glsl("PackHalf2x16", u32, self.inst("OpCompositeConstruct", b.type_vector(f32, 2), value,
                                                         b.const_float(0.0)))
        return self.inst("OpBitwiseAnd", u32, packed, b.const_uint(0xFFFF))

    def _pair_store(self, m: _Memory, idx: int, value: int, signed: bool) -> None:
        """Element ``idx`` = ``value`` (an f32 register), leaving the other half of its word as it is."""
        b = self.b
        u32 = b.type_int(32, False)
        ptr = self._pair_pointer(m, idx, signed)
        shift = self._pair_shift(idx, signed)
        scope, relaxed = b.const_uint(_WORKGROUP_SCOPE), b.const_uint(0)
        keep = self.inst("OpNot", u32, self.inst("OpShiftLeftLogical", u32, b.const_uint(0xFFFF), shift))
        self.inst("OpAtomicAnd", u32, ptr, scope, relaxed, keep)
        self.inst("OpAtomicOr", u32, ptr, scope, relaxed,
                  self.inst("OpShiftLeftLogical", u32, self._pair_bits(m, value), shift))

    def _pair_copy(self, op: Op) -> bool:
        """A 16-byte ``vcopy``/``async_copy`` into a pairs array as four whole words; False when ``op`` is not one
        (the caller copies it otherwise)."""
        dst, di, src, si = op.operands
        n = op.attrs["n"]
        dm = self.mem[dst.uid]
        if dm.kind != "pairs" or n != 8:
            return False
        b = self.b
        u32 = b.type_int(32, False)
        sm = self.mem[src.uid]
        if sm.storage == "StorageBuffer" and self._words_on_side(src.uid, n) == 1 and sm.kind == dm.elem.name:
            word4 = self.inst("OpLoad", b.type_vector(u32, 4),
                              self._word_pointers(src.uid, self.value(si), si.type.is_signed, n)[0],
                              *self._mem_access("StorageBuffer"))
            words = [self.inst("OpCompositeExtract", u32, word4, j) for j in range(4)]
        else:  # from registers (vstore) or another array: element values, packed two to a word
            s0 = self.value(si)
            values = [self._load_at(src.uid, self._offset(si, s0, k), si.type.is_signed) for k in range(n)]
            words = [self._pack_halves(dm.elem.name, values[2 * j:2 * j + 2]) for j in range(4)]
        first = self._pair_word(self.value(di), di.type.is_signed)
        ity = b.type_int(32, di.type.is_signed)
        ptr_t = b.type_pointer("Workgroup", u32)
        for j, w in enumerate(words):
            index = first if j == 0 else self.inst("OpIAdd", ity, first, self.const_of(ity, j))
            self.stmt("OpStore", self.inst("OpAccessChain", ptr_t, dm.var, index), w, *self._mem_access("Workgroup"))
        return True
