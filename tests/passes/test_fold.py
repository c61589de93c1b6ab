from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from iron.ir import types as t
from iron.passes import Fold

from .passes_helpers import F32_BUF, I32_BUF, body_text, new_kernel, opcodes


def _const_of(kernel, name):
    for op in kernel.walk():
        if op.result is not None and op.result.name == name:
            assert op.opcode == "const", f"{name} is still `{op.opcode}`"
            return op.attrs["value"]
    raise KeyError(name)


def _fold_binary(opcode, a, b_, ty):
    k, b, p = new_kernel(("out", t.BufferType(ty if opcode not in ("lt", "eq") else t.i32)))
    r = b.op(opcode, [b.const(a, ty), b.const(b_, ty)], t.bool_ if opcode in ("lt", "eq") else ty, name="r").result
    if r.type == t.bool_:
        r = b.select(r, b.const(1, t.i32), b.const(0, t.i32))
    b.store(p["out"], b.const(0, t.i32), r)
    Fold().run(k)
    return k


def test_integer_arithmetic_folds_and_wraps():
    k = _fold_binary("add", 2**31 - 1, 1, t.i32)
    assert _const_of(k, "r") == -(2**31)
    k = _fold_binary("sub", 0, 1, t.u32)
    assert _const_of(k, "r") == 2**32 - 1
    k = _fold_binary("div", -7, 2, t.i32)
    assert _const_of(k, "r") == -3  # truncates toward zero, like C


def test_folded_op_keeps_its_result_value_and_name():
    k, b, p = new_kernel(("out", F32_BUF))
    s = b.op("mul", [b.const(1.5, t.f32), b.const(2.0, t.f32)], t.f32, name="scale").result
    b.store(p["out"], b.const(0, t.i32), s)
    assert Fold().run(k)
    assert "%scale = const 3.0 : f32\n" in body_text(k)
    assert k.body.ops[-1].operands[2] is s


@pytest.mark.parametrize("opcode", ["div", "rem"])
@pytest.mark.parametrize("ty", [t.i32, t.u32])
def test_integer_division_by_zero_is_left_for_run_time(opcode, ty):
    k = _fold_binary(opcode, 7, 0, ty)
    assert opcode in opcodes(k)


def test_cases_c_leaves_undefined_fold_as_the_semantics_define_them():
    assert _const_of(_fold_binary("div", -(2**31), -1, t.i32), "r") == -(2**31)  # wraps
    assert _const_of(_fold_binary("shl", 1, 33, t.u32), "r") == 2  # shift amounts are masked to 0..31
    assert _const_of(_fold_binary("shl", 1, 31, t.u32), "r") == 2**31


def test_non_finite_results_are_not_folded():
    k = _fold_binary("mul", 1e38, 10.0, t.f32)
    assert "mul" in opcodes(k)


def test_comparison_folds_to_bool():
    k = _fold_binary("lt", 1, 2, t.i32)
    assert _const_of(k, "r") is True
    assert "select" not in opcodes(k)  # the select on the folded condition folds too


@pytest.mark.parametrize("ty,np_type", [(t.f16, np.float16), (t.bf16, ml_dtypes.bfloat16)])
def test_cast_to_half_holds_the_exactly_rounded_value(ty, np_type):
    k, b, p = new_kernel(("out", t.BufferType(ty)))
    h = b.op("cast", [b.const(0.1, t.f32)], ty, name="h").result
    b.store(p["out"], b.const(0, t.i32), h)
    Fold().run(k)
    value = _const_of(k, "h")
    assert type(value) is float
    assert value == float(np_type(np.float32(0.1)))


@pytest.mark.parametrize("x,expected", [(5e9, 2**32 - 1), (-3e38, 0), (-1.0, 0)])
def test_out_of_range_float_to_unsigned_cast_saturates(x, expected):
    k, b, p = new_kernel(("out", t.BufferType(t.u32)))
    b.store(p["out"], b.const(0, t.i32), b.op("cast", [b.const(x, t.f32)], t.u32, name="c").result)
    Fold().run(k)
    assert _const_of(k, "c") == expected


def test_float_to_int_cast_truncates():
    k, b, p = new_kernel(("out", I32_BUF))
    b.store(p["out"], b.const(0, t.i32), b.op("cast", [b.const(-2.75, t.f32)], t.i32, name="c").result)
    Fold().run(k)
    assert _const_of(k, "c") == -2


def test_select_on_const_condition_picks_an_operand():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    i = b.const(0, t.i32)
    a, c = b.load(p["x"], i, name="a"), b.load(p["x"], i, name="c")
    b.store(p["out"], i, b.select(b.const(False, t.bool_), a, c))
    assert Fold().run(k)
    assert body_text(k).endswith("store %out[%0], %c\n")


def test_if_true_inlines_then_branch():
    k, b, p = new_kernel(("out", I32_BUF))
    _, then, else_ = b.if_(b.const(True, t.bool_))
    with b.at(then):
        b.store(p["out"], b.const(0, t.i32), b.const(1, t.i32))
    with b.at(else_):
        b.store(p["out"], b.const(0, t.i32), b.const(2, t.i32))
    b.store(p["out"], b.const(1, t.i32), b.const(3, t.i32))
    Fold().run(k)
    assert body_text(k) == (
        "%0 = const true : bool\n"
        "%1 = const 0 : i32\n"
        "%2 = const 1 : i32\n"
        "store %out[%1], %2\n"
        "%3 = const 1 : i32\n"
        "%4 = const 3 : i32\n"
        "store %out[%3], %4\n"
    )


def test_if_false_inlines_else_branch_and_a_jump_ends_the_block():
    k, b, p = new_kernel(("out", I32_BUF))
    _, then, else_ = b.if_(b.op("lt", [b.const(2, t.i32), b.const(1, t.i32)], t.bool_).result)
    with b.at(then):
        b.store(p["out"], b.const(0, t.i32), b.const(1, t.i32))
    with b.at(else_):
        b.op("return")
    b.store(p["out"], b.const(1, t.i32), b.const(3, t.i32))
    Fold().run(k)
    assert opcodes(k)[-1] == "return"
    assert "store" not in opcodes(k) and "if" not in opcodes(k)


def test_if_inside_loop_keeps_nested_structure():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    _, body = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
    with b.at(body):
        _, then, _ = b.if_(b.const(True, t.bool_))
        with b.at(then):
            b.op("continue")
        b.store(p["out"], body.args[0], body.args[0])
    Fold().run(k)
    loop = k.body.ops[-1]
    assert [op.opcode for op in loop.regions[0].ops] == ["const", "continue"]


def test_zero_trip_loop_with_constant_bounds_is_removed():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body = b.for_(b.const(4, t.i32), b.const(4, t.i32), b.const(1, t.i32), "j")
    with b.at(body):
        b.store(p["out"], body.args[0], body.args[0])
    assert Fold().run(k)
    assert "for" not in opcodes(k)


def test_non_constant_ops_are_untouched():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    gid = b.thread("program_id", 0)
    v = b.load(p["x"], gid)
    b.store(p["out"], gid, b.binary("add", v, b.const(1.0, t.f32)))
    before = body_text(k)
    assert not Fold().run(k)
    assert body_text(k) == before
