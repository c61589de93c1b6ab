"""IR kernel -> SPIR-V compute module (``emit_spirv``).

Layout of the module (one entry point, GLCompute, SPIR-V 1.3 for Vulkan 1.1+):

- each buffer parameter is a storage buffer ``struct { T data[]; }`` (Block, ArrayStride) at set 0, binding = its
  position among the buffers; read-only ones have their member NonWritable. f16 is stored as f16 (16-bit
  storage), bf16 as 16-bit unsigned words, and an f32 buffer updated by a compare-and-swap atomic as u32 words
  (logical addressing cannot reinterpret a pointer, and OpAtomicCompareExchange needs an integer);
- Iron scalars, then the exact grid sizes ``iron_n0..2`` are one push-constant block of 4-byte fields;
- the group size is the WorkgroupSize built-in made of three spec constants (SpecId 0, 1, 2), so one module serves
  every group size the launcher picks (VkSpecializationInfo);
- shared arrays are Workgroup arrays; half arrays hold f32 there (exact, and no 16-bit workgroup storage needed).

``simd_lane``/``simd_group`` are the SubgroupLocalInvocationId/SubgroupId built-ins, the numbering
OpGroupNonUniformShuffle uses. Iron defines them on the linear local id; Vulkan only promises that mapping for 1-D
groups (NVIDIA and lavapipe also follow it for 2-D/3-D groups), see docs/backends/vulkan.md.
"""

from __future__ import annotations

import math

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Block, Kernel, Op, Value
from .builder import SpirvModuleBuilder
from .mathops import MathOps
from .module import SpirvBuffer, SpirvKernel, SpirvPush
from .precise import PreciseMath
from .values import ValueOps

SPEC_IDS = (0, 1, 2)
_SUBGROUP_SCOPE = 3
_DEVICE_SCOPE, _WORKGROUP_SCOPE = 1, 2
# AcquireRelease | UniformMemory | WorkgroupMemory: CUDA's __syncthreads also orders global memory within the group
_BARRIER_SEMANTICS = 0x8 | 0x40 | 0x100
#: float arithmetic whose results are decorated NoContraction
#: declare SignedZeroInfNanPreserve (always; False only for experiments measuring what the mode costs a driver:
#: bench/experiments/vulkan_vs_cuda.py)
IEEE_SPECIALS = True
_EXACT_FLOAT_OPS = frozenset({"OpFAdd", "OpFSub", "OpFMul", "OpFDiv", "OpFRem", "OpFNegate"})
_SIMD_REDUCE = {("simd_sum", "float"): "OpGroupNonUniformFAdd", ("simd_max", "float"): "OpGroupNonUniformFMax",
                ("simd_min", "float"): "OpGroupNonUniformFMin", ("simd_sum", "int"): "OpGroupNonUniformIAdd",
                ("simd_max", "int"): "OpGroupNonUniformSMax", ("simd_min", "int"): "OpGroupNonUniformSMin",
                ("simd_sum", "uint"): "OpGroupNonUniformIAdd", ("simd_max", "uint"): "OpGroupNonUniformUMax",
                ("simd_min", "uint"): "OpGroupNonUniformUMin"}
_THREAD_BUILTINS = {"local_id": "LocalInvocationId", "group_id": "WorkgroupId", "num_groups": "NumWorkgroups"}


class _Memory:
    """How one buffer (parameter or shared array) is stored: ``kind`` is "plain", "f16", "bf16" or "bits"."""

    __slots__ = ("var", "storage", "elem_type", "kind", "elem")

    def __init__(self, var: int, storage: str, elem_type: int, kind: str, elem: t.ScalarType):
        self.var, self.storage, self.elem_type, self.kind, self.elem = var, storage, elem_type, kind, elem


