"""Element-wise fragment ops on NVIDIA (``frag_unary``/``frag_binary``/``frag_reduce``/``frag_fill``/``frag_mask``)
in the accumulator layout that ``mma.sync`` and ``wgmma`` share (``cuda_matrix.py``): per lane (g = lane / 4,
q = lane % 4), element i of an MT x NT-tile accumulator is row 16 (i / 8NT) + g + 8 ((i % 4) / 2), column
8 ((i / 4) % 2NT) + 2q + (i % 2); a row fragment holds the lane's rows 16t + g and 16t + g + 8 as x[2t], x[2t + 1]
(the four lanes of a quad hold the same rows, so a row reduction is the lane's own elements, then two
``__shfl_xor_sync``). The scalar function is a lambda the printer spells with the dialect's math table; a
``iron_wg_acc`` operand is read after ``iron_wg_fence_acc`` (its registers are written by wgmma until the
warpgroup_wait), and one fresh from ``frag_acc`` reads as zeros.
"""

from __future__ import annotations

from ...ir import types as t
from ..lower_fragments import to_a_column
from .dialect import Snippet
from .expr import Expr

_Q = "__device__ __forceinline__"

_CORE = Snippet(f"""\
// element-wise fragment ops (cuda_frag_elementwise.py): row fragments and element access by index
template <int MT> struct iron_frag_row {{ float x[2 * MT]; }};
template <int MT, int NT> {_Q} float iron_fget(const iron_frag_acc<MT, NT>& a, int i, int) {{ return a.x[i]; }}
template <int MT> {_Q} float iron_fget(const iron_frag_row<MT>& r, int i, int nt) {{
    return nt ? r.x[2 * (i / (8 * nt)) + ((i & 3) >> 1)] : r.x[i];
}}
{_Q} float iron_fget(float s, int, int) {{ return s; }}
template <class A> {_Q} void iron_fprep(A&) {{}}
template <class R> {_Q} void iron_flive(R&) {{}}
template <class R, int NT, class F, class A> {_Q} R iron_fmap1(F f, A a) {{
    iron_fprep(a);
    R r;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(r.x) / sizeof(float)); ++i) r.x[i] = f(iron_fget(a, i, NT));
    iron_flive(r);
    return r;
}}
template <class R, int NT, class F, class A, class B> {_Q} R iron_fmap2(F f, A a, B b) {{
    iron_fprep(a);
    iron_fprep(b);
    R r;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(r.x) / sizeof(float)); ++i) r.x[i] = f(iron_fget(a, i, NT), iron_fget(b, i, NT));
    iron_flive(r);
    return r;
}}
template <int MT, int NT, class F, class A> {_Q} iron_frag_row<MT> iron_freduce(F f, A a) {{
    iron_fprep(a);
    iron_frag_row<MT> r;
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int half = 0; half < 2; ++half) {{
            float v = iron_fget(a, 8 * t * NT + 2 * half, NT);
#pragma unroll
            for (int h = 0; h < 2 * NT; ++h) {{
#pragma unroll
                for (int e = 0; e < 2; ++e) {{
                    if (h || e) v = f(v, iron_fget(a, 8 * t * NT + 4 * h + 2 * half + e, NT));
                }}
            }}
            v = f(v, __shfl_xor_sync(0xffffffffu, v, 1));
            r.x[2 * t + half] = f(v, __shfl_xor_sync(0xffffffffu, v, 2));
        }}
    }}
    return r;
}}
template <class R> {_Q} R iron_ffill(float v) {{
    R r;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(r.x) / sizeof(float)); ++i) r.x[i] = v;
    iron_flive(r);
    return r;
}}
template <int NT, class A> {_Q} A iron_fmask(A a, int row0, int col0, int cols, bool causal, float fill) {{
    iron_fprep(a);
    const int lane = iron_local_linear() & 31, g = lane >> 2, q = lane & 3;
    A r;
#pragma unroll
    for (int i = 0; i < (int)(sizeof(r.x) / sizeof(float)); ++i) {{
        const int row = 16 * (i / (8 * NT)) + g + 8 * ((i & 3) >> 1), col = col0 + 8 * ((i >> 2) % (2 * NT)) + 2 * q
                      + (i & 1);
        r.x[i] = (col >= cols || (causal && col > row0 + row)) ? fill : iron_fget(a, i, NT);
    }}
    iron_flive(r);
    return r;
}}""", needs=("frag_types", "local_linear"))

