"""Lowering of the tile copies (``tile_load``, ``tile_commit``, ``tile_wait``: ``iron.ir.ops``' table has their
semantics) to the IR ops of the same names.

``tile_load``'s view -- (rows, cols, ld, bstride) -- must be known to the host before the kernel runs (NVIDIA's bulk
tensor copy engine reads it from a descriptor made at launch), so each of the four is a kernel parameter (an int
scalar, never reassigned) or a compile-time constant; ``attrs["view"]`` records which: ``("param", name)`` or
``("const", value)``. Every index operand is an i32.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir import types as t
from ..ir.core import Value
from .typing_rules import Const

TILE_BUILTINS = frozenset({"tile_load", "tile_commit", "tile_wait"})
_VIEW = ("rows", "cols", "ld", "bstride")
_AT = ("batch", "row", "col")


def lower_tile(cg, name: str, arg_nodes: list[ast.AST], node: ast.AST) -> Any:
    if name in ("tile_commit", "tile_wait"):
        stage = _int(cg, arg_nodes[0], f"{name}'s stage")
        cg.b.loc = cg.frame.src.loc(node)
        cg.b.op(name, [stage], None)
        return None
    dst_node, j_node, ld_node, src_node, view_node, at_node, rows_node, cols_node, stage_node = arg_nodes
    dst = cg.expr(dst_node)
    if not (isinstance(dst, Value) and isinstance(dst.type, t.BufferType) and dst.type.space == "shared"):
        raise cg.error(f"tile_load copies into a shared array, not {cg.describe(dst)}", dst_node)
    src = cg.expr(src_node)
    if not (isinstance(src, Value) and isinstance(src.type, t.BufferType) and src.type.space == "global"):
        raise cg.error(f"tile_load copies from a buffer (global memory), not {cg.describe(src)}", src_node)
    elem = src.type.elem
    if elem != dst.type.elem:
        raise cg.error(f"tile_load from a buffer of {elem} into a shared array of {dst.type.elem}", node)
    if elem.is_narrow or elem.is_wide or elem.is_bool:
        raise cg.error(f"tile_load of {elem} elements is not supported", node, "tiles of f32/f16/bf16/i32/u32")
    rows_box = _constant(cg, rows_node, "tile_load's ROWS")
    cols_box = _constant(cg, cols_node, "tile_load's COLS")
    dst_ld = _constant(cg, ld_node, "tile_load's DST_LD")
    if rows_box % 8 or not 8 <= rows_box <= 256:
        raise cg.error(f"tile_load's ROWS must be a multiple of 8 from 8 to 256, not {rows_box}", rows_node)
    if (cols_box * elem.itemsize) % 16 or not 0 < cols_box <= 256:
        raise cg.error(f"tile_load's COLS ({cols_box} x {elem}) must be a multiple of 16 bytes, at most 256 "
                       "elements", cols_node)
    if dst_ld < cols_box:
        raise cg.error(f"tile_load's DST_LD ({dst_ld}) is less than COLS ({cols_box})", ld_node)
    view_vals, view = _view(cg, view_node)
    at = _tuple(cg, at_node, 3, "(batch, row, col)")
    j = _as_i32(cg, cg.index(j_node))
    stage = _int(cg, stage_node, "tile_load's stage")
    cg.b.loc = cg.frame.src.loc(node)
    cg.b.op("tile_load", [dst, j, src, *view_vals, *(_int(cg, a, f"tile_load's {n}") for a, n in zip(at, _AT)),
                          stage], None,
            {"rows_box": rows_box, "cols_box": cols_box, "dst_ld": dst_ld, "view": view})
    return None


def _view(cg, node: ast.AST) -> tuple[list[Value], tuple]:
    """The view's four i32 values and their host-side description."""
    values, described = [], []
    for elt, what in zip(_tuple(cg, node, 4, "(rows, cols, ld, bstride)"), _VIEW):
        v = cg.expr(elt)
        if isinstance(v, Const) and type(v.value) is int and v.value >= 0:
            described.append(("const", v.value))
            values.append(cg.materialize(v, t.i32))
        elif (isinstance(v, Value) and v.owner is cg.body and v.type == t.i32 and v.name is not None
              and any(a is v for a in cg.body.args)):
            described.append(("param", v.name))
            values.append(v)
        else:
            raise cg.error(f"tile_load's {what} must be an i32 parameter of the kernel or a compile-time int, not "
                           f"{cg.describe(v)}", elt,
                           "the copy engine's descriptor of the view is made on the host at launch")
    return values, tuple(described)


def _tuple(cg, node: ast.AST, n: int, shape: str) -> list[ast.AST]:
    if not isinstance(node, ast.Tuple) or len(node.elts) != n:
        raise cg.error(f"tile_load takes {shape} as a tuple written in the call", node)
    return list(node.elts)


def _constant(cg, node: ast.AST, what: str) -> int:
    v = cg.expr(node)
    if not (isinstance(v, Const) and type(v.value) is int and v.value > 0):
        raise cg.error(f"{what} must be a compile-time positive int (a literal or constexpr), not {cg.describe(v)}",
                       node)
    return v.value


def _int(cg, node: ast.AST, what: str) -> Value:
    v = cg.expr(node)
    if isinstance(v, Const) and type(v.value) is int:
        return cg.materialize(v, t.i32)
    if isinstance(v, Value) and isinstance(v.type, t.ScalarType) and v.type.is_int:
        return _as_i32(cg, v)
    raise cg.error(f"{what} must be an integer, not {cg.describe(v)}", node)


def _as_i32(cg, v: Value) -> Value:
    return v if v.type == t.i32 else cg.b.cast(v, t.i32)
