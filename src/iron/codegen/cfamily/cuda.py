"""The CUDA dialect: CUDA C++ for NVRTC, with no ``#include`` at all.

f16 and bf16 are 16-bit storage structs (``iron_f16``, ``iron_bf16``) converted to and from f32 by the hardware's
``cvt`` instructions (round to nearest even), instead of ``cuda_fp16.h``/``cuda_bf16.h``: the NVRTC wheel ships no
headers, and parsing them would triple the compile time. Math runs in f32 (Iron's storage-type semantics), so the
structs need no operators.
"""

from __future__ import annotations

import re
from typing import ClassVar

from ...ir import types as t
from .cuda_matrix import CudaMatrix, matrix_snippets
from .dialect import (
    ACTIVATION_MATH,
    ACTIVATION_NEEDS,
    WRAPPING_INT_MATH,
    CDialect,
    CParam,
    SimdMasks,
    Snippet,
    Template,
    VectorParts,
    activation_helpers,
    wrapping_int_helpers,
)
from .expr import UNARY, Expr
from .names import GPU_TYPE_NAMES
from .simd_lanes import SIMD_FUNCTIONS, relative_shuffles, scans, votes
from .wide import (
    C_CTYPES,
    C_MATH64,
    WRAPPING_INT64_MATH,
    saturating_casts,
    saturating_conversions,
    wrapping_int64_helpers,
)

_F16 = Snippet("""\
// f16 storage: converted with the hardware's cvt (round to nearest even); math is done in f32.
struct iron_f16 { unsigned short bits; };
__device__ __forceinline__ float iron_f16_to_f32(iron_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
    return f;
}
__device__ __forceinline__ iron_f16 iron_f32_to_f16(float f) {
    iron_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
    return h;
}""")

_BF16 = Snippet("""\
// bf16 storage: the top half of an f32. Rounding to bf16 is to nearest even (cvt.rn.bf16.f32 from sm_80; the same
// rounding in integer arithmetic before that); math is done in f32.
struct iron_bf16 { unsigned short bits; };
__device__ __forceinline__ float iron_bf16_to_f32(iron_bf16 h) {
    return __uint_as_float((unsigned)h.bits << 16);
}
__device__ __forceinline__ iron_bf16 iron_f32_to_bf16(float f) {
    iron_bf16 h;
#if __CUDA_ARCH__ >= 800
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        h.bits = (unsigned short)((u >> 16) | 0x40u);  // NaN: keep it a (quiet) NaN
    } else {
        h.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // ties go to the even neighbour
    }
#endif
    return h;
}""")

_INT_TO_F32_ODD = Snippet("""\
// i32/u32 -> f16/bf16 must round once. Going through f32 could round twice, so convert to f32 rounding to odd
// (truncate, then set the last bit when the conversion was inexact): a later round to nearest even to 8 or 11
// significant bits is then correct.
__device__ __forceinline__ float iron_i32_to_f32_odd(int x) {
    const float f = __int2float_rz(x);
    return __int2float_rd(x) == __int2float_ru(x) ? f : __uint_as_float(__float_as_uint(f) | 1u);
}
__device__ __forceinline__ float iron_u32_to_f32_odd(unsigned x) {
    const float f = __uint2float_rz(x);
    return __uint2float_rd(x) == __uint2float_ru(x) ? f : __uint_as_float(__float_as_uint(f) | 1u);
}""")

_LOCAL_LINEAR = Snippet("""\
// The thread's index in its group, x fastest: warps are cut from this order.
__device__ __forceinline__ int iron_local_linear() {
    return (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y);
}""")

_WARP_LANES = Snippet("""\
// Lanes that exist in this thread's warp: 32, except in the last warp of a group whose size is not a multiple of 32.
__device__ __forceinline__ int iron_warp_lanes() {
    return min(32, (int)(blockDim.x * blockDim.y * blockDim.z) - (iron_local_linear() & ~31));
}""", needs=("local_linear",))

_LANES_MASK = Snippet("""\
// The lanes that exist in this thread's warp, as a mask (see iron_warp_lanes).
__device__ __forceinline__ unsigned iron_lanes_mask() {
    const int n = iron_warp_lanes();
    return n >= 32 ? 0xffffffffu : (1u << n) - 1u;
}""", needs=("warp_lanes",))

