"""Reading a kernel's source: the function's AST with true file line numbers, and locations for errors."""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import CompileError
from ..ir.core import Loc


@dataclass
class FunctionSource:
    """A parsed function: its ``ast.FunctionDef`` (line numbers are the file's), file name and the file's lines."""

    node: ast.FunctionDef
    file: str
    lines: dict[int, str]  # file line number -> text
    col_shift: int  # columns removed by dedent

    def loc(self, node: ast.AST | None) -> Loc | None:
        if node is None or not hasattr(node, "lineno"):
            return None
        line = node.lineno
        end_col = None
        if getattr(node, "end_lineno", None) == line and node.end_col_offset is not None:
            end_col = node.end_col_offset + self.col_shift
        return Loc(self.file, line, node.col_offset + self.col_shift, self.lines.get(line, ""), end_col)


_CACHE: dict[object, FunctionSource] = {}


def function_source(fn) -> FunctionSource:
    """Parse ``fn``'s source (never executing its body). Cached per code object."""
    code = fn.__code__
    cached = _CACHE.get(code)
    if cached is not None:
        return cached
    file = code.co_filename
    try:
        src_lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise CompileError(
            f"cannot read the source of {fn.__qualname__}: Iron compiles kernels from their source text",
            Loc(file, code.co_firstlineno, 0),
            hint="define kernels in a .py file (not in an interactive prompt or exec'd string)",
        ) from None
    raw = "".join(src_lines)
    dedented = textwrap.dedent(raw)
    first_raw = next((ln for ln in src_lines if ln.strip()), "")
    first_ded = next((ln for ln in dedented.splitlines() if ln.strip()), "")
    shift = len(first_raw) - len(first_raw.lstrip()) - (len(first_ded) - len(first_ded.lstrip()))
    tree = ast.parse(dedented)
    ast.increment_lineno(tree, start - 1)
    fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    lines = {start + i: text.rstrip("\n") for i, text in enumerate(src_lines)}
    result = FunctionSource(fdef, file, lines, shift)
    _CACHE[code] = result
    return result
