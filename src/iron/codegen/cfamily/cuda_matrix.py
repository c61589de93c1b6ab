"""Matrix fragments on NVIDIA: the 16x16x16 fragment of ``mma`` as two ``mma.sync.m16n8k16`` (sm_80+, f32 accumulate).

A fragment of MT (NT) tiles of 16 rows (columns) is MT (2 NT) PTX operands. Per lane (g = lane / 4, q = lane % 4,
PTX ISA "Matrix Fragments for mma.m16n8k16"): each A tile holds 4 registers of two halves, rows g and g + 8,
columns 2q, 2q + 1 and those + 8; B holds, for each 8-column half h, rows (k) 2q, 2q + 1 and those + 8 of column
8h + g; the accumulator holds, for each A tile and B half, rows g and g + 8, columns 8h + 2q and 8h + 2q + 1.
From shared memory, fragments load with ``ldmatrix.x4`` (``.trans`` where the stored layout is the operand's transpose:
B stored K x N, A stored K x M) when the index and leading dimension keep rows 16-byte aligned; otherwise, and from
global memory, each element is addressed with a 16-bit access (correct for any index and leading dimension).
"""

from __future__ import annotations

from ...ir import types as t
from .cuda_frag_elementwise import elementwise_snippets, row_ctype, spell
from .dialect import Snippet
from .expr import Expr

_Q = "__device__ __forceinline__"

_TYPES = Snippet(f"""\
// Matrix fragments of a warp, MT (NT) tiles of 16 rows (columns): see codegen/cfamily/cuda_matrix.py for the layout.
template <int MT> struct iron_frag_a {{ unsigned x[4 * MT]; }};
template <int NT> struct iron_frag_b {{ unsigned x[4 * NT]; }};
template <int MT, int NT> struct iron_frag_acc {{ float x[8 * MT * NT]; }};
{_Q} unsigned iron_pack2(unsigned short lo, unsigned short hi) {{ return (unsigned)lo | ((unsigned)hi << 16); }}""",
                 needs=("local_linear",))


def _load(elem: str) -> Snippet:
    return Snippet(f"""\
template <int MT>
{_Q} iron_frag_a<MT> iron_frag_a_load_{elem}(const iron_{elem}* p, long long index, long long ld, bool trans) {{
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
    iron_frag_a<MT> a;
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int i = 0; i < 4; ++i) {{
            const long long r = 16 * t + g + (i & 1) * 8, c = 2 * q + (i >> 1) * 8;
            const long long e0 = trans ? c * ld + r : r * ld + c, e1 = trans ? e0 + ld : e0 + 1;
            a.x[4 * t + i] = iron_pack2(p[index + e0].bits, p[index + e1].bits);
        }}
    }}
    return a;
}}
template <int NT>
{_Q} iron_frag_b<NT> iron_frag_b_load_{elem}(const iron_{elem}* p, long long index, long long ld, bool trans) {{
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
    iron_frag_b<NT> b;
#pragma unroll
    for (int h = 0; h < 2 * NT; ++h) {{  // 8-column halves
#pragma unroll
        for (int i = 0; i < 2; ++i) {{
            const long long k = 2 * q + i * 8, n = 8 * h + g;
            const long long e0 = trans ? n * ld + k : k * ld + n, e1 = trans ? e0 + 1 : e0 + ld;
            b.x[2 * h + i] = iron_pack2(p[index + e0].bits, p[index + e1].bits);
        }}
    }}
    return b;
}}""", needs=("frag_types", elem))


