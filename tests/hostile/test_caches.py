"""Issue 17, hostile caches: a damaged or foreign entry in the binary cache is rebuilt, never handed back (CUDA cubins,
HIP code objects: compiled here by NVRTC and hipRTC, no GPU needed); two processes filling one entry both succeed;
a cache folder that cannot be used gives one warning and a private cache, and launches still work; a damaged
``autotune.json`` is tuned again and rewritten."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import iron
from iron import Tensor, kernel, program_id
from iron.codegen import hiprtc, nvrtc
from iron.frontend import autotune
from iron.runtime import cache, unavailable_reason

#: backend -> (module whose compile function builds its binaries, that function's name, target, why it cannot run)
COMPILERS = {
    "cuda": (nvrtc, "compile_cuda", "sm_90", nvrtc.unavailable_reason()),
    "hip": (hiprtc, "compile_hip", "gfx90a", hiprtc.unavailable_reason()),
}
CORRUPTIONS = ["truncated", "bit_flipped", "empty", "another_kernels_entry"]


@kernel
def scale_add(x: Tensor[iron.f32], y: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = x[i] * 3.0 + y[i]


@kernel
def negate(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = -x[i]


def _compiler(backend: str):
    module, name, target, reason = COMPILERS[backend]
    if reason is not None:
        pytest.skip(f"{backend} compiler unavailable: {reason}")
    return module, name, target


def _fresh(kern, backend: str, target: str, monkeypatch) -> bytes:
    """The binary compiled now, the cache out of the way."""
    with monkeypatch.context() as m:
        m.setenv("IRON_CACHE", "0")
        return kern.compile(backend, target=target)


def _corrupt(entry: Path, how: str, other: Path) -> None:
    whole = entry.read_bytes()
    if how == "truncated":
        entry.write_bytes(whole[: len(whole) // 2])
    elif how == "bit_flipped":
        flipped = bytearray(whole)
        flipped[len(whole) // 3] ^= 0x10
        entry.write_bytes(bytes(flipped))
    elif how == "empty":
        entry.write_bytes(b"")
    else:  # a whole, valid entry of another kernel renamed into place
        os.replace(other, entry)


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_a_damaged_or_foreign_entry_is_rebuilt_not_returned(backend, how, tmp_path, monkeypatch):
    module, name, target = _compiler(backend)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_CACHE", "1")
    fresh = _fresh(scale_add, backend, target, monkeypatch)
    builds: list[str] = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **kw: builds.append(name) or real(*a, **kw))
    assert scale_add.compile(backend, target=target) == fresh
    (entry,) = (tmp_path / backend).iterdir()
    negate.compile(backend, target=target)
    (other,) = set((tmp_path / backend).iterdir()) - {entry}
    assert scale_add.compile(backend, target=target) == fresh and len(builds) == 2  # read from the cache
    _corrupt(entry, how, other)
    assert scale_add.compile(backend, target=target) == fresh
    assert len(builds) == 3  # rebuilt
    assert cache.unseal(backend, entry.name, entry.read_bytes()) == fresh  # and the entry replaced, whole
    assert scale_add.compile(backend, target=target) == fresh and len(builds) == 3


def test_entries_can_be_read_by_the_caches_other_users(tmp_path, monkeypatch):
    _, _, target = _compiler("hip")
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_CACHE", "1")
    old = os.umask(0o022)
    try:
        scale_add.compile("hip", target=target)
    finally:
        os.umask(old)
    (entry,) = (tmp_path / "hip").iterdir()
    assert entry.stat().st_mode & 0o777 == 0o644


def _compile_at_once(backend: str, target: str, barrier, result: str) -> None:
    """A child process: compile scale_add, wait until the other child has compiled too, then store it in the cache
    and write what ``compile`` returned to the file ``result``."""
    module, name, _, _ = COMPILERS[backend]
    real = getattr(module, name)

    def build_then_wait(*a, **kw):
        data = real(*a, **kw)
        barrier.wait(timeout=120)  # both processes have built the entry: both now write it
        return data

    setattr(module, name, build_then_wait)
    Path(result).write_bytes(scale_add.compile(backend, target=target))


@pytest.mark.parametrize("backend", ["cuda", "hip"])
def test_two_processes_filling_one_entry_at_once_both_succeed(backend, tmp_path, monkeypatch):
    _, _, target = _compiler(backend)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("IRON_CACHE", "1")
    fresh = _fresh(scale_add, backend, target, monkeypatch)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    outs = [tmp_path / f"returned-{i}" for i in range(2)]
    procs = [ctx.Process(target=_compile_at_once, args=(backend, target, barrier, str(out))) for out in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    assert [out.read_bytes() for out in outs] == [fresh, fresh]
    (entry,) = (tmp_path / backend).iterdir()  # one entry, no temporary file left behind
    assert cache.unseal(backend, entry.name, entry.read_bytes()) == fresh


def _unusable_cache(how: str, tmp_path: Path) -> Path:
    if how == "under_a_file":  # cannot be created, even by root
        (tmp_path / "a_file").write_text("")
        return tmp_path / "a_file" / "cache"
    folder = tmp_path / "cache"
    folder.mkdir()
    if how == "read_only":
        if os.geteuid() == 0:
            pytest.skip("root writes through chmod 0500 (the under_a_file case covers an uncreatable folder)")
        folder.chmod(0o500)
    else:  # belongs to another user
        if os.geteuid() != 0:
            pytest.skip("making a folder another user's needs root")
        os.chown(folder, 65534, 65534)
    return folder


def _tuned_launch(backend: str, rng) -> None:
    """scale_add launched through the autotuner (which reads and writes the cache), checked against float64."""
    n = 512
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    configs = [{"group": 64}, {"group": 128}]

    def run(cfg):
        scale_add[n, cfg["group"]](x, y, out, backend=backend)

    run(autotune.tune("hostile/scale_add", configs, run, backend=backend, dtype="f32", key=(n,)))
    X, Y = x.astype(np.float64), y.astype(np.float64)
    np.testing.assert_allclose(out, 3 * X + Y, rtol=0, atol=4 * 2**-24 * np.max(np.abs(3 * X) + np.abs(Y)))


@pytest.mark.parametrize("how", ["under_a_file", "read_only", "another_users"])
@pytest.mark.parametrize("backend", ["cpu", "msl-cpu", "vulkan"])
def test_an_unusable_cache_folder_warns_once_and_a_private_one_is_used(backend, how, tmp_path, monkeypatch, rng):
    if unavailable_reason(backend) is not None:
        pytest.skip(f"{backend} unavailable: {unavailable_reason(backend)}")
    bad = _unusable_cache(how, tmp_path)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("IRON_CACHE_DIR", str(bad))
    monkeypatch.setenv("IRON_CACHE", "1")
    monkeypatch.delenv("IRON_AUTOTUNE", raising=False)
    monkeypatch.setattr(autotune, "_MEMORY", {})
    monkeypatch.setattr(autotune, "_QUICK", {})
    scale_add.variant(None).artifacts.clear()  # the library is loaded through the cache again
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                _tuned_launch(backend, rng)
    finally:
        if how == "read_only":
            bad.chmod(0o700)
    cache_warnings = [w for w in caught if issubclass(w.category, cache.CacheWarning)]
    assert len(cache_warnings) == 1, [str(w.message) for w in caught]
    assert str(bad) in str(cache_warnings[0].message)
    private = tmp_path / "tmp" / f"iron-cache-{os.geteuid()}"
    assert json.loads((private / "autotune.json").read_text())  # the private cache took the writes
    assert not (bad / "autotune.json").exists()
    if backend == "msl-cpu":
        assert len(list((private / "msl-cpu").iterdir())) == 1


def test_a_damaged_autotune_file_is_tuned_again_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("IRON_AUTOTUNE", raising=False)
    monkeypatch.delenv("IRON_CACHE", raising=False)
    path = tmp_path / "autotune.json"
    damaged = {"truncated": b'{"cpu|x|demo": 1, "cpu|y', "not_utf8": b"\xff\xfe\x00{", "empty": b"",
               "deeply_nested": b"[" * 200_000, "a_list": b"[1, 2]", "a_folder": None}
    for how, text in damaged.items():
        monkeypatch.setattr(autotune, "_MEMORY", {})
        monkeypatch.setattr(autotune, "_QUICK", {})
        if path.is_dir():
            shutil.rmtree(path)
        path.unlink(missing_ok=True)
        if text is None:
            path.mkdir()
        else:
            path.write_bytes(text)
        calls: list[int] = []

        def run(cfg, calls=calls):
            calls.append(cfg["x"])
            if cfg["x"] == 0:
                raise iron.LaunchError("does not fit this device")

        chosen = autotune.tune(f"demo-{how}", [{"x": 0}, {"x": 1}], run, backend="cpu", dtype="f32", key=(3,))
        assert chosen == {"x": 1} and 0 in calls, how  # tuned again
        if text is not None:
            stored = json.loads(path.read_text())
            assert list(stored.values()) == [1] and f"demo-{how}" in next(iter(stored)), how  # rewritten, whole
