"""Optional buffers: a parameter annotated ``Tensor[...] | None`` that a launch may pass as None.

None selects a variant in which the buffer is absent: it is not a parameter of that variant's compiled kernel, so no
emitter or runtime knows about optional buffers. In the body the parameter's name is bound to an ``Absent`` marker;
``x is None`` / ``x is not None`` fold to a constant (the branch not taken is never compiled, like a constexpr ``if``)
and any other use of the name is a located CompileError telling the user to guard it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ..ir import types as t
from ..ir.core import Value
from .typing_rules import Const


@dataclass(frozen=True)
class Absent:
    """What an absent optional buffer's name means in a variant compiled without it. ``origin``: the kernel
    parameter that was None (a helper's parameter bound to it keeps the kernel's name here)."""

    origin: str


def absent_use(cg, name: str, value: Absent, node: ast.AST):
    """The error for using ``name`` (bound to an absent buffer) other than in ``is None`` / ``is not None``."""
    if name == value.origin:
        why = f"'{name}' is None in this variant of {cg.name} (launched with {name}=None)"
    elif value.origin == "None":
        why = f"'{name}' is None here (its caller passed None, or left it to its default)"
    else:
        why = f"'{name}' is None here ({cg.name} was launched with {value.origin}=None)"
    return cg.error(f"{why}, so it cannot be used", node, f"guard it with `if {name} is not None:`")


def absent_named(cg, node: ast.AST) -> Absent | None:
    """The ``Absent`` a bare name refers to, without raising the error a use of it would."""
    if not isinstance(node, ast.Name) or node.id in cg.frame.vars:
        return None
    for scope in reversed(cg.frame.scopes):
        if node.id in scope:
            value = scope[node.id]
            return value if isinstance(value, Absent) else None
    return None


def helper_argument(cg, node: ast.AST) -> Any:
    """An argument of an ``@iron.func`` call: an absent buffer (or a literal None) passes through as ``Absent``,
    so the helper may test it with ``is None``; anything else is evaluated as usual."""
    if isinstance(node, ast.Constant) and node.value is None:
        return Absent("None")
    absent = absent_named(cg, node)
    return absent if absent is not None else cg.expr(node)


def refuse_absent_arguments(cg, node: ast.Call) -> None:
    """An absent buffer passed to a builtin or a Python function (``len(bias)``, ``atomic_add(bias, ...)``): the
    absent-buffer error, before the call's own checks could say something less to the point."""
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        absent = absent_named(cg, arg)
        if absent is not None:
            raise absent_use(cg, arg.id, absent, arg)


def is_optional_param(cg, value: Any) -> bool:
    """Whether ``value`` is the kernel's own parameter for an optional buffer that this variant has."""
    return (isinstance(value, Value) and value.owner is cg.body and any(value is a for a in cg.body.args)
            and value.name in getattr(cg, "optional_params", ()))


def lower_is_none(cg, node: ast.Compare) -> Const:
    """``x is None`` / ``x is not None``: a compile-time bool for an optional buffer (absent or present)."""
    op = node.ops[0]
    right = node.comparators[0]
    if len(node.ops) != 1 or not isinstance(op, (ast.Is, ast.IsNot)):
        raise cg.error("unsupported comparison: `is` and `is not` only test an optional buffer against None", node,
                       "write `x is None` or `x is not None` on its own (and combine with `and` / `or`)")
    none_left = isinstance(node.left, ast.Constant) and node.left.value is None
    none_right = isinstance(right, ast.Constant) and right.value is None
    if none_left == none_right:
        raise cg.error("`is` / `is not` only compare an optional buffer with None", node,
                       "compare numbers with == and !=")
    subject = right if none_left else node.left
    is_none = _is_none(cg, subject)
    return Const(is_none if isinstance(op, ast.Is) else not is_none)


def _is_none(cg, subject: ast.expr) -> bool:
    if absent_named(cg, subject) is not None:
        return True
    value = cg.expr(subject)
    cg.node = subject
    if isinstance(value, Value) and isinstance(value.type, t.BufferType):
        if cg.frame.is_helper or is_optional_param(cg, value):
            return False  # a helper may test any buffer it is given: only an absent one is None
        name = subject.id if isinstance(subject, ast.Name) else "this buffer"
        raise cg.error(f"'{name}' is not an optional buffer: it is never None", subject,
                       f"annotate it `{name}: Tensor[...] | None` to let a launch pass None, or drop the test")
    raise cg.error(f"`is None` tests an optional buffer parameter, not {cg.describe(value)}", subject,
                   "only buffers annotated `Tensor[...] | None` can be None")
