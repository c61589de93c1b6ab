"""The Metal Shading Language dialect (MSL 3.1): Metal kernels for Apple GPUs, from the one C-family printer.

Shape: ``kernel void name(...)`` whose buffers are ``device`` pointers bound at ``[[buffer(i)]]`` in parameter
order, whose scalars (and the three exact-grid sizes) are ``constant T&`` references each bound at its own buffer
index (the launcher passes them with ``setBytes``), followed by one attribute parameter per thread index the kernel
reads (``uint tid [[thread_position_in_grid]]``, ...): the ``signature`` hook is told which ops the body used.
Kernels that read only axis 0 of the thread indices take them as scalars (``uint``); others as ``uint3``.

Types: f16 is Metal's ``half`` and bf16 is ``bfloat`` (MSL 3.1, macOS 14 / iOS 17); Iron's storage semantics are
kept -- every op converts its operands to ``float``, computes, and rounds the result back once -- so the kernels
need no half arithmetic, only the conversions (round to nearest even, as the MSL spec defines them). A target older
than MSL 3.1 gets bf16 as ``ushort`` storage with the conversions written out (``MslLegacyDialect``,
``emit_msl(..., version="3.0")`` or ``IRON_MSL_VERSION=3.0``).

Math: the runtime must compile with fast math off (``MTLCompileOptions.mathMode = MTLMathModeSafe``): Iron's
NaN/inf semantics and the oracles' tolerances assume IEEE behaviour. MSL has no ``erf``; a helper supplies it.

Checked without Apple's compiler by ``clang -fsyntax-only`` against ``iron/codegen/msl_model/metal_model.h``
(see docs/backends/metal.md for what that proves and what it cannot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Kernel, Op, Value
from ...ir.rewrite import const_value
from ..erf import MID_CENTER, MID_HALF_WIDTH, coefficients
from ..lower_fragments import lower_fragments, needs_fallback
from . import expr as E
from .dialect import (
    ACTIVATION_MATH,
    ACTIVATION_NEEDS,
    WRAPPING_INT_MATH,
    CDialect,
    CParam,
    Features,
    Snippet,
    Template,
    activation_helpers,
    wrapping_int_helpers,
)
from .expr import UNARY, Expr
from .msl_matrix import LANE_SNIPPETS, MslMatrix, matrix_snippets
from .printer import KernelSource, _Printer
from .simd_lanes import SIMD_FUNCTIONS, msl_lanes, msl_relative_shuffles
from .tiles import lower_tile_constructs
from .wide import WRAPPING_INT64_MATH, saturating_casts, saturating_conversions, wrapping_int64_helpers

#: the MSL spellings ``saturating_casts`` needs
MSL_CTYPES = {"f32": "float", "i32": "int", "u32": "uint", "i64": "long", "u64": "ulong"}

#: thread-index op -> (parameter name, Metal attribute); the parameter is declared only when the body reads it
THREAD_PARAMS: dict[str, tuple[str, str]] = {
    "program_id": ("tid", "thread_position_in_grid"),
    "local_id": ("lid", "thread_position_in_threadgroup"),
    "group_id": ("tgid", "threadgroup_position_in_grid"),
    "group_size": ("tgsize", "threads_per_threadgroup"),
    "num_groups": ("ntg", "threadgroups_per_grid"),
    "simd_lane": ("simd_lane_id", "thread_index_in_simdgroup"),
    "simd_group": ("simd_group_id", "simdgroup_index_in_threadgroup"),
    "simd_size": ("simd_width", "threads_per_simdgroup"),
}
_AXIS_OPS = ("program_id", "local_id", "group_id", "group_size", "num_groups")
#: what a 1-D kernel's y/z thread indices are (only the exact-grid guard reads them): Metal dispatches the exact grid
#: (``dispatchThreads``), so a 1-D kernel's y and z positions are 0 and its group and grid sizes there are 1
_FLAT_AXIS = {"program_id": "0", "local_id": "0", "group_id": "0", "group_size": "1", "num_groups": "1"}


@dataclass(frozen=True)
class AxisTemplate(Template):
    """A thread-index template spelled per axis (``texts`` is indexed by the axis letter)."""

    texts: tuple[tuple[str, str], ...] = ()

    def __call__(self, *args, **kw) -> Expr:
        text = dict(self.texts)[str(kw["axis"])]
        return Expr(text, UNARY if text.startswith("(") else self.prec)


@dataclass(frozen=True)
class SpaceTemplate(Template):
    """An atomic template whose ``{space}`` is the Metal address space of the buffer (device or threadgroup)."""

    def __call__(self, *args, **kw) -> Expr:
        space = "threadgroup" if kw.get("space") == "shared" else "device"
        return Template(self.text.format(space=space, ptr="{ptr}", val="{val}", new="{new}"), self.prec)(**kw)


def _thread_table(dims: int) -> dict[str, Template]:
    table: dict[str, Template] = {}
    for code in _AXIS_OPS:
        name = THREAD_PARAMS[code][0]
        if dims == 1:
            texts = (("x", f"(int){name}"), ("y", _FLAT_AXIS[code]), ("z", _FLAT_AXIS[code]))
        else:
            texts = tuple((a, f"(int){name}.{a}") for a in "xyz")
        table[code] = AxisTemplate(f"(int){name}", UNARY, texts=texts)
    for code in ("simd_lane", "simd_group", "simd_size"):
        table[code] = Template(f"(int){THREAD_PARAMS[code][0]}", UNARY)
    return table


def _erf_snippet() -> Snippet:
    """erf in f32 with the SPIR-V backend's algorithm and coefficients (``iron.codegen.erf``): a few ulp."""

    p, q = coefficients()

    def horner(coefs: tuple[float, ...], var: str) -> str:
        text = _f32_literal(coefs[0])
        for c in coefs[1:]:
            text = f"fma({text}, {var}, {_f32_literal(c)})"
        return text

    return Snippet(f"""\
// erf: the Metal standard library has none. x * P(x^2) below 1, 1 - exp(-x^2) * Q(t) up to 4, +-1 beyond
// (polynomials fitted to float64 erf; the same algorithm as the SPIR-V backend's).
static inline float iron_erf(float x) {{
    const float ax = fabs(x);
    const float u = x * x;
    const float small = x * {horner(p, "u")};
    const float c = fmin(fmax(ax, 1.0f), 4.0f);
    const float t = (c - {_f32_literal(MID_CENTER)}) * {_f32_literal(1.0 / MID_HALF_WIDTH)};
    const float mid = copysign(1.0f - exp(-(c * c)) * {horner(q, "t")}, x);
    return isnan(x) ? x : ax < 1.0f ? small : ax >= 4.0f ? copysign(1.0f, x) : mid;
}}""")


