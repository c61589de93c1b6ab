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


def _ends_with_return(body: list[ast.stmt]) -> bool:
    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        return _ends_with_return(last.body) and _ends_with_return(last.orelse)
    return False


def to_tail_form(body: list[ast.stmt]) -> list[ast.stmt]:
    """Rewrite so that every ``return`` is the last statement on its path."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.If):
            rest = body[i + 1:]
            then_ret, else_ret = _ends_with_return(stmt.body), _ends_with_return(stmt.orelse)
            if rest and (then_ret or else_ret) and not (then_ret and else_ret):
                new = copy.copy(stmt)
                new.body = to_tail_form(stmt.body if then_ret else stmt.body + rest)
                new.orelse = to_tail_form(stmt.orelse if else_ret else stmt.orelse + rest)
                out.append(new)
                return out
            new = copy.copy(stmt)
            new.body = to_tail_form(stmt.body)
            new.orelse = to_tail_form(stmt.orelse)
            out.append(new)
            if then_ret and else_ret:
                return out
        else:
            out.append(stmt)
            if isinstance(stmt, ast.Return):
                return out
    return out


def inline_call(cg, func, node: ast.Call) -> Any:
    """Lower a call to the ``@iron.func`` ``func`` at ``node``; returns the helper's result (or None)."""
    fn = func.fn
    if fn in cg.call_stack:
        raise cg.error(f"recursive call to @iron.func '{fn.__name__}' is not supported", node,
                       "kernels are inlined; rewrite the recursion as a loop")
    if len(cg.call_stack) > 32:
        raise cg.error("@iron.func calls nested more than 32 deep", node)
    src = function_source(fn)
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
            cg.stmts(body)
            result = cg.b.get(frame.result_var, "ret") if frame.result_var is not None else None
    finally:
        cg.call_stack.pop()
        cg.frame, cg.loop_depth, cg.terminated, cg.b.loc = saved
    return result


def helper_return(cg, node: ast.Return) -> None:
    """A ``return`` in tail position of an inlined helper: the value goes to the helper's result slot."""
    fr = cg.frame
    if node.value is not None:
        value = cg.expr(node.value)
        if fr.result_var is None:
            ty = cg.var_type(cg.value_type(value))
            fr.result_var = cg.hoist(lambda b: b.var(ty, "ret"))
        cg.b.set(fr.result_var, cg.convert(value, fr.result_var.type.elem, node, "the return value"))
    cg.terminated = True


__all__ = ["helper_return", "inline_call", "to_tail_form", "t"]
