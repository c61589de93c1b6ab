"""The NumPy interpreter (``iron.interp.run_kernel``) on hand-built IR, checked against float64 NumPy oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iron.errors import ExecutionError, LaunchError
from iron.interp import run_kernel
from iron.ir import Block, Builder, Kernel, Loc, Op, Param, Value
from iron.ir import types as t

F32BUF, I32BUF, U32BUF = t.BufferType(t.f32), t.BufferType(t.i32), t.BufferType(t.u32)


def loc(line: int, text: str = "    y[i] = f(x[i])") -> Loc:
    return Loc("kern.py", line, 4, text)


class K:
    """A kernel under construction: ``K("name", x=F32BUF, n=t.i32)``; ``k.b`` builds, ``k.p`` holds the params."""

    def __init__(self, name: str, **params: t.Type):
        body = Block()
        ps = [
            Param(n, "buffer" if isinstance(ty, t.BufferType) else "scalar", Value(ty, n)) for n, ty in params.items()
        ]
        self.kernel = Kernel(name, ps, body, loc=loc(1))
        self.b = Builder(body, loc(2))
        self.p = {p.name: p.value for p in ps}

    def c(self, value, type: t.ScalarType = t.i32) -> Value:
        return self.b.const(value, type)

    def op(self, opcode: str, *args: Value) -> Value:
        if len(args) == 3:  # fma
            return self.b.op(opcode, list(args), args[0].type).result
        return self.b.binary(opcode, *args) if len(args) == 2 else self.b.unary(opcode, *args)

    def pid(self, axis: int = 0) -> Value:
        return self.b.thread("program_id", axis)

    def if_(self, cond: Value) -> tuple[Block, Block]:
        _, then, else_ = self.b.if_(cond)
        return then, else_

    def for_(self, lo: Value, hi: Value, step: Value) -> tuple[Block, Value]:
        _, body = self.b.for_(lo, hi, step, "j")
        return body, body.args[0]

    def while_(self, cond_fn) -> Block:
        _, cond, body = self.b.while_()
        with self.b.at(cond):
            self.b.op("condition", [cond_fn()])
        return body

    def shared(self, elem: t.ScalarType, size: int, name: str = "tile") -> Value:
        rtype = t.BufferType(elem, "shared", size)
        return self.b.op("shared", [], rtype, {"elem": elem, "size": size}, name=name).result

    def run(self, grid, group, simd_width: int = 32, **args) -> None:
        run_kernel(self.kernel, args, grid, group, simd_width)


def nan_f32(n: int) -> np.ndarray:
    return np.full(n, np.nan, dtype=np.float32)


def rand_f32(n: int, seed: int = 0, lo: float = 0.0, hi: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


# -- elementwise, grids, thread ids ---------------------------------------------------------------------------------


def elementwise(opcode: str = "exp") -> K:
    k = K("unary_" + opcode, x=F32BUF, y=F32BUF)
    i = k.pid()
    k.b.store(k.p["y"], i, k.op(opcode, k.b.load(k.p["x"], i)))
    return k


def test_elementwise_exp_matches_float64():
    x = rand_f32(4096, lo=-10, hi=10)
    y = nan_f32(4096)
    elementwise().run((4096, 1, 1), (256, 1, 1), x=x, y=y)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)), rtol=1e-6)


def test_exact_grid_leaves_the_tail_untouched():
    x = rand_f32(1024, seed=1)
    y = nan_f32(1024)
    elementwise("sqrt").run((1000, 1, 1), (256, 1, 1), x=x, y=y)
    np.testing.assert_allclose(y[:1000], np.sqrt(x[:1000].astype(np.float64)), rtol=1e-6)
    assert np.isnan(y[1000:]).all()


def test_exact_grid_of_1000_reads_a_1000_element_buffer_safely():
    # threads 1000..1023 exist in the last group but are outside the grid: their loads must not fault
    x = rand_f32(1000, seed=2)
    y = nan_f32(1000)
    elementwise("neg").run(1000, 256, x=x, y=y)
    np.testing.assert_array_equal(y, -x)


def test_thread_ids_in_a_3d_launch():
    grid, group = (13, 6, 3), (4, 4, 2)
    k = K("ids", out=I32BUF)
    b = k.b
    names = ["program_id", "local_id", "group_id", "group_size", "num_groups"]
    x, y, z = k.pid(0), k.pid(1), k.pid(2)
    flat = k.op("add", x, k.op("mul", k.c(grid[0]), k.op("add", y, k.op("mul", k.c(grid[1]), z))))
    base = k.op("mul", flat, k.c(len(names) * 3 + 1))
    slot = 0
    for name in names:
        for axis in range(3):
            b.store(k.p["out"], k.op("add", base, k.c(slot)), b.thread(name, axis))
            slot += 1
    lin = b.thread("local_id", 0)  # linear local id -> simd_lane with width 8
    lin = k.op(
        "add",
        lin,
        k.op("mul", k.c(4), k.op("add", b.thread("local_id", 1), k.op("mul", k.c(4), b.thread("local_id", 2)))),
    )
    b.store(k.p["out"], k.op("add", base, k.c(slot)), k.op("sub", b.thread("simd_lane"), k.op("rem", lin, k.c(8))))
    n = math.prod(grid)
    out = np.full(n * 16, -7, dtype=np.int32)
    k.run(grid, group, simd_width=8, out=out)
    out = out.reshape(grid[2], grid[1], grid[0], 16)
    zz, yy, xx = np.meshgrid(*[np.arange(g) for g in grid[::-1]], indexing="ij")
    pid = [xx, yy, zz]
    for axis in range(3):
        g = group[axis]
        np.testing.assert_array_equal(out[..., 0 + axis], pid[axis])
        np.testing.assert_array_equal(out[..., 3 + axis], pid[axis] % g)
        np.testing.assert_array_equal(out[..., 6 + axis], pid[axis] // g)
        assert (out[..., 9 + axis] == g).all()
        assert (out[..., 12 + axis] == -(-grid[axis] // g)).all()
    assert (out[..., 15] == 0).all()


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_buffers_load_compute_in_f32_and_store_rounded(dtype):
    elem = t.SCALAR_TYPES[dtype]
    buf = t.BufferType(elem)
    k = K("gelu_ish", x=buf, y=buf)
    i = k.pid()
    v = k.b.cast(k.b.load(k.p["x"], i), t.f32)
    k.b.store(k.p["y"], i, k.b.cast(k.op("mul", v, k.op("erf", v)), elem))
    x = rand_f32(777, seed=11, lo=-3, hi=3).astype(elem.np_dtype)
    y = np.full(800, np.nan, dtype=elem.np_dtype)
    k.run(777, 128, x=x, y=y)
    x64 = x.astype(np.float64)
    want = x64 * np.array([math.erf(v) for v in x64])
    np.testing.assert_allclose(y[:777].astype(np.float64), want, rtol=2.0 ** -(8 if dtype == "bf16" else 11), atol=1e-6)
    assert np.isnan(y[777:].astype(np.float32)).all()


# -- control flow ---------------------------------------------------------------------------------------------------


def test_if_else_divergence():
    k = K("branchy", x=F32BUF, y=F32BUF)
    i = k.pid()
    v = k.b.load(k.p["x"], i)
    then, else_ = k.if_(k.op("gt", v, k.c(0.5, t.f32)))
    with k.b.at(then):
        k.b.store(k.p["y"], i, k.op("sqrt", v))
    with k.b.at(else_):
        k.b.store(k.p["y"], i, k.op("mul", k.op("neg", v), k.c(3.0, t.f32)))
    x = rand_f32(3000, seed=3)
    y = nan_f32(3000)
    k.run(3000, 128, x=x, y=y)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, np.where(x64 > 0.5, np.sqrt(x64), -3 * x64), rtol=1e-6)


def test_for_with_per_thread_bounds_and_steps():
    # acc = sum(x[j] for j in range(i % 7, i % 13 + 3, 1 + i % 3)), and a descending loop with step -2
    k = K("ranges", x=F32BUF, y=F32BUF, z=F32BUF)
    b = k.b
    i = k.pid()
    acc = b.var(t.f32, "acc")
    b.set(acc, k.c(0.0, t.f32))
    lo, hi = k.op("rem", i, k.c(7)), k.op("add", k.op("rem", i, k.c(13)), k.c(3))
    body, j = k.for_(lo, hi, k.op("add", k.c(1), k.op("rem", i, k.c(3))))
    with b.at(body):
        b.set(acc, k.op("add", b.get(acc), b.load(k.p["x"], j)))
    b.store(k.p["y"], i, b.get(acc))
    down = b.var(t.f32, "down")
    b.set(down, k.c(0.0, t.f32))
    body, j = k.for_(hi, lo, k.c(-2))
    with b.at(body):
        b.set(down, k.op("add", b.get(down), b.load(k.p["x"], j)))
    b.store(k.p["z"], i, b.get(down))
    n = 500
    x = rand_f32(64, seed=4)
    y, z = nan_f32(n), nan_f32(n)
    k.run(n, 64, x=x, y=y, z=z)
    want_y = [sum(float(x[j]) for j in range(i % 7, i % 13 + 3, 1 + i % 3)) for i in range(n)]
    want_z = [sum(float(x[j]) for j in range(i % 13 + 3, i % 7, -2)) for i in range(n)]
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_allclose(z, want_z, rtol=1e-6, atol=0)


def test_while_with_break_and_continue():
    # k = 0; s = 0; while k < limit: k += 1; if k % 3 == 0: continue; if s > cap: break; s += k
    kk = K("loopy", lim=I32BUF, cap=I32BUF, out=I32BUF)
    b = kk.b
    i = kk.pid()
    limit, cap = b.load(kk.p["lim"], i), b.load(kk.p["cap"], i)
    k, s = b.var(t.i32, "k"), b.var(t.i32, "s")
    b.set(k, kk.c(0))
    b.set(s, kk.c(0))
    body = kk.while_(lambda: kk.op("lt", b.get(k), limit))
    with b.at(body):
        kv = kk.op("add", b.get(k), kk.c(1))
        b.set(k, kv)
        then, _ = kk.if_(kk.op("eq", kk.op("rem", kv, kk.c(3)), kk.c(0)))
        with b.at(then):
            b.op("continue")
        then, _ = kk.if_(kk.op("gt", b.get(s), cap))
        with b.at(then):
            b.op("break")
        b.set(s, kk.op("add", b.get(s), kv))
    b.store(kk.p["out"], i, kk.op("add", kk.op("mul", b.get(s), kk.c(1000)), b.get(k)))
    rng = np.random.default_rng(5)
    n = 700
    lim = rng.integers(0, 40, n).astype(np.int32)
    capv = rng.integers(0, 200, n).astype(np.int32)
    out = np.full(n, -1, dtype=np.int32)
    kk.run(n, 32, lim=lim, cap=capv, out=out)

    def oracle(limit: int, cap: int) -> int:
        k = s = 0
        while k < limit:
            k += 1
            if k % 3 == 0:
                continue
            if s > cap:
                break
            s += k
        return s * 1000 + k

    assert out.tolist() == [oracle(int(a), int(c)) for a, c in zip(lim, capv)]


def test_nested_loops_break_and_continue_only_their_own_loop():
    # for a in range(5): if a == i % 4: continue; for c in range(10): if c > a + i % 3: break; acc += c * 10 ** a
    k = K("nested", y=I32BUF)
    b = k.b
    i = k.pid()
    acc = b.var(t.i32, "acc")
    b.set(acc, k.c(0))
    outer, a = k.for_(k.c(0), k.c(5), k.c(1))
    with b.at(outer):
        then, _ = k.if_(k.op("eq", a, k.op("rem", i, k.c(4))))
        with b.at(then):
            b.op("continue")
        weight = b.var(t.i32, "w")
        b.set(weight, k.c(1))
        pw, _ = k.for_(k.c(0), a, k.c(1))
        with b.at(pw):
            b.set(weight, k.op("mul", b.get(weight), k.c(10)))
        inner, c = k.for_(k.c(0), k.c(10), k.c(1))
        with b.at(inner):
            then, _ = k.if_(k.op("gt", c, k.op("add", a, k.op("rem", i, k.c(3)))))
            with b.at(then):
                b.op("break")
            b.set(acc, k.op("add", b.get(acc), k.op("mul", c, b.get(weight))))
    b.store(k.p["y"], i, b.get(acc))
    y = np.zeros(24, dtype=np.int32)
    k.run(24, 8, y=y)

    def oracle(i: int) -> int:
        acc = 0
        for a in range(5):
            if a == i % 4:
                continue
            for c in range(10):
                if c > a + i % 3:
                    break
                acc += c * 10**a
        return acc

    assert y.tolist() == [oracle(i) for i in range(24)]


def test_early_return_at_top_level_and_inside_a_loop():
    # if i % 3 == 0: y[i] = 1; return;  for j in range(10): if j == i % 5: return; y[i] = j
    k = K("early", y=F32BUF)
    b = k.b
    i = k.pid()
    then, _ = k.if_(k.op("eq", k.op("rem", i, k.c(3)), k.c(0)))
    with b.at(then):
        b.store(k.p["y"], i, k.c(100.0, t.f32))
        b.op("return")
    body, j = k.for_(k.c(0), k.c(10), k.c(1))
    with b.at(body):
        then, _ = k.if_(k.op("eq", j, k.op("rem", i, k.c(5))))
        with b.at(then):
            b.op("return")
        b.store(k.p["y"], i, b.cast(j, t.f32))
    b.store(k.p["y"], i, k.c(-1.0, t.f32))  # never reached: every thread returns in the loop
    y = nan_f32(90)
    k.run(90, 32, y=y)
    for i in range(90):
        want = 100.0 if i % 3 == 0 else (np.nan if i % 5 == 0 else float(i % 5 - 1))
        assert y[i] == want or (np.isnan(want) and np.isnan(y[i])), i


def test_vars_keep_values_of_threads_that_skip_a_set():
    k = K("vars", y=I32BUF)
    b = k.b
    i = k.pid()
    v = b.var(t.i32, "v")
    b.set(v, k.c(7))
    then, _ = k.if_(k.op("lt", i, k.c(5)))
    with b.at(then):
        b.set(v, i)
    b.store(k.p["y"], i, b.get(v))
    y = np.zeros(10, dtype=np.int32)
    k.run(10, 4, y=y)
    assert y.tolist() == [0, 1, 2, 3, 4, 7, 7, 7, 7, 7]


def test_for_with_zero_step_raises():
    k = K("stepzero", y=I32BUF)
    body, j = k.for_(k.c(0), k.c(4), k.op("rem", k.pid(), k.c(2)))
    with k.b.at(body):
        k.b.store(k.p["y"], j, j)
    with pytest.raises(ExecutionError, match=r"range\(\) step is 0 in kernel 'stepzero', thread program_id 0"):
        k.run(4, 4, y=np.zeros(4, dtype=np.int32))


# -- shared memory, barriers ----------------------------------------------------------------------------------------


def tree_reduce(k: K, sh: Value, lid: Value, combine: str) -> Value:
    """sh[0] = combine over sh[0:group_size], by halving strides with barriers; returns sh[0] (after a barrier)."""
    b = k.b
    s = b.var(t.i32, "s")
    b.set(s, k.op("shr", b.thread("group_size", 0), k.c(1)))
    body = k.while_(lambda: k.op("gt", b.get(s), k.c(0)))
    with b.at(body):
        sv = b.get(s)
        then, _ = k.if_(k.op("lt", lid, sv))
        with b.at(then):
            b.store(sh, lid, k.op(combine, b.load(sh, lid), b.load(sh, k.op("add", lid, sv))))
        b.op("barrier")
        b.set(s, k.op("shr", sv, k.c(1)))
    total = b.load(sh, k.c(0))
    b.op("barrier")  # nobody overwrites sh[0] before every thread has read it
    return total


def row_softmax(group: int) -> K:
    """Softmax of each row of x (rows x ncols), one group of ``group`` threads per row (grid = (group, rows))."""
    k = K("softmax_rows", x=F32BUF, y=F32BUF, ncols=t.i32)
    b = k.b
    x, y, ncols = k.p["x"], k.p["y"], k.p["ncols"]
    lid, gs = b.thread("local_id", 0), b.thread("group_size", 0)
    base = k.op("mul", b.thread("group_id", 1), ncols)
    sh = k.shared(t.f32, group)

    def columns(fn) -> None:
        body, c = k.for_(lid, ncols, gs)
        with b.at(body):
            fn(k.op("add", base, c))

    m = b.var(t.f32, "m")
    b.set(m, k.c(-math.inf, t.f32))
    columns(lambda at: b.set(m, k.op("max", b.get(m), b.load(x, at))))
    b.store(sh, lid, b.get(m))
    b.op("barrier")
    mx = tree_reduce(k, sh, lid, "max")
    acc = b.var(t.f32, "acc")
    b.set(acc, k.c(0.0, t.f32))

    def exp_store(at: Value) -> None:
        e = k.op("exp", k.op("sub", b.load(x, at), mx))
        b.store(y, at, e)
        b.set(acc, k.op("add", b.get(acc), e))

    columns(exp_store)
    b.store(sh, lid, b.get(acc))
    b.op("barrier")
    inv = k.op("div", k.c(1.0, t.f32), tree_reduce(k, sh, lid, "add"))
    columns(lambda at: b.store(y, at, k.op("mul", b.load(y, at), inv)))
    return k


def softmax_oracle(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_row_softmax_with_shared_memory_and_barriers():
    rows, cols, group = 37, 300, 64
    x = rand_f32(rows * cols, seed=6, lo=-20, hi=20)
    y = nan_f32(rows * cols)
    row_softmax(group).run((group, rows, 1), (group, 1, 1), x=x, y=y, ncols=np.int32(cols))
    np.testing.assert_allclose(y.reshape(rows, cols), softmax_oracle(x.reshape(rows, cols)), rtol=2e-6, atol=1e-9)


def test_row_sum_with_shared_memory_and_partial_rows():
    # the grid's x extent (40) is not a multiple of the group (64): the missing threads are not live, no error
    rows, cols, group = 9, 1000, 64
    k = K("row_sum", x=F32BUF, y=F32BUF, ncols=t.i32)
    b = k.b
    lid = b.thread("local_id", 0)
    row = b.thread("group_id", 1)
    sh = k.shared(t.f32, group)
    b.store(sh, lid, k.c(0.0, t.f32))  # lanes outside the grid never store: their slots keep the NaN fill ...
    acc = b.var(t.f32, "acc")
    b.set(acc, k.c(0.0, t.f32))
    body, c = k.for_(lid, k.p["ncols"], k.c(40))
    with b.at(body):
        b.set(acc, k.op("add", b.get(acc), b.load(k.p["x"], k.op("add", k.op("mul", row, k.p["ncols"]), c))))
    b.store(sh, lid, b.get(acc))
    b.op("barrier")
    then, _ = k.if_(k.op("eq", lid, k.c(0)))
    with b.at(then):
        total = b.var(t.f32, "total")
        b.set(total, k.c(0.0, t.f32))
        body, j = k.for_(k.c(0), k.c(40), k.c(1))  # ... so only the 40 live slots are summed
        with b.at(body):
            b.set(total, k.op("add", b.get(total), b.load(sh, j)))
        b.store(k.p["y"], row, b.get(total))
    x = rand_f32(rows * cols, seed=7)
    y = nan_f32(rows)
    k.run((40, rows, 1), (group, 1, 1), x=x, y=y, ncols=np.int32(cols))
    np.testing.assert_allclose(y, x.reshape(rows, cols).astype(np.float64).sum(axis=1), rtol=1e-5)


def test_shared_memory_is_per_group_and_starts_as_nan():
    k = K("peek", y=F32BUF)
    b = k.b
    lid = b.thread("local_id", 0)
    sh = k.shared(t.f32, 4)
    then, _ = k.if_(k.op("eq", b.thread("group_id", 0), k.c(1)))
    with b.at(then):
        b.store(sh, lid, k.c(5.0, t.f32))
    b.op("barrier")
    b.store(k.p["y"], k.pid(), b.load(sh, lid))
    y = np.zeros(12, dtype=np.float32)
    k.run(12, 4, y=y)
    assert np.isnan(y[:4]).all() and (y[4:8] == 5).all() and np.isnan(y[8:]).all()


def test_divergent_barrier_is_an_error():
    k = K("divergent", y=F32BUF)
    b = k.b
    then, _ = k.if_(k.op("lt", b.thread("local_id", 0), k.c(10)))
    with b.at(then):
        b.loc = loc(7, "        barrier()")
        b.op("barrier")
    with pytest.raises(ExecutionError) as info:
        k.run(64, 32, y=nan_f32(64))
    msg = str(info.value)
    assert "barrier() reached by only part of group 0 (divergent control flow)" in msg
    assert "10 of its 32 live threads" in msg and "kern.py:7:5" in msg and "barrier()" in msg.splitlines()[1]


def test_barrier_after_some_threads_returned_is_fine():
    k = K("quitters", y=F32BUF)
    b = k.b
    lid = b.thread("local_id", 0)
    then, _ = k.if_(k.op("ge", lid, k.c(20)))
    with b.at(then):
        b.op("return")
    b.op("barrier")
    b.store(k.p["y"], k.pid(), k.c(1.0, t.f32))
    y = np.zeros(64, dtype=np.float32)
    k.run(64, 32, y=y)
    assert y.reshape(2, 32)[:, :20].all() and not y.reshape(2, 32)[:, 20:].any()


# -- SIMD groups ----------------------------------------------------------------------------------------------------


def simd_kernel() -> K:
    """y = simd_sum(x); z = simd_shuffle_xor(x, m); w = simd_broadcast(x, 3); u = simd_max where x > 0.5."""
    k = K("simd", x=F32BUF, y=F32BUF, z=F32BUF, w=F32BUF, u=F32BUF, m=t.i32)
    b = k.b
    i = k.pid()
    v = b.load(k.p["x"], i)
    b.store(k.p["y"], i, b.op("simd_sum", [v], t.f32).result)
    b.store(k.p["z"], i, b.op("simd_shuffle_xor", [v, k.p["m"]], t.f32).result)
    b.store(k.p["w"], i, b.op("simd_broadcast", [v, k.c(3)], t.f32).result)
    then, _ = k.if_(k.op("gt", v, k.c(0.5, t.f32)))
    with b.at(then):
        b.store(k.p["u"], i, b.op("simd_min", [v], t.f32).result)
    return k


@pytest.mark.parametrize(("width", "group"), [(8, 64), (32, 128), (64, 128), (32, 48), (64, 32)])
def test_simd_reductions_and_shuffles(width, group):
    n = 4 * group
    x = rand_f32(n, seed=width + group)
    outs = {name: nan_f32(n) for name in "yzwu"}
    simd_kernel().run(n, group, simd_width=width, x=x, m=np.int32(5), **outs)
    # lanes of a SIMD group: the same group and the same local_id // width
    key = np.arange(n) // group * 1000 + np.arange(n) % group // width
    lane = np.arange(n) % group % width
    for i in range(n):
        members = key == key[i]
        np.testing.assert_allclose(outs["y"][i], x[members].astype(np.float64).sum(), rtol=1e-6)
        partner = np.flatnonzero(members & (lane == lane[i] ^ 5))
        if partner.size:  # past the end of a partial SIMD group the value is unspecified
            assert outs["z"][i] == x[partner[0]]
        assert outs["w"][i] == x[np.flatnonzero(members & (lane == 3))[0]]
        if x[i] > 0.5:
            assert outs["u"][i] == x[members & (x > 0.5)].min()
        else:
            assert np.isnan(outs["u"][i])


def test_simd_integer_sum_wraps_and_max_over_active_lanes():
    k = K("simd_int", x=I32BUF, y=I32BUF, z=I32BUF)
    b = k.b
    i = k.pid()
    v = b.load(k.p["x"], i)
    b.store(k.p["y"], i, b.op("simd_sum", [v], t.i32).result)
    then, _ = k.if_(k.op("lt", b.thread("simd_lane"), k.c(4)))
    with b.at(then):
        b.store(k.p["z"], i, b.op("simd_max", [v], t.i32).result)
    x = np.full(64, 2**30, dtype=np.int32)
    x[1::8] = -5
    y, z = np.zeros(64, np.int32), np.zeros(64, np.int32)
    k.run(64, 64, simd_width=8, x=x, y=y, z=z)
    assert (y == (7 * 2**30 - 5 + 2**31) % 2**32 - 2**31).all()  # 7 * 2^30 - 5 wraps around
    assert (z.reshape(8, 8)[:, :4] == 2**30).all() and not z.reshape(8, 8)[:, 4:].any()


def test_simd_shuffle_lane_out_of_range_reads_own_value():
    """Issue 15: a source lane outside the SIMD group (past its end, or negative) gives the caller's own value."""
    k = K("edgeshuffle", x=F32BUF, y=F32BUF, z=F32BUF)
    b = k.b
    i = k.pid()
    v = b.load(k.p["x"], i)
    b.store(k.p["y"], i, b.op("simd_shuffle", [v, k.op("add", b.thread("simd_lane"), k.c(1))], t.f32).result)
    b.store(k.p["z"], i, b.op("simd_shuffle", [v, k.op("sub", b.thread("simd_lane"), k.c(1))], t.f32).result)
    x, y, z = rand_f32(64), nan_f32(64), nan_f32(64)
    k.run(64, 64, x=x, y=y, z=z)
    lanes = x.reshape(2, 32)
    assert (y.reshape(2, 32) == np.concatenate([lanes[:, 1:], lanes[:, 31:]], axis=1)).all()
    assert (z.reshape(2, 32) == np.concatenate([lanes[:, :1], lanes[:, :31]], axis=1)).all()


