"""``iron.torch_op``: an Iron kernel launch as a PyTorch custom op, callable inside ``torch.compile`` and CUDA graphs.

    @iron.torch_op("mylib::scaled_exp", shape=lambda x, s: (x.shape, x.dtype))
    def scaled_exp(x: torch.Tensor, s: float) -> torch.Tensor:
        out = torch.empty_like(x)
        scaled_exp_kernel[x.numel()](x, out, s)    # an @iron.kernel, launched on torch tensors
        return out

It is a thin layer over ``torch.library.custom_op`` (torch >= 2.4), PyTorch's maintained way to add an op: torch
owns the dispatch, the schema (inferred from the function's annotations) and the op's place in a compiled graph, so
Iron writes no dispatch code of its own. What torch cannot infer is the outputs of an opaque launch; ``shape`` says
them, and becomes the op's fake implementation, which ``torch.compile`` traces instead of launching the kernel.

CUDA graphs: with torch CUDA tensors, Iron launches on torch's current stream, so launches made while torch captures
(``torch.cuda.graph``) are recorded. Compiling and autotuning happen at a kernel's first launch and cannot be
captured: call the op once, eagerly and with the same dtypes and sizes, before capturing.

Importing this module does not import torch; ``torch_op`` does, when called.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any

_OP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*")


def torch_op(name: str, *, mutates_args: str | Iterable[str] = (),
             shape: Callable[..., Any] | None = None) -> Callable[[Callable[..., Any]], Any]:
    """Decorator: registers ``fn`` (which launches Iron kernels on torch tensors) as the torch op ``name``.

    ``name`` is ``"namespace::opname"``; ``mutates_args`` names the arguments ``fn`` writes in place (as in
    ``torch.library.custom_op``). ``fn`` must be annotated (torch infers the op's schema from the annotations; under
    ``from __future__ import annotations`` they are evaluated in the module's globals, so import torch at module
    scope) and must not return an input or a view of one.

    ``shape(*args, **kwargs)`` is called with the op's arguments (fake tensors under ``torch.compile``) and returns
    ``(shape, dtype)`` for an op returning one tensor, or a list of such pairs for an op returning a tuple; each
    output is created on the device of the first tensor argument. An op that returns None (it only writes its
    ``mutates_args``) needs no ``shape``.

    Returns torch's ``CustomOpDef``: call it like ``fn``; ``register_autograd`` and the other ``torch.library``
    hooks are there too. Before capturing the op in a CUDA graph, call it once outside the capture: the kernel is
    compiled (and autotuned) at its first launch, which a capture cannot record.
    """
    if not isinstance(name, str) or not _OP_NAME.fullmatch(name):
        raise ValueError(f"iron.torch_op: op name {name!r} must look like 'namespace::opname' (letters, digits and "
                         "underscores on each side), e.g. 'mylib::scaled_exp'")
    if shape is not None and not callable(shape):
        raise TypeError(f"iron.torch_op({name!r}): shape must be a function of the op's arguments returning "
                        f"(shape, dtype) per output, or None; got {type(shape).__name__}")
    try:
        import torch
    except ImportError as e:
        raise ImportError("iron.torch_op needs torch; pip install torch") from e

    def register(fn: Callable[..., Any]) -> Any:
        returns = inspect.signature(fn).return_annotation
        if returns is inspect.Signature.empty:
            raise TypeError(f"iron.torch_op({name!r}): annotate what {fn.__name__} returns (e.g. -> torch.Tensor, or "
                            "-> None): torch infers the op's schema from the annotations")
        returns_none = returns in (None, "None")
        if shape is None and not returns_none:
            raise TypeError(f"iron.torch_op({name!r}): {fn.__name__} returns tensors, so give shape= (a function of "
                            "its arguments returning (shape, dtype) per output): torch.compile traces the op "
                            "through it instead of launching the kernel")
        if shape is not None and returns_none:
            raise TypeError(f"iron.torch_op({name!r}): {fn.__name__} is annotated to return None, so there are no "
                            "outputs for shape= to describe; drop shape=")
        op = torch.library.custom_op(name, mutates_args=mutates_args)(fn)
        op.register_fake(_fake_impl(torch, name, shape))
        return op

    return register


def _fake_impl(torch: Any, name: str, shape: Callable[..., Any] | None) -> Callable[..., Any]:
    """The op's fake implementation: empty outputs of the shapes and dtypes ``shape`` gives (None without one)."""

    def fake(*args: Any, **kwargs: Any) -> Any:
        if shape is None:
            return None
        result = shape(*args, **kwargs)
        device = _first_tensor_device(torch, name, (*args, *kwargs.values()))
        if _is_pair(torch, result):
            return torch.empty(result[0], dtype=result[1], device=device)
        if isinstance(result, (list, tuple)) and all(_is_pair(torch, r) for r in result):
            return tuple(torch.empty(s, dtype=d, device=device) for s, d in result)
        raise TypeError(f"iron.torch_op({name!r}): shape returned {result!r}; it must return (shape, dtype) for one "
                        "output, or a list of (shape, dtype) pairs for several, with dtype a torch.dtype")

    return fake


def _is_pair(torch: Any, value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[1], torch.dtype)


def _first_tensor_device(torch: Any, name: str, args: tuple[Any, ...]) -> Any:
    """The device of the first tensor among ``args`` (looking into lists of tensors too)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
        if isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, torch.Tensor):
                    return b.device
    raise TypeError(f"iron.torch_op({name!r}): the op has no tensor argument, so its outputs' device is unknown; "
                    "give it a tensor argument on the device its outputs should live on")
