"""The Python values a kernel's variants baked in: module globals, closure variables and class or module attributes
that are numbers (compile-time constants) or dtypes.

A variant is compiled once and then launched many times, so a value read at its compile would otherwise stay frozen
in it, while a variant compiled later (another dtype) would see the new value: two variants of one kernel would
disagree. ``KernelFunction`` keeps every such read with the value it saw and, before a launch or compile, drops its
variants when one has changed (``KernelFunction.refresh``): they recompile with the current values. Functions,
modules and helpers are not tracked (they are code, and a kernel's source is read once, at decoration)."""

from __future__ import annotations

from typing import Any

from ..ir import types as t
from ..ir.variant import constexpr_key

_GONE = object()


def baked(value: Any) -> bool:
    """Whether a kernel compiles ``value`` into its code: a number becomes a constant, a dtype a type."""
    return isinstance(value, (bool, int, float, t.ScalarType))


def same(a: Any, b: Any) -> bool:
    """Equal as compiled: 2 and 2.0, 0.0 and -0.0 differ; NaN equals NaN; dtypes are compared by identity."""
    if isinstance(a, t.ScalarType) or isinstance(b, t.ScalarType):
        return a is b
    if not baked(a) or not baked(b):
        return False
    return constexpr_key(a) == constexpr_key(b)


def read_now(kind: str, holder: Any, name: str) -> Any:
    """The current value of a read: ``kind`` "global" (``holder`` a module's dict), "cell" (a closure cell) or
    "attr" (an attribute of the module or class ``holder``)."""
    try:
        if kind == "global":
            return holder[name]
        if kind == "cell":
            return holder.cell_contents
        return getattr(holder, name)
    except (KeyError, ValueError, AttributeError):
        return _GONE


class GlobalReads:
    """The reads one or more compiles made, each with the value it saw; ``changed()`` says whether any now differs.
    ``keys`` (a set, so that ``if reads.keys`` costs nothing on the launch path) says whether there are any."""

    def __init__(self) -> None:
        self.keys: set[tuple] = set()
        self._globals: list[tuple[dict, str, Any]] = []  # (module dict, name, value): most reads, checked first
        self._others: list[tuple[str, Any, str, Any]] = []  # (kind, holder, name, value)

    def note(self, kind: str, holder: Any, name: str, value: Any) -> None:
        key = (kind, id(holder), name)
        if not baked(value) or key in self.keys:
            return
        self.keys.add(key)
        if kind == "global":
            self._globals.append((holder, name, value))
        else:
            self._others.append((kind, holder, name, value))

    def update(self, other: GlobalReads) -> None:
        for holder, name, value in other._globals:
            self.note("global", holder, name, value)
        for kind, holder, name, value in other._others:
            self.note(kind, holder, name, value)

    def changed(self) -> bool:
        # run before launches: an unchanged value is the very same object, so `is` answers almost every read
        for holder, name, value in self._globals:
            now = holder.get(name, _GONE)
            if now is not value and not same(now, value):
                return True
        for kind, holder, name, value in self._others:
            now = read_now(kind, holder, name)
            if now is not value and not same(now, value):
                return True
        return False

    def clear(self) -> None:
        self.keys.clear()
        self._globals.clear()
        self._others.clear()
