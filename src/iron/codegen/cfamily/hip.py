"""The HIP dialect: HIP C++ for hipRTC (AMD GPUs), and -- through a small compatibility header -- for NVRTC.

HIP spells almost everything as CUDA does (``threadIdx``, ``__syncthreads``, ``__shared__``, ``atomicAdd``, the math
library), so this is a subclass of the CUDA dialect that overrides what differs:

- **the wavefront size is a parameter.** AMD's SIMD group (wavefront) is 64 lanes on CDNA (gfx9xx: MI100/MI200/
  MI300) and 32 on RDNA (gfx10xx and later, the wave32 default), and 32 on NVIDIA. The lane/group split of
  ``simd_lane()``/``simd_group()``, ``simd_size()`` and the butterfly of the SIMD reductions all depend on it, and the
  compiler needs it as a constant to unroll them, so the source is emitted per wavefront size: ``HipDialect(64)``
  for gfx9xx, ``HipDialect(32)`` for gfx10xx+ and for the NVIDIA run (``HIP_ON_NVIDIA``).
- **SIMD ops** use ``__ballot(1)`` (a 64-bit mask of the active lanes) and ``__shfl``/``__shfl_xor``, which have no
  ``_sync`` mask on AMD: a wavefront executes in lock-step under its exec mask.
- **f16/bf16** keep Iron's 16-bit storage structs, converted by portable integer code (round to nearest even)
  instead of CUDA's PTX ``cvt`` instructions, so the same source compiles for AMD and, unchanged, for NVIDIA.
- **float -> int casts** are spelled out (NaN -> 0, saturate at the range): HIP's ``__float2int_rz`` is a plain C
  cast, undefined outside the range, where Iron defines the result.
- **shared memory**: AMD gives a workgroup 64 KiB of LDS, statically declared or dynamic.
- **matrix fragments** follow the wavefront too: wave64 (gfx9xx) spells them with MFMA (``hip_matrix.HipMatrix``;
  the instruction is guarded by the processor macros of CDNA2+, so the one wave64 source still fits every gfx9
  processor), the NVIDIA run with CUDA's ``mma.sync`` (``cuda_matrix.CudaMatrix``: the compatibility header makes
  the source CUDA), and wave32 RDNA -- gfx10xx has no matrix instructions; RDNA3's WMMA is not used yet -- keeps
  the scalar fallback (``codegen/lower_fragments.py``).
"""

from __future__ import annotations

from functools import cache
from typing import ClassVar

from ...ir.core import Kernel
from .cuda import _REDUCE, _REDUCE_DOC, CUDA_CTYPES, CudaDialect, shuffle_wrappers
from .cuda_matrix import CudaMatrix
from .dialect import ACTIVATION_NEEDS, WRAPPING_INT_MATH, CDialect, SimdMasks, Snippet, Template
from .hip_matrix import HipMatrix, mfma_snippets
from .printer import KernelSource, emit_source
from .simd_lanes import VOTE_PRED, relative_shuffles, scans, votes

