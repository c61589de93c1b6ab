"""Issue 17, definitions: whatever a kernel's definition says, Iron compiles it right or refuses it with a located
error (``file:line:col``, the source line, a caret, a hint); never an internal traceback, a hang or a wrong answer.

1. ``iron.kernel`` / ``iron.func`` of something that is not a ``def`` function: a ``TypeError`` naming it; a lambda
   (it has source, but no annotations and no name) a ``CompileError`` at the lambda.
2. Constant folding follows Python (ints unbounded up to 4096 bits, floats in float64): ``1 << -1``, ``10**400``
   meeting a float, ``2.0 ** 10000``, ``1 << 10**11`` (which Python would take minutes and gigabytes to compute)...
   are located errors, not "internal compiler error"s or hangs.
3. Chained expressions of 500 and 2000 terms compile (CPython does) and compute NumPy's value on every backend.
4. A module global, closure variable or class attribute a kernel reads is part of its variants' key: changing it
   recompiles, so every variant (f32, f16...) sees the current value.
5. ``static_range`` limits the total unrolled iterations of a kernel (nested loops multiply), refused fast at the
   loop that crosses the limit.
6. Rebinding a buffer parameter is located at the assignment; quoted annotations work; ``f(*t)`` says starred
   arguments are unsupported; a parameter named ``backend`` (the launch keyword) is refused at decoration; unicode
   identifiers work on every backend.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
import time

import numpy as np
import pytest

import iron
from iron import CompileError, T, Tensor, program_id, static_range

from ..backends.capabilities import caps
from ..frontend.test_errors import assert_located, marker_line

THIS_FILE = os.path.abspath(__file__)
THIS_MODULE = sys.modules[__name__]


def err_line(fn) -> int:
    """The line of ``fn``'s ``# ERR`` marker."""
    fn = getattr(fn, "fn", fn)
    _, first = inspect.getsourcelines(fn)
    return marker_line(THIS_FILE, first, "# ERR")


def assert_clean(err: BaseException) -> None:
    """No compiler bug shows through: the message is the user's, not an internal error's."""
    assert "internal compiler error" not in str(err), str(err)
    assert err.__cause__ is None


# -- 1. iron.kernel of something that is not a function ------------------------------------------------------------


class CallableObject:
    def __call__(self, x):
        return x


def plain(x: Tensor[iron.f32]):
    x[0] = 1.0


NOT_FUNCTIONS = [3, "kernel", len, int, CallableObject, CallableObject(), functools.partial(plain), staticmethod(plain)]


