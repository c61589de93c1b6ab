"""Bench peers without a GPU: named references resolve lazily (Triton is never imported with Iron), a missing
package is a reason and not an error, a peer whose output fails the oracle is reported and not timed, and the
table shows the Triton columns. A stand-in torch plays the device tensors."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from rich.console import Console

from iron.harness import measure, peers
from iron.harness import runner as bench_runner
from iron.harness.registry import Registration, bench, unregister
from iron.harness.roofline import Ceiling


def test_importing_iron_and_its_harness_imports_no_triton_and_no_torch():
    code = ("import sys, iron, iron.std, iron.harness.peers, iron.harness.runner, iron.harness.worker, iron.cli.main;"
            "from iron.harness.registry import load_all; load_all();"
            "bad = [m for m in ('triton', 'torch') if m in sys.modules]; assert not bad, bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_named_peer_points_at_a_function_of_its_module():
    folder = os.path.dirname(peers.__file__)
    for family, names in peers.NAMED.items():
        for name, target in names.items():
            module, _, function = target.partition(":")
            tree = ast.parse(open(os.path.join(folder, f"{module}.py")).read())
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert function in defined, f"{family} peer {name!r}: {target} has no function {function}"


def test_parse_and_check_spec():
    assert peers.parse("softmax") == ("softmax", {})
    assert peers.parse(("gemm", {"trans_b": True})) == ("gemm", {"trans_b": True})
    with pytest.raises(ValueError, match="a reference is a callable"):
        peers.parse(["gemm"])
    known = "attention, gemm, layer_norm, matmul, rms_norm, softmax"
    with pytest.raises(ValueError, match=f"no triton peer named 'gemv'; known: {known}"):
        peers.check_spec("triton", "gemv")
    peers.check_spec("mlx", "mlx.core.softmax")  # metadata: never resolved


def test_an_unknown_peer_name_is_refused_at_registration():
    def fn():
        pass

    with pytest.raises(ValueError, match="no torch peer named 'softmaxx'"):
        bench("peers-test/unknown", references={"torch": "softmaxx"})(fn)
    unregister("peers-test/unknown")


def test_a_missing_package_is_a_reason_not_an_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    with pytest.raises(peers.PeerUnavailable, match="triton is not installed"):
        peers.resolve("triton", "gemm")
    resolved, missing = peers.device_references({"triton": "softmax", "torch": lambda d: None, "mlx": "x"})
    assert list(resolved) == ["torch"] and missing == {"triton": "triton is not installed"}


def test_the_numpy_matmul_peer_binds_its_options():
    rng = np.random.default_rng(0)
    d = {"a": rng.standard_normal((5, 7)).astype(np.float32), "b": rng.standard_normal((3, 7)).astype(np.float32),
         "out": np.zeros((5, 3), np.float16)}
    got = peers.resolve("numpy", ("matmul", {"trans_b": True}))(d)
    assert got.dtype == np.float16 and np.allclose(got, d["a"] @ d["b"].T, atol=1e-2)


class _FakeTensor:
    """Enough of a torch tensor for ``measure``: an array with fill_, clone, cpu().numpy()."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.dtype = array.dtype

    def fill_(self, value):
        self.array.fill(value)
        return self

    def clone(self):
        return _FakeTensor(self.array.copy())

    def cpu(self):
        return self

    def numpy(self):
        return self.array


@pytest.fixture
def fake_device(monkeypatch):
    """measure's CUDA path on host arrays: a stand-in torch, and event timing that counts its calls."""
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(bfloat16="bf16-never-equal"))
    monkeypatch.setattr(measure, "on_torch_device", lambda backend: True)
    monkeypatch.setattr(measure, "_to_torch", lambda arr: _FakeTensor(arr.copy()))
    monkeypatch.setattr(measure, "_input_copies", lambda dev, uses: [dev])
    timed = []

    def rotated(fns, repeats):
        timed.append(fns)
        for fn in fns:
            fn()
        return 1e-3 * len(timed)

    monkeypatch.setattr(measure, "_rotated_event_time", rotated)
    monkeypatch.setattr(measure.cuda_timing, "last_lead_ok", True, raising=False)
    return timed


def _entry(references):
    def launch(d, backend):
        d["out"].array[:] = d["a"].array * 2

    return Registration(name="peers-test/double", setup=lambda gen: {"a": gen.random(), "out": gen.poisoned()},
                        launch=launch, oracle=lambda d: d["a"].astype(np.float64) * 2, references=references,
                        benched=True, shapes=[(64,)])


def test_a_wrong_peer_is_reported_and_not_timed_and_a_right_one_is_timed(fake_device):
    def right(d):
        d["ref_out"].array[:] = d["a"].array * 2

    def wrong(d):
        d["ref_out"].array[:] = d["a"].array * 3

    entry = _entry({"torch": right, "triton": wrong})
    answer = measure.bench_case(entry, "cuda", "f32", (64,), 1, {"repeats": 3})
    assert answer["ok"] and set(answer["refs"]) == {"torch"} and answer["ref_s"] == answer["refs"]["torch"]
    assert answer["ref_errors"]["triton"].startswith("wrong output, not timed: max abs err")
    assert len(fake_device) == 2  # Iron and torch: the wrong peer never reached the timer


