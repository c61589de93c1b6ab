"""Programmatic dependent launch (``IRON_CUDA_PDL=1``, sm_90+) without a GPU: the emitted source waits for the previous
grid and triggers the next one first in every entry, only when on and only for sm_90+ targets; NVRTC compiles it and
the SASS holds the two instructions (ACQBULK for ``griddepcontrol.wait``, PREEXIT for
``griddepcontrol.launch_dependents``); the compile cache keys differ; and every launch path launches such a kernel
with cuLaunchKernelEx and the programmatic stream serialization attribute (the full path through cuda.core's
LaunchConfig, the generated-Python and compiled launchers over fake drivers), and a plain kernel with cuLaunchKernel.
The GPU side (200 dependent launches, and the same chain captured in a graph) is ``test_pdl_gpu.py``."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import iron
import iron.runtime.cuda_fast as cf
from iron import Tensor, kernel, program_id
from iron.codegen import emit_cuda, nvrtc
from iron.codegen.cfamily.cuda import pdl_capable
from iron.runtime import cuda as cuda_rt
from iron.runtime.cuda import CudaBackend, launch_config

from .test_fast_path import FakeTensor, _Backend

_REASON = nvrtc.unavailable_reason()
needs_nvrtc = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")
WAIT = 'asm volatile("griddepcontrol.wait;" ::: "memory");'
TRIGGER = 'asm volatile("griddepcontrol.launch_dependents;");'


@kernel
def bump(x: Tensor[iron.f32], out: Tensor[iron.f32], alpha: float):
    i = program_id(0)
    out[i] = x[i] * alpha + 1.0


@kernel
def row_sum(x: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    s = iron.simd_sum(x[i])
    if iron.simd_lane() == 0:
        out[i // 32] = s


def _entries(source: str) -> list[str]:
    """The body of each ``__global__`` function, in order."""
    parts = source.split('extern "C" __global__ void')[1:]
    return [p[p.index("{") + 1:] for p in parts]


@pytest.mark.parametrize("k", [bump, row_sum])
def test_prologue_only_when_on_and_only_for_sm90(k):
    variant = k.variant(None)
    plain = emit_cuda(variant.kernel, arch="sm_90")
    assert WAIT not in plain.source and "griddepcontrol" not in plain.source and not plain.pdl
    for arch in ("sm_80", "sm_89", None):
        off = emit_cuda(variant.kernel, arch=arch, pdl=True)
        assert "griddepcontrol" not in off.source and not off.pdl, arch
    for arch in ("sm_90", "sm_90a", "sm_100", "compute_90"):
        on = emit_cuda(variant.kernel, arch=arch, pdl=True)
        assert on.pdl, arch
        entries = _entries(on.source)
        assert len(entries) == (2 if k is bump else 1)  # bump has its vectorised entry too
        assert on.source.count(WAIT) == on.source.count(TRIGGER) == len(entries)
        for body in entries:  # first in the body: the wait, then the trigger, before any other statement
            code = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("//")]
            assert code[:2] == [WAIT, TRIGGER], code[:3]
        # and nothing else changed
        assert on.source.replace(f"    {WAIT}\n", "").replace(f"    {TRIGGER}\n", "").replace(
            "    // programmatic dependent launch: wait for the previous grid, then let the next one be scheduled\n",
            "") == plain.source


def test_pdl_capable_targets():
    assert [pdl_capable(a) for a in ("sm_90", "sm_90a", "sm_100f", "compute_120", "sm_89", "sm_80", "", None,
                                     "gfx90a")] == [True, True, True, True, False, False, False, False, False]


def _backend(monkeypatch, pdl: bool, arch: str = "sm_90") -> CudaBackend:
    monkeypatch.setenv("IRON_CUDA_ARCH", arch)
    monkeypatch.setenv("IRON_CUDA_PDL", "1" if pdl else "0")
    return CudaBackend()


@needs_nvrtc
def test_backend_switch_and_compile_cache_keys(monkeypatch):
    """IRON_CUDA_PDL=1 gives the backend the PDL source, =0 the plain one (unset: on where cuda.core can launch it);
    the compile cache key hashes the source, so the two binaries are cached apart; an sm_80 device gets the plain
    source either way."""
    keys = []
    monkeypatch.setattr(cuda_rt, "cached_binary", lambda kind, key, make: keys.append(key) or b"")
    variant = bump.variant(None)
    monkeypatch.delenv("IRON_CUDA_PDL", raising=False)
    assert cuda_rt.pdl_enabled() == cuda_rt._pdl_supported()
    off = _backend(monkeypatch, False)
    assert not cuda_rt.pdl_enabled()
    assert not off.emitted(variant).pdl and "griddepcontrol" not in off.source(variant)
    off.compile(variant)
    on = _backend(monkeypatch, True)  # (the switch is read at each emit: set it before a kernel's first launch)
    assert cuda_rt.pdl_enabled() and on.emitted(variant).pdl and WAIT in on.source(variant)
    on.compile(variant)
    assert len(keys) == 2 and keys[0] != keys[1]
    old = _backend(monkeypatch, True, "sm_80")
    assert not old.emitted(variant).pdl and "griddepcontrol" not in old.source(variant)
    # an sm_90 device compiling for an older target emits for that target (NVRTC refuses griddepcontrol there)
    assert on.emitted(variant, "sm_80").pdl is False and "griddepcontrol" not in on.source(variant, "sm_80")


@needs_nvrtc
def test_an_older_target_compiles_with_pdl_on(monkeypatch, tmp_path):
    """k.compile("cuda", target="sm_80") and k.source(..., target=...) with PDL on (the default on sm_90): the
    source for sm_80 has no griddepcontrol, and NVRTC compiles it (before: ptxas refused the sm_90 prologue)."""
    monkeypatch.setenv("IRON_CUDA_PDL", "1")
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    assert WAIT in bump.source("cuda", target="sm_90")
    assert "griddepcontrol" not in bump.source("cuda", target="sm_80")
    assert len(bump.compile("cuda", target="sm_80")) > 0


@needs_nvrtc
def test_nvrtc_sm90_sass_has_the_instructions(tmp_path):
    """griddepcontrol.wait is ACQBULK in sm_90 SASS, launch_dependents is PREEXIT: both in every entry of the PDL
    binary, before its first global load, and in none of the plain one's."""
    tool = shutil.which("cuobjdump") or next((p for p in ("/work/tools/cuobjdump",) if os.path.exists(p)), None)
    if tool is None:
        pytest.skip("no cuobjdump")
    variant = bump.variant(None)
    sass = {}
    for pdl in (False, True):
        path = tmp_path / f"bump_{pdl}.cubin"
        path.write_bytes(nvrtc.compile_cuda(emit_cuda(variant.kernel, arch="sm_90", pdl=pdl), arch="sm_90"))
        sass[pdl] = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True).stdout
    assert "ACQBULK" not in sass[False] and "PREEXIT" not in sass[False]
    functions = sass[True].split("Function : ")[1:]
    assert len(functions) == 2
    for text in functions:
        # "/*0010*/   ACQBULK ;   /* encoding */" -> "ACQBULK"
        ops = [line.split("*/", 1)[1].split(";")[0].strip() for line in text.splitlines()
               if line.strip().startswith("/*0")]
        first_load = next(i for i, op in enumerate(ops) if op.startswith("LDG"))
        assert ops.count("ACQBULK") == 1 and ops.count("PREEXIT") == 1
        assert ops.index("ACQBULK") < ops.index("PREEXIT") < first_load


