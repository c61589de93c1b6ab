"""Lowering of the matrix-fragment builtins (``mma_shape``, ``frag_a``, ``frag_b``, ``frag_acc``, ``mma``,
``frag_store``) to the IR's fragment ops (see ``iron.ir.types.FragType`` and ``MMA_SHAPE``)."""

from __future__ import annotations

import ast
from typing import Any

from ..ir import types as t
from ..ir.core import Value
from .refs import Ref
from .typing_rules import Const

MATRIX_BUILTINS = frozenset({"mma_shape", "frag_a", "frag_b", "frag_acc", "mma", "frag_store", "warpgroup_mma",
                             "warpgroup_wait", "frag_rows", "frag_row_max", "frag_row_sum", "frag_mask",
                             "frag_to_a", "mma_q4", "mv_q4"})
_INPUT_DTYPES = ", ".join(t.MMA_SHAPE)


def lower_matrix(cg, name: str, arg_nodes: list[ast.AST], node: ast.AST) -> Any:
    cg.b.loc = cg.frame.src.loc(node)
    if name == "mma_shape":
        elem = _dtype(cg, arg_nodes[0])
        return tuple(Const(v) for v in t.MMA_SHAPE[elem.name])
    if name in ("frag_a", "frag_b"):
        return _load(cg, name[-1], arg_nodes, node)
    if name == "frag_acc":
        m, n, _ = t.MMA_SHAPE["f16"]
        mt, nt = (_count(cg, a, "frag_acc's tile count") for a in arg_nodes) if len(arg_nodes) == 2 else (
            _count(cg, arg_nodes[0], "frag_acc's tile count") if arg_nodes else 1, 1)
        return cg.b.op("frag_zero", [], t.FragType("acc", m * mt, n * nt, t.f32)).result
    if name == "mma":
        return _mma(cg, [cg.expr(a) for a in arg_nodes], arg_nodes, node)
    if name in ("frag_rows", "frag_row_max", "frag_row_sum", "frag_mask"):
        return _rows(cg, name, arg_nodes, node)
    if name == "warpgroup_mma":
        return _warpgroup_mma(cg, arg_nodes, node)
    if name == "frag_to_a":
        return _to_a(cg, arg_nodes, node)
    if name == "mma_q4":
        return _mma_q4(cg, arg_nodes, node)
    if name == "mv_q4":
        return _mv_q4(cg, arg_nodes, node)
    if name == "warpgroup_wait":
        pending = cg.expr(arg_nodes[0])
        if not (isinstance(pending, Const) and type(pending.value) is int and pending.value >= 0):
            raise cg.error(f"warpgroup_wait's count must be a compile-time int >= 0, got {cg.describe(pending)}",
                           arg_nodes[0])
        cg.b.op("wg_wait", [], None, {"pending": pending.value})
        return None
    return _store(cg, arg_nodes, node)


def is_fragment(v: Any) -> bool:
    return isinstance(v, Value) and isinstance(v.type, t.FragType)


def _elementwise_operand(cg, v: Any, node: ast.AST, what: str) -> Value:
    """An operand of an element-wise fragment op: an accumulator or row fragment as is, a number as f32."""
    if is_fragment(v):
        if v.type.role not in ("acc", "row"):
            raise cg.error(f"{what} works on accumulator and row fragments, not an {v.type.role.upper()}-fragment "
                           f"({v.type})", node, "mma(a, b, acc) turns input fragments into an accumulator")
        return v
    cg.check_number(v, node)
    if isinstance(v, Value) and v.type.is_bool:
        raise cg.error(f"{what} of a fragment with a bool", node)
    return cg.materialize_as(v, t.f32)


def frag_arith(cg, fn: str, args: list[Any], node: ast.AST) -> Value:
    """``fn`` (a frag_binary fn or a one-operand float math op / neg) of fragments and numbers, element by element."""
    what = {"add": "`+`", "sub": "`-`", "mul": "`*`", "div": "`/`"}.get(fn, f"{fn}()")
    xs = [_elementwise_operand(cg, a, node, what) for a in args]
    frags = [x for x in xs if is_fragment(x)]
    accs = [x.type for x in frags if x.type.role == "acc"]
    if len(set(accs)) > 1:
        raise cg.error(f"{what} of accumulators of different shapes: {accs[0]} and {accs[1]}", node)
    if len({x.type.rows for x in frags}) > 1:
        raise cg.error(f"{what} of fragments with different row counts: "
                       f"{' and '.join(str(x.type) for x in frags)}", node,
                       "a row fragment pairs with accumulators of its rows (frag_rows(mt) for frag_acc(mt, nt))")
    ty = accs[0] if accs else frags[0].type
    cg.b.loc = cg.frame.src.loc(node)
    if len(xs) == 1:
        return cg.b.op("frag_unary", xs, ty, {"fn": fn}).result
    return cg.b.op("frag_binary", xs, ty, {"fn": fn}).result


