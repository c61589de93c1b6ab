"""``warpgroup_mma`` on NVIDIA sm_90 (Hopper): ``wgmma.mma_async`` from 128-byte-swizzled shared memory.

Used for a kernel only when ``codegen/warpgroup.py``'s ``plan_wgmma`` accepts it (the operand arrays are then stored
through ``phys``); the source then needs the ``sm_90a`` target (``KernelSource.arch``). One call is a K slab of 64:
``wgmma.fence``, four ``wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}`` (the descriptor start advancing 32
bytes per k-step in A and K-major B, 2 KiB = 16 rows in MN-major B) and ``wgmma.commit_group``; ``warpgroup_wait(n)``
is ``wgmma.wait_group n``. The accumulator of SIMD group w is wgmma's D rows 16w..16w+15, whose register layout is
the mma.sync accumulator's (``cuda_matrix.py``), so the fragment stores are shared. An accumulator fresh from
``frag_acc`` is left unwritten (``live`` = 0): the first wgmma of the call then scales D by 0 (writing registers
before the pipeline would make ptxas serialize the wgmmas: its warning C7515, seen on the prototype at N = 256), and
the store reads zeros for it. Every barrier is preceded by ``fence.proxy.async.shared::cta`` so that shared memory
written by ordinary stores and cp.async is visible to the tensor cores (the async proxy). Checked on the H200 as a
hand-written prototype first (bench/experiments/wgmma_proto.py, 506 TF/s at 8192^3 bf16).
"""

from __future__ import annotations

from typing import ClassVar

from ...ir import types as t
from .cuda import CudaDialect
from .cuda_frag_elementwise import elementwise_wg_snippets
from .cuda_matrix import CudaMatrix, matrix_snippets
from .cuda_tma import TMA_SNIPPET
from .dialect import Snippet
from .expr import Expr

_Q = "__device__ __forceinline__"
K = 64

_TYPES = Snippet(f"""\
// warpgroup_mma (wgmma): the accumulator of a SIMD group is 16 x 16NT f32 in mma.sync's register layout; live == 0
// means "zeros" (the registers are not written until the first wgmma, which scales them by 0)
template <int MT, int NT> struct iron_wg_acc {{ float x[8 * MT * NT]; unsigned live; }};
template <int MT, int NT> {_Q} iron_wg_acc<MT, NT> iron_wg_acc_fresh() {{
    iron_wg_acc<MT, NT> c;
    c.live = 0u;
    return c;
}}
// a shared-memory matrix descriptor, 128-byte swizzle (PTX ISA "Matrix Descriptor Format")
{_Q} unsigned long long iron_wg_desc(const void* p, unsigned lbo, unsigned sbo) {{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);  // 1024-byte aligned by construction (no check:
    // a branch here makes ptxas serialize the wgmmas, warning C7518)
    return (unsigned long long)((a & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16)
         | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}}
// an index of a wgmma A array as stored (codegen/warpgroup.py's phys), for fragment stores into it
template <bool SWZ> {_Q} long long iron_wg_phys(long long i) {{ return SWZ ? i ^ (((i >> 6) & 7) << 3) : i; }}
template <int MT, int NT> {_Q} void iron_wg_fence_acc(iron_wg_acc<MT, NT>& c) {{
#pragma unroll
    for (int i = 0; i < 8 * MT * NT; ++i) asm volatile("" : "+f"(c.x[i]) :: "memory");
}}
{_Q} void iron_wg_wait0() {{ asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }}""")


def _issue(elem: str, nt: int, trans: int) -> Snippet:
    """The wgmma of one k-step: m64n(16 nt)k16, D += A B (D scaled by ``scale`` first)."""
    regs = 8 * nt
    outs = ",".join(f"%{i}" for i in range(regs))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    return Snippet(f"""\
{_Q} void iron_wgmma_{elem}_n{16 * nt}_t{trans}(float* d, unsigned long long da, unsigned long long db,
                                                 unsigned scale) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{16 * nt}k16.f32.{elem}.{elem} {{{outs}}}, %{regs}, %{regs + 1}, p, "
                 "1, 1, 0, {1 - trans};\\n}}\\n"
                 : {cons}
                 : "l"(da), "l"(db), "r"(scale));
}}""")


