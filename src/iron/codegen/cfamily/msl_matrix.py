"""Matrix fragments on Apple GPUs: Iron's 16x16x16 ``mma`` as 8 x 8 ``simdgroup_matrix`` operations (MSL 2.3+).

A fragment is an array of 8 x 8 SIMD-group matrices: an A fragment of MT tiles (16 MT x 16) is 2 MT x 2 of them
(row block, k block), a B fragment of NT tiles (16 x 16 NT) 2 x 2 NT (k block, column block), an accumulator
(16 MT x 16 NT, f32) 2 MT x 2 NT ``simdgroup_matrix<float, 8, 8>``. ``mma`` is one ``simdgroup_multiply_accumulate``
per (row block, column block, k block), k blocks in order, so the f32 sums run over k = 0..15 in order.

- f16 inputs are ``simdgroup_matrix<half, 8, 8>`` loaded with ``simdgroup_load`` from device or threadgroup memory;
  ``trans`` is its ``transpose_matrix`` flag (the block's origin is folded into the pointer, matrix_origin is 0).
- bf16 inputs are ``simdgroup_matrix<float, 8, 8>``: each lane converts its own two elements (exact: every bf16 is a
  float, and products of two are exact in float) and writes them through ``thread_elements()``. Not
  ``simdgroup_matrix<bfloat, 8, 8>``: which GPU families run it is not documented where we could check, and the
  float path serves MSL 3.0 too (bf16 as ``ushort`` bits there).
- ``frag_store`` writes an 8 x 8 block wholly inside ``rows`` x ``cols`` with ``simdgroup_store`` (f32, and f16
  after converting the block element by element); a block on the edge, and every block of a bf16 destination, is
  written element by element: each lane its own two elements, under the mask, rounded to the destination's type.

The per-element paths rely on which elements a lane holds, which Apple does not document: lane l holds (r, c) and
(r, c + 1) with r = 4 (l / 16) + (l / 2) % 4, c = 4 ((l / 8) % 2) + 2 (l % 2) -- the layout Apple's MLX uses for
Apple GPUs (BlockMMA in mlx/backend/metal/kernels/steel/gemm/mma.h) and the CPU model of Metal implements
(msl_model/include/metal_simdgroup_matrix.h). The helpers that need it take the lane (``simd_lane_id``); a SIMD-group
is 32 lanes on every Apple GPU.
"""

from __future__ import annotations

from ...ir import types as t
from .dialect import Snippet
from .expr import Expr

#: the matrix element type of each fragment element type (bf16 computes in float, see above)
MATRIX_ELEM = {"f16": "half", "bf16": "float"}

_TYPES = Snippet("""\
// Matrix fragments of a SIMD-group as 8 x 8 simdgroup_matrix blocks (codegen/cfamily/msl_matrix.py): A is
// [row block][k block], B [k block][column block], the f32 accumulator [row block][column block].
template <typename T, int MT>
struct iron_frag_a {
    simdgroup_matrix<T, 8, 8> m[2 * MT][2];
};
template <typename T, int NT>
struct iron_frag_b {
    simdgroup_matrix<T, 8, 8> m[2][2 * NT];
};
template <int MT, int NT>
struct iron_frag_acc {
    simdgroup_matrix<float, 8, 8> m[2 * MT][2 * NT];
};
template <int MT, int NT>
static inline iron_frag_acc<MT, NT> iron_frag_acc_zero() {
    iron_frag_acc<MT, NT> c;
    for (int i = 0; i < 2 * MT; ++i) {
        for (int j = 0; j < 2 * NT; ++j) {
            c.m[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
        }
    }
    return c;
}""")

_LAYOUT = Snippet("""\
// The elements lane l holds of an 8 x 8 simdgroup_matrix: (r, c) and (r, c + 1) in thread_elements()[0] and [1]
// (Apple's layout, as MLX uses it; see codegen/cfamily/msl_matrix.py).
static inline int iron_frag_row(uint lane) {
    return (int)(4u * (lane / 16u) + (lane / 2u) % 4u);
}
static inline int iron_frag_col(uint lane) {
    return (int)(4u * ((lane / 8u) % 2u) + 2u * (lane % 2u));
}""")

