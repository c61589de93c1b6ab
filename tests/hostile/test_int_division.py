"""Issue 17: integer ``//`` and ``%`` by zero and ``INT_MIN // -1`` on the backends that run here.

The rule (docs/dsl.md, Operators): on GPUs a zero divisor gives an unspecified value, never a crash; on the CPU
backends (cpu, msl-cpu) it is an ``ExecutionError`` located at the ``//`` or ``%``; ``INT_MIN // -1`` wraps to
``INT_MIN`` and ``INT_MIN % -1`` is 0 everywhere. Iron's integer ``//`` truncates toward zero (C), so the oracle is
C's quotient, computed here in Python-sized int64 arithmetic.

msl-cpu once died of SIGFPE on a zero divisor, taking pytest with it: every launch runs in a child process
(``_child``), which prints one JSON line of results; the tests assert on its exit status and that line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import iron
from iron import Tensor
from iron.runtime import unavailable_reason

ROOT = Path(__file__).resolve().parents[2]
INT_MIN = -(2**31)
N = 11 * 64  # a whole number of groups: div_shared has a barrier


@iron.kernel
def div_i32(a: Tensor[iron.i32], b: Tensor[iron.i32], q: Tensor[iron.i32]):
    i = iron.program_id(0)
    q[i] = a[i] // b[i]  # site: div_i32


@iron.kernel
def rem_i32(a: Tensor[iron.i32], b: Tensor[iron.i32], q: Tensor[iron.i32]):
    i = iron.program_id(0)
    q[i] = a[i] % b[i]  # site: rem_i32


@iron.kernel
def div_u32(a: Tensor[iron.u32], b: Tensor[iron.u32], q: Tensor[iron.u32]):
    i = iron.program_id(0)
    q[i] = a[i] // b[i]  # site: div_u32


@iron.kernel
def rem_u32(a: Tensor[iron.u32], b: Tensor[iron.u32], q: Tensor[iron.u32]):
    i = iron.program_id(0)
    q[i] = a[i] % b[i]  # site: rem_u32


@iron.kernel
def by_literal_zero(a: Tensor[iron.i32], q: Tensor[iron.i32], at: int):
    i = iron.program_id(0)
    if i == at:
        q[i] = a[i] // 0  # site: by_literal_zero
    else:
        q[i] = a[i]


@iron.kernel
def div_shared(a: Tensor[iron.i32], b: Tensor[iron.i32], q: Tensor[iron.i32]):
    """The divisor of thread i is b[i ^ 1], through shared memory: a kernel with a barrier (msl-cpu runs its
    threads concurrently)."""
    i = iron.program_id(0)
    tile = iron.shared(iron.i32, 64)
    tile[iron.local_id(0)] = b[i]
    iron.barrier()
    q[i] = a[i] // tile[iron.local_id(0) ^ 1]  # site: div_shared


@iron.kernel
def by_minus_one(a: Tensor[iron.i32], q: Tensor[iron.i32], r: Tensor[iron.i32]):
    i = iron.program_id(0)
    q[i] = a[i] // -1
    r[i] = a[i] % -1


KERNELS = {"div_i32": div_i32, "rem_i32": rem_i32, "div_u32": div_u32, "rem_u32": rem_u32}
DTYPES = {"i32": np.int32, "u32": np.uint32}


def _site_line(name: str) -> int:
    """The source line of kernel ``name``'s division (marked ``# site: name``)."""
    lines = Path(__file__).read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if text.endswith(f"# site: {name}"))


def _operands(seed: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Random dividends and non-zero divisors for kernel ``name``, with INT_MIN / -1 (and its neighbours) in front."""
    rng = np.random.default_rng(seed)
    dtype = DTYPES[name[-3:]]
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, N, dtype=np.int64, endpoint=True)
    wide = rng.integers(info.min, info.max, N, dtype=np.int64, endpoint=True)
    small = rng.integers(-40 if dtype == np.int32 else 1, 40, N, dtype=np.int64, endpoint=True)
    b = np.where(rng.random(N) < 0.5, wide, small)
    b[b == 0] = 7
    if dtype == np.int32:
        a[:6] = [INT_MIN, INT_MIN, INT_MIN, INT_MIN + 1, INT_MIN, 2**31 - 1]
        b[:6] = [-1, 1, INT_MIN, -1, 2, -1]
    return a.astype(dtype), b.astype(dtype)


def _c_quotient(a: np.ndarray, b: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """C's truncating quotient and remainder (remainder with the dividend's sign), wrapped to ``dtype``."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64))
    r = a64 - q * b64
    return q.astype(np.uint64).astype(dtype), r.astype(np.uint64).astype(dtype)


# -- the child process: launches, and prints what happened as one JSON line ---------------------------------------


def _outcome(launch) -> dict:
    try:
        return {"values": [int(v) for v in launch()]}
    except iron.ExecutionError as e:
        loc = e.loc
        return {"error": type(e).__name__, "message": e.message, "file": loc and loc.file, "line": loc and loc.line}


def _launch(backend: str, kernel, out: np.ndarray, *args) -> np.ndarray:
    """``kernel(*args)`` over N threads; returns ``out`` (one of ``args``)."""
    kernel[N, 64](*args, backend=backend)
    return out