def _call(elem: str, nt: int, trans: int) -> Snippet:
    """One warpgroup_mma: a K slab of 64 as four k-steps, committed as one group."""
    name = f"iron_wgmma_{elem}_n{16 * nt}_t{trans}"
    if trans:  # B stored N x K, rows of 64: K-major like A
        b_start, b_step, lbo = "b + bi", 2, 16
    else:  # B stored K x LD in 64-column panels of 64 rows (8 KiB apart): MN-major; 16 rows = 2 KiB per k-step
        b_start, b_step, lbo = "b + (bi / (64 * LD)) * (64 * LD) + ((bi % LD) / 64) * 4096", 128, 8192
    return Snippet(f"""\
template <int LD>
{_Q} iron_wg_acc<1, {nt}> iron_wg_mma_{elem}_n{16 * nt}_t{trans}(
        const iron_{elem}* a, long long ai, const iron_{elem}* b, long long bi, iron_wg_acc<1, {nt}> c) {{
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "warpgroup_mma's wgmma path needs the sm_90a target"
#endif
    const unsigned long long da = iron_wg_desc(a + ai, 16, 1024), db = iron_wg_desc({b_start}, {lbo}, 1024);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {{
        {name}(c.x, da + 2ull * kk, db + {b_step}ull * kk, kk > 0 ? 1u : c.live);
    }}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    c.live = 1u;
    return c;
}}""", needs=("wg_types", f"wgmma_{elem}_n{16 * nt}_t{trans}"))


def _issue_rs(elem: str, nt: int, trans: int) -> Snippet:
    """The wgmma of one k-step with A in registers (4 x 32 bits per lane: the mma.sync A layout)."""
    regs = 8 * nt
    outs = ",".join(f"%{i}" for i in range(regs))
    cons = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    a_ops = ",".join(f"%{regs + i}" for i in range(4))
    return Snippet(f"""\
{_Q} void iron_wgmma_rs_{elem}_n{16 * nt}_t{trans}(float* d, const unsigned* a, unsigned long long db,
                                                    unsigned scale) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 5}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{16 * nt}k16.f32.{elem}.{elem} {{{outs}}}, {{{a_ops}}}, "
                 "%{regs + 4}, p, 1, 1, {1 - trans};\\n}}\\n"
                 : {cons}
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale));
}}""")


def _call_rs(elem: str, nt: int, trans: int) -> Snippet:
    """One warpgroup_mma with A from each SIMD group's 16 x 64 accumulator: rounded to the input type and packed
    in the A layout (the accumulator's columns 16 kk .. are the k-step's A: FlashAttention's P in registers)."""
    name = f"iron_wgmma_rs_{elem}_n{16 * nt}_t{trans}"
    if trans:
        b_start, b_step, lbo = "b + bi", 2, 16
    else:
        b_start, b_step, lbo = "b + (bi / (64 * LD)) * (64 * LD) + ((bi % LD) / 64) * 4096", 128, 8192
    return Snippet(f"""\
template <int LD>
{_Q} iron_wg_acc<1, {nt}> iron_wg_mma_rs_{elem}_n{16 * nt}_t{trans}(
        iron_wg_acc<1, 4> a, const iron_{elem}* b, long long bi, iron_wg_acc<1, {nt}> c) {{
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "warpgroup_mma's wgmma path needs the sm_90a target"
#endif
    iron_wg_fence_acc(a);
    unsigned ar[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {{  // k-step i / 4, register i % 4: rows g / g + 8, columns 2q (+ 8) of the step
        const int h = 2 * (i >> 2) + ((i & 3) >> 1), e = 2 * (i & 1);
        const float lo = a.live ? a.x[4 * h + e] : 0.0f, hi = a.live ? a.x[4 * h + e + 1] : 0.0f;
        ar[i] = iron_pack2(iron_f32_to_{elem}(lo).bits, iron_f32_to_{elem}(hi).bits);
    }}
    const unsigned long long db = iron_wg_desc({b_start}, {lbo}, 1024);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {{
        {name}(c.x, &ar[4 * kk], db + {b_step}ull * kk, kk > 0 ? 1u : c.live);
    }}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    c.live = 1u;
    return c;
}}""", needs=("wg_types", "frag_types", elem, f"wgmma_rs_{elem}_n{16 * nt}_t{trans}"))


