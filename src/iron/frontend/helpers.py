"""Inlining of ``@iron.func`` helpers into the calling kernel.

A helper's body is lowered in its own name scope (it sees its parameters, its locals and its module's globals, not
the caller's locals). ``return`` statements are first moved to tail position (``if c: return a`` followed by more
code becomes ``if c: return a else: <more code>``), so a return never needs a jump: the value goes to a result slot.

A ``return`` inside a loop sets the result slot and a "returned" flag, then breaks out of its loop; after each loop
that may return, ``if returned: break`` leaves the enclosing loop too, and at the helper's top level the code after
such a loop runs under ``if not returned``. A ``static_range`` loop (unrolled: no ``break``) runs each later iteration
under ``if not returned`` instead.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from ..ir import types as t
from ..ir.core import Value
from .optional import Absent, helper_argument
from .source import first_store, function_source
from .typing_rules import Const

#: the name of a helper's "returned" flag in its frame (not a Python identifier a user can write by accident)
RETURNED = "__iron_returned__"


class ReturnGuard(ast.stmt):
    """Synthetic statement around code that a ``return`` in a loop may skip: ``kind`` "loop_body" (a loop's body)
    or "after_loop" (what follows a loop that may return). Lowered by ``lower_return_guard``."""

    _fields = ("body",)

    def __init__(self, kind: str, body: list[ast.stmt], where: ast.AST):
        super().__init__(body=body)
        self.kind = kind
        ast.copy_location(self, where)


def _contains_return(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def _returns_in_loops(body: list[ast.stmt]) -> bool:
    return any(isinstance(loop, (ast.For, ast.While)) and _contains_return(loop.body)
               for s in body for loop in ast.walk(s))


def to_tail_form(body: list[ast.stmt], cont: list[ast.stmt] | None = None) -> list[ast.stmt]:
    """Rewrite ``body`` followed by ``cont`` so that every ``return`` is the last statement on its path: the
    statements after an ``if`` that returns on some path move into each of its branches (continuation passing); a
    loop that returns gets its body and what follows it wrapped in ``ReturnGuard``s. Never mutates the input."""
    stmts = body + (cont or [])
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            return stmts[: i + 1]
        if isinstance(stmt, ast.If) and _contains_return([stmt]):
            rest = stmts[i + 1:]
            new = copy.copy(stmt)
            new.body = to_tail_form(stmt.body, rest)
            new.orelse = to_tail_form(stmt.orelse, rest)
            return stmts[:i] + [new]
        if isinstance(stmt, (ast.For, ast.While)) and _contains_return(stmt.body):
            loop = copy.copy(stmt)
            loop.body = [ReturnGuard("loop_body", to_tail_form(stmt.body), stmt)]
            return stmts[:i] + [loop, ReturnGuard("after_loop", to_tail_form(stmts[i + 1:]), stmt)]
    return stmts


def lower_return_guard(cg, node: ReturnGuard) -> None:
    """In a loop that can ``break`` (range, while), a return has already left it: after an inner loop, leave this
    one too (``if returned: break``), and run the rest as is. In a static_range loop (no break) or at the helper's
    top level, run the guarded code only while the helper has not returned."""
    in_breakable_loop = bool(cg.loop_depth) and cg.loop_depth[-1] != "static"
    flag = ast.copy_location(ast.Name(RETURNED, ast.Load()), node)
    if in_breakable_loop:
        if node.kind == "after_loop":
            cg.stmt(ast.copy_location(ast.If(flag, [ast.copy_location(ast.Break(), node)], []), node))
        cg.stmts(node.body)
    elif node.body:
        not_returned = ast.copy_location(ast.UnaryOp(ast.Not(), flag), node)
        cg.stmt(ast.copy_location(ast.If(not_returned, node.body, []), node))


def inline_call(cg, func, node: ast.Call) -> Any:
    """Lower a call to the ``@iron.func`` ``func`` at ``node``; returns the helper's result (or None)."""
    fn = func.fn
    if fn in cg.call_stack:
        raise cg.error(f"recursive call to @iron.func '{fn.__name__}' is not supported", node,
                       "kernels are inlined; rewrite the recursion as a loop")
    if len(cg.call_stack) > 32:
        raise cg.error("@iron.func calls nested more than 32 deep", node)
    src = func.src if func.src is not None else function_source(fn)  # read at decoration (refs.IronFunc)
    fdef = src.node
    args = [helper_argument(cg, a) for a in node.args]  # an absent optional buffer passes through as Absent
    kwargs = {k.arg: helper_argument(cg, k.value) for k in node.keywords}
    cg.node = node
    names = [a.arg for a in fdef.args.args]
    if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs:
        raise cg.error(f"@iron.func '{fn.__name__}' uses *args/**kwargs/keyword-only parameters", node)
    defaults = dict(zip(names[len(names) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    if len(args) > len(names):
        raise cg.error(f"{fn.__name__}() takes {len(names)} arguments, got {len(args)}", node)
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise cg.error(f"{fn.__name__}() has no parameter '{k}'", node)
        if k in bound:
            raise cg.error(f"{fn.__name__}() got two values for '{k}'", node)
        bound[k] = v
    for n in names:
        if n not in bound:
            if n not in defaults:
                raise cg.error(f"{fn.__name__}() is missing argument '{n}'", node)
            d = defaults[n]
            if d is None:  # `b=None`: a buffer the caller may leave out, tested with `b is None`
                bound[n] = Absent("None")
                continue
            if not isinstance(d, (bool, int, float)):
                raise cg.error(f"default of '{n}' must be a number (or None, for a buffer)", node)
            bound[n] = Const(d)

    saved = (cg.frame, cg.loop_depth, cg.terminated, cg.b.loc)
    frame = cg._new_frame(src, {**fn.__globals__, "__iron_fn__": fn}, is_helper=True)
    frame.site = cg.frame.site + ((node.lineno, node.col_offset),)
    if _returns_in_loops(fdef.body):
        cg.b.loc = cg.frame.src.loc(node)
        frame.returned = cg.hoist(lambda b: b.var(t.bool_, "returned"))
        cg.b.set(frame.returned, cg.b.const(False, t.bool_))  # every call starts afresh (a call in a loop)
        frame.vars[RETURNED] = frame.returned
        frame.defined_vars.add(RETURNED)
    cg.frame, cg.loop_depth, cg.terminated = frame, [], False
    cg.call_stack.append(fn)
    try:
        for n in names:
            if n in frame.multi:
                cg.assign_name(n, bound[n], _rebinding(cg, fn, fdef, n, bound[n]))
            else:
                cg.bind(n, bound[n])
        body = to_tail_form(fdef.body)
        returns = [s for s in ast.walk(ast.Module(body=body, type_ignores=[])) if isinstance(s, ast.Return)]
        if len(returns) == 1 and body and body[-1] is returns[0]:
            cg.stmts(body[:-1])
            result = cg.expr(returns[0].value) if returns[0].value is not None else None
        else:
            frame.pending_returns = []
            cg.stmts(body)
            result = _merge_returns(cg, frame.pending_returns, fdef)
    finally:
        cg.call_stack.pop()
        cg.frame, cg.loop_depth, cg.terminated, cg.b.loc = saved
    return result


def helper_return(cg, node: ast.Return) -> None:
    """A ``return`` in tail position of an inlined helper: remember the value and where it was computed; the result
    slot is created once every return is known, so its type is the join of all of them (literals stay weak). In a
    loop the return also sets the "returned" flag and, where the loop can break, leaves it (emitted with the slot's
    write, after the value)."""
    exit = None
    if cg.loop_depth:
        exit = "static" if cg.loop_depth[-1] == "static" else "break"
    value = cg.expr(node.value) if node.value is not None else None
    if value is not None or exit is not None:
        cg.frame.pending_returns.append((cg.b.block, value, node, exit))
    if exit != "static":
        cg.terminated = True  # a static_range iteration goes on to its end, which to_tail_form left empty


def _merge_returns(cg, pending: list, fdef: ast.AST) -> Any:
    valued = [(value, node) for _, value, node, _ in pending if value is not None]
    slot = ty = None
    if valued:
        for value, node in valued:
            cg.check_number(value, node)
            ty = cg.value_type(value) if ty is None else cg.common_type(_Typed(ty), value)
        if all(isinstance(v, Const) for v, _ in valued):
            ty = t.f32 if any(isinstance(v.value, float) for v, _ in valued) else ty
        ty = cg.var_type(ty)
        slot = cg.hoist(lambda b: b.var(ty, "ret"))
    for block, value, node, exit in pending:
        with cg.b.at(block):
            cg.b.loc = cg.frame.src.loc(node)
            if value is not None:
                cg.b.set(slot, cg.convert(value, ty, node, "the return value"))
            if exit is not None:
                cg.b.set(cg.frame.returned, cg.b.const(True, t.bool_))
            if exit == "break":
                cg.b.op("break")
    return cg.b.get(slot, "ret") if slot is not None else None


class _Typed:
    """Stands in for a value of a known type when joining return types."""

    def __init__(self, type: t.ScalarType):
        self.type = type


def _rebinding(cg, fn, fdef: ast.FunctionDef, name: str, value: Any) -> ast.AST:
    """The node an argument assigned again in the helper's body is reported at: a buffer, array, dtype or tuple
    cannot be reassigned (only scalars live in variables), and that is said at the assignment, not at the ``def``."""
    scalar = isinstance(value, Const) or (isinstance(value, Value) and isinstance(value.type, t.ScalarType))
    if scalar or isinstance(value, Value) and isinstance(value.type, t.FragType):
        return fdef
    raise cg.error(f"'{name}' is {cg.describe(value)} here (an argument of {fn.__name__}) and cannot be reassigned",
                   first_store(fdef, name) or fdef, "give the new value a new name")


__all__ = ["ReturnGuard", "helper_return", "inline_call", "lower_return_guard", "to_tail_form", "t"]

