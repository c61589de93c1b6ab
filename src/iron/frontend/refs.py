"""What a kernel body may name at compile time besides values: ``Ref`` wraps a Python object (a builtin, dtype,
module, helper...); ``IronFunc`` is an ``@iron.func`` helper; ``KernelMarker`` marks ``KernelFunction`` so that the
expression lowering can refuse a kernel called from a kernel without importing ``kernel.py`` (which imports it)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from ..errors import CompileError
from .source import FunctionSource, function_source, require_function


@dataclass
class Ref:
    """A compile-time Python object used in a kernel: a builtin, dtype, module, helper, Python function..."""

    obj: Any


class IronFunc:
    """A helper callable from kernels (``@iron.func``); every call site inlines its body.

    The source is read and parsed here, at decoration, like a kernel's: read at first use, an edit of the file in
    between would inline whatever then sits at the helper's old lines (issue 15, bug B2). Where it cannot be read
    (an interactive prompt) the located error is raised at the first call from a kernel."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        try:
            self.src: FunctionSource | None = function_source(fn)
        except CompileError:
            self.src = None

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<iron.func {self.fn.__qualname__}>"


def func(fn) -> IronFunc:
    """Make ``fn`` callable from kernels (inlined at each call)."""
    try:
        require_function(fn, "@iron.func")
    except CompileError as e:
        raise e.with_traceback(None) from None
    return IronFunc(fn)


class KernelMarker:
    """Base of ``KernelFunction`` (an ``@iron.kernel``): kernels cannot be called from kernels."""
