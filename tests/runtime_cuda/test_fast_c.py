"""The compiled CUDA launcher (``cuda_launch.c``) without a GPU: it is built with the system C compiler, and a fake
``cuLaunchKernel`` -- a real C function in a library built here -- records what the driver would receive: the
function handle, grid, block, shared memory, stream, and the bytes behind each ``void*`` of the argument array."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

import iron
import iron.runtime.cuda_fast as cf
from iron import Tensor, kernel, program_id
from iron.runtime.cuda import CudaBackend

from .test_fast_path import F16, FakeTensor, _Backend

FAKE_DRIVER = r"""
#include <stdint.h>
#include <string.h>
uint64_t rec[32];
int calls = 0, nslots = 0, result = 0;
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shmem, void *stream, void **params, void **extra) {
    rec[0] = (uint64_t)(uintptr_t)f; rec[1] = gx; rec[2] = gy; rec[3] = gz; rec[4] = bx; rec[5] = by; rec[6] = bz;
    rec[7] = shmem; rec[8] = (uint64_t)(uintptr_t)stream; rec[9] = extra == 0;
    for (int i = 0; i < nslots && i < 20; ++i) memcpy(&rec[10 + i], params[i], 8);
    ++calls;
    return result;
}
"""


@kernel
def scaled(x: Tensor[iron.f32], out: Tensor[iron.f32], alpha: float, n: int, mask: iron.u32):
    i = program_id(0)
    if i < n:
        out[i] = x[i] * alpha + float(mask & 1)


@pytest.fixture
def driver(tmp_path, monkeypatch):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    if cf.compiled_module() is None:
        pytest.fail(f"the compiled launcher did not build: {cf.EXT_REASON}")
    src = tmp_path / "fake_cuda.c"
    src.write_text(FAKE_DRIVER)
    lib = tmp_path / "libfakecuda.so"
    subprocess.run([shutil.which("cc") or "gcc", "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    dll = ctypes.CDLL(str(lib))
    monkeypatch.setattr(cf, "_launch_address", lambda pdl=False: ctypes.cast(dll.cuLaunchKernel, ctypes.c_void_p).value)
    monkeypatch.setattr(cf, "_torch_stream_getter", lambda: (lambda dev: 0x5150))
    monkeypatch.setenv("IRON_CUDA_LAUNCHER", "c")
    return dll


def _rec(dll):
    return (ctypes.c_uint64 * 32).in_dll(dll, "rec")


def _scaled_launcher(driver):
    """(x, out, the compiled fast launcher of `scaled` for a 1000-thread grid) over the fake driver."""
    ctypes.c_int.in_dll(driver, "nslots").value = 8
    x, out = FakeTensor(1000, 0x1000), FakeTensor(1000, 0x2000)
    fast = cf.make_fast_launch(_Backend(), scaled, scaled.variant(None), (x, out, 1.5, 1000, 3), {}, (1000, 1, 1),
                               (256, 1, 1), {"x": 1000, "out": 1000})
    return x, out, fast


def test_compiled_launcher_writes_pointers_and_falls_back(driver):
    x, out, fast = _scaled_launcher(driver)
    assert type(fast).__name__ == "FastLaunch"
    assert fast((x, out, 1.5, 1000, 3)) is True
    rec = _rec(driver)
    assert list(rec[:10]) == [0xDEAD, 4, 1, 1, 256, 1, 1, 0, 0x5150, 1]
    assert rec[10] == 0x1000 and rec[11] == 0x2000
    slot = lambda i, fmt: ctypes.cast(ctypes.pointer(ctypes.c_uint64(rec[10 + i])), ctypes.POINTER(fmt))[0]  # noqa: E731
    assert slot(2, ctypes.c_float) == 1.5 and slot(3, ctypes.c_int32) == 1000 and slot(4, ctypes.c_uint32) == 3
    assert [slot(i, ctypes.c_int32) for i in (5, 6, 7)] == [1000, 1, 1]  # the exact grid sizes
    # new pointers and scalars each call; an f32 scalar rounds like C's (float) cast
    assert fast((FakeTensor(1000, 0x3000), out, 0.1, -7, 3_000_000_000)) is True
    assert rec[10] == 0x3000 and slot(2, ctypes.c_float) == ctypes.c_float(0.1).value
    assert slot(3, ctypes.c_int32) == -7 and slot(4, ctypes.c_uint32) == 3_000_000_000
    calls = ctypes.c_int.in_dll(driver, "calls").value
    for bad in [(FakeTensor(999, 0x1000), out, 1.0, 1, 1),         # too small for the grid
                (FakeTensor(1000, 0x1000, dtype=F16), out, 1.0, 1, 1),  # another dtype
                (FakeTensor(1000, 0x1000, contiguous=False), out, 1.0, 1, 1),
                (x, out, 1.0, 2**31, 1),                               # i32 out of range
                (x, out, 1.0, 1, -1),                                  # u32 out of range
                (x, out, "1.0", 1, 1),                                 # not a number
                (x, out, 1.0, 1.0, 1),                                 # float for an int
                (x, out, 1.0, 1)]:                                     # too few
        assert fast(bad) is False, bad
    assert ctypes.c_int.in_dll(driver, "calls").value == calls


def test_compiled_launcher_reports_driver_errors_and_skips_captures(driver):
    variant = scaled.variant(None)
    x, out = FakeTensor(64, 0x1000), FakeTensor(64, 0x2000)
    backend = _Backend()
    fast = cf.make_fast_launch(backend, scaled, variant, (x, out, 1.0, 64, 0), {}, (64, 1, 1), (64, 1, 1), {})
    ctypes.c_int.in_dll(driver, "result").value = 700
    with pytest.raises(iron.LaunchError, match=r"CUDA launch of scaled failed \(CUresult 700\)"):
        fast((x, out, 1.0, 64, 0))
    ctypes.c_int.in_dll(driver, "result").value = 0
    backend.capture = object()  # a graph capture in progress: the full path records it
    assert fast((x, out, 1.0, 64, 0)) is False


def test_launcher_setting_is_checked(monkeypatch):
    monkeypatch.setenv("IRON_CUDA_LAUNCHER", "fast")
    with pytest.raises(iron.LaunchError, match="IRON_CUDA_LAUNCHER must be auto, c or python"):
        cf.launcher_mode()


def test_direct_launches_in_c_and_hands_every_other_call_to_its_fallback(driver):
    x, out, fast = _scaled_launcher(driver)
    seen = []

    class Fallback:
        grid = (1000,)

        def __call__(self, *args, **kwargs):
            seen.append((args, kwargs))
            return "fallback"

    fb = Fallback()
    d = fast.direct(fb)
    assert d.fast is fast and d.fallback is fb and d.grid == (1000,)  # unknown attributes are the fallback's
    calls = ctypes.c_int.in_dll(driver, "calls").value
    assert d(FakeTensor(1000, 0x7000), out, 2.5, 1000, 3) is None
    assert ctypes.c_int.in_dll(driver, "calls").value == calls + 1 and _rec(driver)[10] == 0x7000 and not seen
    small = FakeTensor(999, 0x1000)
    assert d(small, out, 1.5, 1000, 3) == "fallback" and seen[-1] == ((small, out, 1.5, 1000, 3), {})
    assert d(x, out, 1.5, 1000, 3, backend="cpu") == "fallback" and seen[-1][1] == {"backend": "cpu"}
    assert ctypes.c_int.in_dll(driver, "calls").value == calls + 1
    ctypes.c_int.in_dll(driver, "result").value = 700
    with pytest.raises(iron.LaunchError, match=r"CUresult 700"):
        d(x, out, 1.5, 1000, 3)


@kernel
def plus_one(a: Tensor[iron.f32], out: Tensor[iron.f32]):
    i = program_id(0)
    out[i] = a[i] + 1.0


class _Float32(type(F16)):
    def __str__(self):
        return "torch.float32"


FLOAT32 = _Float32()


class _ShapedTensor(FakeTensor):
    """A FakeTensor the full launch path accepts (a shape, and a dtype named like torch's)."""

    __module__ = "torch.fake"

    def __init__(self, n, ptr):
        super().__init__(n, ptr, dtype=FLOAT32)
        self.shape = (n,)


class _FakeCuda(_Backend):
    """The CUDA backend's launch interface over the fake driver: the full path records, the fast one is real."""

    def __init__(self):
        self.full = []

    def check_array(self, param, value, where):
        return value

    def launch(self, variant, arrays, scalars, grid, group):
        self.full.append(dict(arrays))

    def fast_launcher(self, kfn, variant, args, bound, grid, group, min_sizes):
        return cf.make_fast_launch(self, kfn, variant, args, bound, grid, group, min_sizes)

    def direct_launcher(self, fast, fallback):
        return CudaBackend.direct_launcher(self, fast, fallback)  # the real one: fast.direct(fallback)


def _use_fake_cuda(monkeypatch) -> _FakeCuda:
    """Route launches (IRON_BACKEND) to a _FakeCuda backend for this test."""
    from iron import runtime

    be = _FakeCuda()
    monkeypatch.setitem(runtime._INSTANCES, "fakecuda", be)
    monkeypatch.setenv("IRON_BACKEND", "fakecuda")
    return be


def test_k_grid_is_served_by_the_compiled_launcher_after_the_first_launch(driver, monkeypatch):
    be = _use_fake_cuda(monkeypatch)
    plus_one._launchers.clear()
    ctypes.c_int.in_dll(driver, "nslots").value = 2
    a, out = _ShapedTensor(1000, 0x1000), _ShapedTensor(1000, 0x2000)
    first = plus_one[1000]
    first(a, out)
    assert len(be.full) == 1  # the first launch takes the full path ...
    d = plus_one[1000]
    assert type(d).__name__ == "Direct" and d.fallback is first and d.grid == first.grid
    assert plus_one[1000] is d
    calls = ctypes.c_int.in_dll(driver, "calls").value
    d(_ShapedTensor(1000, 0x5000), out)  # ... and later ones go straight to the driver
    assert len(be.full) == 1 and ctypes.c_int.in_dll(driver, "calls").value == calls + 1
    assert _rec(driver)[10] == 0x5000 and _rec(driver)[11] == 0x2000
    with pytest.raises(iron.LaunchError, match="argument 'a' has 999 elements"):  # the full path's checks
        d(_ShapedTensor(999, 0x5000), out)
    first(a, out)  # the Python launcher still takes the fast path too
    assert len(be.full) == 1 and ctypes.c_int.in_dll(driver, "calls").value == calls + 2
    d(a, out, backend="fakecuda")  # keywords: the full path
    assert len(be.full) == 2


@pytest.mark.parametrize("single", [True, False])
def test_compiled_launcher_checks_the_device(driver, monkeypatch, single):
    """One visible device: ``is_cuda`` decides; several: ``get_device()`` must be the kernel's device."""
    monkeypatch.setattr(cf, "_single_cuda_device", lambda: single)
    variant = scaled.variant(None)
    x, out = FakeTensor(64, 0x1000), FakeTensor(64, 0x2000)
    fast = cf.make_fast_launch(_Backend(), scaled, variant, (x, out, 1.0, 64, 0), {}, (64, 1, 1), (64, 1, 1),
                               {"x": 64})
    assert fast((x, out, 1.0, 64, 0)) is True
    assert fast((FakeTensor(64, 0x1000, device=-1), out, 1.0, 64, 0)) is False  # a CPU tensor
    assert fast((FakeTensor(64, 0x1000, device=1), out, 1.0, 64, 0)) is single  # another GPU: only seen if several
    assert fast((FakeTensor(63, 0x1000), out, 1.0, 64, 0)) is False  # 252 bytes < 64 f32
    assert fast((FakeTensor(64, 0x1004), out, 1.0, 64, 0)) is False  # off a 16-byte boundary: the full path aligns


def test_a_kernel_made_at_run_time_is_freed_with_its_compiled_launcher(driver, monkeypatch):
    """k[grid] -> Direct -> Launcher -> kernel -> k's launcher cache -> Direct: a cycle the garbage collector frees."""
    import gc
    import weakref

    _use_fake_cuda(monkeypatch)
    ctypes.c_int.in_dll(driver, "nslots").value = 2

    def make():
        @kernel
        def scratch(a: Tensor[iron.f32], out: Tensor[iron.f32]):
            i = program_id(0)
            out[i] = a[i] * 2.0

        return scratch

    k = make()
    a, out = _ShapedTensor(64, 0x1000), _ShapedTensor(64, 0x2000)
    k[64](a, out)
    assert type(k[64]).__name__ == "Direct"
    gone = weakref.ref(k)
    del k
    gc.collect()
    assert gone() is None


@kernel
def times_const(x: Tensor[iron.f32], out: Tensor[iron.f32], k: iron.constexpr):
    i = program_id(0)
    out[i] = x[i] * k


def test_a_call_reentered_during_its_checks_still_launches_its_own_pointers(driver, monkeypatch):
    """Python code runs during the checks (here the constexpr key): a second call made meanwhile (another thread, or
    re-entry) must not change the first call's arguments: each call has its own argument slots."""
    pending = []
    real = cf._constexpr_key

    def key(value):
        if pending:
            pending.pop()()
        return real(value)

    monkeypatch.setattr(cf, "_constexpr_key", key)
    ctypes.c_int.in_dll(driver, "nslots").value = 2
    x, out = FakeTensor(64, 0x1000), FakeTensor(64, 0x2000)
    fast = cf.make_fast_launch(_Backend(), times_const, times_const.variant(None, (2.0,)), (x, out, 2.0), {},
                               (64, 1, 1), (64, 1, 1), {"x": 64})
    d = fast.direct(lambda *args, **kwargs: "fallback")
    rec, seen = _rec(driver), []

    def inner():
        assert d(FakeTensor(64, 0xBBB0), FakeTensor(64, 0xCCC0), 2.0) is None
        seen.append((rec[10], rec[11]))

    pending.append(inner)
    assert d(FakeTensor(64, 0xAAA0), out, 2.0) is None
    assert seen == [(0xBBB0, 0xCCC0)]
    assert (rec[10], rec[11]) == (0xAAA0, 0x2000)


@pytest.mark.parametrize("mode", ["c", "python"])
def test_iron_backend_set_later_sends_calls_to_the_full_path(driver, monkeypatch, mode):
    monkeypatch.setenv("IRON_CUDA_LAUNCHER", mode)
    if mode == "python":
        monkeypatch.setattr(cf, "_libcuda", lambda: driver)
        import types as _types
        fake = _types.SimpleNamespace(**{k: getattr(ctypes, k) for k in dir(ctypes) if not k.startswith("__")})
        fake.CDLL = fake.PyDLL = lambda name: driver
        monkeypatch.setattr(cf, "ctypes", fake)
    ctypes.c_int.in_dll(driver, "nslots").value = 2
    x, out = FakeTensor(64, 0x1000), FakeTensor(64, 0x2000)
    monkeypatch.delenv("IRON_BACKEND", raising=False)
    fast = cf.make_fast_launch(_Backend(), plus_one, plus_one.variant(None), (x, out), {}, (64, 1, 1), (64, 1, 1),
                               {"a": 64})
    assert fast((x, out)) is True
    monkeypatch.setenv("IRON_BACKEND", "cpu")  # set after the launcher was made: the full path decides
    assert fast((x, out)) is False
    monkeypatch.delenv("IRON_BACKEND")
    assert fast((x, out)) is True