def _load_shared(elem: str) -> Snippet:
    """From shared memory: ``ldmatrix`` (one instruction per 16 x 16 tile; ``.trans`` where the stored layout is the
    transpose of the operand's) when the rows are 16-byte aligned, the element loads above otherwise."""
    return Snippet(f"""\
{_Q} void iron_ldmatrix_x4(unsigned* r, const void* p, bool trans) {{
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (trans) {{
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%0,%1,%2,%3}}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    }} else {{
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0,%1,%2,%3}}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    }}
}}
template <int MT>
{_Q} iron_frag_a<MT> iron_frag_a_lds_{elem}(const iron_{elem}* p, long long index, long long ld, bool trans) {{
    if (((index | ld) & 7) != 0) return iron_frag_a_load_{elem}<MT>(p, index, ld, trans);
    const int lane = iron_local_linear() & 31, m = lane >> 3, l = lane & 7;
    iron_frag_a<MT> a;
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
        // matrix m of the tile: rows (m & 1) * 8, columns (m >> 1) * 8; lane l gives the address of its row l
        const long long ro = 16 * t + (m & 1) * 8, co = (m >> 1) * 8;
        const long long e = trans ? (co + l) * ld + ro : (ro + l) * ld + co;
        iron_ldmatrix_x4(&a.x[4 * t], p + index + e, trans);
    }}
    return a;
}}
template <int NT>
{_Q} iron_frag_b<NT> iron_frag_b_lds_{elem}(const iron_{elem}* p, long long index, long long ld, bool trans) {{
    if (((index | ld) & 7) != 0) return iron_frag_b_load_{elem}<NT>(p, index, ld, trans);
    const int lane = iron_local_linear() & 31, m = lane >> 3, l = lane & 7;
    iron_frag_b<NT> b;
#pragma unroll
    for (int t = 0; t < NT; ++t) {{
        // register 2h + i of the tile: k rows i * 8, n columns 16t + 8h; m = 2h + i
        const long long ko = (m & 1) * 8, no = 16 * t + (m >> 1) * 8;
        const long long e = trans ? (no + l) * ld + ko : (ko + l) * ld + no;
        iron_ldmatrix_x4(&b.x[4 * t], p + index + e, !trans);
    }}
    return b;
}}""", needs=(f"frag_load_{elem}",))


def _mma(elem: str) -> Snippet:
    ptx = "f16.f16" if elem == "f16" else "bf16.bf16"
    return Snippet(f"""\
template <int MT, int NT>
{_Q} iron_frag_acc<MT, NT> iron_mma_{elem}(iron_frag_a<MT> a, iron_frag_b<NT> b, iron_frag_acc<MT, NT> c) {{
#if __CUDA_ARCH__ < 800
#error "Iron's mma on NVIDIA needs sm_80 or newer (mma.sync.m16n8k16)"
#endif
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int h = 0; h < 2 * NT; ++h) {{
            float* d = &c.x[8 * (t * NT) + 4 * h];
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{ptx}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, "
                         "{{%8,%9}}, {{%0,%1,%2,%3}};"
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                         : "r"(a.x[4 * t]), "r"(a.x[4 * t + 1]), "r"(a.x[4 * t + 2]), "r"(a.x[4 * t + 3]),
                           "r"(b.x[2 * h]), "r"(b.x[2 * h + 1]));
        }}
    }}
    return c;
}}""", needs=("frag_types",))


def _store(elem: str) -> Snippet:
    ctype = "float" if elem == "f32" else f"iron_{elem}"
    convert = "v" if elem == "f32" else f"iron_f32_to_{elem}(v)"
    return Snippet(f"""\
template <int MT, int NT>
{_Q} void iron_frag_store_{elem}({ctype}* p, long long index, long long ld, iron_frag_acc<MT, NT> c, int rows,
                                   int cols) {{
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int h = 0; h < 2 * NT; ++h) {{
#pragma unroll
            for (int i = 0; i < 4; ++i) {{
                const long long r = 16 * t + g + (i >> 1) * 8, n = 8 * h + 2 * q + (i & 1);
                const float v = c.x[8 * (t * NT) + 4 * h + i];
                if (r < rows && n < cols) p[index + r * ld + n] = {convert};
            }}
        }}
    }}
}}""", needs=("frag_types",) + (() if elem == "f32" else (elem,)))