def test_full_path_config_sets_programmatic_stream_serialization():
    pytest.importorskip("cuda.core")
    variant = bump.variant(None)
    on = launch_config(emit_cuda(variant.kernel, arch="sm_90", pdl=True), (4, 1, 1), (256, 1, 1), 0)
    off = launch_config(emit_cuda(variant.kernel, arch="sm_90"), (4, 1, 1), (256, 1, 1), 0)
    assert on.programmatic_stream_serialization is True
    assert off.programmatic_stream_serialization is False


# -- the generated-Python launcher over a recording ctypes driver ------------------------------------------------------


class _PdlBackend(_Backend):
    def __init__(self, pdl: bool):
        self.pdl = pdl

    def emitted(self, variant):
        return emit_cuda(variant.kernel, arch="sm_90", pdl=self.pdl)


def _make(backend, x, out):
    return cf.make_fast_launch(backend, bump, bump.variant(None), (x, out, 2.0), {}, (1000, 1, 1), (256, 1, 1),
                               {"x": 1000, "out": 1000})


def test_python_launcher_uses_launch_ex_with_the_attribute(recorder):
    x, out = FakeTensor(1000, 0x1000), FakeTensor(1000, 0x2000)
    fast = _make(_PdlBackend(True), x, out)
    assert fast((x, out, 2.0)) is True and fast((FakeTensor(1000, 0x3000), out, 2.0)) is True
    assert not recorder.calls and len(recorder.ex) == 2
    call = recorder.ex[-1]
    assert call["grid"] == [4, 1, 1] and call["block"] == [256, 1, 1] and call["shmem"] == 0
    assert call["stream"] == 1234 and call["function"] == 0xDEAD and call["extra"] is None
    assert call["attrs"] == [(6, 1)]  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, allowed
    assert call["pointers"] == [0x3000, 0x2000]
    plain = _make(_PdlBackend(False), x, out)
    assert plain((x, out, 2.0)) is True and len(recorder.calls) == 1 and len(recorder.ex) == 2


