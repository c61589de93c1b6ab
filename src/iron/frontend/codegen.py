"""Python AST -> Iron IR. One ``FunctionCodegen`` per kernel variant; ``@iron.func`` helpers are inlined into it.

The visitor records the node it is working on, so every CompileError (and every IR op's ``loc``) points at the
user's line and column. Expressions evaluate to an IR ``Value``, a compile-time ``Const`` (literals, constexprs and
expressions of them, computed in Python), or a ``Ref`` to a compile-time Python object (a builtin, a dtype, a module,
a helper).
"""

from __future__ import annotations

import ast
import builtins as py_builtins
import difflib
import os
from dataclasses import dataclass, field
from typing import Any

from ..errors import CompileError, IronError
from ..ir import ops as O
from ..ir import types as t
from ..ir.builder import Builder
from ..ir.core import Block, Kernel, Op, Value
from . import exprs
from .constfold import ConstError, show, to_float
from .optional import Absent, absent_use
from .reads import GlobalReads
from .refs import Ref
from .source import FunctionSource, first_store
from .typing_rules import Const, assignable, const_fits, literal_type
from .variables import WidenVar, float_into_int_var, is_float, new_var, widen_to_64

#: statement kinds the DSL does not support, with a hint each
UNSUPPORTED_STMTS: dict[type, tuple[str, str]] = {
    ast.With: ("`with` statement", "kernels have no context managers"),
    ast.Try: ("`try` statement", "kernels cannot raise or catch exceptions"),
    ast.Raise: ("`raise` statement", "kernels cannot raise exceptions; write a sentinel to an output instead"),
    ast.Assert: ("`assert` statement", "check inputs on the host before the launch"),
    ast.FunctionDef: ("nested function definition", "define a helper at module level with @iron.func"),
    ast.ClassDef: ("class definition", "define classes outside the kernel"),
    ast.Import: ("import inside a kernel", "import at module level; kernels read module globals"),
    ast.ImportFrom: ("import inside a kernel", "import at module level; kernels read module globals"),
    ast.Global: ("`global` statement", "kernels cannot assign globals; pass a buffer and store to it"),
    ast.Nonlocal: ("`nonlocal` statement", "kernels cannot assign enclosing variables"),
    ast.Delete: ("`del` statement", "locals end with the kernel; nothing to delete"),
    ast.Match: ("`match` statement", "use if/elif/else"),
}


@dataclass
class Frame:
    """Name resolution for one function body (the kernel, or an inlined helper)."""

    src: FunctionSource
    globals: dict[str, Any]
    multi: set[str]  # names assigned more than once: they live in var slots
    loop_targets: set[str]
    scopes: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    vars: dict[str, Value] = field(default_factory=dict)
    defined_vars: set[str] = field(default_factory=set)
    ended: dict[str, int] = field(default_factory=dict)  # SSA names whose block ended -> line of that block
    pending_returns: list = field(default_factory=list)  # helpers: (block, value, node, exit) per `return`
    is_helper: bool = False
    site: tuple = ()  # the inlined call sites that led here (the kernel: ()); with a name, keys a widened variable
    starts: dict[str, tuple] = field(default_factory=dict)  # var -> (line, loop depth, literal start, declared type)
    returned: Value | None = None  # helpers with a `return` inside a loop: the flag that says it has returned


