"""What a kernel body may name at compile time besides values: ``Ref`` wraps a Python object (a builtin, dtype,
module, helper...); ``IronFunc`` is an ``@iron.func`` helper; ``KernelMarker`` marks ``KernelFunction`` so that the
expression lowering can refuse a kernel called from a kernel without importing ``kernel.py`` (which imports it)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@dataclass
class Ref:
    """A compile-time Python object used in a kernel: a builtin, dtype, module, helper, Python function..."""

    obj: Any


class IronFunc:
    """A helper callable from kernels (``@iron.func``); every call site inlines its body."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<iron.func {self.fn.__qualname__}>"


def func(fn) -> IronFunc:
    """Make ``fn`` callable from kernels (inlined at each call)."""
    return IronFunc(fn)


class KernelMarker:
    """Base of ``KernelFunction`` (an ``@iron.kernel``): kernels cannot be called from kernels."""
