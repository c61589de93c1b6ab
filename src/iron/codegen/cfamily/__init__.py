"""The C-family emitter: one printer (``printer.py``) and one dialect table per target (``cuda.py``; HIP and MSL
subclass ``dialect.CDialect`` the same way)."""

from __future__ import annotations

from .dialect import CDialect, CParam, Snippet, Template
from .printer import KernelSource, VectorEntry, emit_source

__all__ = ["CDialect", "CParam", "KernelSource", "Snippet", "Template", "VectorEntry", "emit_source"]
