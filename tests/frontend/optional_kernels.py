"""Kernels with optional buffers (``Tensor[...] | None``) for tests/frontend/test_optional_buffer.py.

Deliberately without ``from __future__ import annotations``: ``Tensor[T] | None`` is evaluated when the ``def`` runs,
as in a user's module that does not postpone its annotations."""


import iron
from iron import T, Tensor, program_id


@iron.kernel
def add_bias(x: Tensor[T], bias: Tensor[T] | None, out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        v = x[i]
        if bias is not None:
            v = v + bias[i]
        out[i] = v


@iron.func
def scaled(v, s, i):
    if s is None:
        return v
    return v * s[i]


@iron.kernel
def affine(x: Tensor[T], scale: Tensor[T] | None, shift: Tensor[T] | None, out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        v = scaled(x[i], scale, i)
        out[i] = v + shift[i] if shift is not None else v


@iron.kernel
def residual(x: Tensor[iron.f32], out: Tensor[iron.f32], n: int, res: Tensor[iron.f32] | None = None):
    i = program_id(0)
    if i < n:
        v = x[i] * 2.0
        if res is None:
            out[i] = v
        else:
            out[i] = v + res[i]


@iron.kernel
def early_return(x: Tensor[T], gate: Tensor[T] | None, out: Tensor[T], n: int):
    i = program_id(0)
    if i >= n:
        return
    if gate is None:
        out[i] = x[i]
        return
    out[i] = x[i] * gate[i]