def _mma_q4(elem: str) -> Snippet:
    """mma_q4 (``iron.ir.ops``) on mma.sync, B from the packed words in registers. Lane (g, q) owns words 4q .. 4q + 3
    of B's rows g and g + 8 of each 16-column tile (one 16-byte load each): the 8 codes of word j are k = 32q + 8j ..
    + 7, and a mask of 0x000F000F on the word shifted by 4m puts codes m and m + 4 in one register's halves as the
    mantissas of a magic number (bf16 128, f16 1024), which one fma.rn.{bf16x2, f16x2} turns into code * scale
    (bf16: (128 + q) s - 128 s, rounded once; f16: q exactly, then a multiply, as 1024 s may overflow f16). So the
    16-k tiles 2j, 2j + 1 of the mma take codes (0, 4), (1, 5) and (2, 6), (3, 7) of word j where the PTX layout
    wants k = 2q, 2q + 1, 2q + 8, 2q + 9: the sum over k does not care, as long as A's elements come in the same
    order, which the lane's 32 elements of A's rows g and g + 8 (four 16-byte loads) are permuted into with byte
    permutes. bf16 scales must stay below 2^120 (128 s must not overflow). Every load is 16 bytes, with no branch (so
    ptxas can put several calls' loads in flight together): the op's alignment rule, which the interpreter checks."""
    f16 = elem == "f16"
    magic = "0x64006400u" if f16 else "0x43004300u"
    if f16:  # codes 1, 3 of each pair sit 4 bits up: 1024 + 16 q, scaled by 1 / 16 (exact)
        dequant = """\
            const unsigned wj = wd[j], hi = wj >> 8, u[4] = {(wj & 0x000F000Fu) | M, (wj & 0x00F000F0u) | M,
                                                           (hi & 0x000F000Fu) | M, (hi & 0x00F000F0u) | M};
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                unsigned v;
                asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(v) : "r"(u[m]), "r"(m & 1 ? 0x2C002C00u : 0x3C003C00u),
                    "r"(m & 1 ? 0xD400D400u : 0xE400E400u));
                asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(b[m]) : "r"(v), "r"(ss));
            }"""
        prep = "const unsigned ss = sv.bits * 0x10001u;"
    else:
        dequant = """\
#pragma unroll
            for (int m = 0; m < 4; ++m) {
                const unsigned u = ((wd[j] >> (4 * m)) & 0x000F000Fu) | M;
                asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(b[m]) : "r"(u), "r"(ss), "r"(cc));
            }"""
        prep = ("const unsigned ss = sv.bits * 0x10001u, "
                "cc = iron_f32_to_bf16(-128.0f * iron_bf16_to_f32(sv)).bits * 0x10001u;")
    def mma(i: str, m: int) -> str:
        return (f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{elem}.{elem}.f32 {{%0,%1,%2,%3}}, '
                f'{{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};" : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : '
                f'"r"(x0[{i}]), "r"(x1[{i}]), "r"(x0[{i} + 1]), "r"(x1[{i} + 1]), "r"(b[{m}]), "r"(b[{m + 1}]));')

    return Snippet(f"""\
{_Q} void iron_q4_row_{elem}(unsigned (&x)[16], const iron_{elem}* p, long long e) {{
    unsigned v[16];
#pragma unroll
    for (int j = 0; j < 4; ++j) {{
        const uint4 u = *reinterpret_cast<const uint4*>(p + e + 8 * j);
        v[4 * j] = u.x; v[4 * j + 1] = u.y; v[4 * j + 2] = u.z; v[4 * j + 3] = u.w;
    }}
#pragma unroll
    for (int j = 0; j < 4; ++j) {{  // elements 8j .. 8j + 7 as the pairs (0, 4), (1, 5), (2, 6), (3, 7)
        x[4 * j] = __byte_perm(v[4 * j], v[4 * j + 2], 0x5410);
        x[4 * j + 1] = __byte_perm(v[4 * j], v[4 * j + 2], 0x7632);
        x[4 * j + 2] = __byte_perm(v[4 * j + 1], v[4 * j + 3], 0x5410);
        x[4 * j + 3] = __byte_perm(v[4 * j + 1], v[4 * j + 3], 0x7632);
    }}
}}
template <int NT>
{_Q} iron_frag_acc<1, NT> iron_mma_q4_{elem}(const iron_{elem}* a, long long ai, long long lda, const unsigned* w,
                                              long long wi, long long ldw, const iron_{elem}* s, long long si,
                                              long long lds, iron_frag_acc<1, NT> c, int group) {{
#if __CUDA_ARCH__ < 800
#error "Iron's mma_q4 on NVIDIA needs sm_80 or newer (mma.sync.m16n8k16)"
#endif
    const unsigned M = {magic};
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
    unsigned x0[16], x1[16];  // A's rows g and g + 8: the lane's 32 elements, paired as the k-tiles take them
    iron_q4_row_{elem}(x0, a, ai + g * lda + 32 * q);
    if (lda == 0) {{
#pragma unroll
        for (int i = 0; i < 16; ++i) x1[i] = x0[i];
    }} else {{
        iron_q4_row_{elem}(x1, a, ai + (g + 8) * lda + 32 * q);
    }}
#pragma unroll
    for (int h = 0; h < 2 * NT; ++h) {{  // 8-column halves: B's row (column of the product) n = 8h + g
        const long long n = 8 * h + g, e = wi + n * ldw + 4 * q;
        const uint4 u = *reinterpret_cast<const uint4*>(w + e);
        const unsigned wd[4] = {{u.x, u.y, u.z, u.w}};
        const iron_{elem} sv = s[si + n * lds + (32 * q) / group];
        {prep}
        float* d = &c.x[4 * h];
#pragma unroll
        for (int j = 0; j < 4; ++j) {{
            unsigned b[4];
{dequant}
            {mma("4 * j", 0)}
            {mma("4 * j + 2", 2)}
        }}
    }}
    return c;
}}""", needs=("frag_types", elem))