def _child(mode: str, backend: str, seed: int, zero_at: int) -> None:
    """Runs ``mode``'s launches on ``backend``; prints {case: outcome} as JSON."""
    results = {}
    for name, kernel in KERNELS.items():
        a, b = _operands(seed, name)
        if mode == "zero":
            b[zero_at] = 0
        out = np.full(N, 0x5A5A5A5A, a.dtype)  # poisoned
        results[name] = _outcome(lambda k=kernel, a=a, b=b, out=out: _launch(backend, k, out, a, b, out))
    a = _operands(seed, "div_i32")[0]
    if mode == "zero":
        out = np.full(N, 0x5A5A5A5A, np.int32)
        results["by_literal_zero"] = _outcome(lambda: _launch(backend, by_literal_zero, out, a, out, zero_at))
        b = _operands(seed, "div_i32")[1]
        b[zero_at] = 0
        results["div_shared"] = _outcome(lambda: _launch(backend, div_shared, out, a, b, out))
    else:
        q, r = np.full(N, 0x5A5A5A5A, np.int32), np.full(N, 0x5A5A5A5A, np.int32)
        results["by_minus_one_q"] = _outcome(lambda: _launch(backend, by_minus_one, q, a, q, r))
        results["by_minus_one_r"] = {"values": [int(v) for v in r]}
    print(json.dumps(results))


def _run_child(mode: str, backend: str, seed: int, zero_at: int = 0) -> dict:
    if unavailable_reason(backend) is not None:
        pytest.skip(f"{backend} unavailable: {unavailable_reason(backend)}")
    code = f"from tests.hostile.test_int_division import _child; _child({mode!r}, {backend!r}, {seed}, {zero_at})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"{mode} launches on {backend} killed the process (exit status {proc.returncode}"
                                  f"{', SIGFPE' if proc.returncode == -8 else ''}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _seed(rng) -> int:
    return int(rng.integers(0, 2**62))


# -- the tests ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["cpu", "msl-cpu"])
def test_zero_divisor_is_an_execution_error_at_the_division(backend, rng):
    seed, zero_at = _seed(rng), int(rng.integers(6, N))
    results = _run_child("zero", backend, seed, zero_at)
    for name in (*KERNELS, "by_literal_zero", "div_shared"):
        got = results[name]
        assert got.get("error") == "ExecutionError", f"{name} on {backend}: {got}"
        what = "remainder" if name.startswith("rem") else "division"
        thread = zero_at ^ 1 if name == "div_shared" else zero_at
        assert got["message"] == f"integer {what} by zero in kernel '{name}', thread program_id {thread}", name
        assert Path(got["file"]).name == Path(__file__).name
        assert got["line"] == _site_line(name), f"{name} on {backend} located at line {got['line']}"


@pytest.mark.parametrize("backend", ["cpu", "msl-cpu", "vulkan"])
def test_int_min_by_minus_one_wraps_and_quotients_match_c(backend, rng):
    seed = _seed(rng)
    results = _run_child("values", backend, seed)
    for name in KERNELS:
        a, b = _operands(seed, name)
        q, r = _c_quotient(a, b, a.dtype)
        got = np.array(results[name]["values"], dtype=np.int64).astype(a.dtype)
        want = q if name.startswith("div") else r
        np.testing.assert_array_equal(got, want, err_msg=f"{name} on {backend}")
        if name == "div_i32":
            assert got[0] == INT_MIN and got[3] == 2**31 - 1 and got[5] == -(2**31 - 1)  # INT_MIN // -1 wraps
        if name == "rem_i32":
            assert got[0] == 0 and got[2] == 0  # INT_MIN % -1 == 0
    a = _operands(seed, "div_i32")[0]
    q = np.array(results["by_minus_one_q"]["values"], dtype=np.int64).astype(np.int32)
    r = np.array(results["by_minus_one_r"]["values"], dtype=np.int64)
    np.testing.assert_array_equal(q, (-a.astype(np.int64)).astype(np.uint64).astype(np.int32))
    assert q[0] == INT_MIN
    np.testing.assert_array_equal(r, 0)


def test_vulkan_zero_divisor_returns_and_spares_the_other_threads(rng):
    seed, zero_at = _seed(rng), int(rng.integers(6, N))
    results = _run_child("zero", "vulkan", seed, zero_at)
    others = np.arange(N) != zero_at
    for name in KERNELS:
        a, b = _operands(seed, name)
        q, r = _c_quotient(a, b, a.dtype)
        got = np.array(results[name]["values"], dtype=np.int64).astype(a.dtype)
        want = q if name.startswith("div") else r
        np.testing.assert_array_equal(got[others], want[others], err_msg=name)  # got[zero_at]: unspecified
    a, b = _operands(seed, "div_i32")
    got = np.array(results["by_literal_zero"]["values"], dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(got[others], a[others])
    partner = np.arange(N) ^ 1
    got = np.array(results["div_shared"]["values"], dtype=np.int64).astype(np.int32)
    want = _c_quotient(a, b[partner], np.int32)[0]
    np.testing.assert_array_equal(got[partner != zero_at], want[partner != zero_at])