_MMA = Snippet("""\
template <typename T, int MT, int NT>
static inline iron_frag_acc<MT, NT> iron_frag_mma(iron_frag_a<T, MT> a, iron_frag_b<T, NT> b,
                                                  iron_frag_acc<MT, NT> c) {
    for (int i = 0; i < 2 * MT; ++i) {
        for (int j = 0; j < 2 * NT; ++j) {
            for (int k = 0; k < 2; ++k) {
                simdgroup_multiply_accumulate(c.m[i][j], a.m[i][k], b.m[k][j], c.m[i][j]);
            }
        }
    }
    return c;
}""", needs=("frag_types",))

# f16: simdgroup_load, block (i, k) of A at rows 8i, columns 8k (trans: stored as A^T, so at row 8k, column 8i)
_LOAD_F16 = Snippet("""\
template <int MT, typename P>
static inline iron_frag_a<half, MT> iron_frag_a_load_f16(P p, long index, long ld, bool trans) {
    iron_frag_a<half, MT> a;
    for (int i = 0; i < 2 * MT; ++i) {
        for (int k = 0; k < 2; ++k) {
            const long at = trans ? (8 * k) * ld + 8 * i : (8 * i) * ld + 8 * k;
            simdgroup_load(a.m[i][k], p + index + at, (ulong)ld, ulong2(0), trans);
        }
    }
    return a;
}
template <int NT, typename P>
static inline iron_frag_b<half, NT> iron_frag_b_load_f16(P p, long index, long ld, bool trans) {
    iron_frag_b<half, NT> b;
    for (int k = 0; k < 2; ++k) {
        for (int j = 0; j < 2 * NT; ++j) {
            const long at = trans ? (8 * j) * ld + 8 * k : (8 * k) * ld + 8 * j;
            simdgroup_load(b.m[k][j], p + index + at, (ulong)ld, ulong2(0), trans);
        }
    }
    return b;
}""", needs=("frag_types",))


def _load_bf16(to_float: str) -> Snippet:
    """bf16 into float matrices, each lane its own two elements; ``to_float`` converts one stored bf16."""
    read = to_float.format("p[index + at]")
    return Snippet(f"""\
// bf16 fragments are float matrices: each lane converts its own two elements (exact) into thread_elements().
template <int MT, typename P>
static inline iron_frag_a<float, MT> iron_frag_a_load_bf16(P p, long index, long ld, bool trans, uint lane) {{
    iron_frag_a<float, MT> a;
    for (int i = 0; i < 2 * MT; ++i) {{
        for (int k = 0; k < 2; ++k) {{
            for (int e = 0; e < 2; ++e) {{
                const long row = 8 * i + iron_frag_row(lane), col = 8 * k + iron_frag_col(lane) + e;
                const long at = trans ? col * ld + row : row * ld + col;
                a.m[i][k].thread_elements()[e] = {read};
            }}
        }}
    }}
    return a;
}}
template <int NT, typename P>
static inline iron_frag_b<float, NT> iron_frag_b_load_bf16(P p, long index, long ld, bool trans, uint lane) {{
    iron_frag_b<float, NT> b;
    for (int k = 0; k < 2; ++k) {{
        for (int j = 0; j < 2 * NT; ++j) {{
            for (int e = 0; e < 2; ++e) {{
                // element (k, n) of B is at row k, column n (trans: B stored as B^T), as for A
                const long row = 8 * k + iron_frag_row(lane), col = 8 * j + iron_frag_col(lane) + e;
                const long at = trans ? col * ld + row : row * ld + col;
                b.m[k][j].thread_elements()[e] = {read};
            }}
        }}
    }}
    return b;
}}""", needs=("frag_types", "frag_layout"))


