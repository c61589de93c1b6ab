"""How a local variable's slot gets its type: its first assignment, its annotation, or a widening.

A name assigned more than once lives in a var slot typed by its first value. One exception, as Triton unifies a
loop-carried variable's type: a variable that starts as an int constant (``acc = 0``) and is given a float in a loop
that the start is outside of (``acc += 0.5``) is a float from the start. The front-end finds that out only when the
float arrives, so ``WidenVar`` restarts the kernel's lowering with the variable typed as that float
(``FunctionCodegen.build``). Any other float given to an int variable is a located error that says how to fix it.
Likewise a variable that starts as a literal (``acc = 0``, ``acc = 0.0``) and is given a 64-bit value of its kind
(i64/u64, f64) in such a loop is that 64-bit type from the start: the accumulator of 64-bit values is 64-bit.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir import types as t
from ..ir.core import Value
from .typing_rules import Const


class WidenVar(Exception):
    """Raised (and caught by ``build``) when a loop-carried variable that started as an int constant is given a
    float: lowering restarts with the variable typed as that float from its first assignment."""

    def __init__(self, key: tuple, type: t.ScalarType):
        super().__init__(key)
        self.key, self.type = key, type


def new_var(cg, name: str, value: Any, node: ast.AST, declared: t.ScalarType | None) -> Value:
    """The var slot of ``name``, typed by its first value (or its declaration, or an earlier widening)."""
    fr = cg.frame
    ty = declared or cg.widened.get((fr.site, name)) or cg.value_type(value)
    ty = cg.var_type(ty)
    var = cg.hoist(lambda b: b.var(ty, name))
    fr.vars[name] = var
    weak = declared is None and isinstance(value, Const) and type(value.value) in (int, float)
    fr.starts[name] = (getattr(node, "lineno", 0), len(cg.loop_depth), value.value if weak else None, declared)
    return var


def widen_to_64(cg, name: str, elem: t.ScalarType, value: Any) -> None:
    """``name`` (of 32-bit type ``elem``) is given a 64-bit value of the same kind: widen it when it started as a
    literal outside the loop this happens in; elsewhere the value converts as on any assignment."""
    if not (isinstance(value, Value) and isinstance(value.type, t.ScalarType) and value.type.is_wide) or elem.is_wide:
        return
    if value.type.is_float != elem.is_float:
        return
    _, depth, start, _ = cg.frame.starts.get(name, (0, 0, None, None))
    if start is not None and len(cg.loop_depth) > depth:
        raise WidenVar((cg.frame.site, name), value.type)


def is_float(value: Any) -> bool:
    if isinstance(value, Const):
        return isinstance(value.value, float)
    return isinstance(value, Value) and isinstance(value.type, t.ScalarType) and value.type.is_float


def float_into_int_var(cg, name: str, value: Any, node: ast.AST) -> None:
    """``name`` holds an int and is now given a float. Started as an int constant outside the loop this happens
    in (``acc = 0`` ... ``acc += 0.5``): widen it, ``build`` lowers again. Anywhere else: say how to fix it."""
    line, depth, start, declared = cg.frame.starts[name]
    ty = cg.var_type(t.f32 if isinstance(value, Const) else value.type)
    if start is not None and len(cg.loop_depth) > depth:
        raise WidenVar((cg.frame.site, name), ty)
    elem = cg.frame.vars[name].type.elem
    what = f"the float {value.value!r}" if isinstance(value, Const) else str(value.type)
    if start is not None:
        hint = (f"'{name}' is {elem} because its first assignment (line {line}) is the int {start}; write "
                f"`{name} = {float(start)!r}` there to make it a float variable")
    elif declared is not None:
        hint = f"'{name}' is declared {elem} on line {line}; declare it a float there, or cast(x, iron.{elem}) here"
    else:
        hint = (f"'{name}' is {elem} from its first assignment (line {line}); make that value a float, or convert "
                f"here with cast(x, iron.{elem})")
    raise cg.error(f"cannot implicitly convert {what} to {elem} for '{name}'", node, hint)

