"""Malformed kernels, one per function, left undecorated so that importing this module never fails.

tests/frontend/test_errors.py decorates each with ``iron.kernel(fn)`` inside a test. The line the error must point
at carries the marker comment ``# ERR``; the test finds it by reading this file, so the expected line is never a
hard-coded number.
"""

from __future__ import annotations

import iron
from iron import T, Tensor, barrier, cast, exp, i32, program_id, shared, static_range

# ruff: noqa: B018, F841  (the bodies are never run by Python; they only have to parse)


def use_with(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    with open("f"):  # ERR
        out[i] = x[i]


def use_try(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    try:  # ERR
        out[i] = x[i]
    except ValueError:
        pass


def use_lambda(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    f = lambda v: v + 1.0  # ERR  # noqa: E731
    out[i] = x[i]


def use_list_comprehension(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    vals = [x[i + k] for k in range(4)]  # ERR
    out[i] = x[i]


def use_slice(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[1:3]  # ERR


def unknown_name(x: Tensor[T], out: Tensor[T]):
    i = progam_id(0)  # ERR  # noqa: F821
    out[i] = x[i]


def float_into_int_buffer(x: Tensor[iron.f32], out: Tensor[i32]):
    i = program_id(0)
    out[i] = x[i] * 2.0  # ERR


def bitwise_on_float(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[i] & 3  # ERR


def bad_cast_target(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = cast(x[i], 7)  # ERR


def wrong_builtin_arity(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = exp(x[i], 2.0)  # ERR


def break_in_static_range(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    acc = 0.0
    for k in static_range(4):
        acc += x[i + k]
        if acc > 1.0:
            break  # ERR
    out[i] = acc


def static_range_runtime_bound(x: Tensor[T], out: Tensor[T], n: int):
    i = program_id(0)
    acc = 0.0
    for k in static_range(n):  # ERR
        acc += x[i + k]
    out[i] = acc


def defined_only_in_if(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    if x[i] > 0.0:
        y = x[i] * 2.0
    out[i] = y  # ERR


def used_before_assignment(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    if x[i] > 0.0:
        acc = 1.0
    acc += 2.0  # ERR
    out[i] = acc


def assign_loop_variable(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    for j in range(4):
        j = j + 1  # ERR
        out[i] = x[j]


def kernel_returns_value(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[i]
    return x[i]  # ERR


@iron.func
def recursive_helper(v):
    if v > 1.0:
        return recursive_helper(v - 1.0)  # ERR
    return v


def calls_recursive_helper(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = recursive_helper(x[i])


def missing_annotation(x: Tensor[T], out):  # ERR
    i = program_id(0)
    out[i] = x[i]


def bad_annotation(x: Tensor[T], out: Tensor[T], n: str):  # ERR
    i = program_id(0)
    out[i] = x[i]


def power_with_runtime_exponent(x: Tensor[T], out: Tensor[T], n: int):
    i = program_id(0)
    out[i] = x[i] ** n  # ERR


def two_d_index(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x[i, 0]  # ERR


def shared_runtime_size(x: Tensor[T], out: Tensor[T], n: int):
    i = program_id(0)
    tmp = shared(iron.f32, n * 2)  # ERR (a parameter itself sizes a shared array at launch; an expression does not)
    tmp[i] = x[i]
    barrier()
    out[i] = tmp[i]


def int_variable_gets_float(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    k = 0
    k = x[i]  # ERR
    out[i] = x[i]


def plain_python_call(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = print(x[i])  # ERR


def while_else(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    while i < 4:  # ERR
        i += 1
    else:
        i = 0
    out[i] = x[i]


def T_without_tensor_T(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = cast(x[i], T)  # ERR


def atomic_on_half(x: Tensor[iron.f16], out: Tensor[iron.f16]):
    i = program_id(0)
    iron.atomic_add(out, 0, x[i])  # ERR


def assert_statement(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    assert i >= 0  # ERR
    out[i] = x[i]


def attribute_of_buffer(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = x.shape  # ERR


def store_a_tuple(x: Tensor[T], out: Tensor[T]):
    i = program_id(0)
    out[i] = (x[i], 1.0)  # ERR


def default_parameter(x: Tensor[T], out: Tensor[T], n: int = 4):  # ERR
    i = program_id(0)
    out[i] = x[i]