def _store(elem: str) -> Snippet:
    ctype = "float" if elem == "f32" else f"iron_{elem}"
    convert = "v" if elem == "f32" else f"iron_f32_to_{elem}(v)"
    if elem == "f32":
        pair = "*reinterpret_cast<float2*>(p + iron_wg_phys<SWZ>(index + r * ld + n)) = make_float2(v[0], v[1]);"
    else:
        pair = (f"*reinterpret_cast<unsigned*>(p + iron_wg_phys<SWZ>(index + r * ld + n)) = "
                f"(unsigned)iron_f32_to_{elem}(v[0]).bits | "
                f"((unsigned)iron_f32_to_{elem}(v[1]).bits << 16);")
    wide = "" if elem == "f32" else f"""
    if constexpr (NT % 2 == 0) {{  // 16-byte stores: each row's 4 lanes swap pairs (a 4 x 4 transpose)
        if (c.live && rows >= 16 * MT && cols >= 16 * NT
                && (((unsigned long long)(p + index) | (unsigned long long)ld * 2) & 15) == 0) {{
#pragma unroll
            for (int t = 0; t < MT; ++t) {{
#pragma unroll
                for (int hb = 0; hb < NT / 2; ++hb) {{
#pragma unroll
                    for (int i = 0; i < 4; i += 2) {{
                        unsigned w[4];
#pragma unroll
                        for (int j = 0; j < 4; ++j) {{
                            const float* v = &c.x[8 * (t * NT) + 4 * (4 * hb + j) + i];
                            w[j] = (unsigned)iron_f32_to_{elem}(v[0]).bits
                                 | ((unsigned)iron_f32_to_{elem}(v[1]).bits << 16);
                        }}
                        iron_wg_quad_transpose(w, q);
                        const long long r = 16 * t + g + (i >> 1) * 8, n = 8 * (4 * hb + q);
                        *reinterpret_cast<uint4*>(p + iron_wg_phys<SWZ>(index + r * ld + n)) =
                            make_uint4(w[0], w[1], w[2], w[3]);
                    }}
                }}
            }}
            return;
        }}
    }}"""
    return Snippet(f"""\
template <bool SWZ, int MT, int NT>
{_Q} void iron_wg_store_{elem}({ctype}* p, long long index, long long ld, iron_wg_acc<MT, NT> c, int rows, int cols) {{
    iron_wg_fence_acc(c);  // the registers are read after the warpgroup_wait that completed them
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;{wide}
    if (c.live && rows >= 16 * MT && cols >= 16 * NT && ((index | ld) & 1) == 0) {{  // whole tile: pairs at once
#pragma unroll
        for (int t = 0; t < MT; ++t) {{
#pragma unroll
            for (int h = 0; h < 2 * NT; ++h) {{
#pragma unroll
                for (int i = 0; i < 4; i += 2) {{
                    const long long r = 16 * t + g + (i >> 1) * 8, n = 8 * h + 2 * q;
                    const float* v = &c.x[8 * (t * NT) + 4 * h + i];
                    {pair}
                }}
            }}
        }}
        return;
    }}
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int h = 0; h < 2 * NT; ++h) {{
#pragma unroll
            for (int i = 0; i < 4; ++i) {{
                const long long r = 16 * t + g + (i >> 1) * 8, n = 8 * h + 2 * q + (i & 1);
                const float v = c.live ? c.x[8 * (t * NT) + 4 * h + i] : 0.0f;
                if (r < rows && n < cols) p[iron_wg_phys<SWZ>(index + r * ld + n)] = {convert};
            }}
        }}
    }}
}}""", needs=("wg_types", "local_linear") + (() if elem == "f32" else (elem, "wg_quad_transpose")))


#: lane q of each group of 4 holds word j of column block j; afterwards word j of block q (from lane j): two
#: exchanges (lanes 2 apart, then 1 apart), each swapping the two words whose index bit differs from the lane's
_QUAD_TRANSPOSE = Snippet(f"""\
{_Q} void iron_wg_quad_transpose(unsigned (&w)[4], int q) {{
    const bool hi = (q & 2) != 0, odd = (q & 1) != 0;
#pragma unroll
    for (int j = 0; j < 2; ++j) {{  // lanes 2 apart swap the words whose bit 1 is not the lane's
        const unsigned x = __shfl_xor_sync(0xffffffffu, hi ? w[j] : w[2 + j], 2);
        if (hi) w[j] = x; else w[2 + j] = x;
    }}
#pragma unroll
    for (int j = 0; j < 4; j += 2) {{  // lanes 1 apart swap the words whose bit 0 is not the lane's
        const unsigned x = __shfl_xor_sync(0xffffffffu, odd ? w[j] : w[j + 1], 1);
        if (odd) w[j] = x; else w[j + 1] = x;
    }}
}}""")


def wgmma_snippets() -> dict[str, Snippet]:
    out = {"wg_types": _TYPES, "wg_quad_transpose": _QUAD_TRANSPOSE, **elementwise_wg_snippets()}
    for elem in ("f16", "bf16"):
        out[f"wg_store_{elem}"] = _store(elem)
        for nt in range(1, 17):
            for trans in (0, 1):
                out[f"wgmma_{elem}_n{16 * nt}_t{trans}"] = _issue(elem, nt, trans)
                out[f"wg_mma_{elem}_n{16 * nt}_t{trans}"] = _call(elem, nt, trans)
                out[f"wgmma_rs_{elem}_n{16 * nt}_t{trans}"] = _issue_rs(elem, nt, trans)
                out[f"wg_mma_rs_{elem}_n{16 * nt}_t{trans}"] = _call_rs(elem, nt, trans)
    out["wg_store_f32"] = _store("f32")
    return out