def _store(elem: str, ctype: str, convert: str, needs: tuple[str, ...] = ()) -> Snippet:
    """frag_store into ``ctype`` elements; ``convert`` rounds one float. f32 and f16 store whole blocks with
    simdgroup_store (f16 after converting the block lane by lane: both matrices have the same layout)."""
    if elem == "f32":
        whole = "simdgroup_store(c.m[i][j], p + index + (8 * i) * ld + 8 * j, (ulong)ld);"
    elif elem == "f16":
        whole = """simdgroup_matrix<half, 8, 8> h;
                h.thread_elements()[0] = static_cast<half>(c.m[i][j].thread_elements()[0]);
                h.thread_elements()[1] = static_cast<half>(c.m[i][j].thread_elements()[1]);
                simdgroup_store(h, p + index + (8 * i) * ld + 8 * j, (ulong)ld);"""
    else:
        whole = ""
    element = f"""const int r = 8 * i + iron_frag_row(lane), n = 8 * j + iron_frag_col(lane);
                for (int e = 0; e < 2; ++e) {{
                    if (r < rows && n + e < cols) {{
                        p[index + r * ld + n + e] = {convert.format("c.m[i][j].thread_elements()[e]")};
                    }}
                }}"""
    if whole:
        body = f"""if (8 * i + 8 <= rows && 8 * j + 8 <= cols) {{  // the same branch in every lane
                {whole}
            }} else {{
                {element}
            }}"""
    else:
        body = element.replace("\n    ", "\n")
    return Snippet(f"""\
template <int MT, int NT, typename P>
static inline void iron_frag_store_{elem}(P p, long index, long ld, iron_frag_acc<MT, NT> c, int rows, int cols,
{" " * (len("static inline void iron_frag_store_(") + len(elem))}uint lane) {{
    for (int i = 0; i < 2 * MT; ++i) {{
        for (int j = 0; j < 2 * NT; ++j) {{
            {body}
        }}
    }}
}}""", needs=("frag_types", "frag_layout") + needs)


def matrix_snippets(bf16_ctype: str = "bfloat") -> dict[str, Snippet]:
    """The fragment helpers for a dialect whose bf16 is ``bf16_ctype`` (``bfloat``, or ``ushort`` bits before MSL
    3.1, whose conversions are the ``bf16_bits`` snippet)."""
    if bf16_ctype == "ushort":
        to_float, from_float, bits = "iron_bf16_to_f32({})", "iron_f32_to_bf16({})", ("bf16_bits",)
    else:
        to_float, from_float, bits = "static_cast<float>({})", "static_cast<bfloat>({})", ()
    load_bf16 = _load_bf16(to_float)
    return {
        "frag_types": _TYPES, "frag_layout": _LAYOUT, "frag_mma": _MMA,
        "frag_load_f16": _LOAD_F16,
        "frag_load_bf16": Snippet(load_bf16.text, needs=load_bf16.needs + bits),
        "frag_store_f32": _store("f32", "float", "{}"),
        "frag_store_f16": _store("f16", "half", "static_cast<half>({})"),
        "frag_store_bf16": _store("bf16", bf16_ctype, from_float, bits),
    }


#: snippets whose helpers take the lane: the kernel then declares ``simd_lane_id`` (``MslDialect.attribute_params``)
LANE_SNIPPETS = frozenset({"frag_load_bf16", "frag_store_f32", "frag_store_f16", "frag_store_bf16"})


class MslMatrix:
    """How the C-family printer spells fragment types and ops in MSL (``CDialect.matrix``; the interface of
    ``cuda_matrix.CudaMatrix``)."""

    def ctype(self, ty: t.FragType) -> tuple[str, tuple[str, ...]]:
        if ty.role == "a":
            return f"iron_frag_a<{MATRIX_ELEM[ty.elem.name]}, {ty.rows // 16}>", ("frag_types",)
        if ty.role == "b":
            return f"iron_frag_b<{MATRIX_ELEM[ty.elem.name]}, {ty.cols // 16}>", ("frag_types",)
        return f"iron_frag_acc<{ty.rows // 16}, {ty.cols // 16}>", ("frag_types",)

    def zero(self, ty: t.FragType) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_frag_acc_zero<{ty.rows // 16}, {ty.cols // 16}>()"), ("frag_types",)

    def load(self, ty: t.FragType, buf: str, space: str, index: Expr, ld: Expr, trans: bool
             ) -> tuple[Expr, tuple[str, ...]]:
        e, tiles = ty.elem.name, (ty.rows if ty.role == "a" else ty.cols) // 16
        lane = ", simd_lane_id" if e == "bf16" else ""
        text = f"iron_frag_{ty.role}_load_{e}<{tiles}>({buf}, {index}, {ld}, {'true' if trans else 'false'}{lane})"
        return Expr(text), (f"frag_load_{e}",)

    def mma(self, elem: t.ScalarType, a: Expr, b: Expr, c: Expr) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_frag_mma({a}, {b}, {c})"), ("frag_mma",)

    def store(self, elem: t.ScalarType, buf: str, index: Expr, ld: Expr, acc: Expr, rows: Expr, cols: Expr
              ) -> tuple[str, tuple[str, ...]]:
        text = f"iron_frag_store_{elem.name}({buf}, {index}, {ld}, {acc}, {rows}, {cols}, simd_lane_id);"
        return text, (f"frag_store_{elem.name}",)
