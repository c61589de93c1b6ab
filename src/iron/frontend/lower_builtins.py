"""Typing and lowering of builtin calls (the table in ``iron.lang.builtins``) and of the Python builtins a kernel
may use (``min``, ``max``, ``abs``, ``int``, ``float``, ``bool``; ``float("inf")`` is a constant)."""

from __future__ import annotations

import ast
import builtins as py_builtins
import math
from typing import Any

import numpy as np

from ..ir import ops as O
from ..ir import types as t
from ..ir.core import Value
from .lower_bits import BIT_BUILTINS, lower_bits
from .lower_matrix import MATRIX_BUILTINS, frag_arith, is_fragment, lower_matrix
from .lower_tile import TILE_BUILTINS, lower_tile
from .refs import Ref
from .typing_rules import Const, compute_type, promote

#: (fewest, most) arguments of each builtin, from the one builtin table
ARITY = {b.name: b.arity for b in O.BUILTINS.values()}


def lower_builtin(cg, name: str, node: ast.Call, dtype: t.ScalarType | None = None) -> Any:
    """Lower ``name(...)``; ``dtype`` is set when the call was ``iron.f16(x)`` (a cast)."""
    if dtype is not None:
        if len(node.args) != 1 or node.keywords:
            raise cg.error(f"{dtype}(x) takes exactly one argument", node)
        return cast_to(cg, cg.expr(node.args[0]), dtype, node)
    if name == "static_range":
        raise cg.error("static_range(...) can only be the iterable of a for loop", node)
    arg_nodes = _arguments(cg, name, node)
    if name == "cast":
        value = cg.expr(arg_nodes[0])
        return cast_to(cg, value, dtype_arg(cg, arg_nodes[1]), node)
    if name in ("shared", "local_array"):
        return lower_array(cg, "shared" if name == "shared" else "local", arg_nodes, node)
    if name == "vload":
        return lower_vload(cg, arg_nodes, node)
    if name in MATRIX_BUILTINS:
        return lower_matrix(cg, name, arg_nodes, node)
    if name == "vstore":
        return lower_vstore(cg, arg_nodes, node)
    if name in ("async_copy", "async_commit", "async_wait"):
        return lower_async(cg, name, arg_nodes, node)
    if name in TILE_BUILTINS:
        return lower_tile(cg, name, arg_nodes, node)
    if name in BIT_BUILTINS:
        return lower_bits(cg, name, arg_nodes, node, dtype_arg)
    args = [cg.expr(a) for a in arg_nodes]
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    return lower_values(cg, name, args, arg_nodes, node)


def _arguments(cg, name: str, node: ast.Call) -> list[ast.AST]:
    """The call's argument nodes in positional order (the keywords a builtin takes folded in), arity checked."""
    lo, hi = ARITY[name]
    kwargs = {k.arg: k.value for k in node.keywords}
    if name in O.THREAD_AXIS and set(kwargs) <= {"axis"} and kwargs:
        if node.args:
            raise cg.error("axis given twice", node)
        arg_nodes = [kwargs["axis"]]
    elif name in ("frag_a", "frag_b") and set(kwargs) <= {"trans", "tiles"} and len(node.args) + len(kwargs) <= 5:
        # positional (t, i, ld[, trans[, tiles]]) or keywords; a missing trans is False, a missing tiles 1
        arg_nodes = list(node.args)
        if "trans" in kwargs:
            if len(arg_nodes) > 3:
                raise cg.error("trans given twice", node)
            arg_nodes.append(kwargs["trans"])
        if "tiles" in kwargs:
            if len(arg_nodes) > 4:
                raise cg.error("tiles given twice", node)
            if len(arg_nodes) == 3:
                arg_nodes.append(ast.copy_location(ast.Constant(False), node))
            arg_nodes.append(kwargs["tiles"])
    elif kwargs:
        raise cg.error(f"{name}() takes no keyword arguments", node, f"signature: {_sig(name)}")
    else:
        arg_nodes = list(node.args)
    if not lo <= len(arg_nodes) <= hi:
        raise cg.error(f"{name}() takes {_count(lo, hi)} argument{'s' if hi != 1 else ''}, got {len(arg_nodes)}",
                       node, f"signature: {_sig(name)}")
    return arg_nodes