class SpirvEmitter(ValueOps, PreciseMath, MathOps):
    def __init__(self, kernel: Kernel, atomic_float_add: bool = True, uniform_control_flow: bool = False,
                 float64: bool = False, denorm_preserve: bool = False, lanes=None, *, ieee_specials: bool = True,
                 rounding_rte: bool = False):
        self.k = kernel
        self.lanes = lanes  # a LanePlan: emit the lanes module (see emit_spirv)
        self.pid0: int | None = None  # in the lanes module: program_id(0) of the element being emitted
        self.lane_regs: dict[int, int] | None = None  # lane buffer uid -> the Function variable of its element
        self.views: dict[int, int] = {}  # lane buffer uid -> its 16-byte view (the lanes module)
        self.b = SpirvModuleBuilder()
        self.atomic_float_add = atomic_float_add
        self.uniform_control_flow = uniform_control_flow
        self.float64 = float64  # sin, cos and float % in double precision (precise.py)
        self.denorm_preserve = denorm_preserve
        self.ieee_specials = ieee_specials and IEEE_SPECIALS
        self.rounding_rte = rounding_rte
        self.features: set[str] = set()
        self.vals: dict[int, int] = {}
        self.mem: dict[int, _Memory] = {}
        self.vars: dict[int, int] = {}
        self.interface: dict[str, int] = {}  # built-in name -> Input variable
        self.fvars: list[list[int]] = []  # OpVariable Function: must open the entry block
        self.body: list[list[int]] = []
        self.loops: list[tuple[int, int]] = []  # (merge, continue) of the enclosing loops
        self.terminated = False
        self.shared_bytes = 0
        self.blocks: dict[int, int] = {}  # storage element type -> its buffer block struct
        self.cas_buffers = self._cas_targets()

    # -- plumbing --------------------------------------------------------------------------------------------------

    def inst(self, opname: str, rtype: int, *operands: int) -> int:
        rid = self.b.new_id()
        self.body.append(self.b.instruction(opname, rtype, rid, *operands))
        if opname in _EXACT_FLOAT_OPS:
            # NoContraction: no fusing into fma (as --fmad=false on CUDA), and drivers must not apply value-changing
            # rewrites such as x * 0.0 -> 0.0 (Mesa treats the decorated instruction as exact)
            self.b.decorate(rid, "NoContraction")
        return rid

    def stmt(self, opname: str, *operands: int) -> None:
        self.body.append(self.b.instruction(opname, *operands))

    def label(self, lid: int) -> None:
        self.stmt("OpLabel", lid)
        self.terminated = False

    def branch(self, target: int) -> None:
        if not self.terminated:
            self.stmt("OpBranch", target)
            self.terminated = True

    def value(self, v: Value) -> int:
        owner = v.owner
        if isinstance(owner, Op) and owner.opcode == "const":
            return self.const(owner.attrs["value"], v.type)
        vid = self.vals.get(v.uid)
        if vid is None:
            raise CompileError(f"internal error in the spirv emitter: {v!r} used before it is defined", self.k.loc)
        return vid

    def capability(self, *names: str) -> None:
        for n in names:
            self.b.capability(n)

    def _cas_targets(self) -> set[int]:
        """f32 buffers some atomic updates with compare-and-swap (float max; float add without the extension)."""
        out = set()
        for op in self.k.walk():
            buf = op.operands[0] if op.opcode in O.ATOMICS else None
            if buf is not None and buf.type.elem == t.f32 and (op.opcode == "atomic_max" or not self.atomic_float_add):
                out.add(buf.uid)
        return out

    # -- the module ------------------------------------------------------------------------------------------------

    def run(self):
        b = self.b
        self.capability("Shader")
        u32 = b.type_int(32, False)
        sizes = [b.spec_constant(u32, 1, i) for i in SPEC_IDS]
        self.group_size = b.spec_composite(b.type_vector(u32, 3), *sizes)
        b.decorate(self.group_size, "BuiltIn", b.enum("BuiltIn", "WorkgroupSize"))
        buffers, push = self._params()
        void = b.type_void()
        fn = b.new_id()
        entry = b.new_id()
        self._load_push(push)
        if self.lanes is not None:
            self._lanes_body()
        else:
            self._guard()
            self.region(self.k.body)
        if not self.terminated:
            self.stmt("OpReturn")
        b.code("OpFunction", void, fn, 0, b.type_function(void))
        b.code("OpLabel", entry)
        b.extend_function(self.fvars + self.body)
        b.code("OpFunctionEnd")
        interface = [self.interface[k] for k in sorted(self.interface)]
        b.entry_point("GLCompute", fn, self.k.name, interface)
        b.execution_mode(fn, "LocalSize", 1, 1, 1)  # overridden by the WorkgroupSize built-in
        # keep IEEE signed zeros, infinities and NaNs through f32 arithmetic (x + 0.0 must give +0.0 for x = -0.0),
        # as the interpreter and CUDA do; without it drivers may fold such identities (lavapipe does). Vulkan 1.2
        # devices report shaderSignedZeroInfNanPreserveFloat32 (lavapipe and NVIDIA do); the runtime leaves the mode
        # out on a device that does not (declaring it there would make the module invalid for that device)
        if self.ieee_specials:
            self.capability("SignedZeroInfNanPreserve")
            b.extension("SPV_KHR_float_controls")
            b.execution_mode(fn, "SignedZeroInfNanPreserve", 32)
            if "Float16" in b.capabilities:
                b.execution_mode(fn, "SignedZeroInfNanPreserve", 16)
        if self.rounding_rte:
            # without a declared mode Vulkan lets a device round f32 add/sub/mul and conversions either to nearest
            # even or toward zero; Iron's results (the interpreter's, CUDA's) are round-to-nearest-even
            self.capability("RoundingModeRTE")
            b.extension("SPV_KHR_float_controls")
            for width, cap in ((32, None), (16, "Float16"), (64, "Float64")):
                if cap is None or cap in b.capabilities:
                    b.execution_mode(fn, "RoundingModeRTE", width)
            self.features.add("rounding_rte")
        if self.denorm_preserve:
            # f32 subnormals are numbers (CUDA and the interpreter keep them); NVIDIA's driver flushes them to zero
            # unless the module asks, so fmod(x, 1e-38) became fmod(x, 0) = NaN there
            self.capability("DenormPreserve")
            b.execution_mode(fn, "DenormPreserve", 32)
            self.features.add("denorm_preserve")
        if self.uniform_control_flow and "GroupNonUniform" in b.capabilities:
            # SIMD ops that every lane of the subgroup reaches together (after a loop or branch that all of them
            # entered) then see every lane: without it Vulkan does not promise that lanes reconverge at a merge
            # block, and NVIDIA's driver did not after a loop with per-lane trip counts
            b.extension("SPV_KHR_subgroup_uniform_control_flow")
            b.execution_mode(fn, "SubgroupUniformControlFlowKHR")
            self.features.add("subgroup_uniform_control_flow")
        b.name(fn, self.k.name)
        words = b.build()
        push_fields = tuple(SpirvPush(name, 4 * i, st) for i, (name, st) in enumerate(push))
        return SpirvKernel(words=words, entry=self.k.name, buffers=tuple(buffers), push=push_fields,
                           push_size=4 * len(push), local_size_spec_ids=SPEC_IDS, shared_bytes=self.shared_bytes,
                           features=frozenset(self.features), lanes=self.lanes.width if self.lanes else 1)

    def _params(self):
        b = self.b
        buffers = []
        push: list[tuple[str, t.ScalarType]] = []
        self.push_uids: list[int] = []
        for p in self.k.params:
            if p.kind == "buffer":
                elem = p.type.elem
                kind, elem_type = self._storage_elem(elem, p.value.uid in self.cas_buffers, "global")
                stride = 2 if elem.is_half and kind != "bits" else 4
                block = self._buffer_block(elem_type, stride, p.readonly)
                var = b.global_variable("StorageBuffer", block)
                binding = len(buffers)
                b.decorate(var, "DescriptorSet", 0)
                b.decorate(var, "Binding", binding)
                b.name(var, p.name)
                self.mem[p.value.uid] = _Memory(var, "StorageBuffer", elem_type, kind, elem)
                if self.lanes is not None and self.k.params.index(p) in self.lanes.lanes:
                    self.views[p.value.uid] = self._vector_view(binding, p.readonly, p.name)
                buffers.append(SpirvBuffer(p.name, binding, elem, p.readonly))
            else:
                push.append((p.name, p.type))
                self.push_uids.append(p.value.uid)
        push += [(f"iron_n{a}", t.i32) for a in range(3)]
        members = [self.reg_type(st) for _, st in push]
        block = b.type_struct(members)
        b.decorate(block, "Block")
        for i in range(len(members)):
            b.member_decorate(block, i, "Offset", 4 * i)
        self.push_var = b.global_variable("PushConstant", block)
        b.name(self.push_var, "iron_args")
        return buffers, push

    def _vector_view(self, binding: int, readonly: bool, name: str) -> int:
        """A second variable on a lane buffer's binding, typed as 16-byte words (``uvec4[]``): the lanes module moves
        each invocation's elements with whole-word loads and stores through it (the driver need not merge scalar
        accesses). The body never touches a lane buffer through both views, so they need not be declared Aliased."""
        b = self.b
        u32 = b.type_int(32, False)
        block = self._buffer_block(b.type_vector(u32, 4), 16, readonly)
        var = b.global_variable("StorageBuffer", block)
        b.decorate(var, "DescriptorSet", 0)
        b.decorate(var, "Binding", binding)
        b.name(var, f"{name}_x16")
        return var

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

    def _load_push(self, push) -> None:
        b = self.b
        self.grid = []
        for i, (_, st) in enumerate(push):
            ty = self.reg_type(st)
            ptr = self.inst("OpAccessChain", b.type_pointer("PushConstant", ty), self.push_var, b.const_int(i))
            v = self.inst("OpLoad", ty, ptr)
            if i < len(self.push_uids):
                self.vals[self.push_uids[i]] = v
            else:
                self.grid.append(v)

    def _guard(self, first: int | None = None) -> None:
        """Exact grid: threads past ``iron_n{axis}`` return (kernels with collectives get whole groups only).
        ``first``: the axis-0 element an invocation starts at, where it is not ``program_id(0)`` (lanes module)."""
        b = self.b
        bool_t = b.type_bool()
        out = None
        for axis in range(3):
            at = first if axis == 0 and first is not None else self.thread("program_id", axis)
            past = self.inst("OpSGreaterThanEqual", bool_t, at, self.grid[axis])
            out = past if out is None else self.inst("OpLogicalOr", bool_t, out, past)
        leave, merge = b.new_id(), b.new_id()
        self.stmt("OpSelectionMerge", merge, 0)
        self.stmt("OpBranchConditional", out, leave, merge)
        self.label(leave)
        self.stmt("OpReturn")
        self.label(merge)

    def _lanes_body(self) -> None:
        """The lanes module's body (see ``emit_spirv``): invocation t runs the kernel for elements first = width * t
        ... first + width - 1 of axis 0. When all of them are inside the grid, the lane buffers' elements are
        loaded first (independent loads, all in flight), each element's body works on registers, and the stores
        follow; at the grid's tail each element below n0 runs the plain body."""
        b, plan = self.b, self.lanes
        i32, bool_t, w = b.type_int(32, True), b.type_bool(), plan.width
        pid = self.thread("program_id", 0)
        first = self.inst("OpIMul", i32, pid, b.const_int(w))
        self._guard(first)
        index = [first] + [self.inst("OpIAdd", i32, first, b.const_int(k)) for k in range(1, w)]
        full = self.inst("OpSLessThanEqual", bool_t, self.inst("OpIAdd", i32, first, b.const_int(w)), self.grid[0])
        whole, tail, end = b.new_id(), b.new_id(), b.new_id()
        self.stmt("OpSelectionMerge", end, 0)
        self.stmt("OpBranchConditional", full, whole, tail)
        self.label(whole)
        regs: dict[int, list[int]] = {}
        for i in plan.lanes:
            p = self.k.params[i]
            ptr = b.type_pointer("Function", self.reg_type(p.type.elem))
            regs[p.value.uid] = vids = [b.new_id() for _ in range(w)]
            for vid in vids:
                self.fvars.append(b.instruction("OpVariable", ptr, vid, b.enum("StorageClass", "Function")))
        for i in sorted(plan.preload):
            uid = self.k.params[i].value.uid
            for k, value in enumerate(self._load_words(uid, pid, w)):
                self.stmt("OpStore", regs[uid][k], value)
        for k in range(w):
            self.pid0, self.lane_regs = index[k], {uid: vids[k] for uid, vids in regs.items()}
            self.region(self.k.body)
        self.lane_regs = None
        for i in sorted(plan.writeback):
            p = self.k.params[i]
            values = [self.inst("OpLoad", self.reg_type(p.type.elem), regs[p.value.uid][k]) for k in range(w)]
            self._store_words(p.value.uid, pid, values)
        self.branch(end)
        self.label(tail)
        for k in range(w):
            inside, after = b.new_id(), b.new_id()
            below = self.inst("OpSLessThan", bool_t, index[k], self.grid[0])
            self.stmt("OpSelectionMerge", after, 0)
            self.stmt("OpBranchConditional", below, inside, after)
            self.label(inside)
            self.pid0 = index[k]
            self.region(self.k.body)
            self.branch(after)
            self.label(after)
        self.pid0 = None
        self.branch(end)
        self.label(end)

    def _view_pointer(self, uid: int, pid: int, chunk: int, chunks: int) -> int:
        """Pointer to 16-byte word ``pid * chunks + chunk`` of a lane buffer's view."""
        b = self.b
        i32, u32 = b.type_int(32, True), b.type_int(32, False)
        at = self.inst("OpIAdd", i32, self.inst("OpIMul", i32, pid, b.const_int(chunks)), b.const_int(chunk))
        ptr_t = b.type_pointer("StorageBuffer", b.type_vector(u32, 4))
        return self.inst("OpAccessChain", ptr_t, self.views[uid], b.const_int(0), at)

    def _load_words(self, uid: int, pid: int, w: int) -> list[int]:
        """The ``w`` register values of an invocation's elements of a lane buffer, loaded as 16-byte words."""
        b, m = self.b, self.mem[uid]
        u32, f32 = b.type_int(32, False), b.type_float(32)
        per_word = 4 // m.elem.itemsize  # elements in each 32-bit component
        chunks = w // (4 * per_word)
        values = []
        for c in range(chunks):
            word4 = self.inst("OpLoad", b.type_vector(u32, 4), self._view_pointer(uid, pid, c, chunks))
            for j in range(4):
                word = self.inst("OpCompositeExtract", u32, word4, j)
                if per_word == 1:
                    values.append(self.inst("OpBitcast", self.reg_type(m.elem), word))
                elif m.kind == "f16":
                    pair = self.inst("OpBitcast", b.type_vector(m.elem_type, 2), word)
                    values += [self.inst("OpFConvert", f32, self.inst("OpCompositeExtract", m.elem_type, pair, h))
                               for h in (0, 1)]
                else:  # bf16: the upper 16 bits of an f32
                    low = self.inst("OpShiftLeftLogical", u32, word, b.const_uint(16))
                    high = self.inst("OpBitwiseAnd", u32, word, b.const_uint(0xFFFF0000))
                    values += [self.inst("OpBitcast", f32, low), self.inst("OpBitcast", f32, high)]
        return values

    def _store_words(self, uid: int, pid: int, values: list[int]) -> None:
        """Store an invocation's register values of a lane buffer as 16-byte words."""
        b, m = self.b, self.mem[uid]
        u32 = b.type_int(32, False)
        per_word = 4 // m.elem.itemsize
        chunks = len(values) // (4 * per_word)
        for c in range(chunks):
            words = []
            for j in range(4):
                part = values[(4 * c + j) * per_word:(4 * c + j + 1) * per_word]
                if per_word == 1:
                    words.append(self.inst("OpBitcast", u32, part[0]))
                elif m.kind == "f16":
                    halves = [self.inst("OpFConvert", m.elem_type, v) for v in part]  # exact: already f16 values
                    pair = self.inst("OpCompositeConstruct", b.type_vector(m.elem_type, 2), *halves)
                    words.append(self.inst("OpBitcast", u32, pair))
                else:  # bf16: the upper 16 bits of each f32 (already a bf16 value)
                    low = self.inst("OpShiftRightLogical", u32, self.inst("OpBitcast", u32, part[0]),
                                    b.const_uint(16))
                    high = self.inst("OpBitwiseAnd", u32, self.inst("OpBitcast", u32, part[1]),
                                     b.const_uint(0xFFFF0000))
                    words.append(self.inst("OpBitwiseOr", u32, low, high))
            word4 = self.inst("OpCompositeConstruct", b.type_vector(u32, 4), *words)
            self.stmt("OpStore", self._view_pointer(uid, pid, c, chunks), word4)

    # -- statements ------------------------------------------------------------------------------------------------

    def region(self, block: Block) -> None:
        for op in block.ops:
            if self.terminated:
                break  # unreachable: a jump ends its block
            self.op(op)

    def op(self, op: Op) -> None:  # noqa: C901 - one flat dispatch over the op table
        code = op.opcode
        if code == "const":
            return
        if code == "if":
            return self._if(op)
        if code == "for":
            return self._for(op)
        if code == "while":
            return self._while(op)
        if code == "break":
            self.branch(self.loops[-1][0])
        elif code == "continue":
            self.branch(self.loops[-1][1])
        elif code == "return":
            self.stmt("OpReturn")
            self.terminated = True
        elif code == "barrier":
            s = self.b.const_uint(_WORKGROUP_SCOPE)
            self.stmt("OpControlBarrier", s, s, self.b.const_uint(_BARRIER_SEMANTICS))
        elif code == "var":
            vid = self.b.new_id()
            ptr = self.b.type_pointer("Function", self.reg_type(op.result.type.elem))
            self.fvars.append(self.b.instruction("OpVariable", ptr, vid, self.b.enum("StorageClass", "Function")))
            if op.result.name:
                self.b.name(vid, op.result.name)
            self.vars[op.result.uid] = vid
        elif code == "get":
            self.vals[op.result.uid] = self.inst("OpLoad", self.reg_type(op.result.type), self.vars[op.operands[0].uid])
        elif code == "set":
            self.stmt("OpStore", self.vars[op.operands[0].uid], self.value(op.operands[1]))
        elif code == "shared":
            self._shared(op)
        elif code == "local":
            self._local(op)
        elif code in ("vcopy", "async_copy"):  # Vulkan has no asynchronous copy: it is done at once
            self._vcopy(op)
        elif code in ("async_commit", "async_wait"):
            pass
        elif code == "store":
            self._store(op)
        elif code == "load":
            self.vals[op.result.uid] = self._load(op)
        elif code in O.THREAD_AXIS or code in ("simd_lane", "simd_group", "simd_size"):
            self.vals[op.result.uid] = self.thread(code, op.attrs.get("axis"))
        elif code in O.SIMD_REDUCE or code in O.SIMD_EXCHANGE:
            self.vals[op.result.uid] = self._simd(op)
        elif code in O.ATOMICS:
            self.vals[op.result.uid] = self._atomic(op)
        elif code == "condition":
            raise CompileError("internal error in the spirv emitter: stray `condition`", op.loc)
        else:
            self.vals[op.result.uid] = self.pure(op)
        if op.result is not None and op.result.name and op.result.uid in self.vals:
            self.b.name(self.vals[op.result.uid], op.result.name)

    def _if(self, op: Op) -> None:
        b = self.b
        cond = self.value(op.operands[0])
        then_block, else_block = op.regions
        then_l, merge = b.new_id(), b.new_id()
        else_l = b.new_id() if else_block.ops else merge
        self.stmt("OpSelectionMerge", merge, 0)
        self.stmt("OpBranchConditional", cond, then_l, else_l)
        self.label(then_l)
        self.region(then_block)
        self.branch(merge)
        if else_block.ops:
            self.label(else_l)
            self.region(else_block)
            self.branch(merge)
        self.label(merge)

    def _loop(self, check, body_fn) -> None:
        """header (OpLoopMerge) -> check block (``check()`` returns the condition) -> body -> continue -> header."""
        b = self.b
        header, check_l, body_l, cont, merge = (b.new_id() for _ in range(5))
        self.branch(header)
        self.label(header)
        self.stmt("OpLoopMerge", merge, cont, 0)
        self.stmt("OpBranch", check_l)
        self.label(check_l)
        cond = check()
        self.stmt("OpBranchConditional", cond, body_l, merge)
        self.label(body_l)
        self.loops.append((merge, cont))
        step = body_fn()
        self.loops.pop()
        self.branch(cont)
        self.label(cont)
        if step is not None:
            step()
        self.branch(header)
        self.label(merge)

    def _for(self, op: Op) -> None:
        b = self.b
        i32 = b.type_int(32, True)
        bool_t = b.type_bool()
        lo, hi, step = (self.value(v) for v in op.operands)
        iv_var = b.new_id()
        self.fvars.append(b.instruction("OpVariable", b.type_pointer("Function", i32), iv_var,
                                        b.enum("StorageClass", "Function")))
        self.stmt("OpStore", iv_var, lo)
        step_owner = op.operands[2].owner
        step_const = step_owner.attrs["value"] if isinstance(step_owner, Op) and step_owner.opcode == "const" else None

        def check() -> int:
            iv = self.inst("OpLoad", i32, iv_var)
            up = self.inst("OpSLessThan", bool_t, iv, hi)
            down = self.inst("OpSGreaterThan", bool_t, iv, hi)
            if step_const is not None:  # Python range: the step's sign picks the direction
                return up if step_const > 0 else down
            positive = self.inst("OpSGreaterThan", bool_t, step, b.const_int(0))
            return self.inst("OpSelect", bool_t, positive, up, down)

        def body():
            body_block = op.regions[0]
            self.vals[body_block.args[0].uid] = self.inst("OpLoad", i32, iv_var)
            self.region(body_block)
            return lambda: self.stmt("OpStore", iv_var,
                                     self.inst("OpIAdd", i32, self.inst("OpLoad", i32, iv_var), step))

        self._loop(check, body)

    def _while(self, op: Op) -> None:
        cond_block, body_block = op.regions

        def check() -> int:
            for inner in cond_block.ops[:-1]:
                self.op(inner)
            return self.value(cond_block.ops[-1].operands[0])

        def body():
            self.region(body_block)

        self._loop(check, body)

    # -- memory ----------------------------------------------------------------------------------------------------

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

    # -- threads, SIMD groups, atomics -------------------------------------------------------------------------------

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
        # simd_broadcast uses Shuffle too: OpGroupNonUniformBroadcast needs a constant lane before SPIR-V 1.5
        lane = self.inst("OpBitcast", b.type_int(32, False), self.value(op.operands[1]))
        name = "OpGroupNonUniformShuffleXor" if op.opcode == "simd_shuffle_xor" else "OpGroupNonUniformShuffle"
        return self.inst(name, ty, scope, x, lane)

    def _atomic(self, op: Op) -> int:
        b = self.b
        m, ptr = self._pointer(op.operands[0].uid, self.value(op.operands[1]))
        elem = m.elem
        val = self.value(op.operands[2])
        scope = b.const_uint(_DEVICE_SCOPE if m.storage == "StorageBuffer" else _WORKGROUP_SCOPE)
        relaxed = b.const_uint(0)
        ty = self.reg_type(elem)
        if m.kind == "bits":
            return self._cas(op.opcode, ptr, scope, val)
        if elem.is_int:
            name = "OpAtomicIAdd" if op.opcode == "atomic_add" else (
                "OpAtomicSMax" if elem.is_signed else "OpAtomicUMax")
            return self.inst(name, ty, ptr, scope, relaxed, val)
        self.capability("AtomicFloat32AddEXT")
        b.extension("SPV_EXT_shader_atomic_float_add")
        self.features.add("atomic_float_add")
        return self.inst("OpAtomicFAddEXT", ty, ptr, scope, relaxed, val)

    def _cas(self, opcode: str, ptr: int, scope: int, val: int) -> int:
        """Float atomics as a compare-and-swap loop on the u32 bits; returns the old value."""
        b = self.b
        u32, f32, bool_t = b.type_int(32, False), b.type_float(32), b.type_bool()
        relaxed = b.const_uint(0)
        header, body_l, cont, merge = (b.new_id() for _ in range(4))
        self.branch(header)
        self.label(header)
        self.stmt("OpLoopMerge", merge, cont, 0)
        self.stmt("OpBranch", body_l)
        self.label(body_l)
        cur = self.inst("OpAtomicLoad", u32, ptr, scope, relaxed)
        old = self.inst("OpBitcast", f32, cur)
        new = self.glsl("NMax", f32, old, val) if opcode == "atomic_max" else self.inst("OpFAdd", f32, old, val)
        seen = self.inst("OpAtomicCompareExchange", u32, ptr, scope, relaxed, relaxed,
                         self.inst("OpBitcast", u32, new), cur)
        done = self.inst("OpIEqual", bool_t, seen, cur)
        self.stmt("OpBranchConditional", done, merge, cont)
        self.label(cont)
        self.stmt("OpBranch", header)
        self.label(merge)
        self.terminated = False
        return old