def _f32_literal(v: float) -> str:
    text = repr(float(np.float32(v)))
    return text + "f" if ("." in text or "e" in text) else text + ".0f"


_ERF = _erf_snippet()

_F32_TO_INT = Snippet("""\
// float -> int with Iron's cast semantics: truncate, saturate to the range, NaN -> 0 (spelled out rather than left
// to the target's conversion, whose out-of-range result the C++ model would leave undefined).
static inline int iron_f32_to_i32(float x) {
    return isnan(x) ? 0 : x >= 2147483648.0f ? 2147483647 : x < -2147483648.0f ? (-2147483647 - 1) : (int)x;
}
static inline uint iron_f32_to_u32(float x) {
    return isnan(x) || x <= 0.0f ? 0u : x >= 4294967296.0f ? 4294967295u : (uint)x;
}""")

_INT_TO_F32_ODD = Snippet("""\
// i32/u32 -> half/bfloat must round once; going through float could round twice, so convert to float rounding to
// odd (keep 24 significant bits, OR the dropped bits into the last kept one): a later round to nearest even to 11
// or 8 significant bits is then correct, and the conversion to float itself is exact.
static inline float iron_u32_to_f32_odd(uint u) {
    const uint shift = (u >> 24) != 0u ? 8u - clz(u) : 0u;
    const uint dropped = (1u << shift) - 1u;
    return (float)((u & ~dropped) | ((u & dropped) != 0u ? 1u << shift : 0u));
}
static inline float iron_i32_to_f32_odd(int x) {
    const float f = iron_u32_to_f32_odd(x < 0 ? 0u - (uint)x : (uint)x);
    return x < 0 ? -f : f;
}""")

