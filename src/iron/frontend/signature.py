"""Reading a kernel's signature: which parameters are buffers, scalars and constexprs, and their dtypes."""

from __future__ import annotations

import ast
import types
import typing
from dataclasses import dataclass, replace

from ..errors import CompileError
from ..ir import types as t
from ..lang.types import DTypeVar, TensorSpec, constexpr
from .source import FunctionSource


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: ``kind`` is "buffer", "scalar" or "constexpr"; ``dtype`` a ScalarType, a DTypeVar or None."""

    name: str
    kind: str
    dtype: t.ScalarType | DTypeVar | None
    #: a buffer annotated ``Tensor[...] | None``: a launch may pass None (the variant without it)
    optional: bool = False
    #: it defaults to None (``= None``): a launch may leave it out
    default_none: bool = False


_SCALAR_ANNOTATIONS = {int: t.i32, float: t.f32}


def read_signature(fn, src: FunctionSource) -> list[ParamSpec]:
    """Resolve each parameter's annotation (evaluated in the function's module, never running its body)."""
    args = src.node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise CompileError("kernels take plain positional parameters only (no *args, **kwargs, keyword-only)",
                           src.loc(src.node))
    specs = []
    for arg in args.args:
        if arg.arg in LAUNCH_KEYWORDS:
            raise CompileError(f"a kernel parameter cannot be named '{arg.arg}': a launch takes {arg.arg}= as its own "
                               f"keyword (k[grid](..., {arg.arg}=...))", src.loc(arg),
                               f"rename the parameter, e.g. '{arg.arg}_'")
        if arg.annotation is None:
            raise CompileError(f"parameter '{arg.arg}' needs a type annotation", src.loc(arg),
                               "e.g. `x: iron.Tensor[iron.T]`, `n: int`, `alpha: float`, `BLOCK: iron.constexpr`")
        ann = fn.__annotations__.get(arg.arg)
        if isinstance(ann, str) or ann is None:
            ann = _evaluate(fn, arg, src)
        specs.append(_spec(arg, ann, src))
    return _defaults(specs, args, src)


def _defaults(specs: list[ParamSpec], args: ast.arguments, src: FunctionSource) -> list[ParamSpec]:
    """The one default a kernel parameter may have: ``= None`` on an optional buffer (left out at launch)."""
    first = len(specs) - len(args.defaults)
    for i, default in enumerate(args.defaults, start=first):
        p = specs[i]
        is_none = isinstance(default, ast.Constant) and default.value is None
        if is_none and p.optional:
            specs[i] = replace(p, default_none=True)
        elif is_none and p.kind == "buffer":
            raise CompileError(f"buffer parameter '{p.name}' defaults to None but is not optional",
                               src.loc(default), f"annotate it `{p.name}: Tensor[...] | None = None`")
        else:
            raise CompileError("kernel parameters cannot have default values", src.loc(default),
                               "pass every argument at launch (constexprs too); only an optional buffer "
                               "(`Tensor[...] | None`) may default to None")
    return specs


#: keywords a launch ``k[grid](...)`` takes for itself, which a kernel parameter's name would shadow
LAUNCH_KEYWORDS = frozenset({"backend"})


def _evaluate(fn, arg: ast.arg, src: FunctionSource) -> object:
    """The annotation of ``arg`` evaluated in the kernel's module, as Python itself would: a quoted annotation
    (``x: "Tensor[T]"``) and one postponed by ``from __future__ import annotations`` mean what they say."""
    expr = src.unquote(arg.annotation)
    try:
        return eval(compile(ast.Expression(expr), src.file, "eval"), fn.__globals__)  # noqa: S307
    except Exception as e:  # the annotation names something unknown
        raise CompileError(f"cannot resolve the annotation of '{arg.arg}': {e}", src.loc(arg.annotation)) from None


def _optional_of(ann: object) -> object | None:
    """``X`` for ``X | None`` / ``Optional[X]`` / ``Union[X, None]``, else None."""
    if typing.get_origin(ann) not in (typing.Union, types.UnionType):
        return None
    rest = [a for a in typing.get_args(ann) if a is not type(None)]
    return rest[0] if len(rest) == 1 and len(typing.get_args(ann)) == 2 else None


def _spec(arg: ast.arg, ann: object, src: FunctionSource) -> ParamSpec:
    name = arg.arg
    inner = _optional_of(ann)
    if isinstance(inner, TensorSpec):
        return ParamSpec(name, "buffer", inner.dtype, optional=True)
    if inner is not None:
        raise CompileError(f"parameter '{name}': only a buffer can be optional, not {inner!r}",
                           src.loc(arg.annotation), "write `Tensor[...] | None`; a scalar or constexpr is always "
                           "passed (a constexpr bool can switch code off)")
    if isinstance(ann, TensorSpec):
        return ParamSpec(name, "buffer", ann.dtype)
    if ann is constexpr:
        return ParamSpec(name, "constexpr", None)
    if ann in _SCALAR_ANNOTATIONS:
        return ParamSpec(name, "scalar", _SCALAR_ANNOTATIONS[ann])
    if isinstance(ann, t.ScalarType) and ann in (t.i32, t.u32, t.f32, t.f16, t.bf16, t.i64, t.u64, t.f64):
        # f16/bf16: a Python float rounded to the dtype at launch, passed as f32 (launch._scalar, codegen)
        return ParamSpec(name, "scalar", ann)
    if isinstance(ann, DTypeVar):
        raise CompileError(f"scalar parameter '{name}' cannot be {ann!r}", src.loc(arg.annotation),
                           "scalars are int, float, iron.i32, iron.u32, iron.i64, iron.u64, iron.f32, iron.f64, "
                           "iron.f16 or iron.bf16")
    if isinstance(ann, t.ScalarType) and ann.is_narrow:
        raise CompileError(f"scalar parameter '{name}' cannot be {ann}: 8-bit types are for buffers",
                           src.loc(arg.annotation), "pass it as int (i32) and cast(x, ...) where it is stored")
    if ann is t.Type or ann is type(t.f32) or (isinstance(ann, type) and ann.__name__ == "Tensor"):
        raise CompileError(f"parameter '{name}': write Tensor[dtype], e.g. Tensor[iron.T]", src.loc(arg.annotation))
    raise CompileError(f"unsupported annotation {ann!r} for parameter '{name}'", src.loc(arg.annotation),
                       "use Tensor[T] / Tensor[iron.f32] for buffers, int / float / iron.i32 / iron.u32 / "
                       "iron.f32 for scalars, iron.constexpr for compile-time values")