# -- atomics --------------------------------------------------------------------------------------------------------


def counter_kernel(elem: t.ScalarType) -> K:
    buf = t.BufferType(elem)
    k = K("counter", c=buf, old=buf, v=buf)
    i = k.pid()
    old = k.b.op("atomic_add", [k.p["c"], k.c(0), k.b.load(k.p["v"], i)], elem).result
    k.b.store(k.p["old"], i, old)
    return k


def test_atomic_counter_returns_old_values_in_thread_order():
    n = 200_000
    c = np.array([10], dtype=np.int32)
    old = np.full(n, -1, dtype=np.int32)
    counter_kernel(t.i32).run(n, 256, c=c, old=old, v=np.ones(n, dtype=np.int32))
    assert c[0] == 10 + n
    np.testing.assert_array_equal(old, 10 + np.arange(n))


def test_atomic_add_f32_and_u32_wrap():
    n = 1000
    v = rand_f32(n, seed=8)
    c = np.array([0.5], dtype=np.float32)
    old = nan_f32(n)
    counter_kernel(t.f32).run(n, 128, c=c, old=old, v=v)
    prefix = 0.5 + np.concatenate([[0.0], np.cumsum(v.astype(np.float64))])
    np.testing.assert_allclose(old, prefix[:-1], rtol=1e-6)
    np.testing.assert_allclose(c[0], prefix[-1], rtol=1e-6)
    cu = np.array([2**32 - 3], dtype=np.uint32)
    oldu = np.zeros(4, dtype=np.uint32)
    counter_kernel(t.u32).run(4, 4, c=cu, old=oldu, v=np.full(4, 2, dtype=np.uint32))
    assert oldu.tolist() == [2**32 - 3, 2**32 - 1, 1, 3] and cu[0] == 5


