"""Typing and lowering of the integer bit builtins (issue 15 point 3): ``umulhi``, ``popcount``, ``clz``, ``ctz`` on
i32/u32 (the result has the operands' common type), ``dp4a`` (i32 or u32 operands taken as their bits, an i32
result) and ``bitcast(v, dtype)`` between the 32-bit types.

Constant operands fold through the interpreter's semantics (``interp.semantics``), so a folded value and a computed
one agree bit for bit.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from ..interp.semantics import eval_pure
from ..ir import types as t
from ..ir.core import Value
from .typing_rules import Const

BIT_BUILTINS = frozenset({"umulhi", "popcount", "clz", "ctz", "dp4a", "bitcast"})
_WORDS = (t.f32, t.i32, t.u32)


def lower_bits(cg, name: str, arg_nodes: list[ast.AST], node: ast.AST, dtype_arg) -> Any:
    """Lower one bit builtin; ``dtype_arg`` reads bitcast's dtype argument (lower_builtins.dtype_arg)."""
    if name == "bitcast":
        value, dst = cg.expr(arg_nodes[0]), dtype_arg(cg, arg_nodes[1])
        return _bitcast(cg, value, dst, arg_nodes[0], node)
    args = [cg.expr(a) for a in arg_nodes]
    for a, n in zip(args, arg_nodes):
        if not (isinstance(a, Const) and isinstance(a.value, int) and not isinstance(a.value, bool)
                or isinstance(a, Value) and a.type in (t.i32, t.u32)):
            raise cg.error(f"{name}() needs i32 or u32 operands, got {cg.describe(a)}", n,
                           "convert with cast(x, iron.i32) or bitcast(x, iron.u32) first")
    if name == "dp4a":
        return _dp4a(cg, args, node)
    ty = cg.common_type(*args) if len(args) == 2 else (args[0].type if isinstance(args[0], Value) else None)
    if ty is None or ty not in (t.i32, t.u32):
        ty = t.i32 if all(-(2**31) <= a.value < 2**31 for a in args if isinstance(a, Const)) else t.u32
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    if all(isinstance(a, Const) for a in args):
        arrays = [np.asarray(a.value).astype(np.int64).astype(ty.np_dtype) for a in args]
        return Const(int(eval_pure(name, arrays, ty, {})))
    operands = [cg.materialize_as(a, ty) for a in args]
    return cg.b.op(name, operands, ty).result


def _dp4a(cg, args: list, node: ast.AST) -> Any:
    """dp4a on the operands' bits: u32 values bitcast to i32, constants wrapped into i32's range."""
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    if all(isinstance(a, Const) for a in args):
        arrays = [np.asarray(a.value).astype(np.int64).astype(np.uint32).view(np.int32) for a in args]
        return Const(int(eval_pure("dp4a", arrays, t.i32, {})))
    operands = []
    for a in args:
        if isinstance(a, Const):
            a = Const(int(np.asarray(a.value).astype(np.int64).astype(np.uint32).view(np.int32)))
            operands.append(cg.materialize_as(a, t.i32))
        else:
            operands.append(a if a.type == t.i32 else cg.b.op("bitcast", [a], t.i32).result)
    return cg.b.op("dp4a", operands, t.i32).result


def _bitcast(cg, value: Any, dst: t.ScalarType, arg_node: ast.AST, node: ast.AST) -> Any:
    if isinstance(value, Const) and not isinstance(value.value, bool):
        src = t.f32 if isinstance(value.value, float) else (t.i32 if -(2**31) <= value.value < 2**31 else t.u32)
    elif isinstance(value, Value) and isinstance(value.type, t.ScalarType):
        src = value.type
    else:
        raise cg.error(f"bitcast() needs a number, got {cg.describe(value)}", arg_node)
    if src not in _WORDS or dst not in _WORDS:
        half = src if src in (t.f16, t.bf16) else dst
        why = ("Iron has no 16-bit integer type to hold its bits" if half in (t.f16, t.bf16)
               else "bitcast works between f32, i32 and u32")
        raise cg.error(f"bitcast from {src} to {dst} is not supported: {why}", node,
                       "bitcast between the 32-bit types f32, i32 and u32")
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    if isinstance(value, Const):
        bits = np.asarray(value.value).astype(src.np_dtype).view(dst.np_dtype)
        return Const(float(bits) if dst.is_float else int(bits)) if np.isfinite(bits) else \
            cg.b.op("bitcast", [cg.materialize_as(value, src)], dst).result
    if src == dst:
        return value
    return cg.b.op("bitcast", [value], dst).result