_F32_TO_F16 = Snippet("""\
// float -> half (to nearest even) with the overflow to infinity written out. LLVM's instcombine (clang 16 in the
// CPU model; Apple's Metal compiler is LLVM too) takes an int -> half conversion as exact when the int has at most
// 11 significant bits, whatever its magnitude, and folds (float)(half)(float)i to (float)i: `(x != 0) << 23` then
// stays 8388608 where half overflows to inf (fuzz seed 705000177). Magnitudes that round past half's largest
// finite value (65504) are sent to infinity before the conversion, so the fold only ever sees values in range.
static inline half iron_f32_to_f16(float x) {
    return fabs(x) >= 65520.0f ? static_cast<half>(copysign(INFINITY, x)) : static_cast<half>(x);
}""")

_ATOMIC_MAX_F32 = """\
// atomic_max on f32 with fmax semantics (a NaN operand loses) as a compare-and-swap loop: Metal has no float
// atomic max.
static inline float iron_atomic_max_{space}({space} float* address, float value) {{
    {space} atomic_uint* bits = reinterpret_cast<{space} atomic_uint*>(address);
    uint old = atomic_load_explicit(bits, memory_order_relaxed);
    for (;;) {{
        const uint desired = as_type<uint>(fmax(as_type<float>(old), value));
        if (desired == old ||
            atomic_compare_exchange_weak_explicit(bits, &old, desired, memory_order_relaxed, memory_order_relaxed)) {{
            return as_type<float>(old);
        }}
    }}
}}"""

_LANE_MACRO = Snippet("""\
// simd_shuffle_xor reads lane (own ^ mask); whether that lane exists needs the reader's own lane, a kernel
// attribute parameter, so the helper is called through this macro.
#define iron_simd_shuffle_xor(v, mask) iron_simd_shuffle_xor_from(v, mask, simd_lane_id)""")


_DIVISOR = Snippet("""\
// Integer / and % by zero give an unspecified value on Metal (Iron's rule, docs/dsl.md). The CPU model of Metal
// (msl-cpu), where x86 would trap, defines IRON_DIVISOR to report it at the kernel's Python source line `line`.
#ifndef IRON_DIVISOR
#define IRON_DIVISOR(b, line) (b)
#endif""")


def _simd_snippets(bf16_ctype: str = "bfloat") -> dict[str, Snippet]:
    out: dict[str, Snippet] = {}
    doc = ("// simd_{op}: Metal's simd_{op} reduces over the active threads of the SIMD-group, Iron's semantics; the "
           "result is\n// the same in every active thread.\n")
    for op in ("sum", "max", "min"):
        for i, (irtype, ctype) in enumerate((("f32", "float"), ("i32", "int"), ("u32", "uint"))):
            out[f"iron_simd_{op}:{irtype}"] = Snippet(
                (doc.format(op=op) if i == 0 else "")
                + f"static inline {ctype} iron_simd_{op}({ctype} v) {{\n    return simd_{op}(v);\n}}")
    shuffle_doc = ("// simd_shuffle / simd_shuffle_xor: read v from another lane. A lane past the end of a partial "
                   "last SIMD-group\n// does not exist (it is not active); Iron defines the result as the reader's "
                   "own value.\n")
    for i, (irtype, ctype) in enumerate((("f32", "float"), ("i32", "int"), ("u32", "uint"))):
        out[f"iron_simd_shuffle:{irtype}"] = Snippet(
            (shuffle_doc if i == 0 else "") + f"""\
static inline {ctype} iron_simd_shuffle({ctype} v, int lane) {{
    const {ctype} r = simd_shuffle(v, (ushort)lane);
    const simd_vote::vote_t active = static_cast<simd_vote::vote_t>(simd_active_threads_mask());
    return lane >= 0 && lane < 64 && ((active >> (uint)lane) & 1ul) != 0ul ? r : v;
}}""")
        out[f"iron_simd_shuffle_xor:{irtype}"] = Snippet(f"""\
static inline {ctype} iron_simd_shuffle_xor_from({ctype} v, int mask, uint own) {{
    const {ctype} r = simd_shuffle_xor(v, (ushort)mask);
    const simd_vote::vote_t active = static_cast<simd_vote::vote_t>(simd_active_threads_mask());
    const uint lane = own ^ (uint)mask;
    return lane < 64u && ((active >> lane) & 1ul) != 0ul ? r : v;
}}""", needs=("lane_macro",))
    # bool and the 16-bit types travel as integers: the SIMD functions' overloads for them vary by MSL version
    for kind in ("shuffle", "shuffle_xor"):
        fn = f"iron_simd_{kind}" + ("_from" if kind == "shuffle_xor" else "")
        extra, pass_extra = (", uint own", ", own") if kind == "shuffle_xor" else ("", "")
        out[f"iron_simd_{kind}:bool"] = Snippet(f"""\
static inline bool {fn}(bool v, int lane{extra}) {{
    return {fn}((int)v, lane{pass_extra}) != 0;
}}""", needs=(f"iron_simd_{kind}:i32",))
        for half, ctype in (("f16", "half"), ("bf16", bf16_ctype)):
            out[f"iron_simd_{kind}:{half}"] = Snippet(f"""\
static inline {ctype} {fn}({ctype} v, int lane{extra}) {{
    return as_type<{ctype}>((ushort){fn}((uint)as_type<ushort>(v), lane{pass_extra}));
}}""", needs=(f"iron_simd_{kind}:u32",))
    return out


