"""``for`` loops: ``range(...)`` becomes a ``for`` op; ``static_range(...)`` one marked for the ``unroll`` pass, whose
size the front-end bounds for the whole kernel.

Unrolling copies a body once per iteration, and the copies of a nest multiply: ``static_range(100)`` around
``static_range(100)`` is 10,000 copies, whose passes and backend compiles take minutes. So the kernel's static_range
loops, its helpers' included, unroll at most ``MAX_UNROLLED`` iterations in all (nested ones multiplied, loops in
sequence added), checked as each outermost static loop is lowered: its body is lowered once, nothing is unrolled yet.
"""

from __future__ import annotations

import ast
import builtins as py_builtins

from ..ir.core import Block
from ..passes.unroll import MAX_UNROLL
from .refs import Ref
from .typing_rules import Const

#: the iterations a kernel's static_range loops may unroll in all: the unroll pass's limit for one loop, now the
#: kernel's. Unrolled code grows with it, and so do the passes' and the backend compilers' times (4096 copies of
#: one load take clang and lavapipe seconds)
MAX_UNROLLED = MAX_UNROLL


def lower_for(cg, node: ast.For) -> None:
    """``for name in range(...)`` / ``static_range(...)`` at ``node``."""
    if node.orelse:
        raise cg.error("unsupported syntax: `for ... else`", node, "set a flag before `break` instead")
    if not isinstance(node.target, ast.Name):
        raise cg.error("a for loop needs a single name as its target", node.target)
    it = node.iter
    fn = cg.expr(it.func) if isinstance(it, ast.Call) else None
    from ..lang.builtins import BUILTINS

    static = isinstance(fn, Ref) and fn.obj is BUILTINS["static_range"]
    if not (isinstance(fn, Ref) and (fn.obj is py_builtins.range or static)) or it.keywords:
        raise cg.error("a for loop must iterate over range(...) or static_range(...)", it,
                       "write `for i in range(start, stop, step)`")
    if not 1 <= len(it.args) <= 3:
        raise cg.error("range takes 1 to 3 arguments", it)
    args = [cg.expr(a) for a in it.args]
    if len(args) == 1:
        args = [Const(0), args[0]]
    if len(args) == 2:
        args.append(Const(1))
    for a in args:
        if isinstance(a, Const) and not isinstance(a.value, int):
            raise cg.error("range bounds must be integers", node.iter)
    if static and not all(isinstance(a, Const) for a in args):
        raise cg.error("static_range needs compile-time bounds (literals or constexpr parameters)", it,
                       "use range(...) for bounds known only at run time")
    if isinstance(args[2], Const) and args[2].value == 0:
        raise cg.error("range step must not be zero", it)
    trips = len(range(*[a.value for a in args])) if static else 0
    if trips > MAX_UNROLLED:
        raise cg.error(f"static_range would unroll {trips} iterations (limit {MAX_UNROLLED})", it,
                       "use range(...) for long loops")
    bounds = []
    for a, a_node in zip(args, it.args if len(it.args) == 3 else [None] + list(it.args) + [None]):
        bounds.append(cg.int_operand(a, a_node or it))
    cg.b.loc = cg.frame.src.loc(node)
    _, body = cg.b.for_(*bounds, iv_name=node.target.id, unroll=static)
    if static:
        cg.unroll_nest.append(0)
    _body(cg, node, body, "static" if static else "for")
    if static:
        count_unrolled(cg, trips, node)


def _body(cg, node: ast.For, body: Block, kind: str) -> None:
    iv = body.args[0]
    name, fr = node.target.id, cg.frame
    if name in fr.multi:
        before = set(fr.defined_vars)
        with cg.b.at(body):
            cg.assign_name(name, iv, node.target)
        cg.region(body, node.body, node, is_loop=kind)
        fr.defined_vars = before
        return
    fr.scopes.append({name: iv})
    cg.region(body, node.body, node, is_loop=kind)
    fr.scopes.pop()
    fr.ended.setdefault(name, node.lineno)


def count_unrolled(cg, trips: int, node: ast.For) -> None:
    """The static_range loop at ``node``, just lowered, makes ``trips`` copies of its body, each holding the copies
    its own static loops make (``cg.unroll_nest``). Added to the kernel's total at the outermost static loop, which
    is refused when the total crosses ``MAX_UNROLLED``."""
    inner = cg.unroll_nest.pop()
    copies = trips * max(1, inner)
    if cg.unroll_nest:
        cg.unroll_nest[-1] += copies
        return
    before, cg.unrolled = cg.unrolled, cg.unrolled + copies
    if cg.unrolled > MAX_UNROLLED:
        how = f"{trips} x {inner} nested" if inner else f"{trips}"
        earlier = f" after {before} in earlier static_range loops" if before else ""
        raise cg.error(f"static_range loops would unroll {cg.unrolled} iterations in total: this one {copies} "
                       f"({how}){earlier}; a kernel unrolls at most {MAX_UNROLLED}", node,
                       "nested static_range loops multiply: make the outer one a range(...), or unroll less")
