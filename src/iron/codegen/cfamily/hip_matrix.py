"""Matrix fragments on AMD wave64 (CDNA): a 16x16x16 ``mma`` is one MFMA per pair of 16 x 16 tiles.

On gfx90a (CDNA2) and later CDNA, ``mma`` is ``__builtin_amdgcn_mfma_f32_16x16x16f16`` (f16) or
``__builtin_amdgcn_mfma_f32_16x16x16bf16_1k`` (bf16), f32 accumulation. A fragment of MT (NT) tiles of 16 rows
(columns) holds, per lane, MT (NT) vectors of four 16-bit elements for A (B) and MT x NT vectors of four floats
for the accumulator, in the instruction's own layout (``LAYOUT``): lane ``l``, item ``i`` holds
A[l % 16][4 (l / 16) + i], B[4 (l / 16) + i][l % 16] and C/D[4 (l / 16) + i][l % 16].

Sources for the layout (the three agree):
- AMD's matrix instruction calculator (github.com/ROCm/amd_matrix_instruction_calculator, commit 2ef9189):
  ``matrix_calculator.py -a CDNA2 -i v_mfma_f32_16x16x16f16 -d`` (and ``v_mfma_f32_16x16x16bf16_1k``) prints
  "A i: (lane % 16), A k: 4 * floor(lane / 16) + 2 * GPR_num + floor(GPR_bits / 16)", "B j: (lane % 16)", B k the
  same, "C or D i: 4 * floor(lane / 16) + (GPR_num % 4), C or D j: (lane % 16)". Its register layouts are identical
  for both instructions and for CDNA1 (f16) and CDNA3 (``v_mfma_f32_16x16x16_f16``/``_bf16``);
  tests/codegen_hip/data/mfma_16x16x16_layout.csv is its output, which the tests check ``LAYOUT`` against.
- AMD lab notes, "AMD matrix cores" (gpuopen.com/learn/amd-lab-notes/amd-lab-notes-matrix-cores-readme;
  github.com/amd/amd-lab-notes, matrix-cores/src/mfma_fp32_16x16x16fp16.cpp): a[i] = A[x][i + 4 y],
  b[i] = B[i + 4 y][x], d[i] = D[i + 4 y][x] for the wavefront's lane x + 16 y.
- The AMD CDNA2 ISA guide (section 7, "Matrix Arithmetic Instructions"): a 16-bit operand of four elements is two
  VGPRs, element 2j + h in bits [16h + 15 : 16h] of VGPR j -- item i of an ``ext_vector_type(4)`` of 16-bit values.

Loads (from global or shared memory: a generic pointer on AMD) address each element; when a lane's four items are
consecutive in memory (A stored row-major, B stored as B^T) and the index and leading dimension are multiples of 4,
they are one aligned 8-byte load. ``frag_store`` writes each element inside ``rows`` x ``cols``.

The wave64 source is the same for every gfx9 processor (the wavefront decides the source, see hip.py), so the
MFMA is guarded by the processor macros of CDNA2+ (``MFMA_PROCESSORS``); elsewhere (GCN gfx900/gfx906, CDNA1 gfx908,
whose bf16 MFMA is another instruction) ``mma`` computes the same layout with shuffles and fmas in k order.
"""

from __future__ import annotations

import re

from ...ir import types as t
from .dialect import Snippet
from .expr import Expr

LANES = 64
#: Where the 4 items of a lane sit in a 16 x 16 tile, for V_MFMA_F32_16X16X16F16 and _BF16_1K on wave64: item
#: ``i`` of lane ``lane`` holds element (row, col) of A (M x K), B (K x N) and C/D (M x N). The expressions mean the
#: same in C and in Python (non-negative ints; ``+ * & >>``): the C helpers below are printed from them and
#: tests/codegen_hip/test_hip_mfma_model.py evaluates them, so the test checks the printed layout, not a copy.
LAYOUT: dict[str, tuple[str, str]] = {
    "a": ("lane & 15", "4 * (lane >> 4) + i"),
    "b": ("4 * (lane >> 4) + i", "lane & 15"),
    "acc": ("4 * (lane >> 4) + i", "lane & 15"),
}
#: The inverse of ``LAYOUT`` for A and B: element (row, col) is item ``item`` of lane ``lane`` (used where there
#: is no MFMA, to fetch an element with a shuffle; the item must not depend on the reader's lane).
HOLDER: dict[str, tuple[str, str]] = {
    "a": ("row + 16 * (col >> 2)", "col & 3"),
    "b": ("col + 16 * (row >> 2)", "row & 3"),
}
#: processors with V_MFMA_F32_16X16X16F16 and V_MFMA_F32_16X16X16BF16_1K (CDNA2, CDNA3, CDNA4)
MFMA_PROCESSORS = ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
_HAS_MFMA = " || ".join(f"defined(__{p}__)" for p in MFMA_PROCESSORS)
_BUILTIN = {"f16": "__builtin_amdgcn_mfma_f32_16x16x16f16", "bf16": "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k"}
_Q = "__device__ __forceinline__"