def _mv_q4(elem: str) -> Snippet:
    """mv_q4 (``iron.ir.ops``) on mma.sync with the weight rows as A (16 rows a tile) and x as B (the same vector in
    all 8 columns). Each k-step of 16 takes its codes from one quantization group, so a group's products sum in a
    fresh accumulator that its scale multiplies once: lane (g, q) takes words q WPL .. q WPL + WPL - 1 of each group
    of rows g and g + 8 (WPL = 1, 2, 4 words for groups of 32, 64, >= 128: one 4-, 8- or 16-byte load), and
    ((word >> 4m) & 0x000F000F) | magic puts codes m and m + 4 in one register's halves as magic + code (bf16 128,
    f16 1024: exact), one logic op per two codes and no arithmetic; step 2v + h of a group takes pairs 2h and 2h + 1
    of word v as the PTX layout's k = 2q, 2q + 1 and 2q + 8, 2q + 9, and x's elements come paired the same way
    (byte permutes of its 16-byte loads). The magic offsets are taken off by starting each group's accumulator at
    -magic times x's sum over the group (mma.sync with a constant A), shared by every row tile. Every load is
    unconditional (the op's alignment rule), so ptxas can put several calls' loads in flight together."""
    magic, neg = ("0x64006400u", "0xE400E400u") if elem == "f16" else ("0x43004300u", "0xC300C300u")

    def mma(d: str, a: str, b: str) -> str:
        return (f'asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{elem}.{elem}.f32 {{%0,%1,%2,%3}}, '
                f'{{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};" : "+f"({d}[0]), "+f"({d}[1]), "+f"({d}[2]), '
                f'"+f"({d}[3]) : "r"({a}[0]), "r"({a}[1]), "r"({a}[2]), "r"({a}[3]), "r"({b}[0]), "r"({b}[1]));')

    return Snippet(f"""\
template <int MT, int G>
{_Q} iron_frag_acc<MT, 1> iron_mv_q4_{elem}(const unsigned* w, long long wi, long long ldw, const iron_{elem}* s,
                                             long long si, long long lds, const iron_{elem}* x, long long xi,
                                             iron_frag_acc<MT, 1> c) {{
#if __CUDA_ARCH__ < 800
#error "Iron's mv_q4 on NVIDIA needs sm_80 or newer (mma.sync.m16n8k16)"
#endif
    constexpr int NG = G >= 128 ? 1 : 128 / G, WPL = 4 / NG, STEPS = 2 * WPL;  // groups a slab, words a lane
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
    // the mask from a value the compiler cannot fold (ldw >= 0): ptxas keeps it in a register, so that
    // (word & MASK) | magic is one logic op with the magic number its immediate
    const unsigned MASK = 0x000F000Fu | (unsigned)(ldw >> 62), M = {magic};
    const unsigned NEG[4] = {{{neg}, {neg}, {neg}, {neg}}};
    unsigned xw[NG][WPL][4], wd[MT][2][NG][WPL];
    float sc[MT][2][NG];
    const unsigned* wl = w + wi + g * ldw + WPL * q;  // this lane's words and scales of row g; rows 8 apart below
    const iron_{elem}* sl = s + si + g * lds;
    const long long w8 = 8 * ldw, s8 = 8 * lds;
#pragma unroll
    for (int j = 0; j < NG; ++j) {{
#pragma unroll
        for (int v = 0; v < WPL; ++v) {{
            const uint4 u = *reinterpret_cast<const uint4*>(x + xi + 8 * (4 * WPL * j + WPL * q + v));
            xw[j][v][0] = __byte_perm(u.x, u.z, 0x5410);  // elements (0, 4), (1, 5), (2, 6), (3, 7)
            xw[j][v][1] = __byte_perm(u.x, u.z, 0x7632);
            xw[j][v][2] = __byte_perm(u.y, u.w, 0x5410);
            xw[j][v][3] = __byte_perm(u.y, u.w, 0x7632);
        }}
#pragma unroll
        for (int t = 0; t < MT; ++t) {{
#pragma unroll
            for (int r = 0; r < 2; ++r) {{
                iron_mv_q4_words(wd[t][r][j], wl + (2 * t + r) * w8 + 4 * WPL * j);
                sc[t][r][j] = iron_{elem}_to_f32(sl[(2 * t + r) * s8 + (G >= 128 ? 0 : j)]);
            }}
        }}
    }}
#pragma unroll
    for (int j = 0; j < NG; ++j) {{
        float corr[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};  // -magic times x's sum over the group, in every row
#pragma unroll
        for (int st = 0; st < STEPS; ++st) {{
            const unsigned* b = &xw[j][st >> 1][2 * (st & 1)];
            {mma("corr", "NEG", "b")}
        }}
#pragma unroll
        for (int t = 0; t < MT; ++t) {{
            float d[4] = {{corr[0], corr[1], corr[2], corr[3]}};
#pragma unroll
            for (int st = 0; st < STEPS; ++st) {{
                const int v = st >> 1, m = 2 * (st & 1);
                const unsigned w0 = wd[t][0][j][v], w1 = wd[t][1][j][v];
                const unsigned a[4] = {{((w0 >> (4 * m)) & MASK) | M, ((w1 >> (4 * m)) & MASK) | M,
                                       ((w0 >> (4 * m + 4)) & MASK) | M, ((w1 >> (4 * m + 4)) & MASK) | M}};
                const unsigned* b = &xw[j][v][m];
                {mma("d", "a", "b")}
            }}
#pragma unroll
            for (int h = 0; h < 2; ++h) {{
                float* o = &c.x[8 * t + 4 * h];
                o[0] += sc[t][0][j] * d[0];
                o[1] += sc[t][0][j] * d[1];
                o[2] += sc[t][1][j] * d[2];
                o[3] += sc[t][1][j] * d[3];
            }}
        }}
    }}
    return c;
}}""", needs=("frag_types", "mv_q4_words", elem))