class Sm90Matrix(CudaMatrix):
    """Fragments on sm_90 in a wgmma kernel: accumulators are ``iron_wg_acc`` (plan_wgmma admits no other
    fragment op there than frag_acc, warpgroup_mma and frag_store)."""

    wgmma = True
    var_init = ""  # left unwritten: the first wgmma scales it by 0 (see the module docstring)

    def ctype(self, ty: t.FragType) -> tuple[str, tuple[str, ...]]:
        if ty.role != "acc":
            return super().ctype(ty)
        return f"iron_wg_acc<{ty.rows // 16}, {ty.cols // 16}>", ("wg_types",)

    def zero(self, ty: t.FragType) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_wg_acc_fresh<{ty.rows // 16}, {ty.cols // 16}>()"), ("wg_types",)

    def store(self, elem: t.ScalarType, buf: str, index: Expr, ld: Expr, acc: Expr, rows: Expr, cols: Expr,
              swizzle: bool = False) -> tuple[str, tuple[str, ...]]:
        swz = "true" if swizzle else "false"
        return (f"iron_wg_store_{elem.name}<{swz}>({buf}, {index}, {ld}, {acc}, {rows}, {cols});",
                (f"wg_store_{elem.name}",))

    def wg_mma(self, elem: t.ScalarType, a: str, ai: Expr, b: str, bi: Expr, ldb: int, trans: bool, acc: Expr,
               nt: int, in_regs: bool = False) -> tuple[Expr, tuple[str, ...]]:
        key = f"{elem.name}_n{16 * nt}_t{int(trans)}"
        if in_regs:  # A from the SIMD groups' accumulators (wgmma's register form)
            return (Expr(f"iron_wg_mma_rs_{key}<{0 if trans else ldb}>({a}, {b}, {bi}, {acc})"),
                    (f"wg_mma_rs_{key}",))
        return Expr(f"iron_wg_mma_{key}<{0 if trans else ldb}>({a}, {ai}, {b}, {bi}, {acc})"), (f"wg_mma_{key}",)

    def wg_wait(self, pending: int) -> tuple[str, tuple[str, ...]]:
        return f'asm volatile("wgmma.wait_group.sync.aligned {pending};" ::: "memory");', ()


class CudaSm90Dialect(CudaDialect):
    """CUDA for a kernel whose warpgroup_mma calls run as wgmma (sm_90a): 1024-byte-aligned shared arrays (the
    swizzle period; a dynamic buffer is aligned up in the kernel) and the async-proxy fence before every barrier."""

    matrix: ClassVar[object | None] = Sm90Matrix()
    snippets: ClassVar[dict[str, Snippet]] = {**CudaDialect.snippets, **matrix_snippets(), **wgmma_snippets(),
                                              "tma": TMA_SNIPPET}
    barrier: ClassVar[str] = 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); __syncthreads();'
    plain_barrier: ClassVar[str] = "__syncthreads();"
    shared_align: ClassVar[int] = 1024
    #: static arrays up to 47 KiB: the copy engine's mbarriers and the 1024-byte alignment must fit in the 48 KiB a
    #: kernel may declare statically (a 48 KiB static total failed at launch)
    max_static_shared: ClassVar[int] = 47 * 1024
    #: tile_load into operand arrays runs on the bulk tensor copy engine (cuda_tma.py)
    tma: ClassVar[bool] = True

    def without_fence(self) -> CudaSm90Dialect:
        """This dialect for a kernel whose operand arrays only the copy engine and wgmma touch: plain barriers."""
        return _CUDA_SM90_NO_FENCE

    #: the dynamic buffer's start is aligned up to 1024 bytes in the kernel, so it is sized 1024 bytes larger
    dynamic_shared_pad: ClassVar[int] = 1024

    def dynamic_shared_decl(self) -> str:
        # aligned in the shared window, as an offset from the symbol: the compiler keeps knowing the pointer is
        # shared memory (a generic address rounded as an integer is converted back on every cp.async)
        return ("extern __shared__ __align__(1024) unsigned char iron_dynamic_shared_raw[];\n"
                "    unsigned char* const iron_dynamic_shared = iron_dynamic_shared_raw + ((1024u - ((unsigned)\n"
                "        __cvta_generic_to_shared(iron_dynamic_shared_raw) & 1023u)) & 1023u);")

    def shared_decl(self, ctype: str, name: str, size: int) -> str:
        return f"__shared__ __align__(1024) {ctype} {name}[{size}];"


class _NoFence(CudaSm90Dialect):
    barrier: ClassVar[str] = "__syncthreads();"


CUDA_SM90 = CudaSm90Dialect()
_CUDA_SM90_NO_FENCE = _NoFence()