def test_atomic_histogram_with_heavy_duplicates_and_a_mask():
    # only threads with even i count: h[x[i] % 7] += 1 -- and atomic_max on a second buffer keeps the largest i
    k = K("hist", x=I32BUF, h=I32BUF, top=I32BUF, olds=I32BUF)
    b = k.b
    i = k.pid()
    then, _ = k.if_(k.op("eq", k.op("rem", i, k.c(2)), k.c(0)))
    with b.at(then):
        bin_ = k.op("rem", b.load(k.p["x"], i), k.c(7))
        b.op("atomic_add", [k.p["h"], bin_, k.c(1)], t.i32)
        b.store(k.p["olds"], i, b.op("atomic_max", [k.p["top"], bin_, k.op("neg", i)], t.i32).result)
    n = 100_001
    x = np.random.default_rng(9).integers(0, 1000, n).astype(np.int32)
    h = np.zeros(7, dtype=np.int32)
    top = np.full(7, -(2**31), dtype=np.int32)
    olds = np.full(n, 12345, dtype=np.int32)
    k.run(n, 256, x=x, h=h, top=top, olds=olds)
    even = np.arange(0, n, 2)
    np.testing.assert_array_equal(h, np.bincount(x[even] % 7, minlength=7))
    # -i is decreasing, so each bin's max is its first thread's -i; old values: INT_MIN for the first, then that
    first = {int(bn): -int(i) for i, bn in reversed(list(zip(even, x[even] % 7)))}
    assert top.tolist() == [first[bn] for bn in range(7)]
    seen: set[int] = set()
    for i in even[:2000]:
        bn = int(x[i] % 7)
        assert olds[i] == (first[bn] if bn in seen else -(2**31))
        seen.add(bn)
    assert (olds[1::2] == 12345).all()


