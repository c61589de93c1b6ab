"""Memory ops of the SPIR-V emitter: storage buffers, shared (Workgroup) and local (Function) arrays, loads,
stores and vector copies (a mixin of ``SpirvEmitter``, emit.py).

f16 buffers are stored as f16 (16-bit storage), bf16 as 16-bit unsigned words and an f32 buffer a compare-and-swap
atomic updates as u32 words; registers always hold f32 for the half types, converted at each load and store.
i8/u8 buffers are 8-bit storage (Int8 and StorageBuffer8BitAccess); 8-bit shared and local arrays hold the 32-bit
registers, as half arrays hold f32 (no 8-bit workgroup storage needed). 64-bit elements are stored as they are.
"""

from __future__ import annotations

from ...ir import types as t
from ...ir.core import Op
from .module import SpirvSharedLength


class _Memory:
    """How one buffer (parameter or shared array) is stored: ``kind`` is "plain", "f16", "bf16" or "bits" (u32 words
    holding the register's bits); ``packed``: a shared array declared ``uvec4[]``, element i in component i % 4 of
    word i / 4 (words.py)."""

    __slots__ = ("var", "storage", "elem_type", "kind", "elem", "packed")

    def __init__(self, var: int, storage: str, elem_type: int, kind: str, elem: t.ScalarType, packed: bool = False):
        self.var, self.storage, self.elem_type, self.kind, self.elem = var, storage, elem_type, kind, elem
        self.packed = packed


