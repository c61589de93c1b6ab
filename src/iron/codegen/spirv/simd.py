"""Thread built-ins, SIMD-group (subgroup) operations and atomics of the SPIR-V emitter (a mixin of
``SpirvEmitter``, emit.py).

``simd_lane``/``simd_group`` are the SubgroupLocalInvocationId/SubgroupId built-ins, the numbering
OpGroupNonUniformShuffle uses. Float atomics a device lacks (and float max) are compare-and-swap loops on the u32 bits.
"""

from __future__ import annotations

import math

from ...ir import ops as O
from ...ir.core import Op
from .simd_lanes import SimdLaneOps

_SUBGROUP_SCOPE = 3
_DEVICE_SCOPE, _WORKGROUP_SCOPE = 1, 2
_SIMD_REDUCE = {("simd_sum", "float"): "OpGroupNonUniformFAdd", ("simd_max", "float"): "OpGroupNonUniformFMax",
                ("simd_min", "float"): "OpGroupNonUniformFMin", ("simd_sum", "int"): "OpGroupNonUniformIAdd",
                ("simd_max", "int"): "OpGroupNonUniformSMax", ("simd_min", "int"): "OpGroupNonUniformSMin",
                ("simd_sum", "uint"): "OpGroupNonUniformIAdd", ("simd_max", "uint"): "OpGroupNonUniformUMax",
                ("simd_min", "uint"): "OpGroupNonUniformUMin"}
#: integer atomics (a pair: signed, unsigned); every one relaxed (semantics 0), at the scope of the storage class
_INT_ATOMICS = {"atomic_add": "OpAtomicIAdd", "atomic_max": ("OpAtomicSMax", "OpAtomicUMax"),
                "atomic_min": ("OpAtomicSMin", "OpAtomicUMin"), "atomic_and": "OpAtomicAnd", "atomic_or": "OpAtomicOr",
                "atomic_xor": "OpAtomicXor", "atomic_exchange": "OpAtomicExchange"}
_THREAD_BUILTINS = {"local_id": "LocalInvocationId", "group_id": "WorkgroupId", "num_groups": "NumWorkgroups"}