_F16 = Snippet("""\
// f16 storage, converted in integer arithmetic with round to nearest even (the same code on AMD and NVIDIA); math
// is done in f32. Selects, no branches: hipRTC took 7x longer on a branching form (an f16 GEMM, gfx1030); identical
// results for every f16 and every f32 (checked exhaustively on the host).
struct iron_f16 { unsigned short bits; };
__device__ __forceinline__ float iron_f16_to_f32(iron_f16 h) {
    const unsigned sign = ((unsigned)h.bits & 0x8000u) << 16;
    const unsigned e = ((unsigned)h.bits >> 10) & 0x1fu;
    const unsigned m = (unsigned)h.bits & 0x3ffu;
    const float sub = (float)m * 5.9604644775390625e-08f;  // zero or subnormal: m * 2^-24 is exact in f32
    const unsigned big = e == 0x1fu ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13);
    return __uint_as_float((e == 0u ? __float_as_uint(sub) : big) | sign);
}
__device__ __forceinline__ iron_f16 iron_f32_to_f16(float f) {
    const unsigned u = __float_as_uint(f);
    const unsigned sign = (u >> 16) & 0x8000u;
    const unsigned a = u & 0x7fffffffu;
    // below 2^-14: 0.5 + |f| rounds |f| to a multiple of 2^-24 (ties to even), f16's subnormal units (an f32
    // subnormal, flushed or not, gives 0)
    const unsigned sub = __float_as_uint(__uint_as_float(a) + 0.5f) - 0x3f000000u;
    // normal: rebias the exponent, ties go to the even neighbour
    const unsigned nrm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    // NaN: keep it a (quiet) NaN; 65520 and above round to infinity
    const unsigned big = a > 0x7f800000u ? 0x7e00u | ((a >> 13) & 0x3ffu) : 0x7c00u;
    iron_f16 h;
    h.bits = (unsigned short)(sign | (a >= 0x477ff000u ? big : a >= 0x38800000u ? nrm : sub));
    return h;
}""")

_BF16 = Snippet("""\
// bf16 storage: the top half of an f32, rounded to nearest even in integer arithmetic; math is done in f32.
struct iron_bf16 { unsigned short bits; };
__device__ __forceinline__ float iron_bf16_to_f32(iron_bf16 h) {
    return __uint_as_float((unsigned)h.bits << 16);
}
__device__ __forceinline__ iron_bf16 iron_f32_to_bf16(float f) {
    iron_bf16 h;
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        h.bits = (unsigned short)((u >> 16) | 0x40u);  // NaN: keep it a (quiet) NaN
    } else {
        h.bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // ties go to the even neighbour
    }
    return h;
}""")

_F32_TO_INT = Snippet("""\
// float -> int truncates, saturates to the integer range and sends NaN to 0 (Iron's cast). Written out because a C
// cast (which HIP's __float2int_rz is) is undefined outside the range, and the compiler may exploit that.
__device__ __forceinline__ int iron_f32_to_i32(float x) {
    return x != x ? 0 : x >= 2147483648.0f ? 2147483647 : x <= -2147483648.0f ? (-2147483647 - 1) : (int)x;
}
__device__ __forceinline__ unsigned iron_f32_to_u32(float x) {
    return !(x > 0.0f) ? 0u : x >= 4294967296.0f ? 0xffffffffu : (unsigned)x;
}""")


def _masks(wavefront: int) -> tuple[str, str]:
    """(C constant of a full wavefront's ``__ballot`` mask, log2 of the wavefront)."""
    full = "0xffffffffffffffffull" if wavefront == 64 else f"0x{(1 << wavefront) - 1:x}ull"
    return full, str(wavefront.bit_length() - 1)


