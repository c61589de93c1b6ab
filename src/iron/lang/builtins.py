"""The builtins kernel authors call: thread indices, memory, math, SIMD-group ops, atomics.

Each is a ``Builtin`` object. It does nothing in plain Python (calling one outside a kernel raises); inside an
``@iron.kernel`` the front-end recognises it and lowers the call to IR (``iron.frontend.lower_builtins``). The
table they come from is ``iron.ir.ops.BUILTINS``, which the front-end and the docs read too.
"""

from __future__ import annotations

from ..ir import ops as _ops


class Builtin:
    """A kernel builtin. ``signature`` and ``doc`` document it; the front-end owns its typing and lowering."""

    def __init__(self, name: str, signature: str, doc: str):
        self.name = name
        self.signature = signature
        self.__doc__ = doc
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<iron builtin {self.name}>"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"iron.{self.name}() can only be used inside an @iron.kernel or @iron.func body")


#: derived from the one builtin table, ``iron.ir.ops.BUILTINS`` (name, signature, doc, arity, purity, IR op)
_SPECS: list[tuple[str, str, str]] = [(b.name, b.signature, b.doc) for b in _ops.BUILTINS.values()]

BUILTINS: dict[str, Builtin] = {name: Builtin(name, sig, doc) for name, sig, doc in _SPECS}
globals().update(BUILTINS)

__all__ = ["BUILTINS", "Builtin", *BUILTINS]
