"""IR kernel -> SPIR-V compute module (``emit_spirv``).

Layout of the module (one entry point, GLCompute, SPIR-V 1.3 for Vulkan 1.1+):

- each buffer parameter is a storage buffer ``struct { T data[]; }`` (Block, ArrayStride) at set 0, binding = its
  position among the buffers; read-only ones have their member NonWritable. f16 is stored as f16 (16-bit
  storage), bf16 as 16-bit unsigned words, and an f32 buffer updated by a compare-and-swap atomic as u32 words
  (logical addressing cannot reinterpret a pointer, and OpAtomicCompareExchange needs an integer);
- Iron scalars, then the exact grid sizes ``iron_n0..2`` are one push-constant block of 4-byte fields;
- the group size is the WorkgroupSize built-in made of three spec constants (SpecId 0, 1, 2), so one module serves
  every group size the launcher picks (VkSpecializationInfo);
- shared arrays are Workgroup arrays; half arrays hold f32 there (exact, and no 16-bit workgroup storage needed),
  except those cooperative matrices load from, which hold the halves' 16 bits (coopmat.py). An array sized by an
  int parameter (``shared(f32, n)``) has a u32 spec constant for its length (SpecId 3, 4, ... one per parameter,
  default 1; ``SpirvKernel.shared_lengths``), set by the runtime from the launch's value when it builds the pipeline.
- with cooperative matrices (``coopmat``) the module is SPIR-V 1.6 under the Vulkan memory model (coopmat.py).

``simd_lane``/``simd_group`` are the SubgroupLocalInvocationId/SubgroupId built-ins, the numbering
OpGroupNonUniformShuffle uses. Iron defines them on the linear local id; Vulkan only promises that mapping for 1-D
groups (NVIDIA and lavapipe also follow it for 2-D/3-D groups), see docs/backends/vulkan.md.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Block, Kernel, Op, Value
from .builder import SpirvModuleBuilder
from .control import ControlFlow
from .coopmat import SCRATCH_WORDS, CoopMatrixOps
from .coopmat_emulation import CoopMatrixEmulation
from .driver_constants import driver_constants
from .lanes import LanesOps
from .mathops import MathOps
from .memory import MemoryOps, _Memory
from .module import SpirvBuffer, SpirvKernel, SpirvPush, SpirvSharedLength
from .pairs import PairOps
from .precise import PreciseMath
from .simd import _DEVICE_SCOPE, _WORKGROUP_SCOPE, ThreadOps
from .values import ValueOps
from .words import WordOps

SPEC_IDS = (0, 1, 2)
# AcquireRelease | UniformMemory | WorkgroupMemory: CUDA's __syncthreads also orders global memory within the group
_BARRIER_SEMANTICS = 0x8 | 0x40 | 0x100
# MakeAvailable | MakeVisible: under the Vulkan memory model a barrier's release and acquire do not make writes
# available and visible without them
_MEMORY_MODEL_SEMANTICS = 0x2000 | 0x4000
#: declare SignedZeroInfNanPreserve (always; False only for experiments measuring what the mode costs a driver:
#: bench/experiments/vulkan_vs_cuda.py)
IEEE_SPECIALS = True
#: float arithmetic whose results are decorated NoContraction
_EXACT_FLOAT_OPS = frozenset({"OpFAdd", "OpFSub", "OpFMul", "OpFDiv", "OpFRem", "OpFNegate"})


class SpirvEmitter(ValueOps, PreciseMath, MathOps, MemoryOps, WordOps, PairOps, LanesOps, CoopMatrixOps,
                   CoopMatrixEmulation, ControlFlow, ThreadOps):
    """IR kernel -> ``SpirvKernel``: the module, its entry point and the statement dispatch; the mixins emit values
    (values.py, precise.py, mathops.py), memory (memory.py), 16-byte vector copies (words.py), the lanes module
    (lanes.py), cooperative matrices (coopmat.py), control flow (control.py) and threads, SIMD groups and atomics
    (simd.py)."""

    def __init__(self, kernel: Kernel, atomic_float_add: bool = True, uniform_control_flow: bool = False,
                 float64: bool = False, denorm_preserve: bool = False, lanes=None, *, ieee_specials: bool = True,
                 rounding_rte: bool = False, coopmat: bool = False, simd_width: int = 32,
                 vulkan_memory_model: bool = False, coopmat_emulation: bool = False):
        self.k = kernel
        # matrix fragments as cooperative matrices, and the SPIR-V 1.6 and Vulkan memory model (vmm) they require;
        # ``emulate``: the matrices in plain SPIR-V (coopmat_emulation.py), for devices without them
        self.coopmat = coopmat
        self.emulate = coopmat and coopmat_emulation
        self.vmm = coopmat or vulkan_memory_model
        self.simd_width = simd_width
        self.frags: dict[int, list[int]] = {}  # fragment value uid -> its tiles (coopmat.py)
        self.frag_vars: dict[int, list[int]] = {}  # fragment variable uid -> a Function variable per tile
        self.scratch: int | None = None  # the per-SIMD-group scratch tiles (coopmat.py)
        self.lanes = lanes  # a LanePlan: emit the lanes module (see emit_spirv)
        self.pid0: int | None = None  # in the lanes module: program_id(0) of the element being emitted
        self.lane_regs: dict[int, int] | None = None  # lane buffer uid -> the Function variable of its element
        self.views: dict[int, int] = {}  # buffer uid -> its 16-byte view (lane buffers, vector copies: words.py)
        self.param_info: dict[int, tuple[int, bool, str]] = {}  # buffer uid -> (binding, read-only, name)
        self.b = SpirvModuleBuilder((1, 6), "Vulkan") if self.vmm else SpirvModuleBuilder()
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
        self.length_specs: dict[str, tuple[int, int]] = {}  # run-time length parameter -> (spec constant, SpecId)
        self.shared_lengths: list[SpirvSharedLength] = []  # the shared arrays sized at launch (memory.py)
        self.blocks: dict[int, int] = {}  # storage element type -> its buffer block struct
        self.cas_buffers = self._cas_targets()
        self._driver_constants: frozenset[int] | None = None  # see driver_constants below
        # shared arrays cooperative matrices load from keep 16-bit halves (the matrices read the memory's bits)
        self.shared16 = {op.operands[0].uid for op in kernel.walk()
                         if coopmat and op.opcode == "frag_load" and op.operands[0].type.space == "shared"}
        self.packed = self._packed_shared() - self.shared16  # shared arrays declared as uvec4 words
        self.pairs = self._pair_arrays()  # shared16 arrays that vector copies fill: halves two to a word

    # -- plumbing --------------------------------------------------------------------------------------------------

    def inst(self, opname: str, rtype: int, *operands: int, exact: bool = True) -> int:
        """One instruction in the body; float arithmetic is decorated NoContraction unless ``exact`` is False (a
        product and sum the driver may fuse: ``ValueOps.madd``)."""
        rid = self.b.new_id()
        self.body.append(self.b.instruction(opname, rtype, rid, *operands))
        if exact and opname in _EXACT_FLOAT_OPS:
            # NoContraction: no fusing into fma (as --fmad=false on CUDA), and drivers must not apply value-changing
            # rewrites such as x * 0.0 -> 0.0 (Mesa's NIR treats the decorated instruction as exact; lavapipe's
            # gallivm still folds a constant +0.0 operand, which values.zero_safe_product spells around)
            self.b.decorate(rid, "NoContraction")
        return rid

    @property
    def driver_constants(self) -> frozenset[int]:
        """The values lavapipe may fold to constants (a loop it unrolls, a variable it promotes), found when a
        float product or quotient first asks (values.py, ``zero_kinds``)."""
        if self._driver_constants is None:
            self._driver_constants = driver_constants(self.k)
        return self._driver_constants

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
        self.group_dims = sizes
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
        if b.version >= (1, 4):  # from SPIR-V 1.4 on the interface lists every global variable the entry point uses
            interface += [v for v in b.global_variables if v not in interface]
        b.entry_point("GLCompute", fn, self.k.name, interface)
        if self.vmm:
            self.capability("VulkanMemoryModel")
            self.features |= {"vulkan_memory_model", "spirv_1_6"}
        if self.coopmat and not self.emulate:
            self.capability("CooperativeMatrixKHR")
            b.extension("SPV_KHR_cooperative_matrix")
            self.features.add("cooperative_matrix")
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
        scalars = len(self.push_uids)  # the Iron scalars come first, then the three grid sizes
        push_fields = tuple(SpirvPush(name, off, st, i - scalars if i >= scalars else None)
                            for i, ((name, st), off) in enumerate(zip(push, self.push_offsets)))
        return SpirvKernel(words=words, entry=self.k.name, buffers=tuple(buffers), push=push_fields,
                           push_size=self.push_size, local_size_spec_ids=SPEC_IDS, shared_bytes=self.shared_bytes,
                           features=frozenset(self.features), lanes=self.lanes.width if self.lanes else 1,
                           scratch_bytes_per_simd_group=4 * SCRATCH_WORDS if self.scratch is not None else 0,
                           shared_lengths=tuple(self.shared_lengths))

    def _params(self):
        b = self.b
        buffers = []
        push: list[tuple[str, t.ScalarType]] = []
        self.push_uids: list[int] = []
        for p in self.k.params:
            if p.kind == "buffer":
                elem = p.type.elem
                kind, elem_type = self._storage_elem(elem, p.value.uid in self.cas_buffers, "global")
                stride = 4 if kind == "bits" else 2 if elem.is_half else elem.itemsize
                block = self._buffer_block(elem_type, stride, p.readonly)
                var = b.global_variable("StorageBuffer", block)
                binding = len(buffers)
                b.decorate(var, "DescriptorSet", 0)
                b.decorate(var, "Binding", binding)
                b.name(var, p.name)
                self.mem[p.value.uid] = _Memory(var, "StorageBuffer", elem_type, kind, elem)
                self.param_info[p.value.uid] = (binding, p.readonly, p.name)
                if self.lanes is not None and self.k.params.index(p) in self.lanes.lanes:
                    self.views[p.value.uid] = self._vector_view(binding, p.readonly, p.name)
                buffers.append(SpirvBuffer(p.name, binding, elem, p.readonly))
            else:
                push.append((p.name, p.type))
                self.push_uids.append(p.value.uid)
        push += [(_grid_field(a, {p.name for p in self.k.params}), t.i32) for a in range(3)]
        members = [self.reg_type(st) for _, st in push]
        block = b.type_struct(members)
        b.decorate(block, "Block")
        self.push_offsets, self.push_size = push_layout([st for _, st in push])
        for i, offset in enumerate(self.push_offsets):
            b.member_decorate(block, i, "Offset", offset)
        self.push_var = b.global_variable("PushConstant", block)
        b.name(self.push_var, "iron_args")
        return buffers, push

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
        if self.coopmat and self._fragment_op(op):  # matrix ops and fragment variables (coopmat.py)
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
            semantics = _BARRIER_SEMANTICS | (_MEMORY_MODEL_SEMANTICS if self.vmm else 0)
            self.stmt("OpControlBarrier", s, s, self.b.const_uint(semantics))
        elif code == "fence":  # device scope, AcquireRelease | UniformMemory (buffers), as CUDA's __threadfence
            if self.vmm:
                self.capability("VulkanMemoryModelDeviceScope")
                self.features.add("vulkan_memory_model_device_scope")
            semantics = 0x8 | 0x40 | (_MEMORY_MODEL_SEMANTICS if self.vmm else 0)
            self.stmt("OpMemoryBarrier", self.b.const_uint(_DEVICE_SCOPE), self.b.const_uint(semantics))
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
        elif code in O.SIMD_OPS:
            self.vals[op.result.uid] = self._simd(op)
        elif code in O.ATOMICS:
            self.vals[op.result.uid] = self._atomic(op)
        elif code == "condition":
            raise CompileError("internal error in the spirv emitter: stray `condition`", op.loc)
        else:
            self.vals[op.result.uid] = self.pure(op)
        if op.result is not None and op.result.name and op.result.uid in self.vals:
            self.b.name(self.vals[op.result.uid], op.result.name)



def push_layout(types: list[t.ScalarType]) -> tuple[list[int], int]:
    """Byte offsets of the push-constant fields (4-byte ones packed, 8-byte ones 8-aligned) and the block's size."""
    offsets, at = [], 0
    for st in types:
        size = 8 if st.is_wide else 4
        at = -(-at // size) * size
        offsets.append(at)
        at += size
    return offsets, at


def _grid_field(axis: int, params: set[str]) -> str:
    """The push-constant field name of grid size ``axis``: ``iron_n{axis}``, with underscores added while a kernel
    parameter has that name (issue 17: a scalar called ``iron_n0`` must not read the grid size)."""
    name = f"iron_n{axis}"
    while name in params:
        name += "_"
    return name
