"""The fake HIP runtime installed as the hip backend (shared by this folder's tests)."""

from __future__ import annotations

import pytest

import iron.runtime as runtime
import iron.runtime.hip as hip_rt
from iron.runtime.hip import HipBackend

from .fake_hip import FakeHip


@pytest.fixture
def install(monkeypatch):
    """install(**FakeHip fields) -> (fake, backend): the hip backend of ``backend="hip"`` launches, on the fake."""

    def make(**fields) -> tuple[FakeHip, HipBackend]:
        fake = FakeHip(**fields)
        backend = HipBackend()
        monkeypatch.setattr(hip_rt, "_runtime", lambda: fake)
        monkeypatch.setitem(runtime._INSTANCES, "hip", backend)
        monkeypatch.setattr(runtime, "_PROBES", {})
        return fake, backend

    return make


@pytest.fixture
def running(install, monkeypatch):
    """(fake, backend) on gfx1030 (wavefront 32) whose launches really run: every code object the backend compiles is
    remembered with its variant, so the fake runs each launch in the interpreter."""
    fake, backend = install(arch="gfx1030", warp_size=32)
    compile_for = backend.compile

    def compile_and_remember(variant, target=None):
        code = compile_for(variant, target)
        fake.programs[code] = variant
        return code

    monkeypatch.setattr(backend, "compile", compile_and_remember)
    return fake, backend


@pytest.fixture
def launching(install, monkeypatch):
    """``running`` with a stand-in code object for each variant (``fake_hip.stand_in_code_object``) instead of
    hipRTC's: the launch path (copies, argument array, grid) of many kernels, where compiling each would take minutes
    (that every kernel compiles for gfx1030 is tests/backends/test_compile_targets.py's part)."""
    from .fake_hip import stand_in_code_object

    fake, backend = install(arch="gfx1030", warp_size=32)

    def stand_in(variant, target=None):
        src = backend.emitted(variant, target)
        code = stand_in_code_object(src.source, src.entry)
        fake.programs[code] = variant
        return code

    monkeypatch.setattr(backend, "compile", stand_in)
    return fake, backend
