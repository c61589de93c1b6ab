from __future__ import annotations

import pytest

from iron.ir import types as t
from iron.passes import DCE, Simplify

from .passes_helpers import body_text, new_kernel

BUF = {ty: t.BufferType(ty) for ty in (t.i32, t.u32, t.f32)}


def _simplify(ty, build):
    """Build ``r = build(b, x, y)`` over two loaded values of type ``ty``, store it, simplify + dce, return text."""
    out_ty = t.i32 if ty == t.bool_ else ty
    k, b, p = new_kernel(("inp", BUF[out_ty]), ("out", BUF[out_ty]))
    gid = b.thread("program_id", 0)
    x = b.load(p["inp"], gid, name="x")
    y = b.load(p["inp"], b.binary("add", gid, b.const(1, t.i32)), name="y")
    if ty == t.bool_:
        x = b.binary("lt", x, b.const(0, t.i32))
        x.name = "x"
        y = b.binary("gt", y, b.const(0, t.i32))
        y.name = "y"
    r = build(b, x, y)
    if r.type == t.bool_:
        r = b.select(r, b.const(1, out_ty), b.const(0, out_ty))
    b.store(p["out"], gid, r)
    changed = Simplify().run(k)
    DCE().run(k)
    return changed, body_text(k).splitlines()[-1]


def _c(b, v, ty):
    return b.const(v, ty)


