"""User mistakes get a located error: type, sentence, ``file:line:col``, the source line, a caret, no Iron internals.

Compile errors come from the malformed kernels in ``bad/bad_kernels.py``: each function is decorated here (never at
import, so one bad kernel cannot break collection) and the line it must point at carries a ``# ERR`` marker, found
by reading the file. Launch errors are located at the launch in this file (``# LAUNCH`` marker); runtime faults at
the kernel's line.
"""

from __future__ import annotations

import importlib.util
import inspect
import linecache
import os
import re
from dataclasses import dataclass

import numpy as np
import pytest

import iron
from iron import CompileError, ExecutionError, LaunchError

from . import kernels as K
from .bad import bad_kernels as bad

IRON_SRC = os.path.dirname(os.path.abspath(iron.__file__))
BAD_FILE = os.path.abspath(bad.__file__)
THIS_FILE = os.path.abspath(__file__)


def marker_line(path: str, first_line: int, marker: str) -> int:
    """The line number, at or after ``first_line``, of the first line of ``path`` carrying ``marker``."""
    lines = linecache.getlines(path)
    for number in range(first_line, len(lines) + 1):
        if marker in lines[number - 1]:
            return number
    raise AssertionError(f"no {marker!r} marker in {path} after line {first_line}")


def assert_located(err: BaseException, path: str, line: int, fragment: str, token: str | None = None) -> None:
    """``path:line:col: error: ...fragment...``, then the stripped source line, then a caret under ``col``;
    ``token`` is the source text the caret must point at. No path inside the iron package may appear."""
    text = str(err)
    assert fragment in text, f"message lacks {fragment!r}:\n{text}"
    m = re.search(rf"^{re.escape(path)}:(\d+):(\d+): error: ", text, re.M)
    assert m, f"no '{path}:line:col: error:' header in:\n{text}"
    assert int(m[1]) == line, f"error points at line {m[1]}, expected {line}:\n{text}"
    col = int(m[2]) - 1
    source = linecache.getline(path, line).rstrip("\n")
    lines = text.splitlines()
    shown = [k for k, ln in enumerate(lines) if ln.strip() == source.strip()]
    assert shown, f"the source line {source.strip()!r} is not shown:\n{text}"
    caret_line = lines[shown[0] + 1]
    assert caret_line.strip().startswith("^"), f"no caret under the source line:\n{text}"
    indent = len(source) - len(source.lstrip())
    caret_at = caret_line.index("^")
    assert caret_at == lines[shown[0]].index(source.strip()) + col - indent, f"caret is not under column {col + 1}"
    if token is not None:
        assert source[col:].startswith(token), f"column {col + 1} points at {source[col:]!r}, not at {token!r}"
    assert IRON_SRC not in text, f"an Iron-internal path leaks into the message:\n{text}"
    assert err.__cause__ is None, "the user sees a chained internal exception"


# ---------------------------------------------------------------------------------------------------------------
# compile errors: the corpus


@dataclass(frozen=True)
class Bad:
    fn: str  # function in bad/bad_kernels.py
    fragment: str  # part of the message
    token: str  # the source text the caret points at
    at: str = "compile"  # "decorate": raised by iron.kernel(fn); "compile": by the first compile (lazy)
    marker_fn: str | None = None  # the function whose body holds the `# ERR` line, when not fn itself