class FunctionCodegen(exprs.ExprMixin):
    """Lowers one kernel variant. ``build()`` returns the IR kernel (before passes)."""

    def __init__(self, name: str, src: FunctionSource, globals_: dict[str, Any], native_half: bool, dtype,
                 widened: dict[tuple, t.ScalarType] | None = None):
        self._init_args = (name, src, globals_, native_half, dtype)
        self.widened = widened or {}  # (frame site, name) -> the float type a loop-carried int start widened to
        self.name = name
        self.native_half = native_half
        self.dtype = dtype  # what T means in this variant (or None)
        self.body = Block()
        self.b = Builder(self.body)
        self.frame = self._new_frame(src, globals_, is_helper=False)
        self.node: ast.AST | None = None
        self.loop_depth: list[str] = []  # "for" / "while" / "static" for each enclosing loop
        self.hoisted = 0  # var/shared ops hoisted to the top of the body
        self.call_stack: list[object] = []
        self.terminated = False
        self.reads = GlobalReads()  # the globals, closure variables and attributes this variant bakes in
        self.unroll_nest: list[int] = []  # per enclosing static_range loop: the iterations its body unrolls so far
        self.unrolled = 0  # the iterations the kernel's static_range loops unroll (count_unrolled)

    # -- errors and locations -----------------------------------------------------------------------------------

    def error(self, message: str, node: ast.AST | None = None, hint: str | None = None) -> CompileError:
        node = node if node is not None else self.node
        return CompileError(message, self.frame.src.loc(node), hint)

    def _new_frame(self, src: FunctionSource, globals_: dict[str, Any], is_helper: bool) -> Frame:
        counts: dict[str, int] = {}
        loop_targets: set[str] = set()

        def count_target(tgt: ast.AST, weight: int = 1) -> None:
            if isinstance(tgt, ast.Name):
                counts[tgt.id] = counts.get(tgt.id, 0) + weight
            elif isinstance(tgt, (ast.Tuple, ast.List)):
                for e in tgt.elts:
                    count_target(e, weight)

        for node in ast.walk(src.node):
            if isinstance(node, ast.Assign):
                for tgt in node.targets:
                    count_target(tgt)
            elif isinstance(node, ast.AugAssign):
                count_target(node.target, 2)
            elif isinstance(node, ast.AnnAssign):
                count_target(node.target)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                loop_targets.add(node.target.id)
        for arg in src.node.args.args:
            counts[arg.arg] = counts.get(arg.arg, 0) + 1  # a parameter assigned in the body becomes a var
        multi = {n for n, c in counts.items() if c > 1}
        # a loop target that is also assigned elsewhere keeps Python's semantics: a variable that holds the last
        # iteration's value after the loop; a name used only as loop targets stays a read-only SSA index
        multi |= {n for n in loop_targets if n in counts}
        return Frame(src, globals_, multi, loop_targets, is_helper=is_helper)

    # -- kernel -------------------------------------------------------------------------------------------------

    def build(self, params: list[tuple[str, str, Any]]) -> Kernel:
        """``params``: (name, kind, payload) with kind "buffer" (payload elem type), "scalar" (type) or
        "constexpr" (payload the Python value).

        ``acc = 0`` followed, in a loop, by ``acc += 0.5`` widens ``acc`` to f32 as Triton unifies a loop-carried
        variable's type: the whole kernel is lowered again with ``acc`` a float from its start (once per such
        variable)."""
        while True:
            try:
                return self._lower_kernel(params)
            except WidenVar as w:
                self.__init__(*self._init_args, widened={**self.widened, w.key: w.type})

    def _lower_kernel(self, params: list[tuple[str, str, Any]]) -> Kernel:
        from ..ir.core import Param

        fdef = self.frame.src.node
        kparams: list[Param] = []
        for (pname, kind, payload), arg in zip(params, fdef.args.args):
            self.node = arg
            if kind != "scalar" and pname in self.frame.multi:
                what = "buffer" if kind == "absent" else kind
                raise self.error(f"{what} parameter '{pname}' cannot be reassigned in the kernel",
                                 first_store(fdef, pname) or arg,
                                 f"'{pname}' names the launch's {'array' if what == 'buffer' else 'value'} in the "
                                 "whole kernel; give the new value a new name")
            if kind == "absent":  # an optional buffer passed as None: no parameter, its name an optional.Absent
                self.bind(pname, payload)
                continue
            if kind == "constexpr":
                self.bind(pname, Const(payload) if isinstance(payload, (bool, int, float)) else Ref(payload))
                continue
            ty = t.BufferType(payload) if kind == "buffer" else payload
            half = ty if kind == "scalar" and ty.is_half else None
            v = Value(t.f32 if half else ty, pname)  # a half scalar travels as f32, rounded to the half at launch
            self.body.args.append(v)
            v.owner = self.body
            kparams.append(Param(pname, kind, v))
            if half:
                v = self.b.cast(v, half)  # exact: the launch already rounded the value to the half type
            if pname in self.frame.multi:
                self.assign_name(pname, v, arg)
            else:
                self.bind(pname, v)
        self.stmts(fdef.body)
        written = set()
        for op in self.body.walk():
            written.update(v.uid for v in O.buffers_written(op))
        for p in kparams:
            p.readonly = p.kind == "buffer" and p.value.uid not in written
        return Kernel(self.name, kparams, self.body, self.frame.src.loc(fdef), {"dtype": self.dtype})

    # -- names --------------------------------------------------------------------------------------------------

    def bind(self, name: str, value: Any) -> None:
        self.frame.scopes[-1][name] = value

    def lookup(self, name: str, node: ast.AST) -> Any:
        fr = self.frame
        if name in fr.vars:
            if name not in fr.defined_vars:
                raise self.error(f"local variable '{name}' might be used before it is assigned", node,
                                 "assign it on every path before this line (e.g. before the `if` or loop)")
            return self.b.get(fr.vars[name], name)
        for scope in reversed(fr.scopes):
            if name in scope:
                if isinstance(scope[name], Absent):
                    raise absent_use(self, name, scope[name], node)
                return scope[name]
        if name in fr.ended:
            raise self.error(f"'{name}' is only defined inside the block that starts on line {fr.ended[name]}",
                             node, f"assign '{name}' before that block so it is defined on every path")
        # Python's order past the locals: the enclosing function's variables, the module's globals, the builtins
        cell = self.closure_cells().get(name)
        if cell is not None:
            try:
                obj = cell.cell_contents
            except ValueError:  # the enclosing function has not assigned it (yet)
                raise self.error(f"closure variable '{name}' is not assigned yet", node) from None
            self.reads.note("cell", cell, name, obj)
            return self.wrap_global(obj, name, node)
        if name in fr.globals:
            obj = fr.globals[name]
            self.reads.note("global", fr.globals["__iron_fn__"].__globals__, name, obj)
            return self.wrap_global(obj, name, node)
        if hasattr(py_builtins, name):
            return self.wrap_global(getattr(py_builtins, name), name, node)
        raise self.error(f"unknown name '{name}'", node, self.name_hint(name))

    def closure_cells(self) -> dict[str, Any]:
        fn = self.frame.globals.get("__iron_fn__")
        if fn is None or not fn.__closure__:
            return {}
        return dict(zip(fn.__code__.co_freevars, fn.__closure__))

    def name_hint(self, name: str) -> str | None:
        from ..lang.builtins import BUILTINS

        candidates = list(BUILTINS) + [n for s in self.frame.scopes for n in s] + list(self.frame.vars)
        candidates += [n for n in self.frame.globals if not n.startswith("_")]
        close = difflib.get_close_matches(name, candidates, n=1)
        if close:
            return f"did you mean '{close[0]}'?"
        return "kernels can use their parameters, locals, module globals and iron builtins"

    def wrap_global(self, obj: Any, name: str, node: ast.AST) -> Any:
        from ..lang.types import DTypeVar

        if isinstance(obj, (bool, int, float)):
            return Const(obj)
        if isinstance(obj, DTypeVar):
            if self.dtype is None:
                raise self.error(f"'{name}' is a dtype variable but no parameter of this kernel is a Tensor[{name}]",
                                 node, f"annotate a buffer parameter as Tensor[{name}] or use a concrete dtype")
            return Ref(self.dtype)
        return Ref(obj)

    def assign_name(self, name: str, value: Any, node: ast.AST, declared: t.ScalarType | None = None) -> None:
        fr = self.frame
        if name in fr.multi and isinstance(value, Value) and isinstance(value.type, t.FragType):
            self._assign_fragment(name, value, node)
        elif name in fr.multi or declared is not None:
            if isinstance(value, Ref) or (isinstance(value, Value) and not isinstance(value.type, t.ScalarType)):
                raise self.error(f"'{name}' is assigned more than once, which only scalars may be", node,
                                 "give the buffer/shared array/dtype its own name")
            var = fr.vars.get(name)
            if var is None:
                var = new_var(self, name, value, node, declared)
            elem = var.type.elem
            if elem.is_int and is_float(value):
                float_into_int_var(self, name, value, node)
            widen_to_64(self, name, elem, value)
            v = self.convert(value, elem, node, what=f"'{name}'")
            self.b.set(var, v)
            fr.defined_vars.add(name)
        else:
            if isinstance(value, Value) and value.name is None and value.owner is not None and isinstance(
                    value.owner, Op):
                value.name = name
            self.bind(name, value)

    def _assign_fragment(self, name: str, value: Value, node: ast.AST) -> None:
        """A fragment name assigned more than once (an accumulator in a loop) lives in a var slot of its type."""
        fr = self.frame
        var = fr.vars.get(name)
        if var is None:
            var = self.hoist(lambda b: b.var(value.type, name))
            fr.vars[name] = var
        elif var.type.elem != value.type:
            raise self.error(f"'{name}' held {var.type.elem} and is now given {value.type}", node,
                             "give each kind of fragment its own name")
        self.b.set(var, value)
        fr.defined_vars.add(name)

    def var_type(self, ty: t.ScalarType) -> t.ScalarType:
        if ty.is_half and not self.native_half:
            return t.f32  # locals hold f32: half values are rounded only when stored to memory
        return ty

    def value_type(self, value: Any) -> t.ScalarType:
        if isinstance(value, Const):
            return literal_type(value.value)
        if isinstance(value, Value) and isinstance(value.type, t.ScalarType):
            return value.type
        raise self.error("expected a scalar value here")

    def hoist(self, make) -> Value:
        """Create a var/shared op at the top of the kernel body, so it dominates every use."""
        blk = Block()
        with self.b.at(blk):
            v = make(self.b)
        op = blk.ops[0]
        op.parent = self.body
        self.body.ops.insert(self.hoisted, op)
        self.hoisted += 1
        return v

    # -- conversions --------------------------------------------------------------------------------------------

    def materialize(self, value: Any, ty: t.ScalarType | None = None) -> Value:
        """A Value for ``value``; Consts become ``const`` ops of ``ty`` (or their literal type)."""
        if isinstance(value, Value):
            return value
        if isinstance(value, Const):
            ty = ty or literal_type(value.value)
            if not const_fits(value.value, ty):
                raise self.error(f"constant {show(value.value)} does not fit in {ty}")
            return self.b.const(self.const_for(value.value, ty), ty)
        raise self.error(f"{self.describe(value)} is not a value", hint="only numbers can be computed with here")

    def const_for(self, value: bool | int | float, ty: t.ScalarType, node: ast.AST | None = None) -> Any:
        """``value`` ready for a ``const`` op of ``ty``: an int meeting a float type must fit a float64."""
        if not ty.is_float:
            return value
        try:
            return to_float(value, ty)
        except ConstError as e:
            raise self.error(e.message, node, e.hint) from None

    def convert(self, value: Any, ty: t.ScalarType, node: ast.AST | None = None, what: str = "value") -> Value:
        """Implicit conversion for assignment, stores and arguments (see typing_rules.assignable)."""
        if isinstance(value, Const):
            v = value.value
            if ty.is_bool and not isinstance(v, bool):
                raise self.error(f"cannot use {v!r} as a bool for {what}", node, "compare explicitly, e.g. x != 0")
            if ty.is_int and isinstance(v, float):
                raise self.error(f"cannot store the float {v!r} into {what} of type {ty}", node,
                                 "write an int literal or use cast(...)")
            if ty.is_int and not const_fits(v, ty):
                raise self.error(f"constant {show(v)} does not fit in {ty} ({what})", node)
            return self.b.const(self.const_for(v, ty, node), ty)
        if not isinstance(value, Value) or not isinstance(value.type, t.ScalarType):
            raise self.error(f"{self.describe(value)} cannot be used as {what}", node)
        if not assignable(value.type, ty):
            raise self.error(f"cannot implicitly convert {value.type} to {ty} for {what}", node,
                             f"use cast(x, iron.{ty}) to convert explicitly")
        return self.b.cast(value, ty)

    def describe(self, value: Any) -> str:
        """How a compile-time or IR value is named in an error message."""
        if isinstance(value, Ref):
            obj = value.obj
            if isinstance(obj, t.ScalarType):
                return f"the dtype {obj}"
            return f"'{getattr(obj, '__name__', type(obj).__name__)}'"
        if isinstance(value, Const):
            return f"the constant {value.value!r}"
        if isinstance(value, tuple):
            return f"a tuple of {len(value)}"
        if isinstance(value, Value):
            if isinstance(value.type, t.BufferType):
                space = value.type.space
                return f"a {space} array" if space in ("shared", "local") else f"a buffer of {value.type.elem}"
            return f"a value of type {value.type}"
        if value is None:
            return "a call that returns nothing"
        return type(value).__name__

    # -- statements ---------------------------------------------------------------------------------------------

    def stmts(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if self.terminated:
                break  # code after break/continue/return in the same block is unreachable
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        self.node = node
        self.b.loc = self.frame.src.loc(node)
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            what, hint = UNSUPPORTED_STMTS.get(type(node), (f"`{type(node).__name__}` statement", None))
            raise self.error(f"unsupported syntax: {what}", node, hint)
        try:
            method(node)
        except (CompileError, WidenVar):
            raise
        except ConstError as e:  # a constant Python refuses, or too large, met where no node was at hand
            raise self.error(e.message, self.node, e.hint) from None
        except OverflowError as e:  # a Python int too large for a float64, converted in some builtin's folding
            raise self.error(f"a constant is out of range: {e}", self.node,
                             "compile-time ints are Python ints; one meeting a float must fit a float64") from None
        except Exception as e:  # a bug in Iron: still point at the user's line, keep internals out of the way
            err = self.error(f"internal compiler error: {type(e).__name__}: {e}", self.node,
                             "this is a bug in Iron; set IRON_DEBUG=1 for the compiler's traceback")
            if os.environ.get("IRON_DEBUG"):
                raise err from e
            raise err from None

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for tgt in node.targets:
            self.assign(tgt, value, node.value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        ann = self.expr(self.frame.src.unquote(node.annotation))
        if not (isinstance(ann, Ref) and isinstance(ann.obj, t.ScalarType)):
            raise self.error("a local's annotation must be a dtype (iron.f32, iron.i32, ...)", node.annotation)
        if ann.obj.is_narrow:
            raise self.error(f"a local cannot be {ann.obj}: 8-bit types are for buffers and arrays", node.annotation,
                             f"declare it iron.i32 and store it with cast(x, iron.{ann.obj})")
        if not isinstance(node.target, ast.Name):
            raise self.error("only simple names can be annotated", node.target)
        if node.value is None:
            raise self.error(f"declare '{node.target.id}' with a value", node,
                             f"write `{node.target.id}: {ann.obj} = 0`")
        self.assign_name(node.target.id, self.expr(node.value), node, declared=ann.obj)

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        tgt = node.target
        if isinstance(tgt, ast.Name):
            current = self.lookup(tgt.id, tgt)
            self.node = node
            result = self.binop(node.op, current, self.expr(node.value), node)
            self.assign_name(tgt.id, result, node)
        elif isinstance(tgt, ast.Subscript):
            buf, index = self.subscript_target(tgt)
            from .lower_builtins import widen

            current = widen(self, self.b.load(buf, index))
            self.node = node
            result = self.binop(node.op, current, self.expr(node.value), node)
            self.b.loc = self.frame.src.loc(node)
            self.b.store(buf, index, self.convert(result, buf.type.elem, node, "the stored element"))
        else:
            raise self.error("unsupported augmented-assignment target", tgt)

    def assign(self, tgt: ast.AST, value: Any, value_node: ast.AST) -> None:
        if isinstance(tgt, ast.Name):
            self.assign_name(tgt.id, value, tgt)
        elif isinstance(tgt, ast.Subscript):
            buf, index = self.subscript_target(tgt)
            self.b.loc = self.frame.src.loc(tgt)
            self.b.store(buf, index, self.convert(value, buf.type.elem, value_node, "the stored element"))
        elif isinstance(tgt, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple) or len(value) != len(tgt.elts):
                raise self.error("tuple assignment needs a tuple of the same length on the right", tgt)
            for e, v in zip(tgt.elts, value):
                self.assign(e, v, value_node)
        elif isinstance(tgt, ast.Attribute):
            raise self.error("cannot assign to an attribute in a kernel", tgt)
        else:
            raise self.error("unsupported assignment target", tgt)

    def subscript_target(self, tgt: ast.Subscript) -> tuple[Value, Value]:
        buf = self.expr(tgt.value)
        if not (isinstance(buf, Value) and isinstance(buf.type, t.BufferType)):
            raise self.error(f"{self.describe(buf)} is not a buffer and cannot be indexed", tgt.value)
        return buf, self.index(tgt.slice)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.truth(self.expr(node.test), node.test)
        self.b.loc = self.frame.src.loc(node)
        if isinstance(cond, Const):
            # a compile-time condition (constexpr): only the taken branch is compiled, like `if constexpr`
            self.stmts(node.body if cond.value else node.orelse)
            return
        _, then, else_ = self.b.if_(cond)
        fr = self.frame
        before = set(fr.defined_vars)
        after_then = self.region(then, node.body, node, is_loop=None)
        fr.defined_vars = set(before)
        after_else = self.region(else_, node.orelse, node, is_loop=None)
        reached = [r for r in (after_then, after_else) if r is not None]
        if reached:
            fr.defined_vars = set.intersection(*reached)
        else:
            fr.defined_vars = before
            self.terminated = True  # both branches jump away: what follows is unreachable

    def region(self, block: Block, body: list[ast.stmt], node: ast.AST, is_loop: str | None) -> set[str] | None:
        """Lower ``body`` into ``block`` in a fresh scope. Returns the var slots definitely assigned at its end, or
        None when the block always ends in a jump."""
        fr = self.frame
        before = set(fr.defined_vars)
        fr.scopes.append({})
        if is_loop:
            self.loop_depth.append(is_loop)
        saved_term = self.terminated
        self.terminated = False
        with self.b.at(block):
            self.stmts(body)
        ended_by_jump = self.terminated
        self.terminated = saved_term
        if is_loop:
            self.loop_depth.pop()
        scope = fr.scopes.pop()
        for n, v in scope.items():
            if isinstance(v, Value):
                fr.ended.setdefault(n, node.lineno)
        if is_loop:
            fr.defined_vars = before  # a loop body may run zero times
            return before
        return None if ended_by_jump else set(fr.defined_vars)

    def stmt_For(self, node: ast.For) -> None:
        from .loops import lower_for

        lower_for(self, node)

    def int_operand(self, value: Any, node: ast.AST) -> Value:
        if isinstance(value, Const):
            if not const_fits(value.value, t.i32):
                raise self.error(f"{value.value!r} does not fit in i32", node)
            return self.b.const(value.value, t.i32)
        if isinstance(value, Value) and isinstance(value.type, t.ScalarType) and value.type.is_wide:
            raise self.error(f"a {value.type} cannot be a loop bound or a lane number: they are i32", node,
                             "cast(x, iron.i32) where it fits, or count with a `while` loop over an i64 variable")
        if isinstance(value, Value) and isinstance(value.type, t.ScalarType) and (value.type.is_int
                                                                                  or value.type.is_bool):
            return self.b.cast(value, t.i32)
        raise self.error(f"expected an integer, got {self.describe(value)}", node,
                         "loop bounds and indices must be integers; use cast(x, iron.i32)")

    def stmt_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error("unsupported syntax: `while ... else`", node, "set a flag before `break` instead")
        if self._calls_helper(node.test):
            # a helper inlined into the condition may bring loops and early returns, which a condition region cannot
            # hold (it computes a value, nothing jumps): `while True: if not test: break` evaluates it in the body
            guard = ast.If(ast.UnaryOp(ast.Not(), node.test), [ast.Break()], [])
            loop = ast.While(ast.Constant(True), [guard, *node.body], [])
            for n in (guard, guard.test, guard.body[0], loop, loop.test):
                ast.copy_location(n, node.test if n is not loop else node)
            return self.stmt_While(loop)
        _, cond_block, body = self.b.while_()
        with self.b.at(cond_block):
            c = self.truth(self.expr(node.test), node.test)
            self.b.loc = self.frame.src.loc(node.test)
            self.b.op("condition", [self.materialize(c, t.bool_)])
        self.region(body, node.body, node, is_loop="while")

    def _calls_helper(self, test: ast.expr) -> bool:
        """Whether the expression calls an ``@iron.func`` (resolved by name, as the call will be)."""
        from .refs import IronFunc, Ref

        for call in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
            if isinstance(call.func, (ast.Name, ast.Attribute)):
                try:
                    fn = self.expr(call.func)
                except IronError:
                    continue
                if isinstance(fn, Ref) and isinstance(fn.obj, IronFunc):
                    return True
        return False

    def stmt_Break(self, node: ast.Break) -> None:
        self.jump("break", node)

    def stmt_Continue(self, node: ast.Continue) -> None:
        self.jump("continue", node)

    def jump(self, kind: str, node: ast.AST) -> None:
        if not self.loop_depth:
            raise self.error(f"`{kind}` outside a loop", node)
        if self.loop_depth[-1] == "static":
            raise self.error(f"`{kind}` is not allowed in a static_range loop (it is unrolled)", node,
                             "use range(...) or guard the body with an if")
        self.b.op(kind)
        self.terminated = True

    def stmt_Return(self, node: ast.Return) -> None:
        fr = self.frame
        if not fr.is_helper:
            if node.value is not None:
                raise self.error("a kernel cannot return a value", node, "store results into an output buffer")
            if self.loop_depth and self.loop_depth[-1] == "static":
                pass
            self.b.op("return")
            self.terminated = True
            return
        self.helper_return(node)

    def helper_return(self, node: ast.Return) -> None:
        from .helpers import helper_return

        helper_return(self, node)

    def stmt_ReturnGuard(self, node: ast.stmt) -> None:
        """Code a ``return`` inside a helper's loop may skip (helpers.ReturnGuard)."""
        from .helpers import lower_return_guard

        lower_return_guard(self, node)

    # -- expressions: see exprs.ExprMixin -------------------------------------------------------------------------