def _wave_snippets(wavefront: int) -> dict[str, Snippet]:
    """The SIMD-group helpers of ``cuda.py``, for a wavefront of ``wavefront`` lanes and AMD's mask-free shuffles."""
    w = wavefront
    full, _ = _masks(w)
    out: dict[str, Snippet] = {
        "warp_lanes": Snippet(f"""\
// Lanes that exist in this thread's wavefront: {w}, except in the last wavefront of a group whose size is not a
// multiple of {w}.
__device__ __forceinline__ int iron_warp_lanes() {{
    return min({w}, (int)(blockDim.x * blockDim.y * blockDim.z) - (iron_local_linear() & ~{w - 1}));
}}""", needs=("local_linear",)),
        "lanes_mask": Snippet(f"""\
// The lanes that exist in this thread's wavefront, as a mask (see iron_warp_lanes).
__device__ __forceinline__ unsigned long long iron_lanes_mask() {{
    const int n = iron_warp_lanes();
    return n >= {w} ? {full} : (1ull << n) - 1ull;
}}""", needs=("warp_lanes",)),
        "wave_shfl": Snippet("""\
// Shuffles over the lanes in `mask` (see iron_live). AMD wavefronts run in lockstep, so the exec mask is exactly
// the active lanes and the mask-free intrinsics suffice; the NVIDIA compatibility header defines these with it.
#ifndef IRON_HIP_ON_NVIDIA
#define iron_wave_shfl(v, lane, mask) __shfl((v), (lane))
#define iron_wave_shfl_xor(v, lane_mask, mask) __shfl_xor((v), (lane_mask))
#endif"""),
    }
    for op, per_type in _REDUCE.items():
        for irtype, (ctype, combine, identity) in per_type.items():
            step = combine.format(a="v", b="iron_wave_shfl_xor(v, offset, active)")
            gather = combine.format(a="r", b="iron_wave_shfl(v, __ffsll(rest) - 1, active)")
            doc = _REDUCE_DOC.format(op=op).replace("warp", "wave") + "\n" if irtype == "f32" else ""
            out[f"iron_simd_{op}:{irtype}"] = Snippet(f"""\
{doc}__device__ __forceinline__ {ctype} iron_simd_{op}({ctype} v, unsigned long long active) {{
    if (active == {full}) {{
        for (int offset = {w // 2}; offset > 0; offset >>= 1) {{
            v = {step};
        }}
        return v;
    }}
    {ctype} r = {identity};
    for (unsigned long long rest = active; rest != 0ull; rest &= rest - 1ull) {{
        r = {gather};
    }}
    return r;
}}""", needs=("wave_shfl",))
    for kind, intrinsic, source in (("shuffle", "iron_wave_shfl", "lane"),
                                    ("shuffle_xor", "iron_wave_shfl_xor", f"((iron_local_linear() & {w - 1}) ^ lane)")):
        fn = f"iron_simd_{kind}"
        doc = (f"// simd_{kind}: read v from lane {'`lane`' if kind == 'shuffle' else 'own ^ `lane`'} of the "
               "wavefront. A lane past the end of a partial last\n// wavefront does not exist; Iron defines the "
               "result as the reader's own value.\n")
        for i, (irtype, ctype) in enumerate((("f32", "float"), ("i32", "int"), ("u32", "unsigned"))):
            out[f"{fn}:{irtype}"] = Snippet(f"""\
{doc if i == 0 else ""}__device__ __forceinline__ {ctype} {fn}({ctype} v, int lane, unsigned long long mask) {{
    const {ctype} r = {intrinsic}(v, lane, mask);
    return (unsigned){source} < (unsigned)iron_warp_lanes() ? r : v;
}}""", needs=("warp_lanes", "wave_shfl"))
        out.update(shuffle_wrappers(fn, "unsigned long long"))
    q, lanes = "__device__ __forceinline__", "unsigned long long"
    out.update(relative_shuffles(q, CUDA_CTYPES, lanes, f"(iron_local_linear() & {w - 1})"))
    out["vote_pred"] = VOTE_PRED
    out.update(votes(q, lanes, "(__ballot(iron_vote_pred({p})) & mask)", needs=("vote_pred",)))
    out.update(scans(q, w, lanes, full, "iron_wave_shfl({v}, {lane}, {mask})", "__ffsll"))
    return out