# -- the compiled launcher over a fake driver built against NVIDIA's cuda.h ------------------------------------------

FAKE_DRIVER = r"""
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
uint64_t rec[16];
int plain_calls = 0, ex_calls = 0;
/* the layout the launchers assume, from the real header */
size_t layout[] = {sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value), sizeof(CUlaunchConfig),
                   offsetof(CUlaunchConfig, sharedMemBytes), offsetof(CUlaunchConfig, hStream),
                   offsetof(CUlaunchConfig, attrs), offsetof(CUlaunchConfig, numAttrs),
                   CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, CUstream stream, void **params, void **extra) {
    ++plain_calls;
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    rec[0] = (uint64_t)(uintptr_t)f; rec[1] = c->gridDimX; rec[2] = c->gridDimY; rec[3] = c->gridDimZ;
    rec[4] = c->blockDimX; rec[5] = c->blockDimY; rec[6] = c->blockDimZ; rec[7] = c->sharedMemBytes;
    rec[8] = (uint64_t)(uintptr_t)c->hStream; rec[9] = extra == 0; rec[10] = c->numAttrs;
    rec[11] = c->attrs[0].id; rec[12] = (uint64_t)c->attrs[0].value.programmaticStreamSerializationAllowed;
    memcpy(&rec[13], params[0], 8); memcpy(&rec[14], params[1], 8);
    ++ex_calls;
    return CUDA_SUCCESS;
}
"""


def _cuda_include() -> str | None:
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and (Path(root) / "include" / "cuda.h").exists():
            return str(Path(root) / "include")
    return None


@pytest.fixture
def real_header_driver(tmp_path, monkeypatch):
    cc = shutil.which("cc") or shutil.which("gcc")
    include = _cuda_include()
    if cc is None or include is None:
        pytest.skip("needs a C compiler and NVIDIA's cuda.h (CUDA_HOME or /usr/local/cuda)")
    if cf.compiled_module() is None:
        pytest.fail(f"the compiled launcher did not build: {cf.EXT_REASON}")
    src = tmp_path / "fake_cuda.c"
    src.write_text(FAKE_DRIVER)
    lib = tmp_path / "libfakecuda_ex.so"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-I", include, "-o", str(lib), str(src)], check=True)
    dll = ctypes.CDLL(str(lib))
    monkeypatch.setattr(cf, "_launch_address", lambda pdl=False: ctypes.cast(
        dll.cuLaunchKernelEx if pdl else dll.cuLaunchKernel, ctypes.c_void_p).value)
    monkeypatch.setattr(cf, "_torch_stream_getter", lambda: (lambda dev: 0x5150))
    monkeypatch.setenv("IRON_CUDA_LAUNCHER", "c")
    return dll


def test_ctypes_structures_match_cuda_h(real_header_driver):
    layout = list((ctypes.c_size_t * 8).in_dll(real_header_driver, "layout"))
    assert layout == [ctypes.sizeof(cf.LaunchAttribute), cf.LaunchAttribute.value.offset,
                      ctypes.sizeof(cf.LaunchConfig), cf.LaunchConfig.shmem.offset, cf.LaunchConfig.stream.offset,
                      cf.LaunchConfig.attrs.offset, cf.LaunchConfig.num_attrs.offset,
                      cf.PROGRAMMATIC_STREAM_SERIALIZATION]


def test_compiled_launcher_uses_launch_ex_with_the_attribute(real_header_driver):
    dll = real_header_driver
    x, out = FakeTensor(1000, 0x1000), FakeTensor(1000, 0x2000)
    fast = _make(_PdlBackend(True), x, out)
    assert type(fast).__name__ == "FastLaunch"
    assert fast((x, out, 2.0)) is True
    rec = list((ctypes.c_uint64 * 16).in_dll(dll, "rec"))
    assert rec[:13] == [0xDEAD, 4, 1, 1, 256, 1, 1, 0, 0x5150, 1, 1, 6, 1]
    assert rec[13:15] == [0x1000, 0x2000]
    assert ctypes.c_int.in_dll(dll, "ex_calls").value == 1 and ctypes.c_int.in_dll(dll, "plain_calls").value == 0
    plain = _make(_PdlBackend(False), x, out)
    assert plain((x, out, 2.0)) is True
    assert ctypes.c_int.in_dll(dll, "ex_calls").value == 1 and ctypes.c_int.in_dll(dll, "plain_calls").value == 1