_ATOMIC_CAS = """\
// atomic_cas as a strong compare-and-swap: Metal offers only the weak one, which may fail spuriously (old still equal
// to expected); retry until the swap happens or the location holds another value.
static inline {ctype} iron_atomic_cas_{space}({space} {ctype}* address, {ctype} expected, {ctype} desired) {{
    {space} atomic_{ctype}* bits = reinterpret_cast<{space} atomic_{ctype}*>(address);
    {ctype} old = expected;
    while (!atomic_compare_exchange_weak_explicit(bits, &old, desired, memory_order_relaxed, memory_order_relaxed)) {{
        if (old != expected) {{
            return old;
        }}
    }}
    return expected;
}}"""


def _snippets(bf16_ctype: str = "bfloat") -> dict[str, Snippet]:
    table = {"erf": _ERF, "f32_to_int": _F32_TO_INT, "int_to_f32_odd": _INT_TO_F32_ODD, "f32_to_f16": _F32_TO_F16,
             **wrapping_int_helpers("static inline", "uint"),
             **wrapping_int64_helpers("static inline", "long", "ulong", "L"),
             **saturating_casts("static inline", MSL_CTYPES, "L", ("f32",)),
             **activation_helpers("static inline", "exp", "fabs", "iron_erf"),
             "lane_macro": _LANE_MACRO, "divisor": _DIVISOR}
    for space in ("device", "threadgroup"):
        table[f"atomic_max_f32:{space}"] = Snippet(_ATOMIC_MAX_F32.format(space=space))
        table[f"atomic_cas:{space}"] = Snippet("\n".join(_ATOMIC_CAS.format(space=space, ctype=ctype)
                                                          for ctype in ("int", "uint")))
    table.update(_simd_snippets(bf16_ctype))
    table.update(msl_relative_shuffles({"f32": "float", "i32": "int", "u32": "uint", "bool": "bool", "f16": "half",
                                        "bf16": bf16_ctype}))
    table.update(msl_lanes(bf16_ctype))
    if bf16_ctype == "ushort":
        table["bf16_bits"] = _BF16_BITS
    table.update(matrix_snippets(bf16_ctype))  # last: the bf16 fragment helpers call bf16_bits
    return table


_BF16_BITS = Snippet("""\
// bf16 as ushort bits (MSL before 3.1 has no bf16 type): widening is exact; narrowing rounds to nearest even,
// and a NaN stays a quiet NaN.
static inline float iron_bf16_to_f32(ushort b) {
    return as_type<float>((uint)b << 16);
}
static inline ushort iron_f32_to_bf16(float f) {
    const uint u = as_type<uint>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (ushort)((u >> 16) | 0x40u);
    }
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}""")


def _atomic(fn: str, atomic_type: str) -> SpaceTemplate:
    return SpaceTemplate(f"{fn}(reinterpret_cast<{{space}} {atomic_type}*>({{ptr}}), {{val}}, memory_order_relaxed)")