class HipDialect(CudaDialect):
    """HIP C++ for a wavefront of ``wavefront`` lanes (64: gfx9xx CDNA; 32: gfx10xx+ RDNA, and NVIDIA).

    ``nvidia``: the source is for the NVIDIA run (through ``HIP_COMPAT_HEADER`` and NVRTC), which changes the
    shared-memory limits (48 KiB static, as CUDA; AMD's LDS is 64 KiB either way) and spells matrix fragments as
    CUDA does. Fragments: MFMA at wavefront 64, the scalar fallback at 32 (see the module docstring).
    """

    def bounded(self, signature: str, threads: int, groups: int) -> str:
        # HIP's second argument counts waves per execution unit, not groups per multiprocessor: threads only
        return signature.replace("__global__ void ", f"__global__ void __launch_bounds__({threads}) ", 1)

    #: matrix fragments: set per instance (MFMA on wave64, mma.sync on NVIDIA); None: the scalar fallback
    matrix: ClassVar[object | None] = None

    #: HIP has no PTX: its own __threadfence (device-scope acquire-release on AMD)
    fence: ClassVar[str] = "__threadfence();"

    # AMD has no cp.async: async_copy is an ordinary copy and commit/wait print nothing (CDialect's)
    async_copy = CDialect.async_copy
    async_sync = CDialect.async_sync

    name: ClassVar[str] = "hip"
    #: CUDA's math but for the fast exps, which there are PTX (ex2.approx.ftz): HIP's __expf / exp2f
    math: ClassVar[dict[str, str]] = {**CudaDialect.math, "fast_exp": "__expf", "fast_exp2": "exp2f"}
    math_needs: ClassVar[dict[str, tuple[str, ...]]] = ACTIVATION_NEEDS
    #: CUDA's, but dp4a through the portable helper (HIP has no __dp4a; the NVIDIA run's NVRTC would have it)
    int_math: ClassVar[dict[str, Template]] = {**CudaDialect.int_math, "dp4a:i32": WRAPPING_INT_MATH["dp4a"]}
    builtin_names: ClassVar[frozenset[str]] = CudaDialect.builtin_names | frozenset(
        "__shfl __shfl_xor __ballot __ffsll hipThreadIdx_x hipBlockIdx_x hipBlockDim_x hipGridDim_x "
        "iron_wave_shfl iron_wave_shfl_xor IRON_HIP_ON_NVIDIA".split())
    #: the entry ballot over the lanes that pass the guard (every lane of the wavefront is there at entry); the
    #: active lanes elsewhere. On AMD the shuffles ignore the mask (lockstep); the reductions use it.
    simd_masks: ClassVar[SimdMasks | None] = SimdMasks(
        live="const unsigned long long iron_live = __ballot({in_grid});", live_needs=(), divergent="__ballot(1)")
    max_static_shared: ClassVar[int] = 64 * 1024
    max_dynamic_shared: ClassVar[int] = 64 * 1024

    def __init__(self, wavefront: int = 64, nvidia: bool = False) -> None:
        if wavefront not in (32, 64):
            raise ValueError(f"a HIP wavefront has 32 or 64 lanes, not {wavefront}")
        self.wavefront = wavefront
        self.nvidia = nvidia
        _, shift = _masks(wavefront)
        # instance tables shadow the CUDA class tables; everything not listed is CUDA's
        self.simd_width = wavefront
        self.thread = {
            **CudaDialect.thread,
            "simd_lane": Template(f"(iron_local_linear() & {wavefront - 1})", needs=("local_linear",)),
            "simd_group": Template(f"(iron_local_linear() >> {shift})", needs=("local_linear",)),
            "simd_size": Template(str(wavefront)),
        }
        wave = _wave_snippets(wavefront)
        # the prelude follows this table's order: the shuffle macros and the votes' predicate (HIP only) before
        # every helper that uses them
        snippets = {"wave_shfl": wave.pop("wave_shfl"), "vote_pred": wave.pop("vote_pred"), **CudaDialect.snippets}
        snippets.update({"f16": _F16, "bf16": _BF16, "f32_to_int": _F32_TO_INT})
        snippets.update(wave)
        if nvidia and wavefront == 32:
            self.matrix = CudaMatrix()  # its snippets are CUDA's, which this table already holds
        elif wavefront == 64 and not nvidia:
            self.matrix = HipMatrix()
            snippets.update(mfma_snippets())
        self.snippets = snippets
        self.conversions = {
            **CudaDialect.conversions,
            ("f32", "i32"): Template("iron_f32_to_i32({})", needs=("f32_to_int",)),
            ("f32", "u32"): Template("iron_f32_to_u32({})", needs=("f32_to_int",)),
        }
        if nvidia:
            self.max_static_shared = CudaDialect.max_static_shared
            self.max_dynamic_shared = CudaDialect.max_dynamic_shared

    def header(self, title: str) -> str:
        return (f"// {title}\n// wavefront: {self.wavefront} lanes"
                f"{' (NVIDIA, through the hip->CUDA compatibility header)' if self.nvidia else ''}\n")

    def __repr__(self) -> str:
        return f"HipDialect(wavefront={self.wavefront}{', nvidia=True' if self.nvidia else ''})"


