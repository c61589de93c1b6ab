from __future__ import annotations

import pytest

from iron.ir import types as t
from iron.passes import Unroll

from .passes_helpers import F32_BUF, I32_BUF, body_text, new_kernel, opcodes, static_for


def test_static_loop_becomes_one_copy_per_iteration():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 3)
    with b.at(body):
        b.store(p["out"], i, i)
    assert Unroll().run(k)
    assert body_text(k) == (
        "%0 = const 0 : i32\n"
        "%1 = const 3 : i32\n"
        "%2 = const 1 : i32\n"
        "%i = const 0 : i32\n"
        "store %out[%i], %i\n"
        "%i.1 = const 1 : i32\n"
        "store %out[%i.1], %i.1\n"
        "%i.2 = const 2 : i32\n"
        "store %out[%i.2], %i.2\n"
    )


def test_clones_get_fresh_values_and_keep_name_hints():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    _, body, i = static_for(b, 0, 2)
    with b.at(body):
        v = b.load(p["x"], i, name="v")
        b.store(p["out"], i, b.binary("add", v, v))
    Unroll().run(k)
    loads = [op for op in k.walk() if op.opcode == "load"]
    assert len(loads) == 2 and loads[0].result is not loads[1].result
    assert [op.result.name for op in loads] == ["v", "v"]
    assert "%v.1 = load %x[%i.1] : f32" in body_text(k)


def test_negative_step_and_empty_range():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 3, 0, -1)
    with b.at(body):
        b.store(p["out"], i, i)
    _, body2, j = static_for(b, 5, 5, name="j")
    with b.at(body2):
        b.store(p["out"], j, j)
    Unroll().run(k)
    values = [op.attrs["value"] for op in k.walk() if op.opcode == "const" and op.result.name == "i"]
    assert values == [3, 2, 1]
    assert "for" not in opcodes(k)
    assert opcodes(k).count("store") == 3


def test_nested_static_loops_unroll_fully():
    k, b, p = new_kernel(("out", I32_BUF))
    _, outer, i = static_for(b, 0, 2)
    with b.at(outer):
        _, inner, j = static_for(b, 0, 3, name="j")
        with b.at(inner):
            b.store(p["out"], b.binary("add", b.binary("mul", i, b.const(3, t.i32)), j), j)
    Unroll().run(k)
    assert "for" not in opcodes(k)
    assert opcodes(k).count("store") == 6


def test_static_loop_inside_dynamic_loop_unrolls_and_dynamic_loop_stays():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    _, dyn = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "k")
    with b.at(dyn):
        _, body, i = static_for(b, 0, 2)
        with b.at(body):
            b.store(p["out"], dyn.args[0], i)
    Unroll().run(k)
    fors = [op for op in k.walk() if op.opcode == "for"]
    assert len(fors) == 1 and not fors[0].attrs.get("unroll")
    assert opcodes(k).count("store") == 2


def test_top_level_return_stops_emission_and_drops_rest_of_block():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 4)
    with b.at(body):
        b.store(p["out"], i, i)
        b.op("return")
    b.store(p["out"], b.const(9, t.i32), b.const(9, t.i32))
    Unroll().run(k)
    text = body_text(k)
    assert text.endswith("%i = const 0 : i32\nstore %out[%i], %i\nreturn\n")
    assert opcodes(k).count("store") == 1


def test_return_nested_in_if_keeps_every_iteration():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 3)
    with b.at(body):
        _, then, _ = b.if_(b.binary("eq", i, b.const(1, t.i32)))
        with b.at(then):
            b.op("return")
        b.store(p["out"], i, i)
    Unroll().run(k)
    assert opcodes(k).count("return") == 3
    assert opcodes(k).count("store") == 3


def test_break_inside_inner_dynamic_loop_is_fine():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    _, body, i = static_for(b, 0, 2)
    with b.at(body):
        _, inner = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
        with b.at(inner):
            b.store(p["out"], i, inner.args[0])
            b.op("break")
    Unroll().run(k)
    assert opcodes(k).count("break") == 2


def test_break_targeting_the_static_loop_is_refused():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 2)
    with b.at(body):
        _, then, _ = b.if_(b.binary("eq", i, b.const(1, t.i32)))
        with b.at(then):
            b.op("break")
    with pytest.raises(ValueError, match="break"):
        Unroll().run(k)


def test_more_than_4096_iterations_is_refused():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 4097)
    with b.at(body):
        b.store(p["out"], i, i)
    with pytest.raises(ValueError, match="4097 iterations exceeds the unroll limit of 4096"):
        Unroll().run(k)


def test_exactly_4096_iterations_is_allowed():
    k, b, p = new_kernel(("out", I32_BUF))
    _, body, i = static_for(b, 0, 8192, 2)
    with b.at(body):
        b.store(p["out"], i, i)
    Unroll().run(k)
    assert opcodes(k).count("store") == 4096


def test_no_static_loop_reports_no_change():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    _, dyn = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "k")
    with b.at(dyn):
        b.store(p["out"], dyn.args[0], dyn.args[0])
    before = body_text(k)
    assert not Unroll().run(k)
    assert body_text(k) == before