def test_atomic_max_f32_ignores_nan_values():
    k = K("fmax", v=F32BUF, m=F32BUF, old=F32BUF)
    i = k.pid()
    old = k.b.op("atomic_max", [k.p["m"], k.op("rem", i, k.c(2)), k.b.load(k.p["v"], i)], t.f32).result
    k.b.store(k.p["old"], i, old)
    v = np.array([1.0, np.nan, 3.0, -1.0, np.nan, 7.0, 2.0, 0.0], dtype=np.float32)
    m = np.array([np.nan, -5.0], dtype=np.float32)
    old = nan_f32(8)
    k.run(8, 8, v=v, m=m, old=old)
    assert m.tolist() == [3.0, 7.0]
    np.testing.assert_array_equal(old, [np.nan, -5.0, 1.0, -5.0, 3.0, -1.0, 3.0, 7.0])


def test_atomics_on_shared_memory_are_per_group():
    k = K("shared_count", old=I32BUF, total=I32BUF)
    b = k.b
    lid = b.thread("local_id", 0)
    sh = k.shared(t.i32, 1, "count")
    then, _ = k.if_(k.op("eq", lid, k.c(0)))
    with b.at(then):
        b.store(sh, k.c(0), k.c(0))
    b.op("barrier")
    b.store(k.p["old"], k.pid(), b.op("atomic_add", [sh, k.c(0), k.c(1)], t.i32).result)
    b.op("barrier")
    then, _ = k.if_(k.op("eq", lid, k.c(0)))
    with b.at(then):
        b.store(k.p["total"], b.thread("group_id", 0), b.load(sh, k.c(0)))
    old = np.full(300, -1, np.int32)
    total = np.zeros(3, np.int32)
    k.run(300, 128, old=old, total=total)
    assert total.tolist() == [128, 128, 44]
    assert old.tolist() == list(range(128)) * 2 + list(range(44))