def evaluate(expr: str, **names: int) -> int:
    """A ``LAYOUT``/``HOLDER`` expression for the given names (``lane``, ``i``, ``row``, ``col``)."""
    return eval(expr, {"__builtins__": {}}, names)  # one of this module's constant expressions


def element(role: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) in its 16 x 16 tile of the element that item ``i`` of ``lane`` holds in a fragment of ``role``."""
    row, col = LAYOUT[role]
    return evaluate(row, lane=lane, i=i), evaluate(col, lane=lane, i=i)


def holder(role: str, row: int, col: int) -> tuple[int, int]:
    """(lane, item) that holds element (row, col) of an A or B tile."""
    lane, item = HOLDER[role]
    return evaluate(lane, row=row, col=col), evaluate(item, row=row, col=col)


def _c(expr: str, **names: str) -> str:
    """``expr`` as C, its variables renamed (each replacement parenthesised)."""
    return re.sub(r"\b[a-z]+\b", lambda m: f"({names[m.group()]})" if m.group() in names else m.group(), expr)


_TYPES = Snippet(f"""\
// Matrix fragments of a wavefront (64 lanes), MT (NT) tiles of 16 rows (columns), in the layout of AMD's
// V_MFMA_F32_16X16X16F16 / _BF16_1K (see codegen/cfamily/hip_matrix.py): lane l holds 4 elements of each A tile
// (row l % 16), of each B tile (column l % 16) and 4 floats of each accumulator tile (column l % 16).
typedef short iron_mfma_v4s __attribute__((ext_vector_type(4)));
typedef _Float16 iron_mfma_v4h __attribute__((ext_vector_type(4)));
typedef float iron_mfma_v4f __attribute__((ext_vector_type(4)));
template <int MT> struct iron_mfma_a {{ iron_mfma_v4s x[MT]; }};
template <int NT> struct iron_mfma_b {{ iron_mfma_v4s x[NT]; }};
template <int MT, int NT> struct iron_mfma_acc {{ iron_mfma_v4f x[MT * NT]; }};
{_Q} int iron_mfma_lane() {{ return iron_local_linear() & {LANES - 1}; }}""", needs=("local_linear",))


def _load(role: str, elem: str) -> Snippet:
    """frag_a / frag_b: item i of tile t is element (row, col) of the operand by ``LAYOUT`` (tile t moves A's rows,
    B's columns), stored at index + row * ld + col (trans: index + col * ld + row)."""
    row, col = LAYOUT[role]
    tiles = "MT" if role == "a" else "NT"
    row = f"16 * t + ({row})" if role == "a" else row
    col = col if role == "a" else f"16 * t + ({col})"
    # the 4 items are consecutive in memory when i moves along a stored row: A's k (row-major), B's k (B^T)
    along = "!trans" if re.search(r"\bi\b", col) else "trans"
    return Snippet(f"""\
template <int {tiles}>
{_Q} iron_mfma_{role}<{tiles}> iron_mfma_{role}_load_{elem}(const iron_{elem}* p, long long index, long long ld,
                                                   bool trans) {{
    const int lane = iron_mfma_lane();
    iron_mfma_{role}<{tiles}> f;
#pragma unroll
    for (int t = 0; t < {tiles}; ++t) {{
        if ({along} && ((index | ld) & 3) == 0) {{  // one aligned 8-byte run
            const int i = 0;
            const long long r = {row}, c = {col};
            __builtin_memcpy(&f.x[t], __builtin_assume_aligned(p + index + (trans ? c * ld + r : r * ld + c), 8), 8);
            continue;
        }}
#pragma unroll
        for (int i = 0; i < 4; ++i) {{
            const long long r = {row}, c = {col};
            f.x[t][i] = (short)p[index + (trans ? c * ld + r : r * ld + c)].bits;
        }}
    }}
    return f;
}}""", needs=("mfma_types", elem))


def _mma(elem: str) -> Snippet:
    row, col = LAYOUT["acc"]
    a_lane, a_item = (_c(e, row="r", col="k") for e in HOLDER["a"])
    b_lane, b_item = (_c(e, row="k", col="c") for e in HOLDER["b"])
    return Snippet(f"""\
{_Q} float iron_mfma_to_f32_{elem}(int bits) {{
    iron_{elem} h;
    h.bits = (unsigned short)bits;
    return iron_{elem}_to_f32(h);
}}
template <int MT, int NT>
{_Q} iron_mfma_acc<MT, NT> iron_mfma_mma_{elem}(iron_mfma_a<MT> a, iron_mfma_b<NT> b, iron_mfma_acc<MT, NT> acc) {{
#if {_HAS_MFMA}
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int n = 0; n < NT; ++n) {{
            acc.x[t * NT + n] = {_BUILTIN[elem]}({"(iron_mfma_v4h)" if elem == "f16" else ""}a.x[t],
                {"(iron_mfma_v4h)" if elem == "f16" else ""}b.x[n], acc.x[t * NT + n], 0, 0, 0);
        }}
    }}
#else
    // no MFMA on this processor: each item of the accumulator gathers its row of A and column of B from the lanes
    // that hold them (__shfl) and adds the 16 products in k order (fmaf). Left to the compiler to unroll (the f16
    // conversions make full unrolling too large for it).
    const int lane = iron_mfma_lane();
    for (int t = 0; t < MT; ++t) {{
        for (int n = 0; n < NT; ++n) {{
            for (int i = 0; i < 4; ++i) {{
                const int r = {row}, c = {col};
                float s = acc.x[t * NT + n][i];
                for (int k = 0; k < 16; ++k) {{
                    const float x = iron_mfma_to_f32_{elem}(__shfl((int)a.x[t][{a_item}], {a_lane}));
                    const float y = iron_mfma_to_f32_{elem}(__shfl((int)b.x[n][{b_item}], {b_lane}));
                    s = fmaf(x, y, s);
                }}
                acc.x[t * NT + n][i] = s;
            }}
        }}
    }}
#endif
    return acc;
}}""", needs=("mfma_types", elem))


def _store(elem: str) -> Snippet:
    row, col = LAYOUT["acc"]
    ctype = "float" if elem == "f32" else f"iron_{elem}"
    convert = "v" if elem == "f32" else f"iron_f32_to_{elem}(v)"
    return Snippet(f"""\
template <int MT, int NT>
{_Q} void iron_mfma_store_{elem}({ctype}* p, long long index, long long ld, iron_mfma_acc<MT, NT> acc, int rows,
                                   int cols) {{
    const int lane = iron_mfma_lane();
#pragma unroll
    for (int t = 0; t < MT; ++t) {{
#pragma unroll
        for (int n = 0; n < NT; ++n) {{
#pragma unroll
            for (int i = 0; i < 4; ++i) {{
                const long long r = 16 * t + ({row}), c = 16 * n + ({col});
                const float v = acc.x[t * NT + n][i];
                if (r < rows && c < cols) p[index + r * ld + c] = {convert};
            }}
        }}
    }}
}}""", needs=("mfma_types",) + (() if elem == "f32" else (elem,)))


def mfma_snippets() -> dict[str, Snippet]:
    """The prelude snippets of ``HipMatrix``, in dependency order."""
    out = {"mfma_types": _TYPES, "mfma_store_f32": _store("f32")}
    for elem in ("f16", "bf16"):
        out[f"mfma_load_a_{elem}"] = _load("a", elem)
        out[f"mfma_load_b_{elem}"] = _load("b", elem)
        out[f"mfma_mma_{elem}"] = _mma(elem)
        out[f"mfma_store_{elem}"] = _store(elem)
    return out


class HipMatrix:
    """How the C-family printer spells fragment types and ops on AMD wave64 (``CDialect.matrix``; the interface of
    ``cuda_matrix.CudaMatrix``)."""

    #: warpgroup_mma is expanded into fragment ops here (no wgmma); fragment variables start zeroed
    wgmma = False
    var_init = "{}"

    def ctype(self, ty: t.FragType) -> tuple[str, tuple[str, ...]]:
        if ty.role == "a":
            return f"iron_mfma_a<{ty.rows // 16}>", ("mfma_types",)
        if ty.role == "b":
            return f"iron_mfma_b<{ty.cols // 16}>", ("mfma_types",)
        return f"iron_mfma_acc<{ty.rows // 16}, {ty.cols // 16}>", ("mfma_types",)

    def zero(self, ty: t.FragType) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"{self.ctype(ty)[0]}{{}}"), ("mfma_types",)

    def load(self, ty: t.FragType, buf: str, space: str, index: Expr, ld: Expr, trans: bool
             ) -> tuple[Expr, tuple[str, ...]]:
        e, tiles = ty.elem.name, (ty.rows if ty.role == "a" else ty.cols) // 16
        text = f"iron_mfma_{ty.role}_load_{e}<{tiles}>({buf}, {index}, {ld}, {'true' if trans else 'false'})"
        return Expr(text), (f"mfma_load_{ty.role}_{e}",)

    def mma(self, elem: t.ScalarType, a: Expr, b: Expr, c: Expr) -> tuple[Expr, tuple[str, ...]]:
        return Expr(f"iron_mfma_mma_{elem.name}({a}, {b}, {c})"), (f"mfma_mma_{elem.name}",)

    def store(self, elem: t.ScalarType, buf: str, index: Expr, ld: Expr, acc: Expr, rows: Expr, cols: Expr
              ) -> tuple[str, tuple[str, ...]]:
        text = f"iron_mfma_store_{elem.name}({buf}, {index}, {ld}, {acc}, {rows}, {cols});"
        return text, (f"mfma_store_{elem.name}",)