CORPUS = [
    # unsupported syntax
    Bad("use_with", "unsupported syntax: `with` statement", "with"),
    Bad("use_try", "unsupported syntax: `try` statement", "try"),
    Bad("use_lambda", "unsupported syntax: lambda", "lambda"),
    Bad("use_list_comprehension", "unsupported syntax: list comprehension", "[x[i + k]"),
    Bad("use_slice", "unsupported syntax: slice", "1:3"),
    Bad("while_else", "unsupported syntax: `while ... else`", "while"),
    Bad("assert_statement", "unsupported syntax: `assert` statement", "assert"),
    # names
    Bad("unknown_name", "unknown name 'progam_id'", "progam_id"),
    Bad("T_without_tensor_T", "'T' is a dtype variable but no parameter of this kernel is a Tensor[T]", "T)"),
    Bad("plain_python_call", "cannot call 'print' in a kernel", "print("),
    # types
    Bad("float_into_int_buffer", "cannot implicitly convert f32 to i32", "x[i] * 2.0"),
    Bad("bitwise_on_float", "`&` needs integers", "x[i] & 3"),
    Bad("bad_cast_target", "expected a dtype", "7)"),
    Bad("int_variable_gets_float", "cannot implicitly convert f32 to i32 for 'k'", "k = x[i]"),
    Bad("power_with_runtime_exponent", "`**` is supported only with a literal exponent", "x[i] ** n"),
    Bad("two_d_index", "buffers are 1-D", "i, 0"),
    Bad("attribute_of_buffer", "attribute access on a buffer of f32 is not supported", "x.shape"),
    Bad("atomic_on_half", "atomic_add on a buffer of f16 is not supported", "iron.atomic_add("),
    Bad("store_a_tuple", "cannot be used as the stored element", "(x[i], 1.0)"),
    Bad("shared_runtime_size", "needs a positive compile-time size n (a literal or constexpr), or an int kernel "
        "parameter", "n * 2)"),
    # builtins and control flow
    Bad("wrong_builtin_arity", "exp() takes 1 argument, got 2", "exp(x[i], 2.0)"),
    Bad("break_in_static_range", "`break` is not allowed in a static_range loop", "break"),
    Bad("static_range_runtime_bound", "static_range needs compile-time bounds", "static_range(n)"),
    Bad("defined_only_in_if", "'y' is only defined inside the block that starts on line", "y"),
    Bad("used_before_assignment", "local variable 'acc' might be used before it is assigned", "acc"),

    Bad("kernel_returns_value", "a kernel cannot return a value", "return x[i]"),
    # located at the recursive call inside the helper's body, not at the kernel's call of the helper
    Bad(
        "calls_recursive_helper",
        "recursive call to @iron.func 'recursive_helper'",
        "recursive_helper(v - 1.0)",
        marker_fn="recursive_helper",
    ),
    # the signature: checked when the kernel is decorated
    Bad("missing_annotation", "parameter 'out' needs a type annotation", "out)", at="decorate"),
    Bad("bad_annotation", "unsupported annotation", "str)", at="decorate"),
    Bad("default_parameter", "kernel parameters cannot have default values", "4)", at="decorate"),
]


CORPUS_BY_NAME = {c.fn: c for c in CORPUS}


def _expected_line(case: Bad) -> int:
    fn = getattr(bad, case.marker_fn or case.fn)
    fn = fn.fn if isinstance(fn, iron.IronFunc) else fn
    lines, first = inspect.getsourcelines(fn)
    line = marker_line(BAD_FILE, first, "# ERR")
    assert line < first + len(lines), f"the # ERR marker of {case.fn} is not inside {fn.__name__}"
    return line


@pytest.mark.parametrize("case", CORPUS, ids=[c.fn for c in CORPUS])
def test_malformed_kernel(case: Bad):
    fn = getattr(bad, case.fn)
    if case.at == "decorate":
        with pytest.raises(CompileError) as info:
            iron.kernel(fn)
    else:
        k = iron.kernel(fn)  # compiling is lazy: decoration must succeed
        with pytest.raises(CompileError) as info:
            k.ir()
    assert_located(info.value, BAD_FILE, _expected_line(case), case.fragment, case.token)


def test_unknown_name_suggests_the_builtin():
    with pytest.raises(CompileError) as info:
        iron.kernel(bad.unknown_name).ir()
    assert "did you mean 'program_id'?" in str(info.value)


@pytest.mark.parametrize("fn", ["bad_cast_target", "store_a_tuple"])
def test_messages_do_not_show_internal_reprs(fn):
    with pytest.raises(CompileError) as info:
        iron.kernel(getattr(bad, fn)).ir()
    assert "Const(" not in str(info.value) and "Value(" not in str(info.value)