# -- faults ---------------------------------------------------------------------------------------------------------


def test_out_of_bounds_load_names_kernel_buffer_index_thread_and_line():
    k = K("oob", x=F32BUF, y=F32BUF)
    b = k.b
    i = k.pid()
    b.loc = loc(12, "    y[i] = x[i + 1]")
    v = b.load(k.p["x"], k.op("add", i, k.c(1)))
    b.loc = loc(13)
    b.store(k.p["y"], i, v)
    with pytest.raises(ExecutionError) as info:
        k.run(100, 32, x=rand_f32(100), y=nan_f32(100))
    msg = str(info.value)
    assert msg.startswith("kern.py:12:5: error: load from buffer 'x' at index 100 is out of bounds (size 100)")
    assert "in kernel 'oob', thread program_id 99" in msg
    assert msg.splitlines()[1].strip() == "y[i] = x[i + 1]"
    assert info.value.loc.line == 12


def test_out_of_bounds_store_to_shared_memory_and_negative_index():
    k = K("oob_shared", y=F32BUF)
    b = k.b
    sh = k.shared(t.f32, 16)
    b.store(sh, k.op("sub", b.thread("local_id", 0), k.c(3)), k.c(1.0, t.f32))
    with pytest.raises(
        ExecutionError,
        match=r"store to shared array 'tile' at index -3 is out of bounds \(size 16\) in kernel 'oob_shared', "
        r"thread program_id 0 \(and 5 more threads\)",
    ):
        k.run(32, 16, y=nan_f32(32))


