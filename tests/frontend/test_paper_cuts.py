"""Issue 15, point 7: paper cuts seen in the ports, each refused before, now as a Triton or CUDA author expects.

- ``-float("inf")``, ``float("nan")``, ``-math.inf`` are compile-time constants (also in constexpr arithmetic);
- ``math.sqrt(x)`` and the other ``math`` functions Iron has a builtin for are that builtin; on constants they fold
  with Python's math (``range(math.ceil(N / B))`` is an int bound);
- ``acc = 0`` then ``acc += 0.5`` in a loop widens ``acc`` to f32; outside a loop, the error says ``write acc = 0.0``;
- ``return`` inside ``for``/``while``/``static_range`` loops (nested too) of an ``@iron.func`` helper.

Each kernel runs on every backend of the ``backend`` fixture against a float64 NumPy oracle, outputs poisoned first.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from iron import CompileError

from ..backends.compile_targets import COMPILE_ROWS, CompileRow
from .sources import module_from_source
from .test_kernels import f64, int_poisoned

INFINITIES = '''import math

import iron
from iron import Tensor


@iron.kernel
def k(x: Tensor[iron.f32], hi: Tensor[iron.f32], lo: Tensor[iron.f32], sp: Tensor[iron.f32],
      nan_out: Tensor[iron.f32], n: int, SCALE: iron.constexpr):
    i = iron.program_id(0)
    m = -float("inf")
    low = float("inf")
    for j in range(i % 5):  # row 0 is empty: its results are the starting infinities
        m = max(m, x[i * n + j])
        low = min(low, x[i * n + j])
    hi[i] = m
    lo[i] = low
    sp[i * 4 + 0] = -math.inf * SCALE + 1.0 if x[i] > 0.0 else float("-inf")
    sp[i * 4 + 1] = iron.where(x[i] > 0.5, float("inf") / SCALE, x[i])
    sp[i * 4 + 2] = iron.where(iron.isnan(x[i] + float("nan")), 7.0, -7.0)
    sp[i * 4 + 3] = 1.0 / (SCALE * float("inf")) + x[i] * 0.0 + (5.0 if math.isinf(-math.inf) else 0.0)
    nan_out[i] = float("nan") * x[i]
'''


def test_infinities_and_nan_are_constants(tmp_path, backend, rng):
    mod = module_from_source(tmp_path, "pc_infinities", INFINITIES)
    rows, n = 40, 4
    x = rng.uniform(0.0, 1.0, rows * n).astype(np.float32)
    hi, lo, sp = (np.full(rows, np.nan, np.float32), np.full(rows, np.nan, np.float32),
                  np.full(rows * 4, np.nan, np.float32))
    nan_out = np.full(rows, np.inf, np.float32)  # poisoned with +inf: NaN is what it must hold
    mod.k[rows](x, hi, lo, sp, nan_out, n, 2.0, backend=backend)
    x2 = f64(x).reshape(rows, n)
    want_hi = np.array([x2[i, : i % 5].max(initial=-np.inf) for i in range(rows)])
    want_lo = np.array([x2[i, : i % 5].min(initial=np.inf) for i in range(rows)])
    np.testing.assert_array_equal(f64(hi), want_hi)
    np.testing.assert_array_equal(f64(lo), want_lo)
    xi = f64(x[:rows])
    want_sp = np.stack([np.full(rows, -np.inf), np.where(xi > 0.5, np.inf, xi), np.full(rows, 7.0),
                        np.full(rows, 5.0)], axis=1).ravel()
    np.testing.assert_array_equal(f64(sp), want_sp)
    assert np.isnan(nan_out).all()


MATH_MODULE = '''import math
from math import sqrt

import iron
from iron import Tensor


@iron.kernel
def k(x: Tensor[iron.f32], out: Tensor[iron.f32], N: iron.constexpr, B: iron.constexpr):
    i = iron.program_id(0)
    v = x[i]
    out[i * 12 + 0] = math.sqrt(v)
    out[i * 12 + 1] = math.exp(v)
    out[i * 12 + 2] = math.log(v)
    out[i * 12 + 3] = math.sin(v)
    out[i * 12 + 4] = math.cos(v) * math.tanh(v)
    out[i * 12 + 5] = math.atan2(v, 2.0) + math.pow(v, 1.5)
    out[i * 12 + 6] = math.floor(v * 3.0) + math.ceil(v * 3.0) * 100.0
    out[i * 12 + 7] = math.fabs(-v) + math.copysign(1.0, -v)
    out[i * 12 + 8] = sqrt(v) + math.exp2(v) + math.log2(v)
    out[i * 12 + 9] = math.erf(v)
    out[i * 12 + 10] = math.sqrt(i) + math.fabs(-i)
    s = 0.0
    for j in range(math.ceil(N / B)):  # folded with Python's math: an int bound
        s += math.log2(B)
    out[i * 12 + 11] = s + math.sqrt(2.0) + math.pi
'''


def test_math_module_functions_are_the_builtins(tmp_path, backend, rng):
    mod = module_from_source(tmp_path, "pc_math", MATH_MODULE)
    n = 64
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    out = np.full(n * 12, np.nan, np.float32)
    mod.k[n](x, out, 10, 4, backend=backend)
    v = f64(x)
    x3 = f64(x * np.float32(3.0))  # the product is rounded to f32 before floor/ceil, as in the kernel
    idx = np.arange(n, dtype=np.float64)
    erf = np.vectorize(math.erf)(v)
    want = np.stack([np.sqrt(v), np.exp(v), np.log(v), np.sin(v), np.cos(v) * np.tanh(v),
                     np.arctan2(v, 2.0) + v**1.5, np.floor(x3) + np.ceil(x3) * 100.0, v - 1.0,
                     np.sqrt(v) + np.exp2(v) + np.log2(v), erf, np.sqrt(idx) + idx,
                     np.full(n, 3 * 2.0 + math.sqrt(2.0) + math.pi)], axis=1).ravel()
    np.testing.assert_allclose(f64(out), want, rtol=4e-6, atol=2e-6)


WIDEN = '''import iron
from iron import Tensor


@iron.func
def half_sum(x, base, n):
    s = 0
    j = 0
    while j < n:
        s += x[base + j] * 0.5
        j += 1
    return s


@iron.kernel
def k(x: Tensor[iron.f32], out: Tensor[iron.f32], n: int):
    i = iron.program_id(0)
    acc = 0
    for j in range(n):
        acc += 0.5
    total = 0
    for j in range(n):
        for r in range(2):
            total = total + x[i * n + j] * r
    cnt = 0
    for j in range(n):
        cnt += 1  # only ints: stays i32, so it can index
    out[i * 4 + 0] = acc
    out[i * 4 + 1] = total
    out[i * 4 + 2] = x[i * n + cnt - 1]
    out[i * 4 + 3] = half_sum(x, i * n, n)
'''


def test_an_int_start_widens_to_float_in_a_loop(tmp_path, backend, rng):
    mod = module_from_source(tmp_path, "pc_widen", WIDEN)
    rows, n = 32, 7
    x = rng.standard_normal(rows * n).astype(np.float32)
    out = np.full(rows * 4, np.nan, np.float32)
    mod.k[rows](x, out, n, backend=backend)
    x2 = f64(x).reshape(rows, n)
    want = np.stack([np.full(rows, 0.5 * n), x2.sum(axis=1), x2[:, n - 1], 0.5 * x2.sum(axis=1)], axis=1).ravel()
    np.testing.assert_allclose(f64(out), want, rtol=1e-5, atol=1e-5)


RETURNS = '''import iron
from iron import Tensor


@iron.func
def first_negative(x, base, n):
    for j in range(n):
        if x[base + j] < 0.0:
            return j
    return -1


@iron.func
def first_above(x, base, rows, cols, threshold):
    for r in range(rows):
        for c in range(cols):
            if x[base + r * cols + c] > threshold:
                return r * 100 + c
        if r >= 2:
            return -2
    return -1


@iron.func
def prefix_until(x, base, n, limit):
    s = 0.0
    j = 0
    while j < n:
        s += x[base + j]
        if s > limit:
            return s
        j += 1
    return -s


@iron.func
def first_big_unrolled(x, base):
    for j in iron.static_range(8):
        if x[base + j] > 1.0:
            return j
    return 99


@iron.func
def add_until_negative(out, o, x, base, n):
    for j in range(n):
        if x[base + j] < 0.0:
            return
        out[o] = out[o] + x[base + j]


@iron.kernel
def k(x: Tensor[iron.f32], ints: Tensor[iron.i32], out: Tensor[iron.f32], n: int):
    i = iron.program_id(0)
    base = i * n
    calls = 0
    for rep in range(3):  # the helper runs afresh on every call: its "returned" flag is reset
        calls += first_negative(x, base, n) + rep
    ints[i * 4 + 0] = first_negative(x, base, n)
    ints[i * 4 + 1] = first_above(x, base, 4, 4, 1.5)
    ints[i * 4 + 2] = first_big_unrolled(x, base)
    ints[i * 4 + 3] = calls
    out[i * 2 + 0] = prefix_until(x, base, n, 1.0)
    out[i * 2 + 1] = 0.0
    add_until_negative(out, i * 2 + 1, x, base, n)
'''


def _returns_oracle(x: np.ndarray, rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    ints, out = np.zeros((rows, 4), np.int64), np.zeros((rows, 2))
    for i in range(rows):
        row = x[i * n:(i + 1) * n]
        neg = np.nonzero(row < 0)[0]
        first_neg = int(neg[0]) if neg.size else -1
        above = np.nonzero(row[:16].reshape(4, 4) > 1.5)
        first_above = -2  # rows 0 to 2 hold nothing above: the helper returns -2 after row 2
        if above[0].size:
            r, c = int(above[0][0]), int(above[1][0])
            first_above = r * 100 + c if r <= 2 else -2
        big = np.nonzero(row[:8] > 1.0)[0]
        ints[i] = [first_neg, first_above, int(big[0]) if big.size else 99, 3 * first_neg + 3]
        sums = np.cumsum(row)
        over = np.nonzero(sums > 1.0)[0]
        out[i, 0] = sums[over[0]] if over.size else -sums[-1]
        out[i, 1] = row[: first_neg if first_neg >= 0 else n].sum()
    return ints.ravel(), out.ravel()


def test_return_inside_loops_of_a_helper(tmp_path, backend, rng):
    mod = module_from_source(tmp_path, "pc_returns", RETURNS)
    rows, n = 48, 16
    x = rng.standard_normal(rows * n).astype(np.float32) + np.float32(0.6)
    x[5 * n:6 * n] = np.abs(x[5 * n:6 * n])  # a row with no negative and (likely) no prefix over the limit
    x[6 * n:7 * n] = np.float32(0.01)
    ints, out = int_poisoned(rows * 4), np.full(rows * 2, np.nan, np.float32)
    mod.k[rows](x, ints, out, n, backend=backend)
    want_ints, want_out = _returns_oracle(f64(x), rows, n)
    np.testing.assert_array_equal(ints.astype(np.int64), want_ints)
    np.testing.assert_allclose(f64(out), want_out, rtol=1e-5, atol=1e-5)


def _kernel_text(body: str) -> str:
    return ("import math\n\nimport iron\nfrom iron import Tensor\n\n\n@iron.kernel\n"
            "def k(x: Tensor[iron.f32], out: Tensor[iron.f32], n: int):\n    i = iron.program_id(0)\n" + body)


ERRORS = [
    ("int_start_outside_loop", "    acc = 0\n    acc = x[i]  # ERR\n    out[i] = acc\n",
     "cannot implicitly convert f32 to i32 for 'acc'", "write `acc = 0.0` there"),
    ("int_start_in_same_loop", "    for j in range(n):\n        acc = 3\n        acc += 0.5  # ERR\n    out[i] = 1.0\n",
     "cannot implicitly convert f32 to i32 for 'acc'", "write `acc = 3.0` there"),
    ("int_value_start", "    acc = i\n    for j in range(n):\n        acc += 0.5  # ERR\n    out[i] = acc\n",
     "cannot implicitly convert f32 to i32 for 'acc'", "'acc' is i32 from its first assignment"),
    ("declared_int", "    acc: iron.i32 = 0\n    for j in range(n):\n        acc += x[j]  # ERR\n    out[i] = acc\n",
     "cannot implicitly convert f32 to i32 for 'acc'", "'acc' is declared i32 on line 10"),
    ("math_without_builtin", "    out[i] = math.tan(x[i])  # ERR\n",
     "math.tan() works in a kernel on compile-time constants only", "can apply to run-time values: atan2, ceil"),
    ("math_log_base", "    out[i] = math.log(x[i], 2.0)  # ERR\n", "math.log() with 2 arguments", "log(x) / log(base)"),
    ("math_domain", "    out[i] = x[i] + math.log(-1.0)  # ERR\n", "math.log(-1.0) cannot be computed", None),
    ("float_of_text", '    out[i] = x[i] + float("abc")  # ERR\n', "float('abc') is not a number", None),
    ("int_of_infinity", '    out[i] = x[i] + int(float("inf"))  # ERR\n', "int(inf) is undefined", None),
]


@pytest.mark.parametrize("name,body,message,hint", ERRORS, ids=[e[0] for e in ERRORS])
def test_paper_cut_errors_are_located(tmp_path, name, body, message, hint):
    text = _kernel_text(body)
    mod = module_from_source(tmp_path, f"pc_err_{name}", text)
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if "# ERR" in ln)
    with pytest.raises(CompileError) as info:
        mod.k[4](np.zeros(4, np.float32), np.full(4, np.nan, np.float32), 4, backend="cpu")
    err = str(info.value)
    assert f"{tmp_path / f'pc_err_{name}.py'}:{line}:" in err, err
    assert message in err, err
    assert re.search(r"^\s*\^", err, re.M), err  # the caret under the user's code
    if hint:
        assert hint in err, err
    assert "iron/frontend" not in err, err


COMPILED = {"pc_c_infinities": (INFINITIES, (2.0,)), "pc_c_math": (MATH_MODULE, (10, 4)), "pc_c_widen": (WIDEN, ()),
            "pc_c_returns": (RETURNS, ())}


@pytest.fixture(params=list(COMPILE_ROWS))
def target(request) -> CompileRow:
    """A compile-only toolchain (tests/backends/compile_targets.py), skipped with the reason where it is absent."""
    row = COMPILE_ROWS[request.param]
    reason = row.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return row


@pytest.mark.parametrize("name", list(COMPILED))
def test_paper_cut_kernels_compile_for_every_target(tmp_path, target, name):
    """CUDA and HIP have no device here: their toolchains (and spirv-val, clang against the Metal model) still check
    the source each of these kernels emits (infinity and NaN literals, the helper's flag and breaks)."""
    text, constexprs = COMPILED[name]
    variant = module_from_source(tmp_path, name, text).k.variant(None, constexprs)
    emitted = target.emit(variant)
    result = target.build_all({name: emitted})[name]
    if isinstance(result, Exception):
        raise result
    target.check(name, variant, emitted, result)