def test_compile_error_at_first_launch_is_located_in_the_kernel():
    k = iron.kernel(bad.unknown_name)
    x = np.zeros(4, np.float32)
    with pytest.raises(CompileError) as info:
        k[4](x, x.copy(), backend="cpu")
    assert_located(
        info.value, BAD_FILE, _expected_line(CORPUS_BY_NAME["unknown_name"]), "unknown name 'progam_id'", "progam_id"
    )


def test_break_outside_loop(tmp_path):
    """CPython itself rejects `break` outside a loop when it compiles a module, so no importable function can hold
    one; the front-end's own check is reached when a kernel's file is edited after it was imported (inspect then
    reads the new text)."""
    path = tmp_path / "edited_kernel.py"
    text = (
        "from iron import T, Tensor, program_id\n"
        "\n"
        "\n"
        "def edited(x: Tensor[T], out: Tensor[T]):\n"
        "    i = program_id(0)\n"
        "    if i > 3:\n"
        "        pass  # ERR\n"
        "    out[i] = x[i]\n"
    )
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("edited_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.write_text(text.replace("pass  # ERR", "break  # ERR"))
    linecache.checkcache(str(path))
    with pytest.raises(CompileError) as info:
        iron.kernel(module.edited).ir()
    assert_located(info.value, str(path), 7, "`break` outside a loop", "break")


# ---------------------------------------------------------------------------------------------------------------
# launch errors: located at the launch, in this file


def _launch_line(test_fn) -> int:
    return marker_line(THIS_FILE, test_fn.__code__.co_firstlineno, "# LAUNCH")


def _f32(n: int) -> np.ndarray:
    return np.zeros(n, np.float32)


def test_launch_missing_argument():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](_f32(10), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_missing_argument),
        "iron_exp(a, out) is missing argument 'out'",
        "K.iron_exp[10](",
    )


def test_launch_too_many_arguments():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](_f32(10), _f32(10), _f32(10), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_too_many_arguments),
        "iron_exp(a, out) takes 2 arguments, got 3",
        "K.iron_exp[10](",
    )


def test_launch_wrong_dtype_for_fixed_tensor():
    hist = np.zeros(8, np.float32)  # the kernel takes Tensor[i32]
    with pytest.raises(LaunchError) as info:
        K.histogram_i32[10](_f32(10), hist, 8, backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_wrong_dtype_for_fixed_tensor),
        "argument 'hist' has dtype float32 but the kernel expects i32",
        "K.histogram_i32[10](",
    )


def test_launch_wrong_dtype_for_T():
    a = np.zeros(10, np.int32)
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](a, a.copy(), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_wrong_dtype_for_T),
        "argument 'a' has dtype int32 but Tensor[T] takes f32/f16/bf16",
        "K.iron_exp[10](",
    )


def test_launch_mixed_T():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](_f32(10), np.zeros(10, np.float16), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_mixed_T),
        "arguments 'a' (f32) and 'out' (f16) must have the same dtype T",
        "K.iron_exp[10](",
    )


def test_launch_non_contiguous():
    a = _f32(20)[::2]
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](a, _f32(10), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_non_contiguous),
        "argument 'a' is not C-contiguous",
        "K.iron_exp[10](",
    )


def test_launch_output_too_small():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[100](_f32(100), _f32(50), backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_output_too_small),
        "argument 'out' has 50 elements but iron_exp writes out[program_id(0)] for all 100 threads",
        "K.iron_exp[100](",
    )


def test_launch_collectives_need_whole_groups():
    with pytest.raises(LaunchError) as info:
        K.block_sum[1000, 64](_f32(1024), _f32(16), 64, backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_collectives_need_whole_groups),
        "must be a multiple of its group",
        "K.block_sum[1000, 64](",
    )


def test_launch_scalar_out_of_range():
    with pytest.raises(LaunchError) as info:
        K.load_store_reverse[10](_f32(10), _f32(10), 2**40, backend="cpu")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_scalar_out_of_range),
        "argument 'n' = 1099511627776 does not fit in i32",
        "K.load_store_reverse[10](",
    )