#: the wgmma accumulator's element access (only in the sm_90 dialect, where ``iron_wg_acc`` exists)
_WG = Snippet(f"""\
template <int MT, int NT> {_Q} float iron_fget(const iron_wg_acc<MT, NT>& a, int i, int) {{
    return a.live ? a.x[i] : 0.0f;
}}
template <int MT, int NT> {_Q} void iron_fprep(iron_wg_acc<MT, NT>& a) {{ iron_wg_fence_acc(a); }}
template <int MT, int NT> {_Q} void iron_flive(iron_wg_acc<MT, NT>& r) {{ r.live = 1u; }}""",
                  needs=("wg_types",))

_BINARY = {"add": "x + y", "sub": "x - y", "mul": "x * y", "div": "x / y"}


def _to_a(elem: str) -> Snippet:
    """Columns 8 H0 .. 8 H0 + 15 of a 16-row accumulator as an A fragment: the accumulator's layout is the A
    layout's (rows g / g + 8, columns 2q, 2q + 1 and + 8), so each lane packs its own registers."""
    return Snippet(f"""\
template <int H0, int NT, class A> {_Q} iron_frag_a<1> iron_fto_a_{elem}(A a) {{
    iron_fprep(a);
    iron_frag_a<1> r;
#pragma unroll
    for (int i = 0; i < 4; ++i) {{  // register i: row g + 8 (i & 1), columns 2q + 8 (i >> 1)
        const int e = 4 * (H0 + (i >> 1)) + 2 * (i & 1);
        r.x[i] = iron_pack2(iron_f32_to_{elem}(iron_fget(a, e, NT)).bits,
                            iron_f32_to_{elem}(iron_fget(a, e + 1, NT)).bits);
    }}
    return r;
}}""", needs=("frag_elementwise", elem))


def elementwise_snippets() -> dict[str, Snippet]:
    """mma.sync's (in ``cuda_matrix.matrix_snippets``); the wgmma one follows ``wg_types`` in the sm_90 table."""
    return {"frag_elementwise": _CORE, "frag_to_a_f16": _to_a("f16"), "frag_to_a_bf16": _to_a("bf16")}


def elementwise_wg_snippets() -> dict[str, Snippet]:
    return {"frag_elementwise_wg": _WG}


def _body(fn: str, math: dict[str, str], args: str) -> str:
    if fn in _BINARY:
        return _BINARY[fn]
    if fn == "neg":
        return "-x"
    return f"{math[fn]}({args})"


def spell(op, ctype, operands: list[Expr], math: dict[str, str], wg: bool) -> tuple[Expr, tuple[str, ...]]:
    """The expression of element-wise fragment op ``op`` (``ctype``: a fragment type's C spelling)."""
    code, rt = op.opcode, op.result.type
    needs = ("frag_elementwise",) + (("frag_elementwise_wg",) if wg else ())
    nt = rt.cols // 16 if rt.role == "acc" else 0
    r = ctype(rt)
    fn = op.attrs.get("fn")
    if code == "frag_unary":
        lam = f"[](float x) {{ return {_body(fn, math, 'x')}; }}"
        return Expr(f"iron_fmap1<{r}, {nt}>({lam}, {operands[0]})"), needs
    if code == "frag_binary":
        lam = f"[](float x, float y) {{ return {_body(fn, math, 'x, y')}; }}"
        return Expr(f"iron_fmap2<{r}, {nt}>({lam}, {operands[0]}, {operands[1]})"), needs
    if code == "frag_reduce":
        acc = op.operands[0].type
        body = "fmaxf(x, y)" if fn == "max" else "x + y"
        lam = f"[](float x, float y) {{ return {body}; }}"
        return Expr(f"iron_freduce<{acc.rows // 16}, {acc.cols // 16}>({lam}, {operands[0]})"), needs
    if code == "frag_fill":
        return Expr(f"iron_ffill<{r}>({operands[0]})"), needs
    if code == "frag_to_a":
        elem, nt_in = rt.elem.name, op.operands[0].type.cols // 16
        return (Expr(f"iron_fto_a_{elem}<{to_a_column(op) // 8}, {nt_in}>({operands[0]})"),
                needs + (f"frag_to_a_{elem}",))
    causal = "true" if op.attrs["causal"] else "false"
    acc, row0, col0, cols, fill = operands
    return Expr(f"iron_fmask<{nt}>({acc}, {row0}, {col0}, {cols}, {causal}, {fill})"), needs


def row_ctype(ty: t.FragType) -> str:
    return f"iron_frag_row<{ty.rows // 16}>"
