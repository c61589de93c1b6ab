"""Expression lowering for the front-end (mixed into ``FunctionCodegen``)."""

from __future__ import annotations

import ast
import builtins as py_builtins
import types as pytypes
from typing import Any

from ..ir import ops as O
from ..ir import types as t
from ..ir.core import Value
from .constfold import SYMBOL, ConstError, fold_binop
from .lower_matrix import frag_arith, is_fragment
from .pymath import is_pure_math, lower_math_call, math_function_name
from .refs import IronFunc, KernelMarker, Ref
from .typing_rules import Const, literal_type, promote, promote_with_literal

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
          ast.Mod: "rem", ast.BitAnd: "and", ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl",
          ast.RShift: "shr", ast.Pow: "pow"}
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

UNSUPPORTED_EXPRS = {
    ast.Lambda: ("lambda", "define a helper with @iron.func"),
    ast.ListComp: ("list comprehension", "kernels have no lists; use a loop"),
    ast.SetComp: ("set comprehension", "kernels have no sets"),
    ast.DictComp: ("dict comprehension", "kernels have no dicts"),
    ast.GeneratorExp: ("generator expression", "use a loop"),
    ast.List: ("list literal", "kernels have no lists; use shared(...) for arrays"),
    ast.Dict: ("dict literal", "kernels have no dicts"),
    ast.Set: ("set literal", "kernels have no sets"),
    ast.JoinedStr: ("f-string", "kernels have no strings"),
    ast.Starred: ("starred expression", "pass arguments one by one"),
    ast.Await: ("await", "kernels are not coroutines"),
    ast.Yield: ("yield", "kernels are not generators"),
    ast.YieldFrom: ("yield from", "kernels are not generators"),
    ast.NamedExpr: ("walrus operator `:=`", "assign on its own line"),
    ast.Slice: ("slice", "index one element at a time: t[i]"),
}

#: builtins a condition may evaluate speculatively (no side effects, no memory reads): from the builtin table
PURE_CALLS = frozenset(b.name for b in O.BUILTINS.values() if b.pure)