#: mv_q4's loads of 1, 2 or 4 words (one snippet whatever the dtypes of a kernel's mv_q4 calls)
_MV_Q4_WORDS = Snippet(f"""\
{_Q} void iron_mv_q4_words(unsigned (&d)[1], const unsigned* p) {{ d[0] = *p; }}
{_Q} void iron_mv_q4_words(unsigned (&d)[2], const unsigned* p) {{
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    d[0] = u.x; d[1] = u.y;
}}
{_Q} void iron_mv_q4_words(unsigned (&d)[4], const unsigned* p) {{
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    d[0] = u.x; d[1] = u.y; d[2] = u.z; d[3] = u.w;
}}""")


_ASYNC = Snippet(f"""\
// async_copy: cp.async (sm_80+) into shared memory, 16 bytes bypassing L1 (.cg), 4 or 8 through it (.ca); an
// ordinary copy before sm_80, which the waits then find done.
template <int BYTES>
{_Q} void iron_cp_async(void* dst, const void* src) {{
#if __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (BYTES == 16) {{
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(__cvta_generic_to_global(src)));
    }} else {{
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(d), "l"(__cvta_generic_to_global(src)),
                     "n"(BYTES));
    }}
#else
    if (BYTES == 16) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    else if (BYTES == 8) *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
    else *reinterpret_cast<unsigned*>(dst) = *reinterpret_cast<const unsigned*>(src);
#endif
}}
{_Q} void iron_cp_async_commit() {{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}}
template <int N>
{_Q} void iron_cp_async_wait() {{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#endif
}}""")


