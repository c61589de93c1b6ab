"""Cooperative matrices emulated with plain SPIR-V, so that their lowering (coopmat.py: tiles, layouts, strides,
the scratch paths, the Vulkan memory model) runs and is checked against NumPy on a device without them -- lavapipe
in CI (``emit_spirv(..., coopmat_emulation=True)``, ``IRON_VULKAN_COOPMAT=emulate``). A mixin of ``SpirvEmitter``.

A 16 x 16 tile is a ``float[256 / W]`` value per lane of a SIMD group of W lanes: lane l holds elements l, l + W, ...
of the tile in row-major order (halves as exact f32). Loads and stores follow the extension's memory layout to the
letter: row (RowMajorKHR) or column (ColumnMajorKHR) i starts at element ``i * Stride`` of the *pointer's* type, and
its elements are contiguous in the matrix's component type (so halves read from the scratch's uint words are two a
word). ``MulAdd`` gathers both operands whole in every lane (subgroup shuffles) and adds the products of each owned
element in k order with fma. Nothing here is used on a device that has cooperative matrices.
"""

from __future__ import annotations

from ...ir import types as t

_TILE = 16
_ROW_MAJOR = 0
_SUBGROUP_SCOPE = 3


class CoopMatrixEmulation:
    """The emulated tile type and the load, store and multiply-add of coopmat.py's ``emulate`` mode (loops, so that
    modules stay small: lavapipe compiles every instruction)."""

    def _emu_slots(self) -> int:
        return _TILE * _TILE // self.simd_width

    def _emu_tile_type(self) -> int:
        return self.b.type_array(self.b.type_float(32), self._emu_slots())

    def _emu_var(self, length: int) -> int:
        """A Function ``float[length]``."""
        b = self.b
        vid = b.new_id()
        ptr = b.type_pointer("Function", b.type_array(b.type_float(32), length))
        self.fvars.append(b.instruction("OpVariable", ptr, vid, b.enum("StorageClass", "Function")))
        return vid

    def _emu_at(self, var: int, index: int) -> int:
        return self.inst("OpAccessChain", self.b.type_pointer("Function", self.b.type_float(32)), var, index)

    def _emu_slot_loop(self, body) -> None:
        """``body(q, row, column)`` for this lane's slots q: element lane + q * W of the tile."""
        b = self.b
        i32 = b.type_int(32, True)
        lane = self.thread("simd_lane", None)

        def slot(q: int) -> None:
            e = self._iadd(lane, self._imul(q, b.const_int(self.simd_width)))
            body(q, self.inst("OpShiftRightArithmetic", i32, e, b.const_uint(4)),
                 self.inst("OpBitwiseAnd", i32, e, b.const_int(_TILE - 1)))

        self._range(b.const_int(0), b.const_int(self._emu_slots()), b.const_int(1), slot)

    def _emu_load(self, ty: t.FragType, target: tuple[int | None, int], layout: int, stride: int) -> int:
        b = self.b
        i32, u32, f32 = b.type_int(32, True), b.type_int(32, False), b.type_float(32)
        uid, base = target
        component = 4 if ty.role == "acc" else 2
        pointee = 4 if uid is None else self._storage_size(self.mem[uid])
        out = self._emu_var(self._emu_slots())

        def element(q: int, r: int, c: int) -> None:
            major, minor = (r, c) if layout == _ROW_MAJOR else (c, r)
            line = self._imul(major, stride)
            if pointee == component:
                index = self._iadd(base, line, minor)
                value = self._load_at(uid, index) if uid is not None else \
                    self.inst("OpBitcast", f32, self._emu_word(index))
            else:  # halves in uint words (the scratch): word line + minor / 2, the low half first
                word = self._emu_word(self._iadd(base, line, self.inst("OpShiftRightArithmetic", i32, minor,
                                                                       b.const_uint(1))))
                high = self.inst("OpINotEqual", b.type_bool(),
                                 self.inst("OpBitwiseAnd", i32, minor, b.const_int(1)), b.const_int(0))
                if ty.elem == t.f16:
                    pair = self.inst("OpBitcast", b.type_vector(b.type_float(16), 2), word)
                    half = self.inst("OpVectorExtractDynamic", b.type_float(16), pair,
                                     self.inst("OpSelect", u32, high, b.const_uint(1), b.const_uint(0)))
                    value = self.inst("OpFConvert", f32, half)
                else:  # bf16: the upper 16 bits of an f32
                    bits = self.inst("OpSelect", u32, high,
                                     self.inst("OpBitwiseAnd", u32, word, b.const_uint(0xFFFF0000)),
                                     self.inst("OpShiftLeftLogical", u32, word, b.const_uint(16)))
                    value = self.inst("OpBitcast", f32, bits)
            self.stmt("OpStore", self._emu_at(out, q), value)

        self._emu_slot_loop(element)
        return self.inst("OpLoad", self._emu_tile_type(), out)

    def _emu_word(self, index: int) -> int:
        u32 = self.b.type_int(32, False)
        return self.inst("OpLoad", u32, self._scratch_pointer(index), *self._mem_access("Workgroup"))

    def _emu_store(self, target: tuple[int | None, int], tile: int, layout: int, stride: int) -> None:
        """An f32 accumulator tile to f32 memory (a buffer or shared array of f32, or the scratch's words)."""
        b = self.b
        uid, base = target
        held = self._emu_var(self._emu_slots())
        self.stmt("OpStore", held, tile)

        def element(q: int, r: int, c: int) -> None:
            major, minor = (r, c) if layout == _ROW_MAJOR else (c, r)
            index = self._iadd(base, self._imul(major, stride), minor)
            value = self.inst("OpLoad", b.type_float(32), self._emu_at(held, q))
            if uid is not None:
                self._store_at(uid, index, value)
            else:
                self.stmt("OpStore", self._scratch_pointer(index), self.inst("OpBitcast", b.type_int(32, False), value),
                          *self._mem_access("Workgroup"))

        self._emu_slot_loop(element)

    def _emu_muladd(self, a: int, bb: int, c: int) -> int:
        b = self.b
        f32, i32 = b.type_float(32), b.type_int(32, True)
        full_a, full_b = self._emu_gather(a), self._emu_gather(bb)
        held_c, out, acc = self._emu_var(self._emu_slots()), self._emu_var(self._emu_slots()), self._emu_var(1)
        self.stmt("OpStore", held_c, c)

        def element(q: int, r: int, col: int) -> None:
            self.stmt("OpStore", self._emu_at(acc, b.const_int(0)), self.inst("OpLoad", f32, self._emu_at(held_c, q)))

            def product(k: int) -> None:  # k order, one rounding each (fma), as the fallback adds them
                x = self.inst("OpLoad", f32, self._emu_at(full_a, self._iadd(
                    self.inst("OpShiftLeftLogical", i32, r, b.const_uint(4)), k)))
                y = self.inst("OpLoad", f32, self._emu_at(full_b, self._iadd(
                    self.inst("OpShiftLeftLogical", i32, k, b.const_uint(4)), col)))
                s = self.inst("OpLoad", f32, self._emu_at(acc, b.const_int(0)))
                self.stmt("OpStore", self._emu_at(acc, b.const_int(0)), self.glsl("Fma", f32, x, y, s))

            self._range(b.const_int(0), b.const_int(_TILE), b.const_int(1), product)
            self.stmt("OpStore", self._emu_at(out, q), self.inst("OpLoad", f32, self._emu_at(acc, b.const_int(0))))

        self._emu_slot_loop(element)
        return self.inst("OpLoad", self._emu_tile_type(), out)

    def _emu_gather(self, tile: int) -> int:
        """A Function ``float[256]`` holding the whole tile in every lane: element e comes from slot e / W of lane
        e % W (a subgroup shuffle; every lane runs the loop the same number of times)."""
        b = self.b
        f32, i32, u32 = b.type_float(32), b.type_int(32, True), b.type_int(32, False)
        self.capability("GroupNonUniform", "GroupNonUniformShuffle")
        self.features |= {"subgroup_basic", "subgroup_shuffle"}
        held, full = self._emu_var(self._emu_slots()), self._emu_var(_TILE * _TILE)
        self.stmt("OpStore", held, tile)
        w = b.const_int(self.simd_width)

        def element(e: int) -> None:
            mine = self.inst("OpLoad", f32, self._emu_at(held, self.inst("OpSDiv", i32, e, w)))
            lane = self.inst("OpBitcast", u32, self.inst("OpSRem", i32, e, w))
            value = self.inst("OpGroupNonUniformShuffle", f32, b.const_uint(_SUBGROUP_SCOPE), mine, lane)
            self.stmt("OpStore", self._emu_at(full, e), value)

        self._range(b.const_int(0), b.const_int(_TILE * _TILE), b.const_int(1), element)
        return full
