"""Issue 17: device limits refused before any driver (or the interpreter) sees them, located in the user's source; a
divergent barrier on msl-cpu located at the barrier, with no temporary files left; corrupt bench JSON named by file.

1. Shared memory: every backend refuses a 4 MiB and an 8 GiB ``shared()`` array at once (< 1 s, nothing allocated);
   the interpreter gives a group 48 KiB (``IRON_CPU_MAX_SHARED``), as a GPU does, instead of running anything.
2. Metal's buffer argument table has 31 entries: a kernel binding more (buffers, scalars and grid sizes) is a
   CompileError at its ``def`` on metal and msl-cpu, naming the limit; the other backends run it.
3. A barrier that the threads of one group reach at different calls: msl-cpu reports it at the barrier's line, as
   the interpreter does, and leaves no ``.tmp-*`` entry in the cache.
4. ``iron snap``/``iron diff`` on a truncated or corrupt JSON file: one line naming the file, exit code 1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time

import numpy as np
import pytest
from click.testing import CliRunner

import iron
from iron import CompileError, ExecutionError, LaunchError, Tensor, barrier, local_id, program_id, shared
from iron.runtime import unavailable_reason

THIS_FILE = os.path.abspath(__file__)
BACKENDS = ["cpu", "vulkan", "msl-cpu"]


def need(backend: str) -> None:
    reason = unavailable_reason(backend)
    if reason:
        pytest.skip(reason)


def line_of(marker: str) -> int:
    with open(THIS_FILE) as f:
        return next(i for i, text in enumerate(f, 1) if marker in text and "line_of" not in text)


# -- 1. shared memory ------------------------------------------------------------------------------------------------


@iron.kernel
def big_shared(x: Tensor[iron.f32], out: Tensor[iron.f32], N: iron.constexpr):
    tile = shared(iron.f32, N)  # SHARED
    i = program_id(0)
    tile[local_id(0)] = x[i]
    barrier()
    out[i] = tile[63 - local_id(0)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("elements", [1 << 20, 1 << 31], ids=["4MiB", "8GiB"])
def test_huge_shared_arrays_are_refused_at_once(backend, elements):
    need(backend)
    x, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    start = time.perf_counter()
    with pytest.raises((CompileError, LaunchError)) as info:
        big_shared[64, 64](x, out, elements, backend=backend)  # LAUNCH
    assert time.perf_counter() - start < 1.0, "refused before anything is allocated"
    err = info.value
    assert err.loc is not None and os.path.abspath(err.loc.file) == THIS_FILE, err
    assert err.loc.line in (line_of("# SHARED"), line_of("# LAUNCH")), err
    assert f"{4 * elements} bytes of shared memory" in str(err), err
    assert not out.any()


def test_the_interpreter_gives_a_group_48_kib(monkeypatch):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    big_shared[64, 64](x, out, 12 * 1024, backend="cpu")  # 48 KiB exactly: runs
    np.testing.assert_array_equal(out, x[::-1])
    with pytest.raises(CompileError, match=r"49156 bytes of shared memory, over the 48 KiB that cpu allows") as info:
        big_shared[64, 64](x, out, 12 * 1024 + 1, backend="cpu")
    assert info.value.loc.line == line_of("# SHARED") and "IRON_CPU_MAX_SHARED" in str(info.value)
    monkeypatch.setenv("IRON_CPU_MAX_SHARED", str(64 * 1024))
    big_shared[64, 64](x, out, 12 * 1024 + 1, backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_shared_arrays_within_every_limit_run_everywhere(backend):
    need(backend)
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    big_shared[128, 64](x, out, 4096, backend=backend)  # 16 KiB
    np.testing.assert_array_equal(out, np.concatenate([x[63::-1], x[:63:-1]]))


# -- 2. Metal's 31 buffer arguments ----------------------------------------------------------------------------------


def wide_kernel(tmp_path, buffers: int):
    """A kernel of ``buffers`` f32 buffers (the first written, the others read), from a module written for it."""
    params = ", ".join(f"b{j}: Tensor[iron.f32]" for j in range(buffers))
    total = " + ".join(f"b{j}[i]" for j in range(1, buffers))
    path = tmp_path / f"wide{buffers}.py"
    path.write_text(f"import iron\nfrom iron import Tensor, program_id\n\n\n@iron.kernel\ndef wide({params}):\n"
                    f"    i = program_id(0)\n    b0[i] = {total}\n")
    spec = importlib.util.spec_from_file_location(f"wide{buffers}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.wide, str(path)


@pytest.mark.parametrize("buffers", [100, 31])
def test_metal_refuses_more_than_31_buffer_arguments(tmp_path, buffers):
    k, path = wide_kernel(tmp_path, buffers)
    with pytest.raises(CompileError) as info:
        k.source("metal")
    err = info.value
    assert err.loc is not None and err.loc.file == path and err.loc.line == 6, err
    assert "Metal allows a kernel at most 31" in str(err) and f"{buffers} buffers" in str(err), err
    arrays = [np.zeros(8, np.float32)] + [np.ones(8, np.float32)] * (buffers - 1)
    if unavailable_reason("msl-cpu") is None:
        with pytest.raises(CompileError, match="at most 31"):
            k[8](*arrays, backend="msl-cpu")
    k[8](*arrays, backend="cpu")  # no such limit: runs
    assert (arrays[0] == buffers - 1).all()


def test_metal_takes_28_buffers_and_the_grid_size(tmp_path):
    k, _ = wide_kernel(tmp_path, 28)
    assert "[[buffer(28)]]" in k.source("metal")  # b0..b27 and iron_n0
    need("msl-cpu")
    arrays = [np.zeros(8, np.float32)] + [np.ones(8, np.float32)] * 27
    k[8](*arrays, backend="msl-cpu")
    assert (arrays[0] == 27).all()


# -- 3. a divergent barrier on msl-cpu --------------------------------------------------------------------------------


@iron.kernel
def divergent_barriers(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    tile = shared(iron.f32, 64)
    i = program_id(0)
    tile[local_id(0)] = x[i]
    if local_id(0) < 16:
        barrier()  # FIRST BARRIER
    else:
        barrier()
    out[i] = tile[63 - local_id(0)]


@pytest.mark.parametrize("backend", ["cpu", "msl-cpu"])
def test_a_divergent_barrier_is_reported_at_the_barrier(backend, tmp_path, monkeypatch):
    need(backend)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ExecutionError, match=r"barrier\(\) reached by only part of") as info:
        divergent_barriers[128, 64](np.ones(128, np.float32), np.zeros(128, np.float32), backend=backend)
    err = info.value
    assert err.loc is not None and os.path.abspath(err.loc.file) == THIS_FILE, err
    assert err.loc.line == line_of("# FIRST BARRIER"), err
    left = [str(p) for p in (tmp_path / "cache").rglob(".tmp*")] if (tmp_path / "cache").exists() else []
    assert not left, left


# -- 4. corrupt bench JSON -----------------------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    from iron.harness import baseline

    baseline.bench_dir().mkdir(parents=True, exist_ok=True)
    return baseline


GOOD = {"backend": "cpu", "rows": [{"kernel": "k", "shape": [4], "dtype": "f32", "iron_us": 1.0, "ok": True}]}
CORRUPT = {
    "truncated": '{"backend": "cpu", "rows": [{"kernel": "k", "sha',
    "empty": "",
    "not utf-8": b"\xff\xfe{}",
    "a list": "[]",
    "a string": '"rows"',
    "rows not a list": '{"rows": 3}',
    "row without a shape": '{"rows": [{"kernel": "k", "dtype": "f32"}]}',
    "row with text time": '{"rows": [{"kernel": "k", "shape": [4], "dtype": "f32", "iron_us": "fast"}]}',
}


def write(path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)


def invoke(command, *args):
    result = CliRunner().invoke(command, list(args))
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        f"a traceback, not an error message: {result.exception!r}\n{result.output}"
    return result


@pytest.mark.parametrize("what", list(CORRUPT))
def test_diff_names_a_corrupt_file(cache, what):
    from iron.cli.baseline_cmd import diff

    for bad, good in ((cache.last_run_path(), cache.baseline_path("main")),
                      (cache.baseline_path("main"), cache.last_run_path())):
        write(good, json.dumps(GOOD))
        write(bad, CORRUPT[what])
        result = invoke(diff, "main")
        assert result.exit_code == 1, result.output
        assert str(bad) in result.output and "iron diff:" in result.output, result.output


@pytest.mark.parametrize("what", list(CORRUPT))
def test_snap_names_a_corrupt_last_run(cache, what):
    from iron.cli.baseline_cmd import snap

    write(cache.last_run_path(), CORRUPT[what])
    result = invoke(snap, "main")
    assert result.exit_code == 1 and str(cache.last_run_path()) in result.output, result.output
    assert not cache.baseline_path("main").exists()


def test_snap_and_diff_still_work_on_good_files(cache):
    from iron.cli.baseline_cmd import diff, snap

    write(cache.last_run_path(), json.dumps(GOOD))
    assert invoke(snap, "main").exit_code == 0
    result = invoke(diff, "main")
    assert result.exit_code == 0 and "0 regressions" in result.output, result.output


def test_the_iron_command_uses_the_checked_snap_and_diff():
    from iron.cli import baseline_cmd
    from iron.cli.main import cli

    assert cli.commands["snap"] is baseline_cmd.snap and cli.commands["diff"] is baseline_cmd.diff