class MslDialect(CDialect):
    """MSL 3.1. ``dims``: 1 when the kernel reads only axis 0 of its thread indices (scalar ``uint`` parameters,
    the seed's shape), else 3 (``uint3``); ``emit_msl`` picks it from the IR."""

    name: ClassVar[str] = "msl"
    types: ClassVar[dict[str, str]] = {"bool": "bool", "i32": "int", "u32": "uint", "f32": "float", "f16": "half",
                                       "bf16": "bfloat", "i8": "char", "u8": "uchar", "i64": "long", "u64": "ulong"}
    int64_suffix: ClassVar[str] = "L"
    builtin_names: ClassVar[frozenset[str]] = frozenset(
        "kernel vertex fragment device constant threadgroup thread metal half bfloat uint ushort uchar ulong char "
        "short long uint3 float2 float3 float4 as_type simd_vote simd_shuffle simd_shuffle_xor simd_sum simd_max "
        "simd_min simd_broadcast simd_ballot simd_any simd_all simd_prefix_inclusive_sum simd_prefix_exclusive_sum "
        "simd_active_threads_mask threadgroup_barrier mem_flags atomic_int atomic_uint "
        "atomic_float memory_order_relaxed min max abs clamp select fmax fmin isnan copysign INFINITY NAN".split()
        + [name for name, _ in THREAD_PARAMS.values()])
    simd_width: ClassVar[int] = 32
    math: ClassVar[dict[str, str]] = {
        "exp": "exp", "exp2": "exp2", "fast_exp": "fast::exp", "fast_exp2": "fast::exp2",
        "log": "log", "log2": "log2", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
        "cos": "cos", "tanh": "tanh", "erf": "iron_erf", "floor": "floor", "ceil": "ceil", "abs": "fabs",
        "min": "fmin", "max": "fmax", "rem": "fmod", "fma": "fma", "rint": "rint", "atan2": "atan2", "pow": "pow",
        "copysign": "copysign", "isnan": "isnan", "isinf": "isinf", **ACTIVATION_MATH,
    }
    int_math: ClassVar[dict[str, Template]] = {
        "min": Template("min({}, {})"), "max": Template("max({}, {})"),
        **WRAPPING_INT_MATH, **WRAPPING_INT64_MATH,
        # issue 15 point 3: Metal defines clz(0) and ctz(0) as the type's width (32)
        "umulhi": Template("mulhi({}, {})"), "popcount": Template("popcount({})"), "clz": Template("clz({})"),
        "ctz": Template("ctz({})"),
        **{f"bitcast:{src}:{dst}": Template(f"as_type<{ctype}>({{}})") for src in ("f32", "i32", "u32")
           for dst, ctype in (("f32", "float"), ("i32", "int"), ("u32", "uint")) if src != dst},
    }
    conversions: ClassVar[dict[tuple[str, str], Template]] = {
        ("f32", "i32"): Template("iron_f32_to_i32({})", needs=("f32_to_int",)),
        ("f32", "u32"): Template("iron_f32_to_u32({})", needs=("f32_to_int",)),
        **saturating_conversions(("f32",)),
        **{(half, "f32"): Template("static_cast<float>({})") for half in ("f16", "bf16")},
        ("f32", "f16"): Template("iron_f32_to_f16({})", needs=("f32_to_f16",)),
        ("f32", "bf16"): Template("static_cast<bfloat>({})"),
        **{(src, "f16"): Template(f"iron_f32_to_f16(iron_{src}_to_f32_odd({{}}))",
                                  needs=("int_to_f32_odd", "f32_to_f16")) for src in ("i32", "u32")},
        **{(src, "bf16"): Template(f"static_cast<bfloat>(iron_{src}_to_f32_odd({{}}))", needs=("int_to_f32_odd",))
           for src in ("i32", "u32")},
    }
    atomics: ClassVar[dict[tuple[str, str], Template]] = {
        ("atomic_add", "i32"): _atomic("atomic_fetch_add_explicit", "atomic_int"),
        ("atomic_add", "u32"): _atomic("atomic_fetch_add_explicit", "atomic_uint"),
        ("atomic_add", "f32"): _atomic("atomic_fetch_add_explicit", "atomic_float"),
        ("atomic_max", "i32"): _atomic("atomic_fetch_max_explicit", "atomic_int"),
        ("atomic_max", "u32"): _atomic("atomic_fetch_max_explicit", "atomic_uint"),
        # a CAS loop per address space (the overloads would collide in the C++ model, where the spaces are empty)
        ("atomic_max", "f32"): SpaceTemplate("iron_atomic_max_{space}({ptr}, {val})",
                                             needs=("atomic_max_f32:device", "atomic_max_f32:threadgroup")),
        # issue 15 point 4 (Metal atomics are relaxed only; device or threadgroup scope by the address space)
        **{(code, ty): _atomic(fn, f"atomic_{ctype}") for ty, ctype in (("i32", "int"), ("u32", "uint"))
           for code, fn in (("atomic_min", "atomic_fetch_min_explicit"), ("atomic_and", "atomic_fetch_and_explicit"),
                            ("atomic_or", "atomic_fetch_or_explicit"), ("atomic_xor", "atomic_fetch_xor_explicit"),
                            ("atomic_exchange", "atomic_exchange_explicit"))},
        **{("atomic_cas", ty): SpaceTemplate("iron_atomic_cas_{space}({ptr}, {val}, {new})",
                                             needs=("atomic_cas:device", "atomic_cas:threadgroup"))
           for ty in ("i32", "u32")},
    }
    math_needs: ClassVar[dict[str, tuple[str, ...]]] = {"erf": ("erf",), **ACTIVATION_NEEDS,
                                                        "gelu": ("erf", "gelu")}
    simd: ClassVar[dict[str, str]] = {
        "simd_sum": "iron_simd_sum", "simd_max": "iron_simd_max", "simd_min": "iron_simd_min",
        "simd_shuffle": "iron_simd_shuffle", "simd_broadcast": "iron_simd_shuffle",
        "simd_shuffle_xor": "iron_simd_shuffle_xor", **SIMD_FUNCTIONS,
    }
    snippets: ClassVar[dict[str, Snippet]] = _snippets()
    barrier: ClassVar[str] = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    #: MSL 3.2's device-scope fence (Metal accepts only relaxed or seq_cst orders); metal.py compiles a kernel that
    #: uses it as MSL 3.2
    fence: ClassVar[str] = "atomic_thread_fence(mem_flags::mem_device, memory_order_seq_cst, thread_scope_device);"
    unroll_pragma: ClassVar[str] = "#pragma unroll"
    #: Apple GPUs give a threadgroup 32 KiB; Metal has no larger dynamic pool, so both limits are the same
    max_static_shared: ClassVar[int] = 32 * 1024
    max_dynamic_shared: ClassVar[int] = 32 * 1024

    def __init__(self, dims: int = 3):
        self.dims = dims
        self.thread = _thread_table(dims)  # per instance: the spelling depends on the kernel's dimensionality

    def header(self, title: str) -> str:
        return f"// {title}\n\n#include <metal_stdlib>\nusing namespace metal;\n"

    def param_decl(self, p: CParam, position: int) -> str:
        if p.kind == "buffer":
            return f"{'const ' if p.readonly else ''}device {p.ctype} *{p.name} [[buffer({position})]]"
        return f"constant {p.ctype}& {p.name} [[buffer({position})]]"

    def attribute_params(self, features: Features) -> list[tuple[str, str, str]]:
        used = set(features.thread_ops) if features is not None else set()
        lane_users = ("iron_simd_shuffle_xor:", "iron_simd_shuffle_rel:", "iron_simd_shuffle_up:",
                      "iron_simd_shuffle_down:")  # snippets (or their needs) that read the caller's lane
        if features is not None and any(s.startswith(lane_users)
                                        or s in LANE_SNIPPETS
                                        for s in features.snippets):
            used.add("simd_lane")
        return [("uint3" if code in _AXIS_OPS and self.dims > 1 else "uint", name, attribute)
                for code, (name, attribute) in THREAD_PARAMS.items() if code in used]

    def bounded(self, signature: str, threads: int, groups: int) -> str:
        return f"[[max_total_threads_per_threadgroup({threads})]] " + signature

    def signature(self, entry: str, params: list[CParam], features: Features, prefix: str = "kernel void") -> str:
        decls = [self.param_decl(p, i) for i, p in enumerate(params)]
        if features is not None:
            decls += [f"threadgroup {ctype} *{name} [[threadgroup({i})]]"
                      for i, (ctype, name, _) in enumerate(features.shared_params)]
        decls += [f"{ctype} {name} [[{attribute}]]" for ctype, name, attribute in self.attribute_params(features)]
        head = f"{prefix} {entry}("
        one_line = head + ", ".join(decls) + ")"
        if len(one_line) <= 120:
            return one_line
        return head + "\n" + ",\n".join("    " + d for d in decls) + ")"

    #: threadgroup arrays are ``threadgroup T *name [[threadgroup(i)]]`` parameters sized by the host
    #: (``setThreadgroupMemoryLength:atIndex:``): one spelling for the runtime, ``iron build`` hosts and the CPU model
    #: of Metal (whose driver gives each threadgroup its own storage)
    shared_as_params: ClassVar[bool] = True
    #: matrix fragments as 8 x 8 simdgroup_matrix operations (msl_matrix.py)
    matrix: ClassVar[object | None] = MslMatrix()
    vector_types: ClassVar[dict[int, str]] = {16: "uint4", 8: "uint2", 4: "uint", 2: "ushort"}

    def vector_pointer(self, vtype: str, space: str, const: bool) -> str:
        where = {"global": "device", "shared": "threadgroup", "local": "thread"}[space]
        return f"reinterpret_cast<{where} {'const ' if const else ''}{vtype}*>"

    def dynamic_shared_decl(self) -> str:  # unreachable: both limits are 32 KiB, so the printer refuses first
        raise NotImplementedError("Metal has no dynamic threadgroup memory beyond its 32 KiB")

    def half_literal(self, type: t.ScalarType, bits: int, value: float) -> Expr:
        return Expr(f"as_type<{self.types[type.name]}>((ushort)0x{bits:04x})")

    def _collect_reserved(self) -> frozenset[str]:
        # ``iron_simd_shuffle_xor`` is a macro; its helper's name comes from the snippet text
        return super()._collect_reserved() | {"iron_simd_shuffle_xor_from", "simd_lane_id"}