def test_launch_group_too_large():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[4096, 2048](_f32(4096), _f32(4096), backend="cpu")  # LAUNCH
    assert_located(
        info.value, THIS_FILE, _launch_line(test_launch_group_too_large), "the limit is 1024", "K.iron_exp[4096, 2048]("
    )


def test_launch_unknown_backend_message():
    with pytest.raises(LaunchError, match="unknown backend 'no-such-backend'; choose one of: cpu"):
        K.iron_exp[10](_f32(10), _f32(10), backend="no-such-backend")


def test_launch_unknown_backend_is_located():
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](_f32(10), _f32(10), backend="no-such-backend")  # LAUNCH
    assert_located(
        info.value,
        THIS_FILE,
        _launch_line(test_launch_unknown_backend_is_located),
        "unknown backend 'no-such-backend'",
        "K.iron_exp[10](",
    )


def test_launch_read_only_output_message():
    out = _f32(10)
    out.setflags(write=False)
    with pytest.raises(LaunchError, match="argument 'out' is read-only but iron_exp writes to it"):
        K.iron_exp[10](_f32(10), out, backend="cpu")


def test_launch_read_only_output_is_located():
    out = _f32(10)
    out.setflags(write=False)
    with pytest.raises(LaunchError) as info:
        K.iron_exp[10](_f32(10), out, backend="cpu")  # LAUNCH
    assert_located(
        info.value, THIS_FILE, _launch_line(test_launch_read_only_output_is_located), "is read-only", "K.iron_exp[10]("
    )


def test_calling_a_kernel_without_a_grid():
    with pytest.raises(LaunchError, match=r"launch iron_exp with a grid: iron_exp\[n_threads\]"):
        K.iron_exp(_f32(10), _f32(10))


# ---------------------------------------------------------------------------------------------------------------
# runtime faults (the interpreter)

HAVE_INTERPRETER = importlib.util.find_spec("iron.interp.executor") is not None


def _read_past_end(x: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    out[i] = x[i + 1]  # OOB


def _write_past_end(x: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    if i % 2 == 1:
        out[i * 2] = x[i]  # OOB


@pytest.mark.skipif(
    not HAVE_INTERPRETER, reason="needs the NumPy interpreter (src/iron/interp/executor.py), which is not written yet"
)
@pytest.mark.parametrize(
    ("fn", "access", "buffer", "index", "token"),
    [(_read_past_end, "load", "x", 100, "x[i + 1]"), (_write_past_end, "store", "out", 102, "out[i * 2]")],
)
def test_out_of_bounds_access_is_reported(fn, access, buffer, index, token):
    """The first faulting thread is reported: for the store, thread 51 (the first odd i with 2i >= 100)."""
    n = 100
    x, out = _f32(n), np.full(n, np.nan, np.float32)
    with pytest.raises(ExecutionError) as info:
        iron.kernel(fn)[n](x, out, backend="cpu")
    line = marker_line(THIS_FILE, fn.__code__.co_firstlineno, "# OOB")
    assert_located(info.value, THIS_FILE, line, "out of bounds", token)
    text = str(info.value)
    assert f"'{fn.__name__}'" in text, "the message must name the kernel"
    assert f"{access}" in text and f"buffer '{buffer}'" in text, "the message must name the access and buffer"
    assert f"index {index}" in text, "the message must give the faulting index"


def test_error_in_a_kernel_defined_inside_a_function():
    """Kernels nested in a function are dedented before parsing; the column must still be the file's."""

    def make():
        @iron.kernel
        def nested(x: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
            out[iron.program_id(0)] = x[0] + undefined_name  # ERR  # noqa: F821

        return nested

    with pytest.raises(CompileError) as info:
        make().ir()
    line = marker_line(THIS_FILE, test_error_in_a_kernel_defined_inside_a_function.__code__.co_firstlineno, "# ERR")
    assert_located(info.value, THIS_FILE, line, "unknown name 'undefined_name'", "undefined_name")