_ATOMIC_MAX_F32 = Snippet("""\
// atomic_max on f32 with fmax semantics (a NaN operand loses) as a compare-and-swap loop: there is no float atomic
// max instruction. The first read is volatile so that a stale cached copy cannot end the loop without a swap.
__device__ __forceinline__ float iron_atomic_max(float* address, float value) {
    unsigned* bits = (unsigned*)address;
    unsigned old = *(volatile unsigned*)bits;
    for (;;) {
        const unsigned desired = __float_as_uint(fmaxf(__uint_as_float(old), value));
        if (desired == old) {
            return __uint_as_float(old);
        }
        const unsigned seen = atomicCAS(bits, old, desired);
        if (seen == old) {
            return __uint_as_float(old);
        }
        old = seen;
    }
}""")

# -- SIMD-group (warp) helpers, one overload per value type -----------------------------------------------------------

_REDUCE_DOC = """\
// simd_{op} over the active lanes of the warp (Iron's semantics), result in every active lane. A full warp uses a
// butterfly, which leaves the same bits in every lane (each step combines the same two values, in either order); a
// partial warp (divergent code, or a group's last warp) reads the active lanes one by one, in lane order."""

# (C type, combine(a, b), identity) per IR type and reduction; NaN is the identity of fminf/fmaxf (they return the
# other operand), so active lanes that are all NaN reduce to NaN, as on every backend
_REDUCE = {
    "sum": {"f32": ("float", "{a} + {b}", "0.0f"), "i32": ("int", "(int)((unsigned){a} + (unsigned){b})", "0"),
            "u32": ("unsigned", "{a} + {b}", "0u")},
    "max": {"f32": ("float", "fmaxf({a}, {b})", "__int_as_float(0x7fffffff)"),
            "i32": ("int", "max({a}, {b})", "(-2147483647 - 1)"), "u32": ("unsigned", "max({a}, {b})", "0u")},
    "min": {"f32": ("float", "fminf({a}, {b})", "__int_as_float(0x7fffffff)"),
            "i32": ("int", "min({a}, {b})", "2147483647"), "u32": ("unsigned", "min({a}, {b})", "0xffffffffu")},
}


def _reduce_snippet(op: str, irtype: str) -> Snippet:
    ctype, combine, identity = _REDUCE[op][irtype]
    step = combine.format(a="v", b="__shfl_xor_sync(active, v, offset)")
    gather = combine.format(a="r", b="__shfl_sync(active, v, __ffs(rest) - 1)")
    doc = _REDUCE_DOC.format(op=op) + "\n" if irtype == "f32" else ""
    return Snippet(f"""\
{doc}__device__ __forceinline__ {ctype} iron_simd_{op}({ctype} v, unsigned active) {{
    if (active == 0xffffffffu) {{
        for (int offset = 16; offset > 0; offset >>= 1) {{
            v = {step};
        }}
        return v;
    }}
    {ctype} r = {identity};
    for (unsigned rest = active; rest != 0u; rest &= rest - 1u) {{
        r = {gather};
    }}
    return r;
}}""")


def _shuffle_snippets() -> dict[str, Snippet]:
    out: dict[str, Snippet] = {}
    for kind, intrinsic, source in (("shuffle", "__shfl_sync", "lane"),
                                    ("shuffle_xor", "__shfl_xor_sync", "((iron_local_linear() & 31) ^ lane)")):
        fn = f"iron_simd_{kind}"
        doc = (f"// simd_{kind}: read v from lane {'`lane`' if kind == 'shuffle' else 'own ^ `lane`'} of the warp. "
               "A lane past the end of a partial last warp\n// does not exist; Iron defines the result as the "
               "reader's own value.\n")
        for i, ctype in enumerate(("float", "int", "unsigned")):
            irtype = ("f32", "i32", "u32")[i]
            out[f"{fn}:{irtype}"] = Snippet(f"""\
{doc if i == 0 else ""}__device__ __forceinline__ {ctype} {fn}({ctype} v, int lane, unsigned mask) {{
    const {ctype} r = {intrinsic}(mask, v, lane);
    return (unsigned){source} < (unsigned)iron_warp_lanes() ? r : v;
}}""", needs=("warp_lanes",))
        out.update(shuffle_wrappers(fn, "unsigned"))
    return out