@cache
def hip_dialect(wavefront: int = 64, nvidia: bool = False) -> HipDialect:
    """The (shared, immutable) dialect instance for a wavefront size."""
    return HipDialect(wavefront, nvidia)


def wavefront_of(target: str) -> int:
    """Lanes per wavefront that hipRTC compiles ``target`` (``gfx90a``, ``gfx1030``, ...) for: gfx9xx (GCN, CDNA)
    run wave64; gfx10xx and later (RDNA) default to wave32."""
    if not target.startswith("gfx") or not target[3:].split(":", 1)[0].isalnum():
        raise ValueError(f"bad AMD target {target!r}: expected gfxNNN, e.g. gfx90a or gfx1030")
    return 32 if len(target.split(":", 1)[0]) >= 7 else 64


#: The hip->CUDA compatibility header: put before HIP source emitted for ``HIP_ON_NVIDIA`` (wavefront 32), it makes
#: the source CUDA C++ that NVRTC compiles. Only the HIP names the dialect uses beyond CUDA's are mapped: a warp
#: is a wavefront of 32, Iron's masked shuffles become the ``*_sync`` intrinsics on their mask, and ``__ballot`` takes
#: the active-lane mask (``__activemask``), which is what AMD's exec mask means.
HIP_COMPAT_HEADER = """\
// iron_hip_compat.h: the HIP names Iron's HIP source uses, in CUDA (NVIDIA: wavefront = warp = 32 lanes).
#define IRON_HIP_ON_NVIDIA 1
// Iron's masked shuffles (iron_wave_shfl*: mask = the lanes taking part, see iron_live) map to the *_sync forms.
#define iron_wave_shfl(v, lane, mask) __shfl_sync((unsigned)(mask), (v), (lane))
#define iron_wave_shfl_xor(v, lane_mask, mask) __shfl_xor_sync((unsigned)(mask), (v), (lane_mask))
__device__ __forceinline__ unsigned long long iron_hip_ballot(int predicate) {
    return (unsigned long long)__ballot_sync(__activemask(), predicate);
}
#define __ballot(predicate) iron_hip_ballot(predicate)
"""


def emit_hip(kernel: Kernel, wavefront: int = 64, line_comments: bool = True, vectorize: bool = True,
             nvidia: bool = False) -> KernelSource:
    """HIP C++ for ``kernel`` (an optimised IR kernel) for a wavefront of ``wavefront`` lanes (``wavefront_of``)."""
    return emit_source(kernel, hip_dialect(wavefront, nvidia), line_comments, vectorize)


def for_nvidia(source: str) -> str:
    """HIP source emitted for ``HIP_ON_NVIDIA`` as CUDA C++ for NVRTC: the compatibility header, then the source."""
    if "// wavefront: 32 lanes" not in source:
        raise ValueError("HIP source for NVIDIA must be emitted with wavefront 32 (HIP_ON_NVIDIA)")
    return HIP_COMPAT_HEADER + "\n" + source


HIP64 = hip_dialect(64)
HIP32 = hip_dialect(32)
HIP_ON_NVIDIA = hip_dialect(32, nvidia=True)
__all__ = ["HIP_COMPAT_HEADER", "HIP32", "HIP64", "HIP_ON_NVIDIA", "HipDialect", "emit_hip",
           "for_nvidia", "hip_dialect", "wavefront_of"]