class MslLegacyDialect(MslDialect):
    """MSL before 3.1 (macOS 13 / iOS 16 and older): no ``bfloat``, so bf16 is ``ushort`` bits with the conversions
    written out (``iron_bf16_to_f32`` / ``iron_f32_to_bf16``, round to nearest even); everything else as in 3.1."""

    types: ClassVar[dict[str, str]] = {**MslDialect.types, "bf16": "ushort"}
    conversions: ClassVar[dict[tuple[str, str], Template]] = {
        **MslDialect.conversions,
        ("bf16", "f32"): Template("iron_bf16_to_f32({})", needs=("bf16_bits",)),
        ("f32", "bf16"): Template("iron_f32_to_bf16({})", needs=("bf16_bits",)),
        **{(src, "bf16"): Template(f"iron_f32_to_bf16(iron_{src}_to_f32_odd({{}}))",
                                   needs=("int_to_f32_odd", "bf16_bits")) for src in ("i32", "u32")},
    }
    snippets: ClassVar[dict[str, Snippet]] = _snippets("ushort")

    def header(self, title: str) -> str:
        return super().header(title).replace("\n\n", "\n// MSL 3.0: bf16 values are ushort bits.\n\n", 1)

    def half_literal(self, type: t.ScalarType, bits: int, value: float) -> Expr:
        if type.name == "bf16":
            return Expr(f"(ushort)0x{bits:04x}", UNARY)
        return super().half_literal(type, bits, value)