class ExprMixin:
    """Expression visitors. Each returns a Value, a Const, a Ref or a tuple of those."""

    def expr(self, node: ast.expr) -> Any:
        self.node = node
        self.b.loc = self.frame.src.loc(node)
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            what, hint = UNSUPPORTED_EXPRS.get(type(node), (f"`{type(node).__name__}` expression", None))
            raise self.error(f"unsupported syntax: {what}", node, hint)
        result = method(node)
        self.node = node
        self.b.loc = self.frame.src.loc(node)
        return result

    def expr_Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (bool, int, float)):
            return Const(node.value)
        raise self.error(f"unsupported constant {node.value!r}", node, "kernels compute with numbers only")

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.expr(e) for e in node.elts)

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        base = self.expr(node.value)
        if isinstance(base, Ref) and isinstance(base.obj, (pytypes.ModuleType, type)):
            if not hasattr(base.obj, node.attr):
                raise self.error(f"'{getattr(base.obj, '__name__', base.obj)}' has no attribute '{node.attr}'", node)
            value = getattr(base.obj, node.attr)
            self.reads.note("attr", base.obj, node.attr, value)
            return self.wrap_global(value, node.attr, node)
        raise self.error(f"attribute access on {self.describe(base)} is not supported", node,
                         "kernels read attributes of modules only (e.g. iron.exp, math.pi)")

    # -- operators ----------------------------------------------------------------------------------------------

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        # `x[0] + x[1] + ... + x[1999]` nests to the left as deep as it is long: walk down its left spine in a loop,
        # not by recursion (which would run out of Python's stack), then apply the operators from the innermost out
        spine = [node]
        while isinstance(spine[-1].left, ast.BinOp):
            spine.append(spine[-1].left)
        acc = self.expr(spine[-1].left)
        for link in reversed(spine):
            right = self.expr(link.right)
            self.node = link
            acc = self.binop(link.op, acc, right, link)
            self.b.loc = self.frame.src.loc(link)  # as expr() leaves it after each inner operation
        return acc

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        name = BINOPS.get(type(op))
        if name is None:
            raise self.error("unsupported operator `@`", node)
        if is_fragment(a) or is_fragment(b):
            if name not in ("add", "sub", "mul", "div"):
                raise self.error(f"`{SYMBOL.get(name, name)}` is not defined on fragments", node,
                                 "fragments take +, -, *, /, min, max and one-operand float math")
            return frag_arith(self, name, [a, b], node)
        self.check_number(a, node)
        self.check_number(b, node)
        if isinstance(a, Const) and isinstance(b, Const):
            return self.fold_binop(name, a.value, b.value, node)
        if name == "pow":
            return self.power(a, b, node)
        ty = self.common_type(a, b)
        if name in ("and", "or", "xor", "shl", "shr"):
            if ty.is_float:
                raise self.error(f"`{SYMBOL[name]}` needs integers, got {self.type_name(a)} and {self.type_name(b)}",
                                 node, "bitwise operators work on ints and bools")
            if name in ("shl", "shr") and ty.is_bool:
                ty = t.i32
        elif ty.is_bool:
            ty = t.i32
        if name == "div" and not ty.is_float:
            ty = t.f32  # `/` is true division, as in Python
        if name == "rem" and ty == t.f64:
            raise self.error("`%` on f64 is not supported", node, "cast to f32, or write a - b * floor(a / b)")
        x, y = self.materialize_as(a, ty), self.materialize_as(b, ty)
        if name == "floordiv":
            if ty.is_float:
                return self.b.unary("floor", self.b.binary("div", x, y))
            name = "div"  # integer `//` truncates toward zero, like C (documented)
        return self.b.binary(name, x, y)

    def fold_binop(self, name: str, a: Any, b: Any, node: ast.AST) -> Const:
        try:
            return Const(fold_binop(name, a, b))
        except ConstError as e:
            raise self.error(e.message, node, e.hint) from None

    def power(self, a: Any, b: Any, node: ast.AST) -> Any:
        if not isinstance(b, Const) or b.value not in (0, 1, 2, 3, 4, -1, 0.5, -0.5):
            raise self.error("`**` is supported only with a literal exponent in {-1, -0.5, 0.5, 0, 1, 2, 3, 4}", node,
                             "use exp2(y * log2(x)) for a general power")
        e = b.value
        ty = self.common_type(a, Const(float(e)) if e in (-1, 0.5, -0.5) else b)
        x = self.materialize_as(a, ty)
        if e == 0:
            return self.b.const(1, ty)
        if e == 0.5:
            return self.b.unary("sqrt", x)
        if e == -0.5:
            return self.b.unary("rsqrt", x)
        if e == -1:
            return self.b.binary("div", self.b.const(1.0, ty), x)
        result = x
        for _ in range(int(e) - 1):
            result = self.b.binary("mul", result, x)
        return result

    def check_number(self, v: Any, node: ast.AST) -> None:
        if isinstance(v, Const) or (isinstance(v, Value) and isinstance(v.type, t.ScalarType)):
            return
        raise self.error(f"{self.describe(v)} cannot be used in arithmetic", node,
                         "index a buffer to get a number: t[i]" if isinstance(v, Value) else None)

    def type_name(self, v: Any) -> str:
        return str(v.type) if isinstance(v, Value) else f"literal {v.value!r}"

    def common_type(self, a: Any, b: Any) -> t.ScalarType:
        if isinstance(a, Const) and isinstance(b, Const):
            return literal_type(a.value) if not isinstance(b.value, float) else t.f32
        if isinstance(a, Const):
            return promote_with_literal(b.type, a, self.native_half)
        if isinstance(b, Const):
            return promote_with_literal(a.type, b, self.native_half)
        return promote(a.type, b.type, self.native_half)

    def arms_type(self, a: Any, b: Any) -> t.ScalarType:
        """The type of ``a if c else b``: bool when both arms are (as in Python), else the arithmetic promotion."""
        if all(isinstance(v.value, bool) if isinstance(v, Const) else v.type == t.bool_ for v in (a, b)):
            return t.bool_
        return self.common_type(a, b)

    def materialize_as(self, v: Any, ty: t.ScalarType) -> Value:
        if isinstance(v, Const):
            value = v.value
            if ty.is_float:
                value = self.const_for(value, ty, self.node)
            elif ty.is_int and isinstance(value, bool):
                value = int(value)
            return self.materialize(Const(value), ty)
        return self.b.cast(v, ty)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        self.node = node
        if isinstance(node.op, ast.Not):
            c = self.truth(v, node.operand)
            return Const(not c.value) if isinstance(c, Const) else self.b.unary("not", c)
        if is_fragment(v) and isinstance(node.op, (ast.UAdd, ast.USub)):
            return v if isinstance(node.op, ast.UAdd) else frag_arith(self, "neg", [v], node)
        self.check_number(v, node)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if isinstance(v, Const):
                return Const(-v.value)
            ty = self.common_type(v, Const(0))
            ty = t.i32 if ty.is_bool else ty
            return self.b.unary("neg", self.materialize_as(v, ty))
        # ast.Invert
        if isinstance(v, Const):
            if isinstance(v.value, int) and not isinstance(v.value, bool):
                return Const(~v.value)
        elif v.type.is_int:
            return self.b.unary("not", v)
        raise self.error("`~` needs an integer", node, "use `not` for booleans")

    def truth(self, v: Any, node: ast.AST) -> Any:
        """A condition as a bool Value (numbers compare != 0), or a Const bool."""
        if isinstance(v, Const):
            return Const(bool(v.value))
        self.check_number(v, node)
        if v.type.is_bool:
            return v
        return self.b.binary("ne", v, self.b.const(0, v.type))

    def expr_Compare(self, node: ast.Compare) -> Any:
        if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            from .optional import lower_is_none

            return lower_is_none(self, node)  # `x is None` on an optional buffer: a compile-time bool
        result = None
        left = self.expr(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node)
            self.node = node
            name = CMPOPS.get(type(op))
            if name is None:
                raise self.error("unsupported comparison (`in`)", node, "compare numbers with < <= > >= == !=")
            self.check_number(left, node)
            self.check_number(right, node)
            if isinstance(left, Const) and isinstance(right, Const):
                a, b = left.value, right.value
                c = Const({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[name])
            else:
                ty = self.common_type(left, right)
                c = self.b.binary(name, self.materialize_as(left, ty), self.materialize_as(right, ty))
            result = c if result is None else self.logical("and", result, c)
            left = right
        return result

    def logical(self, kind: str, a: Any, b: Any) -> Any:
        if isinstance(a, Const):
            return b if (a.value if kind == "and" else not a.value) else a
        if isinstance(b, Const):
            return a if (b.value if kind == "and" else not b.value) else b
        return self.b.binary(kind, a, b)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        kind = "and" if isinstance(node.op, ast.And) else "or"
        acc = self.truth(self.expr(node.values[0]), node.values[0])
        for rhs_node in node.values[1:]:
            if isinstance(acc, Const):
                if acc.value == (kind == "or"):
                    return acc  # short-circuit at compile time
                acc = self.truth(self.expr(rhs_node), rhs_node)
                continue
            if self.is_safe(rhs_node):
                acc = self.logical(kind, acc, self.truth(self.expr(rhs_node), rhs_node))
                continue
            # the right side may load out of bounds or fault when the left decides: branch, as Python does
            self.node = node
            tmp = self.hoist(lambda b: b.var(t.bool_, "_" + kind))
            self.b.set(tmp, acc)
            cond = acc if kind == "and" else self.b.unary("not", acc)
            _, then, _ = self.b.if_(cond)
            with self.b.at(then):
                rhs = self.truth(self.expr(rhs_node), rhs_node)
                self.b.set(tmp, self.materialize(rhs, t.bool_))
            acc = self.b.get(tmp)
        return acc

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.truth(self.expr(node.test), node.test)
        if isinstance(cond, Const):
            return self.expr(node.body if cond.value else node.orelse)
        if self.is_safe(node.body) and self.is_safe(node.orelse):
            a, b = self.expr(node.body), self.expr(node.orelse)
            self.node = node
            self.check_number(a, node)
            self.check_number(b, node)
            ty = self.arms_type(a, b)
            return self.b.select(cond, self.materialize_as(a, ty), self.materialize_as(b, ty))
        # an arm may load or divide: evaluate only the chosen arm, as Python does
        self.node = node
        _, then, else_ = self.b.if_(cond)
        with self.b.at(then):
            a = self.expr(node.body)
        with self.b.at(else_):
            b = self.expr(node.orelse)
        self.node = node
        self.check_number(a, node)
        self.check_number(b, node)
        ty = self.var_type(self.arms_type(a, b))
        tmp = self.hoist(lambda bld: bld.var(ty, "_select"))
        with self.b.at(then):
            self.b.set(tmp, self.materialize_as(a, ty))
        with self.b.at(else_):
            self.b.set(tmp, self.materialize_as(b, ty))
        return self.b.get(tmp)

    def is_safe(self, node: ast.AST) -> bool:
        """True when evaluating ``node`` can neither fault nor have effects (no loads, calls with effects,
        integer division)."""
        from ..lang.builtins import Builtin
        for sub in ast.walk(node):
            if isinstance(sub, (ast.Subscript, ast.NamedExpr)):
                return False
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                return False
            if isinstance(sub, ast.Call):
                fn = None
                if isinstance(sub.func, ast.Name) and sub.func.id not in self.frame.vars:
                    if not any(sub.func.id in s for s in self.frame.scopes):
                        fn = self.frame.globals.get(sub.func.id, getattr(py_builtins, sub.func.id, None))
                elif isinstance(sub.func, ast.Attribute):
                    try:
                        r = self.expr(sub.func)
                        fn = r.obj if isinstance(r, Ref) else None
                    except Exception:
                        return False
                if isinstance(fn, Builtin) and fn.name in PURE_CALLS:
                    continue
                if fn in (py_builtins.min, py_builtins.max, py_builtins.abs, py_builtins.int, py_builtins.float):
                    continue
                if isinstance(fn, t.ScalarType) or is_pure_math(fn):
                    continue
                return False
        return True

    # -- indexing and calls -------------------------------------------------------------------------------------

    def index(self, node: ast.AST) -> Value:
        if isinstance(node, ast.Tuple):
            raise self.error("buffers are 1-D: index with a single integer", node, "flatten it: t[row * ncols + col]")
        if isinstance(node, ast.Slice):
            raise self.error("unsupported syntax: slice", node, "index one element at a time: t[i]")
        v = self.expr(node)
        self.node = node
        if isinstance(v, Const):
            if isinstance(v.value, bool) or not isinstance(v.value, int):
                raise self.error(f"index must be an integer, not {v.value!r}", node)
            if v.value < 0:
                raise self.error("negative indices are not supported", node,
                                 "Python's t[-1] counting from the end has no meaning for a raw buffer")
            return self.materialize(v, literal_type(v.value))
        if isinstance(v, Value) and isinstance(v.type, t.ScalarType) and v.type.is_int:
            return v
        raise self.error(f"index must be an integer, got {self.describe(v)}", node,
                         "use cast(x, iron.i32) to index with a computed float")

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        buf = self.expr(node.value)
        if not (isinstance(buf, Value) and isinstance(buf.type, t.BufferType)):
            raise self.error(f"{self.describe(buf)} is not a buffer and cannot be indexed", node.value)
        idx = self.index(node.slice)
        self.node = node
        self.b.loc = self.frame.src.loc(node)
        from .lower_builtins import widen

        return widen(self, self.b.load(buf, idx))

    def expr_Call(self, node: ast.Call) -> Any:
        from ..lang.builtins import Builtin
        from .lower_builtins import lower_builtin, lower_python_builtin

        for arg in [*node.args, *node.keywords]:
            if isinstance(arg, ast.Starred) or (isinstance(arg, ast.keyword) and arg.arg is None):
                stars = "*" if isinstance(arg, ast.Starred) else "**"
                raise self.error(f"unpacked arguments ({stars}...) are not supported in a kernel's calls", arg,
                                 f"pass the arguments one by one: f(a, b), not f({stars}t)")
        fn = self.expr(node.func)
        self.node = node
        if not isinstance(fn, Ref):
            raise self.error(f"{self.describe(fn)} is not callable", node.func)
        obj = fn.obj
        if not isinstance(obj, IronFunc):  # a helper may take an absent buffer and test it; nothing else may
            from .optional import refuse_absent_arguments

            refuse_absent_arguments(self, node)
        if isinstance(obj, Builtin):
            return lower_builtin(self, obj.name, node)
        if isinstance(obj, IronFunc):
            from .helpers import inline_call

            return inline_call(self, obj, node)
        if isinstance(obj, KernelMarker):
            raise self.error(f"cannot call kernel '{obj.__name__}' from a kernel", node,
                             "decorate shared code with @iron.func to call it from kernels")
        if isinstance(obj, t.ScalarType):
            return lower_builtin(self, "cast", node, dtype=obj)
        if obj in (py_builtins.min, py_builtins.max, py_builtins.abs, py_builtins.int, py_builtins.float,
                   py_builtins.bool, py_builtins.range):
            return lower_python_builtin(self, obj, node)
        math_name = math_function_name(obj)
        if math_name is not None:
            return lower_math_call(self, math_name, node)
        name = getattr(obj, "__name__", repr(obj))
        raise self.error(f"cannot call '{name}' in a kernel", node,
                         "kernels call iron builtins and @iron.func helpers; mark this function with @iron.func")