class ThreadOps(SimdLaneOps):
    """``program_id`` and the other thread indices, ``simd_*`` reductions and exchanges, ``atomic_*``."""

    def _builtin(self, name: str, vector: bool) -> int:
        b = self.b
        u32 = b.type_int(32, False)
        var = self.interface.get(name)
        ty = b.type_vector(u32, 3) if vector else u32
        if var is None:
            var = self.interface[name] = b.global_variable("Input", ty)
            b.decorate(var, "BuiltIn", b.enum("BuiltIn", name))
        return self.inst("OpLoad", ty, var)

    def thread(self, code: str, axis: int | None) -> int:
        b = self.b
        u32, i32 = b.type_int(32, False), b.type_int(32, True)
        if code in _THREAD_BUILTINS:
            value = self.inst("OpCompositeExtract", u32, self._builtin(_THREAD_BUILTINS[code], True), axis)
        elif code == "group_size":
            value = self.inst("OpCompositeExtract", u32, self.group_size, axis)
        elif code == "num_threads":  # the exact grid: an i32 push constant
            return self.grid[axis]
        elif code == "program_id" and axis == 0 and self.pid0 is not None:
            return self.pid0  # the lanes module: the element being emitted
        elif code == "program_id":
            gid = self.inst("OpCompositeExtract", u32, self._builtin("WorkgroupId", True), axis)
            size = self.inst("OpCompositeExtract", u32, self.group_size, axis)
            lid = self.inst("OpCompositeExtract", u32, self._builtin("LocalInvocationId", True), axis)
            value = self.inst("OpIAdd", u32, self.inst("OpIMul", u32, gid, size), lid)
        else:
            self.capability("GroupNonUniform")
            self.features.add("subgroup_basic")
            name = {"simd_lane": "SubgroupLocalInvocationId", "simd_group": "SubgroupId",
                    "simd_size": "SubgroupSize"}[code]
            value = self._builtin(name, False)
        return self.inst("OpBitcast", i32, value)

    def _simd(self, op: Op) -> int:
        b = self.b
        rt = op.result.type
        ty = self.reg_type(rt)
        x = self.value(op.operands[0])
        scope = b.const_uint(_SUBGROUP_SCOPE)
        self.capability("GroupNonUniform")
        self.features.add("subgroup_basic")
        if op.opcode in O.SIMD_VOTE or op.opcode in O.SIMD_SCAN:
            return self._simd_lanes(op)
        if op.opcode in O.SIMD_REDUCE:
            self.capability("GroupNonUniformArithmetic")
            self.features.add("subgroup_arithmetic")
            name = _SIMD_REDUCE[op.opcode, rt.kind]
            reduce = b.enum("GroupOperation", "Reduce")
            if rt.is_float and op.opcode in ("simd_min", "simd_max"):
                # Iron's simd_min/max skip NaN lanes (like fmin/fmax) and give NaN when every lane is NaN. Drivers
                # differ on NaN operands of FMin/FMax (NVIDIA's propagate them; with only NaNs lavapipe gives the
                # identity): NaN lanes take part as the identity, and the NaN lanes are counted
                u32, boolean = b.type_int(32, False), b.type_bool()
                nan = self.inst("OpIsNan", boolean, x)
                identity = self.f32c(math.inf if op.opcode == "simd_min" else -math.inf)
                r = self.inst(name, ty, scope, reduce, self.inst("OpSelect", ty, nan, identity, x))
                counted = self.inst("OpSelect", u32, nan, b.const_uint(0), b.const_uint(1))
                numbers = self.inst("OpGroupNonUniformIAdd", u32, scope, reduce, counted)
                none = self.inst("OpIEqual", boolean, numbers, b.const_uint(0))
                r = self.inst("OpSelect", ty, none, x, r)  # x is NaN in every lane then
            else:
                r = self.inst(name, ty, scope, reduce, x)
            return self.rounded(r, rt)
        self.capability("GroupNonUniformShuffle")
        self.features.add("subgroup_shuffle")
        # every exchange is a Shuffle by absolute lane (OpGroupNonUniformBroadcast needs a constant lane before
        # SPIR-V 1.5), at the lane _source_lane checked: one that exists and is active, else the caller's own
        return self.inst("OpGroupNonUniformShuffle", ty, scope, x, self._source_lane(op))

    def _atomic(self, op: Op) -> int:
        b = self.b
        m, ptr = self._pointer(op.operands[0].uid, self.value(op.operands[1]), op.operands[1].type.is_signed)
        elem = m.elem
        val = self.value(op.operands[2])
        scope = b.const_uint(_DEVICE_SCOPE if m.storage == "StorageBuffer" else _WORKGROUP_SCOPE)
        if self.vmm and m.storage == "StorageBuffer":  # the Vulkan memory model asks for device scope explicitly
            self.capability("VulkanMemoryModelDeviceScope")
            self.features.add("vulkan_memory_model_device_scope")
        relaxed = b.const_uint(0)
        ty = self.reg_type(elem)
        if m.kind == "bits":
            return self._cas(op.opcode, ptr, scope, val)
        if op.opcode == "atomic_cas":  # OpAtomicCompareExchange takes the new value before the comparator
            return self.inst("OpAtomicCompareExchange", ty, ptr, scope, relaxed, relaxed,
                             self.value(op.operands[3]), val)
        if elem.is_wide:  # atomic_add on i64/u64 (the front-end allows no other 64-bit atomic)
            self.capability("Int64Atomics")
            self.features.add("int64_atomics" if m.storage == "StorageBuffer" else "int64_shared_atomics")
        if elem.is_int:
            name = _INT_ATOMICS[op.opcode]
            if isinstance(name, tuple):
                name = name[0] if elem.is_signed else name[1]
            return self.inst(name, ty, ptr, scope, relaxed, val)
        self.capability("AtomicFloat32AddEXT")
        b.extension("SPV_EXT_shader_atomic_float_add")
        self.features.add("atomic_float_add")
        return self.inst("OpAtomicFAddEXT", ty, ptr, scope, relaxed, val)

    def _cas(self, opcode: str, ptr: int, scope: int, val: int) -> int:
        """Float atomics as a compare-and-swap loop on the u32 bits; returns the old value.

        The compared value lives in a ``Function`` variable (loaded once before the loop, replaced by what a failed
        swap saw: a loop-carried phi) and the old value is read from it after the loop, never taken from an
        instruction inside it: lavapipe runs the loop for a whole SIMD vector until its last lane swaps and
        recomputes in-loop results for the lanes that left (an atomic load gives them 0), so a value leaving this
        single-exit loop without a phi was the last iteration's (docs/backends/vulkan.md, "Limits seen on
        lavapipe")."""
        b = self.b
        u32, f32, bool_t = b.type_int(32, False), b.type_float(32), b.type_bool()
        relaxed = b.const_uint(0)
        expected = b.new_id()
        self.fvars.append(b.instruction("OpVariable", b.type_pointer("Function", u32), expected,
                                        b.enum("StorageClass", "Function")))
        self.stmt("OpStore", expected, self.inst("OpAtomicLoad", u32, ptr, scope, relaxed))
        header, body_l, cont, merge = (b.new_id() for _ in range(4))
        self.branch(header)
        self.label(header)
        self.stmt("OpLoopMerge", merge, cont, 0)
        self.stmt("OpBranch", body_l)
        self.label(body_l)
        cur = self.inst("OpLoad", u32, expected)
        old = self.inst("OpBitcast", f32, cur)
        new = self.glsl("NMax", f32, old, val) if opcode == "atomic_max" else self.inst("OpFAdd", f32, old, val)
        seen = self.inst("OpAtomicCompareExchange", u32, ptr, scope, relaxed, relaxed,
                         self.inst("OpBitcast", u32, new), cur)
        done = self.inst("OpIEqual", bool_t, seen, cur)
        self.stmt("OpBranchConditional", done, merge, cont)
        self.label(cont)
        self.stmt("OpStore", expected, seen)
        self.stmt("OpBranch", header)
        self.label(merge)
        self.terminated = False
        return self.inst("OpBitcast", f32, self.inst("OpLoad", u32, expected))
