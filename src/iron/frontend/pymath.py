"""Python's ``math`` module and ``float("inf")`` inside kernels, as a CUDA or Triton author writes them.

- ``math.sqrt(x)``, ``math.exp(x)``, ``math.atan2(y, x)``... on a run-time value are Iron's builtin of the same name
  (every float-math row of the op table that ``math`` also has), ``math.fabs`` is ``abs`` on a float; also when
  imported bare (``from math import sqrt``).
- On compile-time constants every ``math`` function folds with Python's own ``math``, in float64, so constexpr
  arithmetic means what it means in Python: ``math.ceil(N / B)`` is an int, ``math.log2(BLOCK)`` a float.
- ``math.inf``, ``math.nan``, ``math.pi`` are constants already (module attributes); ``float("inf")`` folds in
  ``lower_builtins.float_of_string``.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from ..ir import ops as O
from .lower_builtins import ARITY, lower_values
from .typing_rules import Const

#: ``math`` functions that are an Iron builtin under another name
ALIASES = {"fabs": "abs"}


def math_function_name(obj: Any) -> str | None:
    """``obj``'s name when it is a function of the ``math`` module (``math.sqrt`` or ``from math import sqrt``)."""
    name = getattr(obj, "__name__", None)
    if isinstance(name, str) and callable(obj) and getattr(math, name, None) is obj:
        return name
    return None


def iron_builtin_for(name: str) -> str | None:
    """The Iron builtin a ``math`` function lowers to on run-time values, or None when Iron has none."""
    if name in ALIASES:
        return ALIASES[name]
    return name if name in O.FLOAT_MATH else None


def is_pure_math(obj: Any) -> bool:
    """A ``math`` function a condition may evaluate speculatively: it folds, or lowers to a pure builtin."""
    name = math_function_name(obj)
    return name is not None and iron_builtin_for(name) is not None


def lower_math_call(cg, name: str, node: ast.Call) -> Any:
    """``math.<name>(...)`` at ``node``: folded with Python's math when every argument is a compile-time constant,
    else Iron's builtin of that name."""
    if node.keywords:
        raise cg.error(f"math.{name}() takes no keyword arguments in a kernel", node)
    args = [cg.expr(a) for a in node.args]
    cg.node = node
    cg.b.loc = cg.frame.src.loc(node)
    for a, a_node in zip(args, node.args):
        cg.check_number(a, a_node)
    if all(isinstance(a, Const) for a in args):
        return _fold(cg, name, args, node)
    builtin = iron_builtin_for(name)
    if builtin is None:
        known = sorted({n for n in O.FLOAT_MATH if hasattr(math, n)} | set(ALIASES))
        raise cg.error(f"math.{name}() works in a kernel on compile-time constants only; Iron has no {name} builtin",
                       node, f"the math functions a kernel can apply to run-time values: {', '.join(known)}")
    lo, hi = ARITY[builtin]
    if not lo <= len(args) <= hi:
        hint = "write log(x) / log(base)" if name == "log" else f"Iron's {builtin} takes {lo} argument(s)"
        raise cg.error(f"math.{name}() with {len(args)} arguments on a run-time value is not supported", node, hint)
    if name == "fabs":
        args = [a if isinstance(a, Const) else cg.materialize_as(a, cg.common_type(a, Const(0.0))) for a in args]
    return lower_values(cg, builtin, args, list(node.args), node)


def _fold(cg, name: str, args: list[Const], node: ast.Call) -> Const:
    shown = ", ".join(repr(a.value) for a in args)
    try:
        value = getattr(math, name)(*(a.value for a in args))
    except (ValueError, OverflowError, TypeError, ZeroDivisionError) as e:
        raise cg.error(f"math.{name}({shown}) cannot be computed: {e}", node) from None
    if not isinstance(value, (bool, int, float)):
        raise cg.error(f"math.{name}({shown}) gives {type(value).__name__}, not a number", node,
                       "kernels compute with numbers only")
    return Const(value)