#: the MSL versions ``emit_msl`` writes: 3.1 (``bfloat``) and 3.0 (bf16 as ``ushort``; also for older targets)
MSL_VERSIONS = ("3.1", "3.0")


def msl_version(version: str | None = None) -> str:
    """``version``, else ``IRON_MSL_VERSION``, else 3.1; checked."""
    import os

    v = version or os.environ.get("IRON_MSL_VERSION", "3.1")
    if v not in MSL_VERSIONS:
        raise ValueError(f"MSL version {v!r} is not one Iron writes; choose {' or '.join(MSL_VERSIONS)} "
                         "(IRON_MSL_VERSION)")
    return v


def kernel_dims(kernel: Kernel) -> int:
    """1 when every thread-index op of ``kernel`` reads axis 0 only, else 3."""
    for op in kernel.walk():
        if op.opcode in O.THREAD_AXIS and op.attrs.get("axis", 0) != 0:
            return 3
    return 1


#: one dialect per dimensionality (the tables are shared; only the thread spellings differ)
MSL = MslDialect(1)
MSL_3D = MslDialect(3)


MSL30 = MslLegacyDialect(1)
MSL30_3D = MslLegacyDialect(3)


def dialect_for(kernel: Kernel, version: str = "3.1") -> MslDialect:
    if version == "3.0":
        return MSL30 if kernel_dims(kernel) == 1 else MSL30_3D
    return MSL if kernel_dims(kernel) == 1 else MSL_3D




#: thread-index ops whose value is never zero (a divisor that is one of them needs no IRON_DIVISOR)
_NONZERO_OPS = frozenset({"simd_size", "group_size", "num_groups"})


def _may_be_zero(v: Value) -> bool:
    c = const_value(v)
    if c is not None:
        return c == 0
    return not (isinstance(v.owner, Op) and v.owner.opcode in _NONZERO_OPS)