class MemoryOps:
    """Buffers and arrays: how each is stored (``self.mem``), and element loads and stores through it."""

    def _storage_elem(self, elem: t.ScalarType, cas: bool, space: str) -> tuple[str, int]:
        b = self.b
        if cas:
            return "bits", b.type_int(32, False)
        if elem == t.f16 and space == "global":
            self.capability("Float16", "StorageBuffer16BitAccess")
            self.features |= {"float16", "storage16"}
            return "f16", b.type_float(16)
        if elem == t.bf16 and space == "global":
            self.capability("StorageBuffer16BitAccess")
            self.features.add("storage16")
            return "bf16", b.type_int(16, False)
        if elem.is_narrow and space == "global":
            self.capability("Int8", "StorageBuffer8BitAccess")
            b.extension("SPV_KHR_8bit_storage")
            self.features |= {"int8", "storage8"}
            return elem.name, b.type_int(8, elem.is_signed)
        if elem.is_half and space == "shared16":  # a shared array cooperative matrices load from (coopmat.py)
            if elem == t.f16:
                self.capability("Float16")
                self.features.add("float16")
                return "f16", b.type_float(16)
            self.capability("Int16")
            self.features.add("int16")
            return "bf16", b.type_int(16, False)
        return "plain", self.reg_type(elem)

    def _buffer_block(self, elem_type: int, stride: int, readonly: bool) -> int:
        """``struct { T data[]; }``, one per element type and access: a read-only buffer's struct has its member
        decorated NonWritable (as glslang writes ``readonly buffer``). A NonWritable decoration on the variable of
        a struct that writable buffers share made NVIDIA's driver treat those as read-only too: it reused a loaded
        value across the buffer's own stores."""
        block = self.blocks.get((elem_type, readonly))
        if block is None:
            block = self.b.type_struct([self.b.type_runtime_array(elem_type, stride)])
            self.blocks[elem_type, readonly] = block
            self.b.decorate(block, "Block")
            self.b.member_decorate(block, 0, "Offset", 0)
            if readonly:
                self.b.member_decorate(block, 0, "NonWritable")
        return block

    def _shared(self, op: Op) -> None:
        b = self.b
        elem = op.attrs["elem"]
        if op.result.uid in self.pairs:  # halves two to a 32-bit word (pairs.py)
            self._pair_shared(op)
            if op.result.name:
                b.name(self.mem[op.result.uid].var, op.result.name)
            return
        if op.result.uid in self.packed:  # moved by 16-byte vector copies: an array of uvec4 words (words.py)
            u32 = b.type_int(32, False)
            var = b.global_variable("Workgroup", self._shared_array(op, b.type_vector(u32, 4), 4, 4))
            self.mem[op.result.uid] = _Memory(var, "Workgroup", u32, "bits", elem, packed=True)
        else:
            space = "shared16" if op.result.uid in self.shared16 else "shared"
            kind, elem_type = self._storage_elem(elem, op.result.uid in self.cas_buffers, space)
            item = 2 if kind in ("f16", "bf16") else 8 if elem.is_wide else 4
            var = b.global_variable("Workgroup", self._shared_array(op, elem_type, item, 1))
            self.mem[op.result.uid] = _Memory(var, "Workgroup", elem_type, kind, elem)
        if op.result.name:
            b.name(var, op.result.name)

    def _shared_array(self, op: Op, word: int, item_bytes: int, per: int) -> int:
        """The Workgroup array type of shared array ``op``, ``per`` elements of ``item_bytes`` to a ``word``, and its
        bytes counted: in ``shared_bytes`` at a compile-time size, else in ``shared_lengths`` (the length is then a
        specialization constant, set from the launch's value of the parameter ``op.attrs["length"]``)."""
        b = self.b
        size = op.attrs["size"]
        if size is not None:
            count = -(-size // per)
            self.shared_bytes += item_bytes * per * count
            return b.type_array(word, count)
        param = op.attrs["length"]
        if param not in self.length_specs:
            spec_id = len(self.group_dims) + len(self.length_specs)
            self.length_specs[param] = (b.spec_constant(b.type_int(32, False), 1, spec_id), spec_id)
            b.name(self.length_specs[param][0], f"shared_length_{param}")
        length, spec_id = self.length_specs[param]
        if per > 1:  # ceil(length / per) words, computed when the pipeline is built
            bumped = b.spec_op(b.type_int(32, False), "OpIAdd", length, b.const_uint(per - 1))
            length = b.spec_op(b.type_int(32, False), "OpUDiv", bumped, b.const_uint(per))
        self.shared_lengths.append(SpirvSharedLength(param, spec_id, item_bytes, per, op.result.name or ""))
        return b.type_array_of(word, length)

    def _local(self, op: Op) -> None:
        """A per-thread array: a Function variable of registers (f16/bf16 elements held as exact f32 values)."""
        b = self.b
        elem, size = op.attrs["elem"], op.attrs["size"]
        elem_type = self.reg_type(elem)
        var = b.new_id()
        ptr = b.type_pointer("Function", b.type_array(elem_type, size))
        self.fvars.append(b.instruction("OpVariable", ptr, var, b.enum("StorageClass", "Function")))
        if op.result.name:
            b.name(var, op.result.name)
        self.mem[op.result.uid] = _Memory(var, "Function", elem_type, "plain", elem)

    def _pointer(self, buf_uid: int, idx: int, signed: bool = True) -> tuple[_Memory, int]:
        """Pointer to element ``idx`` (an i32 register, or u32 where ``signed`` is False)."""
        b, m = self.b, self.mem[buf_uid]
        if m.kind == "pairs":  # the word holding the element (pairs.py)
            return m, self._pair_pointer(m, idx, signed)
        ptr_t = b.type_pointer(m.storage, m.elem_type)
        if m.packed:  # component idx % 4 of word idx / 4
            ity = b.type_int(32, signed)
            shift = "OpShiftRightArithmetic" if signed else "OpShiftRightLogical"
            chain = (self.inst(shift, ity, idx, b.const_uint(2)),
                     self.inst("OpBitwiseAnd", ity, idx, self.const_of(ity, 3)))
        elif m.storage == "StorageBuffer":
            chain = (b.const_int(0), idx)
        else:
            chain = (idx,)
        return m, self.inst("OpAccessChain", ptr_t, m.var, *chain)

    def _load(self, op: Op) -> int:
        buf = op.operands[0]
        if self.lane_regs is not None and buf.uid in self.lane_regs:  # the lanes module: this element's register
            return self.inst("OpLoad", self.reg_type(buf.type.elem), self.lane_regs[buf.uid])
        return self._load_at(buf.uid, self.value(op.operands[1]), op.operands[1].type.is_signed)

    def _load_at(self, buf_uid: int, idx: int, signed: bool = True) -> int:
        b = self.b
        if self.mem[buf_uid].kind == "pairs":
            return self._pair_load(self.mem[buf_uid], idx, signed)
        m, ptr = self._pointer(buf_uid, idx, signed)
        raw = self.inst("OpLoad", m.elem_type, ptr, *self._mem_access(m.storage))
        f32, u32 = b.type_float(32), b.type_int(32, False)
        if m.kind == "f16":
            return self.inst("OpFConvert", f32, raw)
        if m.kind == "bf16":
            wide = self.inst("OpUConvert", u32, raw)
            return self.inst("OpBitcast", f32, self.inst("OpShiftLeftLogical", u32, wide, b.const_uint(16)))
        if m.kind == "bits":
            return self._from_u32(raw, self.reg_type(m.elem))
        if m.kind in ("i8", "u8"):  # widened to the 32-bit register
            return self.inst("OpSConvert" if m.kind == "i8" else "OpUConvert", self.reg_type(m.elem), raw)
        return raw

    def _to_storage(self, m: _Memory, v: int) -> int:
        b = self.b
        if m.kind == "f16":
            return self.inst("OpFConvert", m.elem_type, v)  # exact: the value is already an f16
        if m.kind == "bf16":
            u32 = b.type_int(32, False)
            high = self.inst("OpShiftRightLogical", u32, self.inst("OpBitcast", u32, v), b.const_uint(16))
            return self.inst("OpUConvert", m.elem_type, high)
        if m.kind == "bits":
            return self._to_u32(v, self.reg_type(m.elem))
        if m.kind in ("i8", "u8"):  # the register holds the value in range: truncation keeps it
            return self.inst("OpSConvert" if m.kind == "i8" else "OpUConvert", m.elem_type, v)
        return v

    def _store(self, op: Op) -> None:
        buf = op.operands[0]
        if self.lane_regs is not None and buf.uid in self.lane_regs:
            self.stmt("OpStore", self.lane_regs[buf.uid], self.value(op.operands[2]))
            return
        self._store_at(buf.uid, self.value(op.operands[1]), self.value(op.operands[2]), op.operands[1].type.is_signed)

    def _store_at(self, buf_uid: int, idx: int, value: int, signed: bool = True) -> None:
        if self.mem[buf_uid].kind == "pairs":
            return self._pair_store(self.mem[buf_uid], idx, value, signed)
        m, ptr = self._pointer(buf_uid, idx, signed)
        self.stmt("OpStore", ptr, self._to_storage(m, value), *self._mem_access(m.storage))

    def _mem_access(self, storage: str) -> tuple[int, ...]:
        """Memory operands of a load or store: under the Vulkan memory model (modules with cooperative matrices)
        accesses of buffers and shared memory are NonPrivatePointer, so that barriers order them between
        invocations (private accesses are only ordered within one)."""
        return (0x20,) if self.vmm and storage in ("StorageBuffer", "Workgroup") else ()