def test_inactive_threads_never_fault_or_write():
    # if i < n: y[i] = x[i] / d[i] with every out-of-range thread holding a bad index and a zero divisor
    k = K("guarded", x=I32BUF, d=I32BUF, y=I32BUF, n=t.i32)
    b = k.b
    i = k.pid()
    then, _ = k.if_(k.op("lt", i, k.p["n"]))
    with b.at(then):
        b.store(k.p["y"], i, k.op("div", b.load(k.p["x"], i), b.load(k.p["d"], i)))
    x = np.arange(50, dtype=np.int32) * 10
    d = np.arange(1, 51, dtype=np.int32)
    y = np.full(64, -1, dtype=np.int32)
    k.run(64, 64, x=x, d=d, y=y, n=np.int32(50))
    assert y[:50].tolist() == [10 * i // (i + 1) for i in range(50)] and (y[50:] == -1).all()


def test_integer_division_by_zero_on_an_active_thread_is_an_error():
    k = K("divzero", x=I32BUF, y=I32BUF)
    i = k.pid()
    k.b.loc = loc(20, "    y[i] = 100 % x[i]")
    k.b.store(k.p["y"], i, k.op("rem", k.c(100), k.b.load(k.p["x"], i)))
    x = np.array([1, 2, 0, 4], dtype=np.int32)
    with pytest.raises(ExecutionError, match=r"integer remainder by zero in kernel 'divzero', thread program_id 2"):
        k.run(4, 4, x=x, y=np.zeros(4, np.int32))


def test_unknown_opcode_is_not_implemented():
    k = K("mystery", y=F32BUF)
    k.b.block.append(Op("frobnicate", [], t.i32))
    with pytest.raises(NotImplementedError, match="frobnicate"):
        k.run(4, 4, y=nan_f32(4))


def test_bad_arguments_are_launch_errors():
    k = elementwise()
    with pytest.raises(LaunchError, match="missing argument 'y'"):
        k.run(4, 4, x=rand_f32(4))
    with pytest.raises(LaunchError, match="argument 'y' must be a 1-D float32 array, got float64"):
        k.run(4, 4, x=rand_f32(4), y=np.zeros(4))
    with pytest.raises(LaunchError, match="group must be"):
        k.run(4, 0, x=rand_f32(4), y=nan_f32(4))


def test_scalar_parameters_and_an_empty_grid():
    k = K("axpy", x=F32BUF, y=F32BUF, a=t.f32, n=t.i32)
    i = k.pid()
    then, _ = k.if_(k.op("lt", i, k.p["n"]))
    with k.b.at(then):
        k.b.store(k.p["y"], i, k.op("fma", k.p["a"], k.b.load(k.p["x"], i), k.b.load(k.p["y"], i)))
    x, y = rand_f32(10), np.ones(10, np.float32)
    k.run(16, 16, x=x, y=y, a=np.float32(2.0), n=7)
    np.testing.assert_allclose(y, np.where(np.arange(10) < 7, 2 * x + 1, 1), rtol=1e-6)
    k.run(0, 16, x=x, y=y, a=np.float32(2.0), n=7)  # nothing runs
    with pytest.raises(LaunchError, match="argument 'a' must be a f32 scalar"):
        k.run(16, 16, x=x, y=y, a=np.float64(2.0), n=7)