def _rows(cg, name: str, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """frag_rows(mt, value), frag_row_max/sum(acc), frag_mask(acc, row0, col0, cols, causal, fill)."""
    if name == "frag_rows":
        mt = _count(cg, arg_nodes[0], "frag_rows's tile count") if arg_nodes else 1
        value = cg.expr(arg_nodes[1]) if len(arg_nodes) > 1 else Const(0.0)
        v = _elementwise_operand(cg, value, arg_nodes[1] if len(arg_nodes) > 1 else node, "frag_rows")
        if is_fragment(v):
            raise cg.error(f"frag_rows's value must be a number, got {cg.describe(v)}", arg_nodes[1])
        cg.b.loc = cg.frame.src.loc(node)
        return cg.b.op("frag_fill", [v], t.FragType("row", 16 * mt, 1, t.f32)).result
    acc = cg.expr(arg_nodes[0])
    if not (is_fragment(acc) and acc.type.role == "acc"):
        raise cg.error(f"{name} needs an accumulator fragment, got {cg.describe(acc)}", arg_nodes[0])
    if name != "frag_mask":
        cg.b.loc = cg.frame.src.loc(node)
        row = t.FragType("row", acc.type.rows, 1, t.f32)
        return cg.b.op("frag_reduce", [acc], row, {"fn": "max" if name == "frag_row_max" else "add"}).result
    bounds = [cg.materialize_as(_int(cg, n), t.i32) for n in arg_nodes[1:4]]
    flag = cg.expr(arg_nodes[4])
    if not (isinstance(flag, Const) and isinstance(flag.value, bool)):
        raise cg.error("frag_mask's causal must be a compile-time bool (True/False or a constexpr)", arg_nodes[4])
    fill = _elementwise_operand(cg, cg.expr(arg_nodes[5]), arg_nodes[5], "frag_mask")
    if is_fragment(fill):
        raise cg.error(f"frag_mask's fill must be a number, got {cg.describe(fill)}", arg_nodes[5])
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("frag_mask", [acc, *bounds, fill], acc.type, {"causal": flag.value}).result


def _to_a(cg, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """frag_to_a(acc, col0, dtype): 16 columns of a 16-row accumulator as an A fragment of dtype (rounded)."""
    acc = cg.expr(arg_nodes[0])
    if not (is_fragment(acc) and acc.type.role == "acc" and acc.type.rows == 16):
        raise cg.error(f"frag_to_a needs a 16-row accumulator fragment (frag_acc(1, nt)), got {cg.describe(acc)}",
                       arg_nodes[0])
    col0 = _int(cg, arg_nodes[1])
    k = t.MMA_SHAPE["f16"][2]
    if isinstance(col0, Const) and not (col0.value % k == 0 and 0 <= col0.value <= acc.type.cols - k):
        raise cg.error(f"frag_to_a's col0 must be a multiple of {k} from 0 to {acc.type.cols - k} (the accumulator "
                       f"has {acc.type.cols} columns), got {col0.value}", arg_nodes[1])
    elem = _dtype(cg, arg_nodes[2])
    cg.b.loc = cg.frame.src.loc(node)
    col = cg.materialize_as(col0, t.i32)
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("frag_to_a", [acc, col], t.FragType("a", 16, k, elem)).result


def _q4_operands(cg, name: str, vec: str, nodes: tuple[ast.AST, ast.AST, ast.AST, ast.AST], hint: str):
    """The checked (vector or A, words, scales, group) of mma_q4 / mv_q4; ``vec`` names the f16/bf16 operand."""
    x, w, s = (_buffer(cg, n, name) for n in nodes[:3])
    if x.type.elem.name not in t.MMA_SHAPE:
        raise cg.error(f"{name}'s {vec} elements must be {_INPUT_DTYPES}, not {x.type.elem}", nodes[0])
    if w.type.elem != t.u32:
        raise cg.error(f"{name}'s packed weights must be u32 words (8 codes each), not {w.type.elem}", nodes[1])
    if s.type.elem != x.type.elem:
        raise cg.error(f"{name}'s scales must have {vec}'s dtype ({x.type.elem}), not {s.type.elem}", nodes[2], hint)
    group = cg.expr(nodes[3])
    if not (isinstance(group, Const) and type(group.value) is int and group.value > 0 and group.value % 32 == 0):
        raise cg.error(f"{name}'s group must be a compile-time positive multiple of 32, got {cg.describe(group)}",
                       nodes[3], "a quantization group of 32, 64 or 128 codes, as the scales were made")
    return x, w, s, group.value


def _mma_q4(cg, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """mma_q4(a, ai, lda, w, wi, ldw, s, si, lds, acc, group): acc + A (16 x 128) @ the dequantized 4-bit B."""
    a, w, s, group = _q4_operands(cg, "mma_q4", "A", tuple(arg_nodes[i] for i in (0, 3, 6, 10)),
                                  "the products are rounded to A's dtype before the matrix units see them")
    acc = cg.expr(arg_nodes[9])
    if not (is_fragment(acc) and acc.type.role == "acc" and acc.type.rows == 16):
        raise cg.error(f"mma_q4 accumulates into a 16-row accumulator fragment (frag_acc(1, nt)), got "
                       f"{cg.describe(acc)}", arg_nodes[9])
    idx = [cg.index(arg_nodes[i]) for i in (1, 2, 4, 5, 7, 8)]
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("mma_q4", [a, *idx[:2], w, *idx[2:4], s, *idx[4:], acc], acc.type, {"group": group}).result


def _mv_q4(cg, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """mv_q4(w, wi, ldw, s, si, lds, x, xi, acc, group): acc + W (16 mt x 128, 4-bit) @ x in every column."""
    x, w, s, group = _q4_operands(cg, "mv_q4", "x", tuple(arg_nodes[i] for i in (6, 0, 3, 9)),
                                  "the matrix units take the codes and x in that dtype")
    acc = cg.expr(arg_nodes[8])
    if not (is_fragment(acc) and acc.type.role == "acc" and acc.type.cols == 16):
        raise cg.error(f"mv_q4 accumulates into a 16-column accumulator fragment (frag_acc(mt, 1)), got "
                       f"{cg.describe(acc)}", arg_nodes[8])
    idx = [cg.index(arg_nodes[i]) for i in (1, 2, 4, 5, 7)]
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("mv_q4", [w, *idx[:2], s, *idx[2:4], x, idx[4], acc], acc.type, {"group": group}).result


def _int(cg, node: ast.AST) -> Any:
    v = cg.expr(node)
    if isinstance(v, Const) and isinstance(v.value, int) and not isinstance(v.value, bool):
        return v
    if isinstance(v, Value) and isinstance(v.type, t.ScalarType) and v.type.is_int and v.type.bits <= 32:
        return v
    raise cg.error(f"expected an int (i32), got {cg.describe(v)}", node)


def _count(cg, node: ast.AST, what: str) -> int:
    v = cg.expr(node)
    if not (isinstance(v, Const) and isinstance(v.value, int) and not isinstance(v.value, bool) and 1 <= v.value <= 16):
        raise cg.error(f"{what} must be a compile-time int from 1 to 16, got {cg.describe(v)}", node)
    return v.value


def _dtype(cg, node: ast.AST) -> t.ScalarType:
    d = cg.expr(node)
    if isinstance(d, Ref) and isinstance(d.obj, t.ScalarType) and d.obj.name in t.MMA_SHAPE:
        return d.obj
    raise cg.error(f"matrix fragments hold {_INPUT_DTYPES} inputs, not {cg.describe(d)}", node)


def _buffer(cg, node: ast.AST, what: str) -> Value:
    buf = cg.expr(node)
    if not (isinstance(buf, Value) and isinstance(buf.type, t.BufferType) and buf.type.space != "local"):
        raise cg.error(f"{what} needs a buffer or shared array, got {cg.describe(buf)}", node)
    return buf


def _load(cg, role: str, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    buf = _buffer(cg, arg_nodes[0], f"frag_{role}")
    if buf.type.elem.name not in t.MMA_SHAPE:
        raise cg.error(f"frag_{role} reads {_INPUT_DTYPES} elements, not {buf.type.elem}", arg_nodes[0])
    index, ld = cg.index(arg_nodes[1]), cg.index(arg_nodes[2])
    trans = False
    if len(arg_nodes) >= 4:
        flag = cg.expr(arg_nodes[3])
        if not (isinstance(flag, Const) and isinstance(flag.value, bool)):
            raise cg.error("trans must be a compile-time bool (True/False or a constexpr)", arg_nodes[3])
        trans = flag.value
    tiles = _count(cg, arg_nodes[4], f"frag_{role}'s tiles") if len(arg_nodes) == 5 else 1
    m, n, k = t.MMA_SHAPE[buf.type.elem.name]
    rows, cols = (m * tiles, k) if role == "a" else (k, n * tiles)
    cg.b.loc = cg.frame.src.loc(node)
    ty = t.FragType(role, rows, cols, buf.type.elem)
    return cg.b.op("frag_load", [buf, index, ld], ty, {"role": role, "trans": trans}).result


def _mma(cg, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    roles = ("a", "b", "acc")
    for v, role, n in zip(args, roles, arg_nodes):
        if not (isinstance(v, Value) and isinstance(v.type, t.FragType) and v.type.role == role):
            raise cg.error(f"mma's {'first second third'.split()[roles.index(role)]} argument must be a "
                           f"{'frag_a frag_b frag_acc'.split()[roles.index(role)]} fragment, got {cg.describe(v)}", n)
    a, b, c = args
    if a.type.elem != b.type.elem:
        raise cg.error(f"mma of an {a.type.elem} A-fragment with a {b.type.elem} B-fragment", node,
                       "load both from buffers of one dtype")
    if (a.type.rows, b.type.cols) != (c.type.rows, c.type.cols):
        raise cg.error(f"mma shapes disagree: A {a.type.rows}x{a.type.cols}, B {b.type.rows}x{b.type.cols}, "
                       f"accumulator {c.type.rows}x{c.type.cols}", node,
                       "frag_a's tiles must be the accumulator's mt, frag_b's its nt")
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("mma", [a, b, c], c.type).result


def _store(cg, arg_nodes: list[ast.AST], node: ast.AST) -> None:
    buf = _buffer(cg, arg_nodes[0], "frag_store")
    if buf.type.elem not in (t.f32, t.f16, t.bf16):
        raise cg.error(f"frag_store writes f32/f16/bf16 elements, not {buf.type.elem}", arg_nodes[0])
    index, ld = cg.index(arg_nodes[1]), cg.index(arg_nodes[2])
    acc = cg.expr(arg_nodes[3])
    if not (isinstance(acc, Value) and isinstance(acc.type, t.FragType) and acc.type.role == "acc"):
        raise cg.error(f"frag_store's value must be an accumulator fragment, got {cg.describe(acc)}", arg_nodes[3])
    cg.b.loc = cg.frame.src.loc(node)
    full = (acc.type.rows, acc.type.cols)
    bounds = [cg.index(n) for n in arg_nodes[4:6]] + [cg.b.const(v, t.i32) for v in full[len(arg_nodes) - 4:]]
    cg.b.loc = cg.frame.src.loc(node)
    cg.b.op("frag_store", [buf, index, ld, acc, *bounds], None)
    return None


def _warpgroup_mma(cg, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """warpgroup_mma(a, ai, b, bi, ldb, trans_b, acc): both tiles in shared arrays of one f16/bf16 dtype, or A from
    each SIMD group's own 16 x 64 accumulator fragment (``ai`` then 0)."""
    a, b = (cg.expr(arg_nodes[i]) for i in (0, 2))
    in_regs = is_fragment(a)
    if in_regs:
        if not (a.type.role == "acc" and (a.type.rows, a.type.cols) == (16, 64)):
            raise cg.error(f"warpgroup_mma's A fragment must be a 16 x 64 accumulator (frag_acc(1, 4)), got "
                           f"{a.type}", arg_nodes[0])
        ai = cg.expr(arg_nodes[1])
        if not (isinstance(ai, Const) and ai.value == 0 and not isinstance(ai.value, bool)):
            raise cg.error("with A in a fragment, warpgroup_mma's A index must be 0", arg_nodes[1])
    for v, n, what in ((a, arg_nodes[0], "A"), (b, arg_nodes[2], "B"))[int(in_regs):]:
        if not (isinstance(v, Value) and isinstance(v.type, t.BufferType) and v.type.space == "shared"
                and v.type.elem.name in t.MMA_SHAPE):
            raise cg.error(f"warpgroup_mma reads its {what} tile from a shared array of {_INPUT_DTYPES}, got "
                           f"{cg.describe(v)}", n, "stage the tile with async_copy or vstore into shared(dtype, n)")
    if not in_regs and a.type.elem != b.type.elem:
        raise cg.error(f"warpgroup_mma of {a.type.elem} A with {b.type.elem} B", node, "use one dtype for both")
    flag = cg.expr(arg_nodes[5])
    if not (isinstance(flag, Const) and isinstance(flag.value, bool)):
        raise cg.error("trans_b must be a compile-time bool (True/False or a constexpr)", arg_nodes[5])
    acc = cg.expr(arg_nodes[6])
    if not (isinstance(acc, Value) and isinstance(acc.type, t.FragType) and acc.type.role == "acc"
            and acc.type.rows == 16 and acc.type.cols <= 256):
        raise cg.error(f"warpgroup_mma accumulates into a frag_acc(1, nt) with nt <= 16 (16 rows per SIMD group), "
                       f"got {cg.describe(acc)}", arg_nodes[6])
    ai, bi, ldb = (cg.index(arg_nodes[i]) for i in (1, 3, 4))
    cg.b.loc = cg.frame.src.loc(node)
    return cg.b.op("wg_mma", [a, ai, b, bi, ldb, acc], acc.type, {"trans_b": flag.value}).result
