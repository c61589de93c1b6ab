"""Memory ops of the SPIR-V emitter: storage buffers, shared (Workgroup) and local (Function) arrays, loads,
stores and vector copies (a mixin of ``SpirvEmitter``, emit.py).

f16 buffers are stored as f16 (16-bit storage), bf16 as 16-bit unsigned words and an f32 buffer a compare-and-swap
atomic updates as u32 words; registers always hold f32 for the half types, converted at each load and store.
"""

from __future__ import annotations

from ...ir import types as t
from ...ir.core import Op


class _Memory:
    """How one buffer (parameter or shared array) is stored: ``kind`` is "plain", "f16", "bf16" or "bits"."""

    __slots__ = ("var", "storage", "elem_type", "kind", "elem")

    def __init__(self, var: int, storage: str, elem_type: int, kind: str, elem: t.ScalarType):
        self.var, self.storage, self.elem_type, self.kind, self.elem = var, storage, elem_type, kind, elem


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
        elem, size = op.attrs["elem"], op.attrs["size"]
        kind, elem_type = self._storage_elem(elem, op.result.uid in self.cas_buffers, "shared")
        var = b.global_variable("Workgroup", b.type_array(elem_type, size))
        if op.result.name:
            b.name(var, op.result.name)
        self.shared_bytes += 4 * size
        self.mem[op.result.uid] = _Memory(var, "Workgroup", elem_type, kind, elem)

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

    def _vcopy(self, op: Op) -> None:
        """n elements, one by one: drivers merge adjacent loads (a 16-byte view of the buffer is the next step)."""
        dst, di, src, si = op.operands
        d0, s0 = self.value(di), self.value(si)
        for k in range(op.attrs["n"]):
            dk = d0 if k == 0 else self.inst("OpIAdd", self.reg_type(di.type), d0, self.const(k, di.type))
            sk = s0 if k == 0 else self.inst("OpIAdd", self.reg_type(si.type), s0, self.const(k, si.type))
            self._store_at(dst.uid, dk, self._load_at(src.uid, sk))

    def _pointer(self, buf_uid: int, idx: int) -> tuple[_Memory, int]:
        m = self.mem[buf_uid]
        ptr_t = self.b.type_pointer(m.storage, m.elem_type)
        chain = (self.b.const_int(0), idx) if m.storage == "StorageBuffer" else (idx,)
        return m, self.inst("OpAccessChain", ptr_t, m.var, *chain)

    def _load(self, op: Op) -> int:
        buf = op.operands[0]
        if self.lane_regs is not None and buf.uid in self.lane_regs:  # the lanes module: this element's register
            return self.inst("OpLoad", self.reg_type(buf.type.elem), self.lane_regs[buf.uid])
        return self._load_at(buf.uid, self.value(op.operands[1]))

    def _load_at(self, buf_uid: int, idx: int) -> int:
        b = self.b
        m, ptr = self._pointer(buf_uid, idx)
        raw = self.inst("OpLoad", m.elem_type, ptr)
        f32, u32 = b.type_float(32), b.type_int(32, False)
        if m.kind == "f16":
            return self.inst("OpFConvert", f32, raw)
        if m.kind == "bf16":
            wide = self.inst("OpUConvert", u32, raw)
            return self.inst("OpBitcast", f32, self.inst("OpShiftLeftLogical", u32, wide, b.const_uint(16)))
        if m.kind == "bits":
            return self.inst("OpBitcast", f32, raw)
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
            return self.inst("OpBitcast", m.elem_type, v)
        return v

    def _store(self, op: Op) -> None:
        buf = op.operands[0]
        if self.lane_regs is not None and buf.uid in self.lane_regs:
            self.stmt("OpStore", self.lane_regs[buf.uid], self.value(op.operands[2]))
            return
        self._store_at(buf.uid, self.value(op.operands[1]), self.value(op.operands[2]))

    def _store_at(self, buf_uid: int, idx: int, value: int) -> None:
        m, ptr = self._pointer(buf_uid, idx)
        self.stmt("OpStore", ptr, self._to_storage(m, value))
