from __future__ import annotations

from iron.ir import types as t
from iron.passes import CSE

from .passes_helpers import F32_BUF, I32_BUF, body_text, new_kernel, opcodes


def test_identical_pure_ops_merge_and_uses_follow():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    gid = b.thread("program_id", 0)
    v = b.load(p["x"], gid, name="v")
    a1 = b.binary("mul", v, v)
    a1.name = "sq"
    a2 = b.binary("mul", v, v)
    b.store(p["out"], b.thread("program_id", 0), b.binary("add", a1, a2))
    assert CSE().run(k)
    assert body_text(k) == (
        "%0 = program_id 0 : i32\n"
        "%v = load %x[%0] : f32\n"
        "%sq = mul %v, %v : f32\n"
        "%1 = add %sq, %sq : f32\n"
        "store %out[%0], %1\n"
    )


def test_loads_gets_and_simd_ops_are_never_merged():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    i = b.const(0, t.i32)
    l1, l2 = b.load(p["x"], i), b.load(p["x"], i)
    var = b.var(t.f32)
    b.set(var, l1)
    g1, g2 = b.get(var), b.get(var)
    s1 = b.op("simd_sum", [l2], t.f32).result
    s2 = b.op("simd_sum", [l2], t.f32).result
    for v in (g1, g2, s1, s2):
        b.store(p["out"], i, v)
    assert not CSE().run(k)
    assert opcodes(k).count("load") == 2 and opcodes(k).count("get") == 2 and opcodes(k).count("simd_sum") == 2


def test_outer_value_is_reused_inside_a_nested_region():
    k, b, p = new_kernel(("out", I32_BUF))
    gid = b.thread("program_id", 0)
    outer = b.binary("add", gid, b.const(1, t.i32))
    _, then, _ = b.if_(b.binary("lt", gid, b.const(4, t.i32)))
    with b.at(then):
        inner = b.binary("add", gid, b.const(1, t.i32))
        b.store(p["out"], gid, inner)
    b.store(p["out"], gid, outer)
    CSE().run(k)
    store_in_if = k.body.ops[5].regions[0].ops[-1]
    assert store_in_if.operands[2] is outer


def test_values_inside_a_region_are_not_visible_after_it_or_in_the_other_branch():
    k, b, p = new_kernel(("out", I32_BUF))
    gid = b.thread("program_id", 0)
    _, then, else_ = b.if_(b.binary("lt", gid, b.const(4, t.i32)))
    with b.at(then):
        b.store(p["out"], gid, b.binary("mul", gid, gid))
    with b.at(else_):
        b.store(p["out"], gid, b.binary("mul", gid, gid))
    b.store(p["out"], gid, b.binary("mul", gid, gid))
    CSE().run(k)
    assert opcodes(k).count("mul") == 3
    from iron.ir import verify

    verify(k)


def test_commutative_int_ops_match_swapped_but_float_add_does_not():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF), ("o2", I32_BUF))
    gid = b.thread("program_id", 0)
    one = b.const(1, t.i32)
    b.store(p["o2"], gid, b.binary("add", gid, one))
    b.store(p["o2"], gid, b.binary("add", one, gid))
    v = b.load(p["x"], gid)
    w = b.load(p["x"], one)
    b.store(p["out"], gid, b.binary("add", v, w))
    b.store(p["out"], gid, b.binary("add", w, v))
    b.store(p["out"], gid, b.select(b.binary("eq", v, w), v, w))
    b.store(p["out"], gid, b.select(b.binary("eq", w, v), v, w))
    CSE().run(k)
    ops = opcodes(k)
    assert ops.count("add") == 3  # one i32 add merged, both f32 adds kept
    assert ops.count("eq") == 1


def test_constants_merge_by_type_and_exact_value():
    k, b, p = new_kernel(("out", F32_BUF), ("o2", I32_BUF))
    i = b.const(0, t.i32)
    b.store(p["out"], i, b.const(0.0, t.f32))
    b.store(p["out"], i, b.const(-0.0, t.f32))
    b.store(p["out"], i, b.const(0.0, t.f32))
    b.store(p["o2"], b.const(0, t.i32), b.const(1, t.i32))
    CSE().run(k)
    assert body_text(k) == (
        "%0 = const 0 : i32\n"
        "%1 = const 0.0 : f32\n"
        "store %out[%0], %1\n"
        "%2 = const -0.0 : f32\n"
        "store %out[%0], %2\n"
        "store %out[%0], %1\n"
        "%3 = const 1 : i32\n"
        "store %o2[%0], %3\n"
    )


def test_thread_indices_merge_only_on_the_same_axis():
    k, b, p = new_kernel(("out", I32_BUF))
    x0, y0, x1 = b.thread("program_id", 0), b.thread("program_id", 1), b.thread("program_id", 0)
    b.store(p["out"], x0, b.binary("add", y0, x1))
    CSE().run(k)
    assert opcodes(k).count("program_id") == 2


def test_merging_chains_through_dependent_ops():
    k, b, p = new_kernel(("out", I32_BUF))
    g = b.thread("program_id", 0)
    a = b.binary("shl", b.binary("add", g, g), b.const(2, t.i32))
    c = b.binary("shl", b.binary("add", g, g), b.const(2, t.i32))
    b.store(p["out"], a, c)
    CSE().run(k)
    assert opcodes(k) == ["program_id", "add", "const", "shl", "store"]
