from __future__ import annotations

from iron.ir import Op
from iron.ir import types as t
from iron.passes import DCE

from .passes_helpers import F32_BUF, I32_BUF, body_text, new_kernel, opcodes


def test_unused_pure_ops_and_loads_go_stores_stay():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    gid = b.thread("program_id", 0)
    v = b.load(p["x"], gid)
    b.unary("exp", b.binary("mul", v, v))  # dead chain
    b.op("simd_shuffle", [v, gid], t.f32)
    b.op("shared", [], t.BufferType(t.f32, "shared", 32), {"elem": t.f32, "size": 32})
    b.store(p["out"], gid, b.const(1.0, t.f32))
    assert DCE().run(k)
    assert body_text(k) == "%0 = program_id 0 : i32\n%1 = const 1.0 : f32\nstore %out[%0], %1\n"


def test_atomics_and_barriers_stay_even_when_unused():
    k, b, p = new_kernel(("out", I32_BUF))
    gid = b.thread("program_id", 0)
    b.op("atomic_add", [p["out"], gid, gid], t.i32)
    b.op("barrier")
    assert not DCE().run(k)
    assert opcodes(k) == ["program_id", "atomic_add", "barrier"]


def test_var_never_read_is_removed_with_its_sets():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    gid = b.thread("program_id", 0)
    acc = b.var(t.i32, "acc")
    b.set(acc, b.const(0, t.i32))
    _, body = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
    with b.at(body):
        b.set(acc, b.binary("add", body.args[0], gid))
        b.store(p["out"], gid, body.args[0])
    DCE().run(k)
    assert "var" not in opcodes(k) and "set" not in opcodes(k) and "add" not in opcodes(k)
    assert "for" in opcodes(k)


def test_var_whose_only_read_is_dead_goes_too():
    k, b, p = new_kernel(("out", I32_BUF))
    acc = b.var(t.i32, "acc")
    b.set(acc, b.const(0, t.i32))
    b.get(acc)
    b.set(acc, b.const(1, t.i32))
    DCE().run(k)
    assert k.body.ops == []


def test_read_var_is_kept():
    k, b, p = new_kernel(("out", I32_BUF))
    acc = b.var(t.i32, "acc")
    b.set(acc, b.const(0, t.i32))
    b.store(p["out"], b.const(0, t.i32), b.get(acc))
    assert not DCE().run(k)


def test_empty_if_and_empty_for_are_removed_while_is_kept():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    gid = b.thread("program_id", 0)
    _, then, _ = b.if_(b.binary("lt", gid, p["n"]))
    with b.at(then):
        b.binary("add", gid, gid)  # dead, so the if becomes empty
    b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
    _, cond, _ = b.while_()
    with b.at(cond):
        b.op("condition", [b.binary("lt", gid, p["n"])])
    DCE().run(k)
    assert opcodes(k) == ["program_id", "while", "lt", "condition"]


def test_code_after_a_jump_is_removed():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    gid = b.thread("program_id", 0)
    _, body = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
    with b.at(body):
        b.store(p["out"], gid, body.args[0])
        b.op("break")
    body.append(Op("store", [p["out"], gid, gid]))  # unreachable: the verifier rejects it, DCE must drop it
    DCE().run(k)
    assert [op.opcode for op in body.ops] == ["store", "break"]


def test_code_after_an_if_whose_branches_both_jump_is_removed():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    gid = b.thread("program_id", 0)
    _, then, else_ = b.if_(b.binary("lt", gid, p["n"]))
    with b.at(then):
        b.store(p["out"], gid, gid)
        b.op("return")
    with b.at(else_):
        b.op("return")
    b.store(p["out"], gid, p["n"])
    DCE().run(k)
    assert opcodes(k)[-1] == "return"
    assert opcodes(k).count("store") == 1


def test_reaches_a_fixpoint_through_nested_regions():
    k, b, p = new_kernel(("out", I32_BUF), ("n", t.i32))
    gid = b.thread("program_id", 0)
    x = b.binary("mul", gid, gid)
    _, then, _ = b.if_(b.binary("lt", gid, p["n"]))
    with b.at(then):
        _, body = b.for_(b.const(0, t.i32), p["n"], b.const(1, t.i32), "j")
        with b.at(body):
            b.binary("add", x, body.args[0])
    DCE().run(k)
    assert k.body.ops == []