# (type, builder, expected last line)
IDENTITIES = [
    (t.i32, lambda b, x, y: b.binary("add", x, _c(b, 0, t.i32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("add", _c(b, 0, t.i32), x), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.binary("add", x, _c(b, -0.0, t.f32)), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.binary("sub", x, _c(b, 0.0, t.f32)), "store %out[%0], %x"),
    (t.u32, lambda b, x, y: b.binary("sub", x, _c(b, 0, t.u32)), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.binary("mul", x, _c(b, 1.0, t.f32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("mul", _c(b, 1, t.i32), x), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.binary("div", x, _c(b, 1.0, t.f32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("div", x, _c(b, 1, t.i32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("min", x, x), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("and", x, x), "store %out[%0], %x"),
    (t.u32, lambda b, x, y: b.binary("or", x, x), "store %out[%0], %x"),
    (t.u32, lambda b, x, y: b.binary("or", x, _c(b, 0, t.u32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("and", x, _c(b, -1, t.i32)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("xor", _c(b, 0, t.i32), x), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("shl", x, _c(b, 0, t.i32)), "store %out[%0], %x"),
    (t.u32, lambda b, x, y: b.binary("shr", x, _c(b, 0, t.u32)), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.unary("neg", b.unary("neg", x)), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.unary("not", b.unary("not", x)), "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.op("cast", [x], t.f32).result, "store %out[%0], %x"),
    (t.f32, lambda b, x, y: b.select(b.binary("lt", x, y), x, x), "store %out[%0], %x"),
    (t.i32, lambda b, x, y: b.binary("mul", x, _c(b, 0, t.i32)), "store %out[%0], %1"),
    (t.i32, lambda b, x, y: b.binary("sub", x, x), "store %out[%0], %1"),
    (t.u32, lambda b, x, y: b.binary("xor", x, x), "store %out[%0], %1"),
    (t.i32, lambda b, x, y: b.binary("rem", x, _c(b, 1, t.i32)), "store %out[%0], %1"),
    (t.u32, lambda b, x, y: b.binary("and", _c(b, 0, t.u32), x), "store %out[%0], %1"),
]


@pytest.mark.parametrize("ty,build,expected", IDENTITIES)
def test_exact_identities(ty, build, expected):
    changed, last = _simplify(ty, build)
    assert changed
    assert last == expected


NOT_IDENTITIES = [
    (t.f32, lambda b, x, y: b.binary("add", x, _c(b, 0.0, t.f32))),  # -0.0 + 0.0 == +0.0
    (t.f32, lambda b, x, y: b.binary("sub", x, _c(b, -0.0, t.f32))),
    (t.f32, lambda b, x, y: b.binary("mul", x, _c(b, 0.0, t.f32))),  # NaN, inf, -0.0
    (t.f32, lambda b, x, y: b.binary("sub", x, x)),  # NaN, inf
    (t.f32, lambda b, x, y: b.binary("eq", x, x)),  # NaN
    (t.f32, lambda b, x, y: b.binary("mul", x, _c(b, 2.0, t.f32))),
    (t.i32, lambda b, x, y: b.binary("mul", x, _c(b, 8, t.i32))),  # i32 shifts of negatives are UB in C
    (t.i32, lambda b, x, y: b.binary("div", x, _c(b, 8, t.i32))),  # rounds toward zero, a shift rounds down
    (t.f32, lambda b, x, y: b.binary("add", b.binary("add", x, y), _c(b, 1.0, t.f32))),
]


@pytest.mark.parametrize("ty,build", NOT_IDENTITIES)
def test_inexact_rewrites_are_not_done(ty, build):
    changed, _ = _simplify(ty, build)
    assert not changed


def test_not_of_float_comparison_is_not_inverted():
    k, b, p = new_kernel(("inp", BUF[t.f32]), ("out", BUF[t.f32]))
    x = b.load(p["inp"], b.const(0, t.i32), name="x")
    n = b.unary("not", b.binary("lt", x, b.const(0.0, t.f32)))  # !(x < 0) is not x >= 0 when x is NaN
    b.store(p["out"], b.const(0, t.i32), b.select(n, x, b.const(1.0, t.f32)))
    Simplify().run(k)
    assert "ge" not in body_text(k)


def test_comparing_an_int_with_itself_is_constant():
    k, b, p = new_kernel(("inp", BUF[t.i32]), ("out", BUF[t.i32]))
    x = b.load(p["inp"], b.const(0, t.i32), name="x")
    for i, code in enumerate(["eq", "ne", "lt", "le", "gt", "ge"]):
        r = b.op(code, [x, x], t.bool_, name=code).result
        b.store(p["out"], b.const(i, t.i32), b.select(r, b.const(1, t.i32), b.const(0, t.i32)))
    Simplify().run(k)
    text = body_text(k)
    for code, v in [("eq", "true"), ("ne", "false"), ("lt", "false"), ("le", "true"), ("gt", "false")]:
        assert f"%{code} = const {v} : bool" in text


def test_unsigned_compared_with_zero_is_constant_and_signed_is_not():
    """x >= 0u is always true for an unsigned x (NVRTC warns "pointless comparison" on it); never for i32."""
    for ty, folds in ((t.u32, True), (t.i32, False)):
        k, b, p = new_kernel(("inp", BUF[ty]), ("out", BUF[t.i32]))
        x = b.load(p["inp"], b.const(0, t.i32), name="x")
        zero = b.const(0, ty)
        cases = [("ge", [x, zero], "true"), ("lt", [x, zero], "false"), ("le", [zero, x], "true"),
                 ("gt", [zero, x], "false"), ("gt", [x, zero], None), ("le", [x, zero], None)]
        for i, (code, operands, _) in enumerate(cases):
            r = b.op(code, operands, t.bool_, name=f"r{i}").result
            b.store(p["out"], b.const(i, t.i32), b.select(r, b.const(1, t.i32), b.const(0, t.i32)))
        Simplify().run(k)
        text = body_text(k)
        for i, (code, _, v) in enumerate(cases):
            constant = f"%r{i} = const {v} : bool" in text if v else False
            assert constant == (folds and v is not None), (ty, code, text)


def test_u32_strength_reduction():
    k, b, p = new_kernel(("inp", BUF[t.u32]), ("out", BUF[t.u32]))
    gid = b.thread("program_id", 0)
    x = b.load(p["inp"], gid, name="x")
    m = b.op("mul", [b.const(8, t.u32), x], t.u32, name="m").result
    d = b.op("div", [m, b.const(4, t.u32)], t.u32, name="d").result
    r = b.op("rem", [d, b.const(16, t.u32)], t.u32, name="r").result
    b.store(p["out"], gid, r)
    Simplify().run(k)
    DCE().run(k)
    assert body_text(k) == (
        "%0 = program_id 0 : i32\n"
        "%x = load %inp[%0] : u32\n"
        "%1 = const 3 : u32\n"
        "%m = shl %x, %1 : u32\n"
        "%2 = const 2 : u32\n"
        "%d = shr %m, %2 : u32\n"
        "%3 = const 15 : u32\n"
        "%r = and %d, %3 : u32\n"
        "store %out[%0], %r\n"
    )


def test_select_of_bool_constants_and_negated_conditions():
    changed, last = _simplify(t.bool_, lambda b, x, y: b.select(x, b.const(True, t.bool_), b.const(False, t.bool_)))
    assert changed
    k, b, p = new_kernel(("inp", BUF[t.i32]), ("out", BUF[t.i32]))
    x = b.load(p["inp"], b.const(0, t.i32), name="x")
    c = b.binary("and", b.binary("lt", x, b.const(0, t.i32)), b.binary("gt", x, b.const(-9, t.i32)))
    c.name = "c"
    s = b.select(b.unary("not", c), b.const(1, t.i32), b.const(2, t.i32))
    b.store(p["out"], b.const(0, t.i32), s)
    Simplify().run(k)
    DCE().run(k)
    assert "select %c, %6, %5 : i32" in body_text(k)


def test_not_of_int_comparison_inverts_it():
    changed, _ = _simplify(t.i32, lambda b, x, y: b.unary("not", b.binary("lt", x, y)))
    assert changed
    k, b, p = new_kernel(("inp", BUF[t.i32]), ("out", BUF[t.i32]))
    x = b.load(p["inp"], b.const(0, t.i32), name="x")
    n = b.unary("not", b.binary("lt", x, b.const(0, t.i32)))
    n.name = "n"
    b.store(p["out"], b.const(0, t.i32), b.select(n, x, x))
    Simplify().run(k)
    assert "%n = ge %x, %1 : bool" in body_text(k)


def test_if_on_negated_condition_swaps_branches():
    k, b, p = new_kernel(("inp", BUF[t.i32]), ("out", BUF[t.i32]))
    x = b.load(p["inp"], b.const(0, t.i32), name="x")
    c = b.binary("and", b.binary("lt", x, b.const(0, t.i32)), b.binary("gt", x, b.const(-9, t.i32)))
    c.name = "c"
    _, then, else_ = b.if_(b.unary("not", c))
    with b.at(then):
        b.store(p["out"], x, x)
    Simplify().run(k)
    DCE().run(k)
    text = body_text(k)
    assert "if %c {\n} else {\n  store %out[%x], %x\n}" in text


def test_replacement_inherits_the_dead_values_name():
    k, b, p = new_kernel(("inp", BUF[t.f32]), ("out", BUF[t.f32]))
    gid = b.thread("program_id", 0)
    v = b.load(p["inp"], gid)
    r = b.op("mul", [v, b.const(1.0, t.f32)], t.f32, name="scaled").result
    b.store(p["out"], gid, r)
    Simplify().run(k)
    assert v.name == "scaled"
    assert body_text(k).endswith("store %out[%0], %scaled\n")