def shuffle_wrappers(fn: str, mask_ctype: str) -> dict[str, Snippet]:
    """The bool and 16-bit forms of shuffle helper ``fn``, through its int/u32 forms."""
    out = {f"{fn}:bool": Snippet(f"""\
__device__ __forceinline__ bool {fn}(bool v, int lane, {mask_ctype} mask) {{
    return {fn}((int)v, lane, mask) != 0;
}}""", needs=(f"{fn}:i32",))}
    for half in ("f16", "bf16"):
        out[f"{fn}:{half}"] = Snippet(f"""\
__device__ __forceinline__ iron_{half} {fn}(iron_{half} v, int lane, {mask_ctype} mask) {{
    iron_{half} r;
    r.bits = (unsigned short){fn}((unsigned)v.bits, lane, mask);
    return r;
}}""", needs=(half, f"{fn}:u32"))
    return out


_ATOMIC_ADD_I64 = Snippet("""\
// i64 atomic_add through the unsigned long long atomicAdd (the sum's bits are the same in two's complement).
__device__ __forceinline__ long long iron_atomic_add_i64(long long* p, long long v) {
    return (long long)atomicAdd((unsigned long long*)p, (unsigned long long)v);
}""")


#: fast_exp / fast_exp2 (issue 16): one MUFU.EX2 through ex2.approx.ftz (PTX: about 2 ulp; subnormal inputs and
#: results flush to 0). exp2f and __expf lower to the non-ftz ex2.approx, which ptxas wraps in a range test and two
#: predicated multiplies (4 SASS instructions an exp2 instead of 1; sm_90, NVRTC 13, read with nvdisasm).
_FAST_EXP2 = Snippet("""\
__device__ __forceinline__ float iron_fast_exp2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}""")
_FAST_EXP = Snippet("""\
__device__ __forceinline__ float iron_fast_exp(float x) {
    return iron_fast_exp2(x * 1.4426950408889634f);
}""", needs=("fast_exp2",))


def _snippets() -> dict[str, Snippet]:
    table = {"f16": _F16, "bf16": _BF16, "int_to_f32_odd": _INT_TO_F32_ODD,
             "fast_exp2": _FAST_EXP2, "fast_exp": _FAST_EXP,
             **wrapping_int_helpers("__device__ __forceinline__", "unsigned"),
             **activation_helpers("__device__ __forceinline__", "expf", "fabsf", "erff"),
             "local_linear": _LOCAL_LINEAR, "warp_lanes": _WARP_LANES,
             "lanes_mask": _LANES_MASK, "atomic_max_f32": _ATOMIC_MAX_F32, **matrix_snippets(),
             **wrapping_int64_helpers("__device__ __forceinline__", "long long", "unsigned long long", "LL"),
             "atomic_add_i64": _ATOMIC_ADD_I64,
             **saturating_casts("__device__ __forceinline__", C_CTYPES, "LL", ("f32", "f64"))}
    for op in ("sum", "max", "min"):
        for irtype in ("f32", "i32", "u32"):
            table[f"iron_simd_{op}:{irtype}"] = _reduce_snippet(op, irtype)
    table.update(_shuffle_snippets())
    q = "__device__ __forceinline__"
    table.update(relative_shuffles(q, CUDA_CTYPES, "unsigned", "(iron_local_linear() & 31)"))
    table.update(votes(q, "unsigned", "__ballot_sync(mask, {p})"))
    table.update(scans(q, 32, "unsigned", "0xffffffffu", "__shfl_sync({mask}, {v}, {lane})", "__ffs"))
    return table


#: the C types of the values SIMD shuffles move
CUDA_CTYPES = {"f32": "float", "i32": "int", "u32": "unsigned", "bool": "bool", "f16": "iron_f16", "bf16": "iron_bf16"}


