from __future__ import annotations

from iron.ir import print_kernel, verify
from iron.ir import types as t
from iron.ir.rewrite import (
    clone_block,
    clone_kernel,
    const_value,
    erase_op,
    insert_before,
    make_const,
    replace_all_uses,
    truncate_after_jump,
    use_counts,
    users,
)

from .passes_helpers import F32_BUF, I32_BUF, body_text, new_kernel, static_for


def _kernel():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    gid = b.thread("program_id", 0)
    v = b.load(p["x"], gid, name="v")
    sq = b.binary("mul", v, v)
    _, body, i = static_for(b, 0, 2)
    with b.at(body):
        b.store(p["out"], i, sq)
    return k, b, p, gid, v, sq


def test_clone_kernel_is_deep_and_prints_the_same():
    k, *_ = _kernel()
    k2 = clone_kernel(k)
    assert print_kernel(k2) == print_kernel(k)
    verify(k2)
    old = {id(op) for op in k.walk()} | {id(op.result) for op in k.walk() if op.result is not None}
    for op in k2.walk():
        assert id(op) not in old and (op.result is None or id(op.result) not in old)
    assert k2.params[0].value is not k.params[0].value


def test_clone_block_maps_block_args_and_results():
    k, b, p, gid, v, sq = _kernel()
    loop = k.body.ops[-1]
    mapping = {}
    copy = clone_block(loop.regions[0], mapping)
    iv = loop.regions[0].args[0]
    assert mapping[iv] is copy.args[0] and copy.args[0].name == "i"
    store = copy.ops[0]
    assert store.operands[1] is copy.args[0] and store.operands[2] is sq  # outer value kept


def test_use_counts_and_users():
    k, b, p, gid, v, sq = _kernel()
    counts = use_counts(k)
    assert counts[v] == 2 and counts[sq] == 1 and counts[gid] == 1
    assert [op.opcode for op in users(k)[v]] == ["mul"]


def test_replace_all_uses_reaches_nested_regions_and_passes_on_the_name():
    k, b, p, gid, v, sq = _kernel()
    w = make_const(2.0, t.f32)
    insert_before(sq.owner, w)
    assert replace_all_uses(k, sq, v) == 1
    assert k.body.ops[-1].regions[0].ops[0].operands[2] is v
    assert replace_all_uses(k, v, w.result) == 3
    assert w.result.name is None  # constants stay anonymous
    verify(k)


def test_erase_op_updates_counts_and_parent():
    k, b, p, gid, v, sq = _kernel()
    loop = k.body.ops[-1]
    counts = use_counts(k)
    erase_op(loop, counts)
    assert loop.parent is None and loop not in k.body.ops
    assert counts[sq] == 0
    erase_op(sq.owner, counts)
    assert counts[v] == 0
    verify(k)


def test_truncate_after_jump():
    k, b, p = new_kernel(("out", I32_BUF))
    b.op("return")
    c = make_const(1, t.i32)
    k.body.append(c)
    assert truncate_after_jump(k.body)
    assert c.parent is None
    assert body_text(k) == "return\n"
    assert not truncate_after_jump(k.body)


def test_make_const_normalises_python_types():
    assert const_value(make_const(1, t.f32).result) == 1.0
    assert type(const_value(make_const(1, t.f32).result)) is float
    assert const_value(make_const(1, t.bool_).result) is True
    assert const_value(make_const(3.0, t.i32).result) == 3
