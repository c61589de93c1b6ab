"""User-facing errors. Every one carries a sentence, and where it can a source location with a caret and a hint."""

from __future__ import annotations

from .ir.core import Loc


class IronError(Exception):
    """Base class of every error Iron raises on purpose."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(format_located(message, loc, hint, kind=self.kind))

    kind = "error"


class CompileError(IronError):
    """The front-end or a backend compiler rejected a kernel; located in the kernel's source."""


class LaunchError(IronError):
    """A launch's arguments are wrong (count, dtype, shape, device, layout); located at the call site."""


class ExecutionError(IronError):
    """A kernel failed while running (e.g. an out-of-bounds access caught by the interpreter)."""


def format_located(message: str, loc: Loc | None, hint: str | None = None, kind: str = "error") -> str:
    """``file:line:col: error: message``, the source line, a caret under the column, then ``hint: ...``."""
    if loc is None:
        text = message
    else:
        text = f"{loc}: {kind}: {message}"
        if loc.text:
            src = loc.text.rstrip("\n")
            stripped = src.lstrip()
            shift = len(src) - len(stripped)
            col = max(0, loc.col - shift)
            width = 1
            if loc.end_col is not None and loc.end_col > loc.col:
                width = min(loc.end_col - loc.col, max(1, len(stripped) - col))
            text += f"\n    {stripped}\n    {' ' * col}^{'~' * (width - 1)}"
    if hint:
        text += f"\nhint: {hint}"
    return text