class CudaDialect(CDialect):
    name: ClassVar[str] = "cuda"
    matrix: ClassVar[object | None] = CudaMatrix()
    types: ClassVar[dict[str, str]] = {**CDialect.types, "f16": "iron_f16", "bf16": "iron_bf16"}
    type_needs: ClassVar[dict[str, tuple[str, ...]]] = {"f16": ("f16",), "bf16": ("bf16",)}
    builtin_names: ClassVar[frozenset[str]] = frozenset(
        "threadIdx blockIdx blockDim gridDim warpSize __syncthreads __shfl_sync __shfl_xor_sync __activemask "
        "__ballot_sync __any_sync __all_sync __ffs iron_live "
        "atomicAdd atomicMax atomicCAS atomicMin atomicAnd atomicOr atomicXor atomicExch asm min max abs".split()
    ) | GPU_TYPE_NAMES  # float4, uint3, half... (issue 17)
    thread: ClassVar[dict[str, Template]] = {
        "program_id": Template("(int)(blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis})", UNARY),
        "local_id": Template("(int)threadIdx.{axis}", UNARY),
        "group_id": Template("(int)blockIdx.{axis}", UNARY),
        "group_size": Template("(int)blockDim.{axis}", UNARY),
        "num_groups": Template("(int)gridDim.{axis}", UNARY),
        "simd_lane": Template("(iron_local_linear() & 31)", needs=("local_linear",)),
        "simd_group": Template("(iron_local_linear() >> 5)", needs=("local_linear",)),
        "simd_size": Template("32"),
    }
    simd_width: ClassVar[int] = 32
    math: ClassVar[dict[str, str]] = {
        "exp": "expf", "exp2": "exp2f", "fast_exp": "iron_fast_exp", "fast_exp2": "iron_fast_exp2",
        "log": "logf", "log2": "log2f", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
        "sin": "sinf", "cos": "cosf", "tanh": "tanhf", "erf": "erff", "floor": "floorf", "ceil": "ceilf",
        "abs": "fabsf", "min": "fminf", "max": "fmaxf", "rem": "fmodf", "fma": "fmaf", "rint": "rintf",
        "atan2": "atan2f", "pow": "powf", "copysign": "copysignf", "isnan": "isnan", "isinf": "isinf",
        **ACTIVATION_MATH,
    }
    math_needs: ClassVar[dict[str, tuple[str, ...]]] = {**ACTIVATION_NEEDS, "fast_exp": ("fast_exp",),
                                                        "fast_exp2": ("fast_exp2",)}
    math64: ClassVar[dict[str, str]] = C_MATH64
    int_math: ClassVar[dict[str, Template]] = {
        "min": Template("min({}, {})"), "max": Template("max({}, {})"),
        **WRAPPING_INT_MATH, **WRAPPING_INT64_MATH,
        # issue 15 point 3: __clz(0) is 32, and ctz is the clz of the bit-reversed word (so ctz(0) is 32 too)
        "umulhi:i32": Template("__mulhi({}, {})"), "umulhi:u32": Template("__umulhi({}, {})"),
        "dp4a:i32": Template("__dp4a({}, {}, {})"),  # one IDP.4A on sm_61+
        "popcount:i32": Template("__popc((unsigned)({}))"), "popcount:u32": Template("(unsigned)__popc({})", UNARY),
        "clz:i32": Template("__clz({})"), "clz:u32": Template("(unsigned)__clz((int)({}))", UNARY),
        "ctz:i32": Template("__clz((int)__brev((unsigned)({})))"),
        "ctz:u32": Template("(unsigned)__clz((int)__brev({}))", UNARY),
        "bitcast:f32:i32": Template("__float_as_int({})"), "bitcast:f32:u32": Template("__float_as_uint({})"),
        "bitcast:i32:f32": Template("__int_as_float({})"), "bitcast:u32:f32": Template("__uint_as_float({})"),
        "bitcast:i32:u32": Template("(unsigned)({})", UNARY), "bitcast:u32:i32": Template("(int)({})", UNARY),
    }
    conversions: ClassVar[dict[tuple[str, str], Template]] = {
        # PTX cvt.rzi: truncates, saturates to the integer range, and sends NaN to 0 -- Iron's cast semantics
        ("f32", "i32"): Template("__float2int_rz({})"),
        ("f32", "u32"): Template("__float2uint_rz({})"),
        # the 64-bit cvt.rzi sends NaN to INT64_MIN on sm_90 (seen on the H200): the helpers of wide.py instead
        **saturating_conversions(("f32", "f64")),
        ("f16", "f32"): Template("iron_f16_to_f32({})", needs=("f16",)),
        ("f32", "f16"): Template("iron_f32_to_f16({})", needs=("f16",)),
        ("bf16", "f32"): Template("iron_bf16_to_f32({})", needs=("bf16",)),
        ("f32", "bf16"): Template("iron_f32_to_bf16({})", needs=("bf16",)),
        **{(src, half): Template(f"iron_f32_to_{half}(iron_{src}_to_f32_odd({{}}))", needs=(half, "int_to_f32_odd"))
           for src in ("i32", "u32") for half in ("f16", "bf16")},
    }
    atomics: ClassVar[dict[tuple[str, str], Template]] = {
        **{("atomic_add", ty): Template("atomicAdd({ptr}, {val})") for ty in ("i32", "u32", "f32")},
        # 64-bit: atomicAdd has the unsigned long long form only; two's complement makes it the signed sum too
        ("atomic_add", "u64"): Template("atomicAdd({ptr}, {val})"),
        ("atomic_add", "i64"): Template("iron_atomic_add_i64({ptr}, {val})", needs=("atomic_add_i64",)),
        **{("atomic_max", ty): Template("atomicMax({ptr}, {val})") for ty in ("i32", "u32")},
        ("atomic_max", "f32"): Template("iron_atomic_max({ptr}, {val})", needs=("atomic_max_f32",)),
        # issue 15 point 4: relaxed, device scope on global memory, block scope on shared (as atomicAdd)
        **{(code, ty): Template(f"{fn}({{ptr}}, {{val}})") for ty in ("i32", "u32")
           for code, fn in (("atomic_min", "atomicMin"), ("atomic_and", "atomicAnd"), ("atomic_or", "atomicOr"),
                            ("atomic_xor", "atomicXor"), ("atomic_exchange", "atomicExch"))},
        **{("atomic_cas", ty): Template("atomicCAS({ptr}, {val}, {new})") for ty in ("i32", "u32")},
    }
    simd: ClassVar[dict[str, str]] = {
        "simd_sum": "iron_simd_sum", "simd_max": "iron_simd_max", "simd_min": "iron_simd_min",
        "simd_shuffle": "iron_simd_shuffle", "simd_broadcast": "iron_simd_shuffle",
        "simd_shuffle_xor": "iron_simd_shuffle_xor", **SIMD_FUNCTIONS,
    }
    snippets: ClassVar[dict[str, Snippet]] = _snippets()
    #: SIMD ops take a lane mask (``convergence.py``): iron_live, balloted at entry over the lanes that exist, at
    #: convergent ops; the lanes converged at the moment elsewhere
    simd_masks: ClassVar[SimdMasks | None] = SimdMasks(
        live="const unsigned iron_live = __ballot_sync(iron_lanes_mask(),{in_grid});", live_needs=("lanes_mask",),
        divergent="__activemask()")
    float_specials: ClassVar[dict[str, str]] = {
        "inf": "__int_as_float(0x7f800000)", "-inf": "__int_as_float(0xff800000)", "nan": "__int_as_float(0x7fffffff)",
    }
    barrier: ClassVar[str] = "__syncthreads();"
    #: fence(): acquire and release at device scope (PTX fence.acq_rel.gpu, sm_70+), what the DSL promises and SPIR-V
    #: emits; __threadfence() is fence.sc.gpu (MEMBAR.SC.GPU), sequentially consistent and slower, more than the
    #: message passing of a last-group combine needs
    fence: ClassVar[str] = 'asm volatile("fence.acq_rel.gpu;" ::: "memory");'

    device_function: ClassVar[str] = "__device__ __forceinline__ void"
    #: CUDA refuses more than 48 KiB of static __shared__ arrays; more needs dynamic shared memory and an opt-in
    max_static_shared: ClassVar[int] = 48 * 1024
    #: the most any current NVIDIA GPU gives one block (sm_90: 227 KiB); the runtime checks the device's own limit
    max_dynamic_shared: ClassVar[int] = 227 * 1024

    def dynamic_shared_decl(self) -> str:
        return "extern __shared__ __align__(16) unsigned char iron_dynamic_shared[];"

    def param_decl(self, p: CParam, position: int) -> str:
        if p.kind == "buffer":
            return f"{'const ' if p.readonly else ''}{p.ctype}* __restrict__ {p.name}"
        return f"{p.ctype} {p.name}"

    def signature(self, entry, params, features) -> str:
        return super().signature(entry, params, features, prefix='extern "C" __global__ void')

    def bounded(self, signature: str, threads: int, groups: int) -> str:
        return signature.replace("__global__ void ", f"__global__ void __launch_bounds__({threads}, {groups}) ", 1)

    def async_copy(self, dst: str, src: str, nbytes: int) -> tuple[str, tuple[str, ...]] | None:
        return f"iron_cp_async<{nbytes}>(&{dst}, &{src});", ("cp_async",)

    def async_sync(self, code: str, pending: int | None) -> tuple[str, tuple[str, ...]] | None:
        if code == "async_commit":
            return "iron_cp_async_commit();", ("cp_async",)
        return f"iron_cp_async_wait<{pending}>();", ("cp_async",)

    def shared_decl(self, ctype: str, name: str, size: int) -> str:
        # 16-byte aligned: a `vload`/`vstore` of a shared array moves uint4s, which the type's own alignment (4 for
        # a float) would not guarantee wherever ptxas places the array
        return f"__shared__ __align__(16) {ctype} {name}[{size}];"

    def half_literal(self, type: t.ScalarType, bits: int, value: float) -> Expr:
        # aggregate initialisation from the bits: a constant, where a conversion call would be an instruction
        return Expr(f"iron_{type.name}{{0x{bits:04x}}}")

    def vector_entry(self, parts: VectorParts) -> str:
        # Lane buffers live in 16-byte-aligned register arrays filled and drained with uint4 copies (LDG.128 /
        # STG.128); the alignment test is uniform across the launch, so the branch costs nothing.
        w, first, k = parts.width, parts.first, parts.k
        n0 = self.grid_params[0]
        pad, pad2, pad3 = "    ", "        ", "            "
        lines = [
            f"// Vectorised entry: each thread runs {parts.element} for {w} consecutive elements of axis 0, and moves "
            "the buffers\n// indexed by program_id(0) as 16-byte vectors. Launch ceil(n0 / "
            f"{w}) threads on a 1-D grid, with the same arguments.",
            self.signature(parts.entry, list(parts.params), None) + " {",
            *(pad + line for line in parts.prologue),
            f"{pad}const unsigned {first} = {w}u * (blockIdx.x * blockDim.x + threadIdx.x);",
            f"{pad}if ({first} >= (unsigned){n0}) {{",
            f"{pad2}return;",
            f"{pad}}}",
        ]
        pointers = " | ".join(f"(unsigned long long){lane.param.name}" for lane in parts.lanes)
        lines.append(f"{pad}if ({first} + {w}u <= (unsigned){n0} && (({pointers}) & 15ull) == 0ull) {{")
        for lane in parts.lanes:
            lines.append(f"{pad2}__align__(16) {lane.param.ctype} {lane.regs}[{w}];")
        for lane in parts.lanes:
            if lane.preload:
                lines += self._chunks(lane, w, f"reinterpret_cast<uint4*>({lane.regs})",
                                      f"reinterpret_cast<const uint4*>({lane.param.name} + {first})", pad2)
        call = ", ".join([*parts.args, f"(int)({first} + {k})", *(f"{lane.regs}[{k}]" for lane in parts.lanes)])
        lines += [f"{pad2}#pragma unroll", f"{pad2}for (unsigned {k} = 0; {k} < {w}u; ++{k}) {{",
                  f"{pad3}{parts.element}({call});", f"{pad2}}}"]
        for lane in parts.lanes:
            if lane.writeback:
                lines += self._chunks(lane, w, f"reinterpret_cast<uint4*>({lane.param.name} + {first})",
                                      f"reinterpret_cast<const uint4*>({lane.regs})", pad2)
        call = ", ".join([*parts.args, f"(int){k}", *(f"{lane.param.name}[{k}]" for lane in parts.lanes)])
        lines += [
            f"{pad}}} else {{  // the grid's tail, or a buffer that is not 16-byte aligned: one element at a time",
            f"{pad2}for (unsigned {k} = {first}; {k} < min({first} + {w}u, (unsigned){n0}); ++{k}) {{",
            f"{pad3}{parts.element}({call});",
            f"{pad2}}}",
            f"{pad}}}",
            "}",
        ]
        return "\n".join(lines) + "\n"

    @staticmethod
    def _chunks(lane, width: int, dst: str, src: str, pad: str) -> list[str]:
        chunks = width * lane.param.dtype.itemsize // 16
        return [f"{pad}{dst}[{c}] = {src}[{c}];" for c in range(chunks)]


CUDA = CudaDialect()

#: Programmatic dependent launch (sm_90+; opt-in, ``IRON_CUDA_PDL=1``): the first statements of every entry. The wait
#: blocks until the grid launched before this one in the stream has completed and its memory is visible, so with it
#: first the kernel sees exactly what ordinary stream order gives; the trigger then lets the next grid (launched with
#: programmatic stream serialization) be scheduled while this one runs, to hide the launch gap between kernels.
PDL_PROLOGUE = (
    "// programmatic dependent launch: wait for the previous grid, then let the next one be scheduled",
    'asm volatile("griddepcontrol.wait;" ::: "memory");',
    'asm volatile("griddepcontrol.launch_dependents;");',
)


def pdl_capable(arch: str | None) -> bool:
    """Whether the target ``arch`` (``sm_90``, ``sm_90a``, ``compute_100``...) has the griddepcontrol instructions
    (compute capability 9.0 and later); False for no arch."""
    match = re.fullmatch(r"(?:sm|compute)_(\d+)[a-z]?", arch or "")
    return match is not None and int(match.group(1)) >= 90
