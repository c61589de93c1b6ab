"""Reading a kernel's source: the function's AST with true file line numbers, and locations for errors."""

from __future__ import annotations

import ast
import inspect
import linecache
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

    def unquote(self, node: ast.expr) -> ast.expr:
        """A quoted annotation (``x: "Tensor[T]"``) as the expression it quotes, every part located at the string;
        any other node as it is."""
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return node
        try:
            expr = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError as e:
            raise CompileError(f"the annotation {node.value!r} is not a Python expression: {e.msg}",
                               self.loc(node)) from None
        for sub in ast.walk(expr):
            if "lineno" in sub._attributes:
                ast.copy_location(sub, node)
        return expr


_CACHE: dict[object, FunctionSource] = {}


def first_store(fdef: ast.AST, name: str) -> ast.Name | None:
    """The first place (in source order) where the body of ``fdef`` assigns ``name``."""
    stores = [n for n in ast.walk(fdef) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)]
    return min(stores, key=lambda n: (n.lineno, n.col_offset), default=None)


def require_function(obj: object, decorator: str) -> None:
    """``obj`` must be a function written with ``def``: anything else is a TypeError that names it, and a lambda
    (which has no annotations and whose source line holds more than the function) a located CompileError."""
    if not inspect.isfunction(obj):
        shown = repr(obj)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TypeError(f"{decorator} needs a Python function defined with `def`, not {type(obj).__name__} {shown}")
    if obj.__name__ == "<lambda>":
        code = obj.__code__
        text = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
        col = max(text.find("lambda"), 0)
        raise CompileError(f"{decorator} cannot compile a lambda", Loc(code.co_filename, code.co_firstlineno, col,
                                                                       text, col + len("lambda") if text else None),
                           "define it with `def name(...):`" + (", with an annotation on each parameter"
                                                                 if decorator == "@iron.kernel" else ""))


def function_source(fn) -> FunctionSource:
    """Parse ``fn``'s source (never executing its body). Cached per (file, code object): code objects compare equal
    across files when their text and first line are the same, and each file must keep its own locations."""
    code = fn.__code__
    key = (code.co_filename, code)
    cached = _CACHE.get(key)
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
    _CACHE[key] = result
    return result