def lower_values(cg, name: str, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Any:
    """The builtins whose arguments are ordinary values (evaluated already)."""
    if name in O.THREAD_AXIS:
        axis = args[0] if args else Const(0)
        if not isinstance(axis, Const) or axis.value not in (0, 1, 2) or isinstance(axis.value, bool):
            raise cg.error(f"{name}() axis must be the literal 0, 1 or 2", node)
        return cg.b.thread(name, axis.value)
    if name == "simd_size":
        # issue 15: a variant compiled for one SIMD width (and keyed by it) reads simd_size() as a constant
        cg.simd_width_used = True
        if getattr(cg, "simd_width", None):
            return Const(cg.simd_width)
    if name in ("simd_lane", "simd_group", "simd_size"):
        return cg.b.thread(name)
    if name in ("barrier", "fence"):
        cg.b.op(name)
        return None
    if name in ("load", "store") or name in O.ATOMICS:
        return lower_memory(cg, name, args, arg_nodes, node)
    if name in O.FLOAT_MATH:
        return lower_math(cg, name, args, arg_nodes, node)
    if name == "abs":
        return frag_arith(cg, "abs", args, node) if is_fragment(args[0]) else lower_abs(cg, args[0], node)
    if name in ("min", "max"):
        return lower_minmax(cg, name, args, node)
    if name == "fma":
        return lower_fma(cg, args, node)
    if name == "where":
        cond = cg.truth(args[0], arg_nodes[0])
        for a in args[1:]:
            cg.check_number(a, node)
        if isinstance(cond, Const):
            return args[1] if cond.value else args[2]
        ty = cg.arms_type(args[1], args[2])  # bool when both arms are
        return cg.b.select(cond, cg.materialize_as(args[1], ty), cg.materialize_as(args[2], ty))
    if name in O.SIMD_REDUCE or name in O.SIMD_EXCHANGE:
        return lower_simd(cg, name, args, arg_nodes, node)
    if name in O.SIMD_VOTE or name in O.SIMD_SCAN:
        return lower_simd_lanes(cg, name, args, arg_nodes, node)
    raise cg.error(f"builtin {name}() is not implemented", node)


def lower_fma(cg, args: list[Any], node: ast.AST) -> Any:
    for a in args:
        cg.check_number(a, node)
    if all(isinstance(a, Const) for a in args):
        return Const(float(args[0].value) * args[1].value + args[2].value)
    tys = [a.type for a in args if isinstance(a, Value)]
    ty = tys[0]
    for other in tys[1:]:
        ty = promote(ty, other, cg.native_half)
    ty = compute_type(ty, cg.native_half) if ty.is_float else t.f32
    return cg.b.op("fma", [cg.materialize_as(a, ty) for a in args], ty).result


def _sig(name: str) -> str:
    from ..lang.builtins import BUILTINS

    return BUILTINS[name].signature


def _count(lo: int, hi: int) -> str:
    if lo == hi:
        return str(lo)
    if hi >= 99:
        return f"at least {lo}"
    return f"{lo} to {hi}"


def dtype_arg(cg, node: ast.AST) -> t.ScalarType:
    d = cg.expr(node)
    if isinstance(d, Ref) and isinstance(d.obj, t.ScalarType):
        return d.obj
    raise cg.error(f"expected a dtype (iron.f32, iron.i32, iron.u32, iron.i64, iron.u8, ..., T), got "
                   f"{cg.describe(d)}", node)


def cast_to(cg, value: Any, ty: t.ScalarType, node: ast.AST) -> Any:
    if isinstance(value, tuple) or not (isinstance(value, Const) or isinstance(value, Value)
                                        and isinstance(value.type, t.ScalarType)):
        raise cg.error(f"cannot cast {cg.describe(value)} to {ty}", node)
    if isinstance(value, Const):
        v = value.value
        if ty.is_bool:
            return Const(bool(v))
        if ty.is_int:
            iv = int(v) if not isinstance(v, float) or math.isfinite(v) else 0
            if isinstance(v, float):  # saturate, as the runtime cast does (8-bit targets: to i32, then wrap)
                lo, hi = t.INT_RANGE[ty.name if not ty.is_narrow else "i32"]
                iv = min(max(iv, lo), hi)
            iv = wrap_int(iv, ty)
            return cg.b.const(iv, t.i32 if ty.is_narrow else ty)
        return cg.b.const(cg.const_for(v, ty, node), ty)
    cg.node = node
    if ty.is_narrow:  # 8-bit types are storage: the value wraps to 8 bits and is read back as an i32
        if value.type.is_float:
            value = cg.b.cast(value, t.i32)
        return cg.b.cast(cg.b.cast(value, ty), t.i32)
    return cg.b.cast(value, ty)


def wrap_int(value: int, ty: t.ScalarType) -> int:
    """``value`` wrapped to the integer type ``ty`` (two's complement, as C converts)."""
    lo, hi = t.INT_RANGE[ty.name]
    return (value - lo) % (hi - lo + 1) + lo


def widen(cg, v: Value) -> Value:
    """A value loaded from an 8-bit buffer or array, read as the i32 it is computed in (docs/dsl.md)."""
    return cg.b.cast(v, t.i32) if isinstance(v.type, t.ScalarType) and v.type.is_narrow else v


def lower_array(cg, space: str, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """``shared(dtype, n)`` (space "shared") or ``local_array(dtype, n)`` (space "local"): hoisted to the top of the
    kernel, so one array serves every loop iteration, as a C array declared there would."""
    what = "shared arrays" if space == "shared" else "local arrays"
    spelling = "shared(dtype, n)" if space == "shared" else "local_array(dtype, n)"
    elem = dtype_arg(cg, arg_nodes[0])
    if elem not in t.BUFFER_ELEM_TYPES:
        raise cg.error(f"{what} hold f32/f16/bf16/f64/i32/u32/i64/u64/i8/u8, not {elem}", arg_nodes[0])
    n = cg.expr(arg_nodes[1])
    if space == "shared" and _is_length_param(cg, n):  # run-time sized: the host sizes it from the launch's value
        cg.node = node
        cg.b.loc = cg.frame.src.loc(node)
        ty = t.BufferType(elem, space, None)
        return cg.hoist(lambda b: b.op(space, [], ty, {"elem": elem, "size": None, "length": n.name}).result)
    if not isinstance(n, Const) or isinstance(n.value, bool) or not isinstance(n.value, int) or n.value <= 0:
        raise cg.error(
            f"{spelling} needs a positive compile-time size n (a literal or constexpr)"
            + (", or an int kernel parameter (its value at launch sizes the array)" if space == "shared" else ""),
            arg_nodes[1], "shared(dtype, n) with `n: int` a parameter of the kernel (not an expression of it) gives "
            "a run-time length" if space == "shared" and isinstance(n, Value) else None)
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    return new_array(cg, space, elem, n.value)


def _is_length_param(cg, n: Any) -> bool:
    """Whether ``n`` is an int scalar parameter of the kernel itself, unchanged (a shared array's run-time length)."""
    return (isinstance(n, Value) and n.owner is cg.body and n.type in (t.i32, t.u32) and n.name is not None
            and any(v is n for v in cg.body.args))


def new_array(cg, space: str, elem: t.ScalarType, size: int) -> Value:
    ty = t.BufferType(elem, space, size)
    return cg.hoist(lambda b: b.op(space, [], ty, {"elem": elem, "size": size}).result)


def _vector_count(cg, elem: t.ScalarType, n: int, node: ast.AST) -> None:
    if n <= 0 or n & (n - 1) or n * elem.itemsize > 16:
        most = 16 // elem.itemsize
        raise cg.error(f"a vector access moves a power-of-two count of elements, at most 16 bytes: {n} x {elem} "
                       f"is not one", node, f"use n in 1, 2, 4{', 8' if most >= 8 else ''} for {elem}")


def _vector_buffer(cg, buf: Any, what: str, node: ast.AST) -> Value:
    if not (isinstance(buf, Value) and isinstance(buf.type, t.BufferType) and buf.type.space != "local"):
        raise cg.error(f"{what} needs a buffer or shared array, got {cg.describe(buf)}", node)
    if buf.type.elem.is_narrow or buf.type.elem.is_wide:
        raise cg.error(f"{what} of {buf.type.elem} elements is not supported", node,
                       "vector accesses move f32/f16/bf16/i32/u32 elements; access these one at a time")
    return buf


def lower_vload(cg, arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """``vload(t, i, n)``: a new local array of n elements, filled by one ``vcopy`` from t[i:i+n]."""
    buf = _vector_buffer(cg, cg.expr(arg_nodes[0]), "vload", arg_nodes[0])
    index = cg.index(arg_nodes[1])
    n = cg.expr(arg_nodes[2])
    if not isinstance(n, Const) or isinstance(n.value, bool) or not isinstance(n.value, int):
        raise cg.error("vload(t, i, n) needs a compile-time count n (a literal or constexpr)", arg_nodes[2])
    _vector_count(cg, buf.type.elem, n.value, arg_nodes[2])
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    arr = new_array(cg, "local", buf.type.elem, n.value)
    cg.b.op("vcopy", [arr, cg.b.const(0, t.i32), buf, index], None, {"n": n.value})
    return arr


def lower_vstore(cg, arg_nodes: list[ast.AST], node: ast.AST) -> None:
    """``vstore(t, i, a)``: the whole local array a to t[i:i+len(a)] in one ``vcopy``."""
    buf = _vector_buffer(cg, cg.expr(arg_nodes[0]), "vstore", arg_nodes[0])
    index = cg.index(arg_nodes[1])
    arr = cg.expr(arg_nodes[2])
    if not (isinstance(arr, Value) and isinstance(arr.type, t.BufferType) and arr.type.space == "local"):
        raise cg.error(f"vstore's value must be a local_array (from local_array() or vload()), got "
                       f"{cg.describe(arr)}", arg_nodes[2])
    if arr.type.elem != buf.type.elem:
        raise cg.error(f"vstore of a {arr.type.elem} array into a buffer of {buf.type.elem}", node,
                       "convert element by element into a local_array of the buffer's dtype first")
    _vector_count(cg, arr.type.elem, arr.type.size, arg_nodes[2])
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    cg.b.op("vcopy", [buf, index, arr, cg.b.const(0, t.i32)], None, {"n": arr.type.size})
    return None


def lower_memory(cg, name: str, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Any:
    buf = args[0]
    if not (isinstance(buf, Value) and isinstance(buf.type, t.BufferType)):
        raise cg.error(f"{name}() needs a buffer as its first argument, got {cg.describe(buf)}", arg_nodes[0])
    index = cg.index(arg_nodes[1]) if not isinstance(args[1], Value) else args[1]
    if isinstance(args[1], Value) and not (isinstance(index.type, t.ScalarType) and index.type.is_int):
        raise cg.error(f"index must be an integer, got {cg.describe(args[1])}", arg_nodes[1])
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    elem = buf.type.elem
    if name == "load":
        return widen(cg, cg.b.load(buf, index))
    value = cg.convert(args[2], elem, arg_nodes[2], "the stored element" if name == "store" else f"{name}'s value")
    if name == "store":
        cg.b.store(buf, index, value)
        return None
    if name in O.INT_ATOMICS and elem not in (t.i32, t.u32):
        raise cg.error(f"{name} on a buffer of {elem} is not supported", node,
                       f"{name} works on i32 and u32 buffers and shared arrays")
    if elem not in (t.i32, t.u32, t.f32) and not (name == "atomic_add" and elem in (t.i64, t.u64)):
        raise cg.error(f"{name} on a buffer of {elem} is not supported", node,
                       "atomics work on i32, u32 and f32 buffers (atomic_add also on i64 and u64)")
    operands = [buf, index, value]
    if name == "atomic_cas":  # (t, i, expected, new): both converted to the element type
        operands.append(cg.convert(args[3], elem, arg_nodes[3], "atomic_cas's new value"))
    return cg.b.op(name, operands, elem).result


def lower_math(cg, name: str, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Any:
    """Float math (the op table's ``FLOAT_MATH`` rows): operands promoted to one float compute type (ints to f32);
    constant operands fold through the op's float64 reference, rounded once to f32 as the op is defined."""
    row = O.OPS[name]
    if any(is_fragment(a) for a in args):
        if len(args) != 1 or row.result == "bool":
            raise cg.error(f"{name}() is not defined on fragments", node,
                           "fragments take +, -, *, /, min, max and one-operand float math")
        return frag_arith(cg, name, args, node)
    for a, n in zip(args, arg_nodes):
        cg.check_number(a, n)
    if all(isinstance(a, Const) for a in args):
        with np.errstate(all="ignore"):
            value = row.ref(*(np.float64(float(a.value)) for a in args))
        if row.result == "bool":
            return Const(bool(value))
        value = float(np.float32(value))
        if math.isfinite(value) or not all(math.isfinite(float(a.value)) for a in args):
            return Const(value)
        raise cg.error(f"{name}({', '.join(repr(a.value) for a in args)}) is undefined", node)
    tys = [a.type for a in args if isinstance(a, Value)]
    ty = tys[0]
    for other in tys[1:]:
        ty = promote(ty, other, cg.native_half)
    ty = compute_type(ty, cg.native_half) if ty.is_float else t.f32
    if ty == t.f64 and name not in F64_MATH:
        raise cg.error(f"{name}() on f64 is not supported", node,
                       f"f64 has {', '.join(sorted(F64_MATH))}, abs, min, max and fma; cast to f32 for {name}")
    operands = [cg.materialize_as(a, ty) for a in args]
    return cg.b.op(name, operands, t.bool_ if row.result == "bool" else ty).result


#: the float math every backend spells on f64 (GLSL.std.450 has the transcendentals for 16/32-bit floats only)
F64_MATH = frozenset({"sqrt", "floor", "ceil"})


def lower_abs(cg, x: Any, node: ast.AST) -> Any:
    cg.check_number(x, node)
    if isinstance(x, Const):
        return Const(abs(x.value))
    if x.type in (t.u32, t.u64):
        return x
    ty = compute_type(x.type, cg.native_half) if x.type.is_float else (t.i64 if x.type == t.i64 else t.i32)
    return cg.b.unary("abs", cg.b.cast(x, ty))


def lower_minmax(cg, name: str, args: list[Any], node: ast.AST) -> Any:
    acc = args[0]
    for x in args[1:]:
        if is_fragment(acc) or is_fragment(x):
            acc = frag_arith(cg, name, [acc, x], node)
            continue
        cg.check_number(acc, node)
        cg.check_number(x, node)
        if isinstance(acc, Const) and isinstance(x, Const):
            acc = Const(min(acc.value, x.value) if name == "min" else max(acc.value, x.value))
            continue
        ty = cg.common_type(acc, x)
        ty = t.i32 if ty.is_bool else ty
        acc = cg.b.binary(name, cg.materialize_as(acc, ty), cg.materialize_as(x, ty))
    return acc


def lower_simd(cg, name: str, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    x = args[0]
    cg.check_number(x, node)
    ty = cg.value_type(x)
    if ty.is_bool:
        raise cg.error(f"{name} needs a number, not a bool", arg_nodes[0], "cast(x, iron.i32) first")
    ty = compute_type(ty, cg.native_half)
    _refuse_wide_simd(cg, name, ty, arg_nodes[0])
    xv = cg.materialize_as(x, ty)
    if name in O.SIMD_REDUCE:
        return cg.b.op(name, [xv], ty).result
    lane = cg.int_operand(args[1], arg_nodes[1])
    cg.node = node
    return cg.b.op(name, [xv, lane], ty).result


def lower_simd_lanes(cg, name: str, args: list[Any], arg_nodes: list[ast.AST], node: ast.AST) -> Value:
    """simd_ballot/any/all (a bool) and the prefix sums (i32/u32/f32; halves sum in f32 and round once)."""
    if name in O.SIMD_VOTE:
        cond = cg.materialize_as(cg.truth(args[0], arg_nodes[0]), t.bool_)
        cg.node = node
        return cg.b.op(name, [cond], t.u32 if name == "simd_ballot" else t.bool_).result
    x = args[0]
    cg.check_number(x, node)
    ty = cg.value_type(x)
    if ty.is_bool:
        raise cg.error(f"{name} needs a number, not a bool", arg_nodes[0], "cast(x, iron.i32) first")
    _refuse_wide_simd(cg, name, ty, arg_nodes[0])
    sum_ty = t.f32 if ty.is_float else ty
    cg.node = node
    out = cg.b.op(name, [cg.materialize_as(x, sum_ty)], sum_ty).result
    return cg.materialize_as(out, ty) if ty.is_half else out


def _refuse_wide_simd(cg, name: str, ty: t.ScalarType, node: ast.AST) -> None:
    if ty.is_wide:
        raise cg.error(f"{name} on {ty} is not supported", node,
                       "SIMD-group operations take 32-bit and half values: split or cast the value first")


def lower_python_builtin(cg, fn: Any, node: ast.Call) -> Any:
    """``min``/``max``/``abs`` map to the iron builtins; ``int``/``float``/``bool`` are casts to i32/f32/bool."""
    if fn is py_builtins.range:
        raise cg.error("range(...) can only be the iterable of a for loop", node)
    if node.keywords:
        raise cg.error(f"{fn.__name__}() takes no keyword arguments in a kernel", node)
    if fn in (py_builtins.min, py_builtins.max, py_builtins.abs):
        return lower_builtin(cg, fn.__name__, node)
    if len(node.args) != 1:
        raise cg.error(f"{fn.__name__}(x) takes exactly one argument in a kernel", node)
    ty = {py_builtins.int: t.i32, py_builtins.float: t.f32, py_builtins.bool: t.bool_}[fn]
    parsed = float_of_string(cg, node.args[0]) if fn is py_builtins.float else None
    if parsed is not None:
        return parsed
    value = cg.expr(node.args[0])
    if ty.is_bool:
        return cg.truth(value, node.args[0])
    if isinstance(value, Const):
        if ty.is_int and isinstance(value.value, float) and not math.isfinite(value.value):
            raise cg.error(f"int({value.value!r}) is undefined", node, "an infinity or NaN has no integer value")
        return Const(int(value.value) if ty.is_int else cg.const_for(value.value, ty, node))
    return cast_to(cg, value, ty, node)


def lower_async(cg, name: str, arg_nodes: list[ast.AST], node: ast.AST) -> None:
    """``async_copy(dst, j, src, i, n)`` (global -> shared), ``async_commit()``, ``async_wait(pending)``."""
    if name == "async_commit":
        cg.b.loc = cg.frame.src.loc(node)
        cg.b.op("async_commit", [], None)
        return None
    if name == "async_wait":
        pending = cg.expr(arg_nodes[0])
        if not (isinstance(pending, Const) and isinstance(pending.value, int) and not isinstance(pending.value, bool)
                and 0 <= pending.value <= 7):
            raise cg.error("async_wait(pending) needs a compile-time count from 0 to 7", arg_nodes[0])
        cg.b.loc = cg.frame.src.loc(node)
        cg.b.op("async_wait", [], None, {"pending": pending.value})
        return None
    dst = cg.expr(arg_nodes[0])
    if not (isinstance(dst, Value) and isinstance(dst.type, t.BufferType) and dst.type.space == "shared"):
        raise cg.error(f"async_copy copies into a shared array, not {cg.describe(dst)}", arg_nodes[0])
    j = cg.index(arg_nodes[1])
    src = cg.expr(arg_nodes[2])
    if not (isinstance(src, Value) and isinstance(src.type, t.BufferType) and src.type.space == "global"):
        raise cg.error(f"async_copy copies from a buffer (global memory), not {cg.describe(src)}", arg_nodes[2])
    if src.type.elem != dst.type.elem:
        raise cg.error(f"async_copy from a buffer of {src.type.elem} into a shared array of {dst.type.elem}", node)
    if src.type.elem.is_narrow or src.type.elem.is_wide:
        raise cg.error(f"async_copy of {src.type.elem} elements is not supported", node,
                       "vector accesses move f32/f16/bf16/i32/u32 elements; copy these one at a time")
    i = cg.index(arg_nodes[3])
    n = cg.expr(arg_nodes[4])
    if not isinstance(n, Const) or isinstance(n.value, bool) or not isinstance(n.value, int):
        raise cg.error("async_copy's count n must be compile-time (a literal or constexpr)", arg_nodes[4])
    _vector_count(cg, src.type.elem, n.value, arg_nodes[4])
    if n.value * src.type.elem.itemsize < 4:
        raise cg.error(f"async_copy moves 4, 8 or 16 bytes, not {n.value} x {src.type.elem}", arg_nodes[4])
    cg.b.loc = cg.frame.src.loc(node)
    cg.b.op("async_copy", [dst, j, src, i], None, {"n": n.value})
    return None


def float_of_string(cg, arg: ast.AST) -> Const | None:
    """``float("inf")``, ``float("-inf")``, ``float("nan")`` (any string literal ``float`` accepts): a constant;
    None when ``arg`` is not a string literal."""
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        return None
    try:
        return Const(float(arg.value))
    except ValueError:
        raise cg.error(f"float({arg.value!r}) is not a number", arg,
                       'write float("inf"), float("-inf"), float("nan") or a numeric literal') from None