@pytest.mark.parametrize("obj", NOT_FUNCTIONS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("decorator", [iron.kernel, iron.kernel(native_half=True), iron.func],
                         ids=["kernel", "kernel(native_half)", "func"])
def test_decorating_a_non_function_is_a_type_error(decorator, obj):
    with pytest.raises(TypeError) as info:
        decorator(obj)
    text = str(info.value)
    assert "def" in text and type(obj).__name__ in text, text


square = lambda x: x  # ERR  # noqa: E731 - a lambda is what is under test


@pytest.mark.parametrize("decorator", [iron.kernel, iron.func], ids=["kernel", "func"])
def test_lambda_is_a_located_error(decorator):
    with pytest.raises(CompileError) as info:
        decorator(square)
    assert_located(info.value, THIS_FILE, err_line(square), "cannot compile a lambda", "lambda")
    assert "def" in info.value.hint


# -- 2. constant folding ----------------------------------------------------------------------------------------


def shift_by_negative(out: Tensor[iron.i32]):
    out[0] = 1 << -1  # ERR


def shift_right_by_negative(out: Tensor[iron.i32]):
    out[0] = 1 >> -1  # ERR


def shift_too_far(out: Tensor[iron.i32]):
    out[0] = (1 << 100000000000) >> 99999999999  # ERR


def power_too_large(out: Tensor[iron.i32]):
    out[0] = (10**10**10) % 7  # ERR


def huge_int_into_float(out: Tensor[iron.f32]):
    out[0] = 10**400  # ERR


def huge_int_into_int(out: Tensor[iron.i32]):
    out[0] = 10**400  # ERR


def huge_int_times_float(out: Tensor[iron.f32]):
    out[0] = 10**400 * 1.0  # ERR


def huge_int_meets_value(out: Tensor[iron.f32]):
    out[0] = out[0] + 10**400  # ERR


def huge_int_to_float_call(out: Tensor[iron.f32]):
    out[0] = float(10**400)  # ERR


def float_power_overflows(out: Tensor[iron.f32]):
    out[0] = 2.0**10000  # ERR


def complex_power(out: Tensor[iron.f32]):
    out[0] = (-8.0) ** 0.5  # ERR


def float_remainder_by_zero(out: Tensor[iron.f32]):
    out[0] = 1.5 % 0.0  # ERR


FOLD_CASES = [
    (shift_by_negative, "negative shift count", "1 << -1"),
    (shift_right_by_negative, "negative shift count", "1 >> -1"),
    (shift_too_far, "4096 bits", "1 << 100000000000"),
    (power_too_large, "4096 bits", "10**10**10"),
    (huge_int_into_float, "out of range for f32", "10**400"),
    (huge_int_into_int, "does not fit in i32", "10**400"),
    (huge_int_times_float, "out of range", "10**400 * 1.0"),
    (huge_int_meets_value, "out of range for f32", "out[0] + 10**400"),
    (huge_int_to_float_call, "out of range", "float(10**400)"),
    (float_power_overflows, "out of range", "2.0**10000"),
    (complex_power, "complex", "(-8.0) ** 0.5"),
    (float_remainder_by_zero, "by zero", "1.5 % 0.0"),
]


@pytest.mark.parametrize("fn,fragment,token", FOLD_CASES, ids=[c[0].__name__ for c in FOLD_CASES])
def test_constant_folding_errors_are_located(fn, fragment, token):
    start = time.perf_counter()
    with pytest.raises(CompileError) as info:
        iron.kernel(fn).ir()
    assert time.perf_counter() - start < 2.0, "folding must refuse a huge constant before computing it"
    assert_located(info.value, THIS_FILE, err_line(fn), fragment, token)
    assert_clean(info.value)
    assert len(str(info.value)) < 600, "a huge constant is not printed in full"


def wide_intermediates(out: Tensor[iron.i32]):
    out[0] = ((1 << 40) >> 38) + (10**400 // 10**399) + 10**400 % 7 + (1 << 4095 >> 4094)


def test_constant_folding_has_python_semantics(backend):
    out = np.zeros(1, np.int32)
    iron.kernel(wide_intermediates)[1](out, backend=backend)
    assert out[0] == 4 + 10 + 10**400 % 7 + 2


# -- 3. long chains ---------------------------------------------------------------------------------------------


def _load_module(path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # CPython compiles the chain: so must Iron
    return module


@pytest.mark.parametrize("terms", [500, 2000])
def test_long_chains_compile_and_compute(backend, terms, tmp_path, rng):
    """Each chain nests ``terms`` deep in Python's AST. (The loads cycle through 61 and 16 elements: 2000 distinct
    loads in one thread take lavapipe's LLVM half a minute to compile, which is not what is tested here.)"""
    j = np.arange(terms)
    loads = " + ".join(f"x[{k % 61}]" for k in j)
    same = " + ".join(["a"] * terms)
    mixed = " - ".join(f"x[{k % 16}] * {k % 3 + 1}" for k in j)
    text = ("import iron\nfrom iron import Tensor, program_id\n\n\n@iron.kernel\n"
            "def chains(x: Tensor[iron.f32], out: Tensor[iron.f32]):\n"
            "    a = x[program_id(0)]\n"
            f"    out[0] = {loads}\n    out[1] = {same}\n    out[2] = {mixed}\n")
    module = _load_module(tmp_path / f"chain_{terms}.py", text)
    x = rng.uniform(0.5, 1.0, 64).astype(np.float32)
    out = np.zeros(3, np.float32)
    module.chains[1](x, out, backend=backend)
    x64 = x.astype(np.float64)
    signs = np.where(j == 0, 1.0, -1.0)
    want = [x64[j % 61].sum(), x64[0] * terms, (signs * x64[j % 16] * (j % 3 + 1)).sum()]
    np.testing.assert_allclose(out, want, rtol=2e-4)


# -- 4. globals and closure variables are part of the key -------------------------------------------------------

SCALE = 2
ROUND_TO = iron.f32


class Config:
    OFFSET = 1


@iron.kernel
def scale_by_global(x: Tensor[iron.T], out: Tensor[iron.T]):
    i = program_id(0)
    out[i] = x[i] * SCALE + Config.OFFSET


@iron.kernel
def round_by_global(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = iron.cast(x[i], ROUND_TO)


def make_closure_kernel():
    factor = 2

    def set_factor(value):
        nonlocal factor
        factor = value

    @iron.kernel
    def scale_by_closure(x: Tensor[iron.f32], out: Tensor[iron.f32]):
        i = program_id(0)
        out[i] = x[i] * factor

    return scale_by_closure, set_factor


def _scaled(backend: str, dtype, launcher=None) -> np.ndarray:
    x = np.arange(8).astype(dtype)
    out = np.zeros_like(x)
    (launcher or scale_by_global[8])(x, out, backend=backend)
    return out.astype(np.float64)


def test_changed_global_recompiles_every_variant(backend, monkeypatch):
    monkeypatch.setattr(THIS_MODULE, "SCALE", 2)
    monkeypatch.setattr(Config, "OFFSET", 1)
    dtypes = [np.float32] + ([np.float16] if "f16" in caps(backend).dtypes else [])
    base = np.arange(8.0)
    for dt in dtypes:
        np.testing.assert_array_equal(_scaled(backend, dt), base * 2 + 1)
    held = scale_by_global[8]
    held(np.zeros(8, np.float32), np.zeros(8, np.float32), backend=backend)  # a repeat call: the fast path
    monkeypatch.setattr(THIS_MODULE, "SCALE", 3)
    for dt in dtypes:
        np.testing.assert_array_equal(_scaled(backend, dt), base * 3 + 1)
        np.testing.assert_array_equal(_scaled(backend, dt, held), base * 3 + 1)
    monkeypatch.setattr(Config, "OFFSET", 5)
    monkeypatch.setattr(THIS_MODULE, "SCALE", 0.5)  # a new type too
    for dt in reversed(dtypes):
        np.testing.assert_array_equal(_scaled(backend, dt), base * 0.5 + 5)
        np.testing.assert_array_equal(_scaled(backend, dt, held), base * 0.5 + 5)


def test_unchanged_globals_keep_the_variant(monkeypatch):
    monkeypatch.setattr(THIS_MODULE, "SCALE", 2)
    first = scale_by_global.variant(iron.f32)
    monkeypatch.setattr(THIS_MODULE, "SCALE", 2)  # the same value again: nothing to recompile
    assert scale_by_global.variant(iron.f32) is first
    monkeypatch.setattr(THIS_MODULE, "SCALE", 4)
    assert scale_by_global.variant(iron.f32) is not first


def test_changed_global_drops_a_direct_launcher(monkeypatch):
    """A backend's direct launcher (CUDA's compiled stand-in for ``k[grid]``) never enters Python: ``k[grid]`` must
    not hand it out once a value its variant baked in has changed."""
    monkeypatch.setattr(THIS_MODULE, "SCALE", 2)
    monkeypatch.setattr(Config, "OFFSET", 1)
    scale_by_global.refresh()  # variants an earlier test compiled with other values go now, not at the call below
    launcher = scale_by_global[16]
    launcher(np.zeros(16, np.float32), np.zeros(16, np.float32), backend="cpu")

    def direct(*args, **kwargs):
        raise AssertionError("the direct launcher of a stale variant ran")

    scale_by_global.install_direct_launcher(16, launcher, direct)
    assert scale_by_global[16] is direct
    monkeypatch.setattr(THIS_MODULE, "SCALE", 3)
    assert scale_by_global[16] is not direct
    x = np.arange(16, dtype=np.float32)
    out = np.zeros_like(x)
    scale_by_global[16](x, out, backend="cpu")
    np.testing.assert_array_equal(out, x * 3 + 1)


def test_changed_dtype_global_recompiles(backend, monkeypatch):
    x = np.full(4, 1 / 3, np.float32)
    out = np.zeros_like(x)
    monkeypatch.setattr(THIS_MODULE, "ROUND_TO", iron.f32)
    round_by_global[4](x, out, backend=backend)
    assert out[0] == np.float32(1 / 3)
    monkeypatch.setattr(THIS_MODULE, "ROUND_TO", iron.f16)
    round_by_global[4](x, out, backend=backend)
    assert out[0] == np.float32(np.float16(1 / 3))


def test_changed_closure_variable_recompiles(backend):
    k, set_factor = make_closure_kernel()
    x = np.arange(6, dtype=np.float32)
    out = np.zeros_like(x)
    k[6](x, out, backend=backend)
    np.testing.assert_array_equal(out, x * 2)
    set_factor(7)
    k[6](x, out, backend=backend)
    np.testing.assert_array_equal(out, x * 7)


# -- 5. static_range: one budget for the whole kernel -----------------------------------------------------------


def nested_static(out: Tensor[iron.f32], A: iron.constexpr, B: iron.constexpr):
    acc = 0.0
    for a in static_range(A):  # ERR
        for b in static_range(B):
            acc += out[a * B + b]
    out[0] = acc


def three_deep(out: Tensor[iron.f32], A: iron.constexpr):
    acc = 0.0
    for a in static_range(16):  # ERR
        for b in static_range(16):
            for c in static_range(A):
                acc += out[(a * 16 + b) * A + c]
    out[0] = acc


def loops_in_sequence(out: Tensor[iron.f32], A: iron.constexpr):
    acc = 0.0
    for a in static_range(A):
        acc += out[a]
    for b in static_range(A):  # ERR
        acc += out[b]
    out[0] = acc


@pytest.mark.parametrize("fn,ok,bad,total", [
    (nested_static, dict(A=64, B=64), dict(A=100, B=100), 10000),
    (nested_static, dict(A=2, B=2048), dict(A=4, B=4096), 16384),
    (three_deep, dict(A=16), dict(A=17), 4352),
    (loops_in_sequence, dict(A=2048), dict(A=2049), 4098),
])
def test_static_range_budget_is_per_kernel(fn, ok, bad, total):
    k = iron.kernel(fn)
    start = time.perf_counter()
    with pytest.raises(CompileError) as info:
        k.variant(None, tuple(bad.values()))
    assert time.perf_counter() - start < 2.0, "the budget is checked before anything is unrolled"
    assert_located(info.value, THIS_FILE, err_line(fn), f"{total} iterations", "for")
    assert "4096" in str(info.value)
    k.variant(None, tuple(ok.values()))  # at the limit: compiles


# -- 6. smaller errors, and names ------------------------------------------------------------------------------


def rebind_buffer(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out = x  # ERR
    out[i] = 1.0


def augment_buffer(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    out += 1  # ERR


def loop_over_buffer_name(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    for out in range(3):  # ERR
        x[out] = 1.0


def swap_buffers(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    x, out = out, x  # ERR


def annotate_buffer(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    out[0] = 2.0
    x: iron.f32 = 1.0  # ERR  # noqa: F841


@iron.func
def helper_rebinds(buf, value):
    buf = value  # ERR
    return buf


def calls_helper_that_rebinds(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    out[0] = helper_rebinds(x, 1.0)


REBINDS = [
    (rebind_buffer, "out = x", "out"),
    (augment_buffer, "out += 1", "out"),
    (loop_over_buffer_name, "for out in range(3)", "out"),
    (swap_buffers, "x, out = out, x", "x"),
    (annotate_buffer, "x: iron.f32 = 1.0", "x"),
]


@pytest.mark.parametrize("fn,source,token", REBINDS, ids=[c[0].__name__ for c in REBINDS])
def test_rebinding_a_buffer_parameter_points_at_the_assignment(fn, source, token):
    with pytest.raises(CompileError) as info:
        iron.kernel(fn).ir()
    name = token
    assert_located(info.value, THIS_FILE, err_line(fn), f"buffer parameter '{name}'", token)
    assert "new name" in info.value.hint


def test_rebinding_a_helpers_buffer_parameter_points_at_the_assignment():
    with pytest.raises(CompileError) as info:
        iron.kernel(calls_helper_that_rebinds).ir()
    assert_located(info.value, THIS_FILE, err_line(helper_rebinds), "'buf'", "buf")


def quoted_annotations(x: "Tensor[iron.f32]", out: "Tensor[T]", n: "int", s: "iron.f32",  # noqa: UP037
                       K: "iron.constexpr"):  # noqa: UP037
    i = program_id(0)
    if i < n:
        out[i] = x[i] * s + K


def quoted_unknown(x: "Tensor[f99]"):  # ERR  # noqa: F821, UP037
    x[0] = 1.0


def test_quoted_annotations_mean_what_they_say(backend):
    k = iron.kernel(quoted_annotations)
    assert [p.kind for p in k.params] == ["buffer", "buffer", "scalar", "scalar", "constexpr"]
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float16 if "f16" in caps(backend).dtypes else np.float32)
    k[8](x, out, 6, 2.0, 1, backend=backend)
    np.testing.assert_array_equal(out.astype(np.float32), np.where(np.arange(8) < 6, x * 2 + 1, 0))


def test_quoted_unknown_annotation_is_located():
    with pytest.raises(CompileError) as info:
        iron.kernel(quoted_unknown)
    assert_located(info.value, THIS_FILE, err_line(quoted_unknown), "f99", '"Tensor[f99]"')


def star_into_max(x: Tensor[iron.f32]):
    t = (x[0], x[1])
    x[2] = max(*t)  # ERR


def star_into_builtin(x: Tensor[iron.f32]):
    t = (x[0],)
    x[2] = iron.exp(*t)  # ERR


def star_into_helper(x: Tensor[iron.f32]):
    t = (x[0], 1.0)
    x[2] = helper_rebinds(**t)  # ERR


@pytest.mark.parametrize("fn,token", [(star_into_max, "*t"), (star_into_builtin, "*t"), (star_into_helper, "**t")])
def test_starred_arguments_are_refused_clearly(fn, token):
    with pytest.raises(CompileError) as info:
        iron.kernel(fn).ir()
    assert_located(info.value, THIS_FILE, err_line(fn), "unpacked arguments", token)
    assert "one by one" in info.value.hint


def param_named_backend(x: Tensor[iron.f32], backend: int):  # ERR
    x[0] = backend


def test_parameter_named_backend_is_refused_at_decoration():
    with pytest.raises(CompileError) as info:
        iron.kernel(param_named_backend)
    assert_located(info.value, THIS_FILE, err_line(param_named_backend), "'backend'", "backend")
    assert "rename" in info.value.hint


def unicode_names(données: Tensor[iron.f32], résultat: Tensor[iron.f32], échelle: float, Δ: iron.constexpr):
    i = program_id(0)
    λ = données[i] * échelle
    μ = λ + Δ
    for k in range(2):
        μ = μ + k
    résultat[i] = μ


def test_unicode_identifiers(backend, rng):
    k = iron.kernel(unicode_names)
    x = rng.standard_normal(37).astype(np.float32)
    out = np.zeros_like(x)
    k[37](x, out, 1.5, 2, backend=backend)
    np.testing.assert_allclose(out, x.astype(np.float64) * 1.5 + 3, rtol=1e-6, atol=1e-6)
    out[:] = 0
    k[37](données=x, résultat=out, échelle=0.5, Δ=1, backend=backend)
    np.testing.assert_allclose(out, x.astype(np.float64) * 0.5 + 2, rtol=1e-6, atol=1e-6)