def test_a_peer_that_raises_or_returns_its_output(fake_device):
    def returns(d):
        return _FakeTensor(d["a"].array * 2)

    def raises(d):
        raise RuntimeError("no kernel image")

    answer = measure.bench_case(_entry({"torch": raises, "triton": returns}), "cuda", "f32", (64,), 1, {})
    assert answer["ok"] and set(answer["refs"]) == {"triton"} and answer["ref_s"] is None
    assert answer["ref_errors"] == {"torch": "raised RuntimeError: no kernel image"}


def test_the_table_shows_triton_beside_torch(capsys):
    entry = _entry({"torch": "softmax", "triton": "softmax"})
    entry.bytes_moved = lambda shape, itemsize: 2 * shape[0] * itemsize
    cases = [{"kernel": entry.name, "dtype": "f32", "shape": [64], "seed": 0} for _ in range(3)]
    base = {"iron_s": 2e-6, "timing": "CUDA events", "ok": True, "max_abs": 0.0, "input_copies": 1}
    answers = [dict(base, ref_s=4e-6, refs={"torch": 4e-6, "triton": 1e-6}),
               dict(base, ref_s=4e-6, refs={"torch": 4e-6}, ref_errors={"triton": "wrong output, not timed: x"}),
               dict(base, ref_s=4e-6, refs={"torch": 4e-6}, ref_errors={"triton": "triton is not installed"})]
    sweep = bench_runner.Sweep("cuda", 5, True, {entry.name: entry}, cases, answers)
    console = Console(width=250, record=True)
    rows, ok = bench_runner.render_rows(sweep, console, False, None, None)
    bench_runner.print_notes(sweep, console, None, None)
    text = console.export_text()
    assert ok and "Triton(µs)" in text and "Iron % Triton" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("│ peers-test")]
    assert "│          1 │" in lines[0] and "50.0%" in lines[0] and "200.0%" in lines[0]
    assert "wrong" in lines[1] and "triton reference wrong output, not timed: x" in text
    assert "Not run here: triton is not installed." in text
    assert rows[0]["refs"]["triton"]["us"] == pytest.approx(1.0) and rows[1]["ref_errors"]["triton"]


def test_no_triton_columns_on_the_host():
    entry = _entry({"numpy": lambda d: d["a"], "triton": "softmax"})
    sweep = bench_runner.Sweep("cpu", 5, False, {entry.name: entry}, [], [])
    assert sweep.peers == []


def test_percent_of_a_copy_of_the_rows_own_bytes(monkeypatch):
    """-v on a GPU: a memory-side row (FLOP/B below the ridge) gets %copy = its GB/s over the copy rate of its own
    bytes (sized_copy_gbps, asked once per byte count), a compute-side row none; the note under the table says what
    it is. Without a sized copy (the CPU backends) there is no column."""
    asked = []

    def sized(backend, nbytes):
        asked.append((backend, nbytes))
        return 500.0  # GB/s

    monkeypatch.setattr(bench_runner, "sized_copy_gbps", sized)
    mem = _entry({"torch": "softmax"})
    mem.bytes_moved = lambda shape, itemsize: 2 * shape[0] * itemsize
    mem.flops = lambda shape: shape[0]
    dense = _entry({"torch": "softmax"})
    dense.name = "peers-test/dense"
    dense.bytes_moved = lambda shape, itemsize: 8
    dense.flops = lambda shape: 1000
    cases = [{"kernel": e.name, "dtype": "f32", "shape": [1 << 20], "seed": 0} for e in (mem, dense)]
    base = {"iron_s": 2e-5, "timing": "CUDA events", "ok": True, "max_abs": 0.0, "input_copies": 1, "ref_s": 4e-5,
            "refs": {"torch": 4e-5}}
    ceiling = Ceiling(1000.0, "test copy", 1e6, "test matrix")
    for device, want in ((True, [(("cuda", 8 << 20))]), (False, [])):
        asked.clear()
        sweep = bench_runner.Sweep("cuda", 5, device, {mem.name: mem, dense.name: dense}, cases, [base, dict(base)])
        console = Console(width=300, record=True)
        rows, ok = bench_runner.render_rows(sweep, console, True, ceiling, 3e-6)
        bench_runner.print_notes(sweep, console, ceiling, 3e-6, rows)
        text = console.export_text()
        assert ok and asked == want
        if device:  # 8 MiB in 20 us = 419 GB/s: 83.9 % of the 500 GB/s copy
            assert rows[0]["pct_copy"] == pytest.approx(100 * (8 << 20) / 2e-5 / 1e9 / 500.0)
            assert "pct_copy" not in rows[1] and "%copy" in text and "83.9%" in text
            assert "of torch's copy of the row's own bytes" in text
        else:
            assert "pct_copy" not in rows[0] and "%copy" not in text


def test_no_sized_copy_off_a_torch_gpu():
    """The CPU backends (and any machine without torch on a CUDA GPU) have no sized copy: None, not an error."""
    from iron.harness.roofline import sized_copy_gbps

    for backend in ("cpu", "msl-cpu"):
        assert sized_copy_gbps(backend, 8 << 20) is None