class _MslPrinter(_Printer):
    """The C-family printer with MSL's integer division: a divisor that may be zero is spelled
    ``IRON_DIVISOR(b, line)`` (``b`` itself on Metal; the CPU model reports the zero divisor at ``line``)."""

    def _value(self, op: Op) -> Expr:
        rt = op.result.type
        if op.opcode not in ("div", "rem") or not rt.is_int or not _may_be_zero(op.operands[1]):
            return super()._value(op)
        self._need(("divisor",))
        line = op.loc.line if op.loc is not None else 0
        a = self.expr(op.operands[0])
        b = E.call("IRON_DIVISOR", self.expr(op.operands[1]), Expr(str(line)))
        if rt in (t.i32, t.i64):  # iron_div / iron_rem (iron_div64 ...): INT_MIN / -1 wraps
            return self._int_math(op.opcode, rt, op, a, b)
        return E.binary("/" if op.opcode == "div" else "%", a, b)


def emit_msl(kernel: Kernel, line_comments: bool = True, version: str | None = None) -> KernelSource:
    """MSL for ``kernel`` (an optimised IR kernel, e.g. ``variant.kernel``), with its launch ABI: buffer index ``i``
    is parameter ``i`` of ``KernelSource.params`` (scalars and grid sizes as ``setBytes`` values). ``version``: the
    MSL version to write, "3.1" (default; ``IRON_MSL_VERSION`` overrides) or "3.0" (bf16 as ``ushort``). No
    vectorised entry (Metal's compiler vectorises loads itself; a ``float4`` entry is future work).

    The steps of ``printer.emit_source``, with ``_MslPrinter`` printing."""
    refuse_f64(kernel)
    dialect = dialect_for(kernel, msl_version(version))
    folded, spelled = kernel.attrs.get("simd_width"), dialect.thread.get("simd_size")
    if folded is not None and spelled is not None and spelled.text.isdigit() and int(spelled.text) != folded:
        raise CompileError(f"{kernel.name} was compiled for SIMD width {folded} (simd_size() folded to it); "
                           f"backend {dialect.name} runs {spelled.text} lanes", kernel.loc)
    kernel, dialect = lower_tile_constructs(kernel, dialect)
    if dialect.simd_width and needs_fallback(kernel, dialect.matrix):
        kernel = lower_fragments(kernel, dialect.simd_width)
    src = _MslPrinter(kernel, dialect, line_comments).run(vectorize=False)
    _check_buffer_slots(kernel, src)
    return src


def refuse_f64(kernel: Kernel) -> None:
    """Metal has no double: a kernel that uses f64 anywhere is refused at the first op that does."""
    def f64_in(ty) -> bool:
        return ty == t.f64 or isinstance(ty, t.BufferType) and ty.elem == t.f64

    for op in kernel.body.walk():
        if any(f64_in(v.type) for v in op.operands) or op.result is not None and f64_in(op.result.type):
            break
    else:
        if not any(f64_in(p.value.type) for p in kernel.params):
            return
        op = None
    raise CompileError("f64 is not supported on Metal (MSL has no double)", op.loc if op is not None else kernel.loc,
                       "use f32 on Metal, or run the kernel on cuda, hip, vulkan or cpu")


#: entries of a Metal kernel's buffer argument table: ``[[buffer(0)]]`` to ``[[buffer(30)]]``
MAX_BUFFER_ARGS = 31


def _check_buffer_slots(kernel: Kernel, src: KernelSource) -> None:
    """CompileError when the kernel binds more buffer arguments (buffers, scalars, grid sizes) than Metal has."""
    if len(src.params) <= MAX_BUFFER_ARGS:
        return
    buffers = sum(p.kind == "buffer" for p in src.params)
    scalars = len(src.params) - buffers
    raise CompileError(
        f"kernel '{kernel.name}' needs {len(src.params)} Metal buffer arguments ({buffers} buffers, {scalars} scalars "
        f"and grid sizes); Metal allows a kernel at most {MAX_BUFFER_ARGS} ([[buffer(0)]] to "
        f"[[buffer({MAX_BUFFER_ARGS - 1})]])", kernel.loc,
        "pass fewer buffers: pack several into one array and index it with offsets")


__all__ = ["MSL", "MSL30", "MSL30_3D", "MSL_3D", "MSL_VERSIONS", "MslDialect", "MslLegacyDialect", "dialect_for",
           "emit_msl", "kernel_dims", "msl_version"]
