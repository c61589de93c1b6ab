"""Kernels that exposed front-end bugs (regression tests in test_kernels.py).

Decorated at import: decoration never compiles, so a kernel that fails to compile cannot break collection.
"""

from __future__ import annotations

import iron
from iron import T, Tensor, i32, kernel, program_id


@iron.func
def clamp_then_double(v):
    """10 above 10, 2v on (0, 10], v otherwise: the early return sits in an `if` nested in an `if`, followed by
    more code in the outer `if`."""
    if v > 0.0:
        if v > 10.0:
            return 10.0
        v = v * 2.0
    return v


@kernel
def nested_early_return(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = clamp_then_double(x[i])


@kernel
def loop_rebinds_variable(out: Tensor[i32], n: int):
    """In Python, `j` after the loop holds the last index, n - 1 (for n > 0)."""
    i = program_id(0)
    j = -100
    for j in range(n):  # noqa: B007 (the point: j after the loop)
        pass
    out[i] = j


@iron.func
def relu(v):
    if v < 0.0:
        return 0
    return v


@kernel
def relu_int_literal_return(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = relu(x[i])