def matrix_snippets() -> dict[str, Snippet]:
    out = {"frag_types": _TYPES, "frag_store_f32": _store("f32"), "cp_async": _ASYNC, "mv_q4_words": _MV_Q4_WORDS,
           **elementwise_snippets()}
    for elem in ("f16", "bf16"):
        out[f"frag_load_{elem}"] = _load(elem)
        out[f"frag_lds_{elem}"] = _load_shared(elem)
        out[f"mma_{elem}"] = _mma(elem)
        out[f"frag_store_{elem}"] = _store(elem)
        out[f"mma_q4_{elem}"] = _mma_q4(elem)
        out[f"mv_q4_{elem}"] = _mv_q4(elem)
    return out


class CudaMatrix:
    """How the C-family printer spells fragment types and ops on NVIDIA (``CDialect.matrix``)."""

    #: warpgroup_mma runs as wgmma (only ``cuda_wgmma.Sm90Matrix``); fragment variables start zeroed
    wgmma = False
    var_init = "{}"
    #: element-wise fragment ops in the accumulator's lane layout (cuda_frag_elementwise.py)
    elementwise = True
    #: mma_q4 in mma.sync's own k order (``_mma_q4``)
    permuted = True

    def ctype(self, ty: t.FragType) -> tuple[str, tuple[str, ...]]:
        if ty.role == "row":
            return row_ctype(ty), ("frag_elementwise",)
        if ty.role == "a":
            return f"iron_frag_a<{ty.rows // 16}>", ("frag_types",)
        if ty.role == "b":
            return f"iron_frag_b<{ty.cols // 16}>", ("frag_types",)
        return f"iron_frag_acc<{ty.rows // 16}, {ty.cols // 16}>", ("frag_types",)

    def zero(self, ty: t.FragType) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"{self.ctype(ty)[0]}{{}}"), ("frag_types",)

    def load(self, ty: t.FragType, buf: str, space: str, index: Expr, ld: Expr, trans: bool
             ) -> tuple[Expr, tuple[str, ...]]:
        e, tiles = ty.elem.name, (ty.rows if ty.role == "a" else ty.cols) // 16
        how, need = ("lds", f"frag_lds_{e}") if space == "shared" else ("load", f"frag_load_{e}")
        text = f"iron_frag_{ty.role}_{how}_{e}<{tiles}>({buf}, {index}, {ld}, {'true' if trans else 'false'})"
        return Expr(text), (need,)

    def mma(self, elem: t.ScalarType, a: Expr, b: Expr, c: Expr) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_mma_{elem.name}({a}, {b}, {c})"), (f"mma_{elem.name}",)

    def mma_q4(self, elem: t.ScalarType, args: list[Expr], cols: int, group: int) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_mma_q4_{elem.name}<{cols // 16}>({', '.join(map(str, args))}, {group})"), \
            (f"mma_q4_{elem.name}",)

    def mv_q4(self, elem: t.ScalarType, args: list[Expr], rows: int, group: int) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_mv_q4_{elem.name}<{rows // 16}, {group}>({', '.join(map(str, args))})"), \
            (f"mv_q4_{elem.name}",)

    def store(self, elem: t.ScalarType, buf: str, index: Expr, ld: Expr, acc: Expr, rows: Expr, cols: Expr
              ) -> tuple[str, tuple[str, ...]]:
        text = f"iron_frag_store_{elem.name}({buf}, {index}, {ld}, {acc}, {rows}, {cols});"
        return text, (f"frag_store_{elem.name}",)

    def elementwise_op(self, op, operands: list[Expr], math: dict[str, str]) -> tuple[Expr, tuple[str, ...]]:
        return spell(op, lambda ty: self.ctype(ty)[0], operands, math, self.wgmma)
