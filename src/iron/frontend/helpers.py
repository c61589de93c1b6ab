"""Inlining of ``@iron.func`` helpers into the calling kernel.

A helper's body is lowered in its own name scope (it sees its parameters, its locals and its module's globals, not
the caller's locals). ``return`` statements are first moved to tail position (``if c: return a`` followed by more
code becomes ``if c: return a else: <more code>``), so a return never needs a jump: the value goes to a result slot.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from ..ir import types as t
from .source import function_source
from .typing_rules import Const


def _contains_return(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def to_tail_form(body: list[ast.stmt], cont: list[ast.stmt] | None = None) -> list[ast.stmt]:
    """Rewrite ``body`` followed by ``cont`` so that every ``return`` is the last statement on its path: the
    statements after an ``if`` that returns on some path move into each of its branches (continuation passing)."""
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
    return stmts


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
    for sub in ast.walk(fdef):
        if isinstance(sub, (ast.For, ast.While)):
            for inner in ast.walk(sub):
                if isinstance(inner, ast.Return):
                    raise cg.error(f"`return` inside a loop of @iron.func '{fn.__name__}' is not supported",
                                   node, f"see {src.file}:{inner.lineno}; set a result variable and `break`")
    args = [cg.expr(a) for a in node.args]
    kwargs = {k.arg: cg.expr(k.value) for k in node.keywords}
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
            if not isinstance(d, (bool, int, float)):
                raise cg.error(f"default of '{n}' must be a number", node)
            bound[n] = Const(d)

    saved = (cg.frame, cg.loop_depth, cg.terminated, cg.b.loc)
    frame = cg._new_frame(src, {**fn.__globals__, "__iron_fn__": fn}, is_helper=True)
    cg.frame, cg.loop_depth, cg.terminated = frame, [], False
    cg.call_stack.append(fn)
    try:
        for n in names:
            if n in frame.multi:
                cg.assign_name(n, bound[n], fdef)
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
    slot is created once every return is known, so its type is the join of all of them (literals stay weak)."""
    if node.value is not None:
        cg.frame.pending_returns.append((cg.b.block, cg.expr(node.value), node))
    cg.terminated = True


def _merge_returns(cg, pending: list, fdef: ast.AST) -> Any:
    if not pending:
        return None
    ty = None
    for _, value, node in pending:
        cg.check_number(value, node)
        vt = cg.value_type(value)
        if ty is None:
            ty = vt
        else:
            ty = cg.common_type(_Typed(ty), value)
    if all(isinstance(v, Const) for _, v, _ in pending):
        ty = t.f32 if any(isinstance(v.value, float) for _, v, _ in pending) else ty
    ty = cg.var_type(ty)
    slot = cg.hoist(lambda b: b.var(ty, "ret"))
    for block, value, node in pending:
        with cg.b.at(block):
            cg.b.loc = cg.frame.src.loc(node)
            cg.b.set(slot, cg.convert(value, ty, node, "the return value"))
    return cg.b.get(slot, "ret")


class _Typed:
    """Stands in for a value of a known type when joining return types."""

    def __init__(self, type: t.ScalarType):
        self.type = type


__all__ = ["helper_return", "inline_call", "to_tail_form", "t"]
