"""The CUDA launch fast path without a GPU: the generated launcher re-checks what it specialised on, writes the new
pointers into the argument array, and falls back (returns False) when a call does not match.

The driver and torch are replaced by fakes that record what would be launched; the real path is exercised on the
H200 by scripts/gpu_bench.py (``fast_path_correct``)."""

from __future__ import annotations

import ctypes
import types

import pytest

import iron
import iron.runtime.cuda_fast as cf
from iron.codegen import emit_cuda
from iron.runtime.backend import Backend
from iron.std.unary import iron_exp


class _Dtype:
    pass


F32, F16 = _Dtype(), _Dtype()


class _Device:
    index = 0


class FakeTensor:
    """Just the attributes the fast path reads from a torch CUDA tensor."""

    __module__ = "torch.fake"

    def __init__(self, n, ptr, dtype=F32, contiguous=True, device=0):
        self.n, self.ptr, self.dtype, self.contiguous = n, ptr, dtype, contiguous
        self.is_cuda, self.device, self.dev = device >= 0, _Device(), device

    def get_device(self):
        return self.dev

    def element_size(self):
        return 2 if self.dtype is F16 else 4

    @property
    def nbytes(self):
        return self.n * self.element_size()

    def is_contiguous(self):
        return self.contiguous

    def numel(self):
        return self.n

    def data_ptr(self):
        return self.ptr


class _Kern:
    handle = 0xDEAD


class _Backend(Backend):
    capture = None

    def geometry(self, variant, grid, group):
        return _Kern(), (4, 1, 1), (256, 1, 1)

    def emitted(self, variant):
        return emit_cuda(variant.kernel)


def _pointer_arg(call, index):
    argv = ctypes.cast(call[9].value, ctypes.POINTER(ctypes.c_void_p))
    return ctypes.cast(argv[index], ctypes.POINTER(ctypes.c_void_p))[0]


def test_fast_path_relaunches_with_new_pointers_and_falls_back(recorder):
    variant = iron_exp.variant(iron.f32)
    a, out = FakeTensor(1000, 0x1000), FakeTensor(1000, 0x2000)
    fast = cf.make_fast_launch(_Backend(), iron_exp, variant, (a, out), {}, (1000, 1, 1), (256, 1, 1),
                               {"a": 1000, "out": 1000})
    assert fast((a, out)) is True
    call = recorder.calls[-1]
    assert call[0].value == 0xDEAD and [c.value for c in call[1:7]] == [4, 1, 1, 256, 1, 1]
    assert call[8].value == 1234  # torch's current stream
    assert _pointer_arg(call, 0) == 0x1000 and _pointer_arg(call, 1) == 0x2000
    n0 = ctypes.cast(ctypes.cast(call[9].value, ctypes.POINTER(ctypes.c_void_p))[2], ctypes.POINTER(ctypes.c_int32))
    assert n0[0] == 1000
    b = FakeTensor(1000, 0x3000)
    assert fast((b, out)) is True and _pointer_arg(recorder.calls[-1], 0) == 0x3000
    launched = len(recorder.calls)
    # anything that does not match what the launcher was made for goes back to the full path
    assert fast((FakeTensor(999, 0x1000), out)) is False  # too small for the grid
    assert fast((FakeTensor(1000, 0x1000, dtype=F16), out)) is False  # another dtype: another variant
    assert fast((FakeTensor(1000, 0x1000, contiguous=False), out)) is False
    assert fast((FakeTensor(1000, 0x1008), out)) is False  # off a 16-byte boundary: the full path aligns it
    assert fast((a,)) is False
    assert len(recorder.calls) == launched


def test_fast_path_declines_after_iron_backend_changes(recorder, monkeypatch):
    """The launcher reads IRON_BACKEND from os.environ's own dict (cheaper than os.environ.get per launch): a change
    made through os.environ after the launcher was made sends the call back to the full path, as before."""
    monkeypatch.delenv("IRON_BACKEND", raising=False)
    variant = iron_exp.variant(iron.f32)
    a, out = FakeTensor(1000, 0x1000), FakeTensor(1000, 0x2000)
    fast = cf.make_fast_launch(_Backend(), iron_exp, variant, (a, out), {}, (1000, 1, 1), (256, 1, 1),
                               {"a": 1000, "out": 1000})
    assert fast((a, out)) is True
    monkeypatch.setenv("IRON_BACKEND", "cpu")
    assert fast((a, out)) is False
    monkeypatch.delenv("IRON_BACKEND")
    assert fast((a, out)) is True


class _Store:
    """An iron Array's CUDA memory, faked: a device address and its device."""

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes, self.device = ptr, nbytes, 0


class _ArrayBackend(_Backend):
    name = "cuda"
    stream = types.SimpleNamespace(handle=777)


def test_fast_path_takes_iron_arrays_on_irons_stream(recorder):
    """iron Arrays (issue 16): the generated launcher checks type, dtype, backend and size, writes store pointer +
    view offset, launches on Iron's own stream (not torch's), and declines overlap of written views and torch
    tensors mixed in."""
    from iron.runtime.device_array import Array

    def arr(ptr, n, offset=0, dtype=iron.f32, backend="cuda"):
        return Array(_Store(ptr, 4 * (n + offset)), 4 * offset, (n,), dtype, backend)

    variant = iron_exp.variant(iron.f32)
    a, out = arr(0x1000, 1000), arr(0x9000, 1000)
    fast = cf.make_fast_launch(_ArrayBackend(), iron_exp, variant, (a, out), {}, (1000, 1, 1), (256, 1, 1),
                               {"a": 1000, "out": 1000})
    assert fast((a, out)) is True
    call = recorder.calls[-1]
    assert call[8].value == 777  # Iron's stream
    assert _pointer_arg(call, 0) == 0x1000 and _pointer_arg(call, 1) == 0x9000
    view = arr(0x5000, 1000, offset=8)
    assert fast((view, out)) is True and _pointer_arg(recorder.calls[-1], 0) == 0x5000 + 32
    launched = len(recorder.calls)
    assert fast((arr(0x1000, 999), out)) is False  # too small for the grid
    assert fast((arr(0x1000, 1000, dtype=iron.f16), out)) is False
    assert fast((arr(0x1000, 1000, backend="hip-on-cuda"), out)) is False
    assert fast((arr(0x9000, 1000), out)) is False  # the same memory as the written out: the full path refuses it
    assert fast((FakeTensor(1000, 0x1000), out)) is False  # a torch tensor where an Array was
    assert len(recorder.calls) == launched
    mixed = cf.make_fast_launch(_ArrayBackend(), iron_exp, variant, (FakeTensor(1000, 0x1000), out), {},
                                (1000, 1, 1), (256, 1, 1), {"a": 1000, "out": 1000})
    assert mixed is None  # torch beside Arrays: which stream is the full path's call


class _Maps:
    """Stands in for cuda_tma.TensorMaps: records each lookup, answers an address made from its arguments."""

    def __init__(self, refuse=False):
        self.calls, self.refuse = [], refuse

    def pointer(self, spec, address, length, scalars, stream, kernel):
        from iron.errors import LaunchError

        if self.refuse:
            raise LaunchError("misaligned")
        self.calls.append((spec.buffer, address, length, dict(scalars), stream, kernel))
        return 0x100000 + 0x1000 * len(self.calls)


class _TmaBackend(_Backend):
    def __init__(self, maps):
        self.maps = maps

    def emitted(self, variant):
        return emit_cuda(variant.kernel, arch="sm_90")

    def tensor_map_cache(self):
        return self.maps


@pytest.mark.parametrize("refuse", [False, True])
def test_fast_path_looks_up_copy_engine_descriptors_per_launch(recorder, refuse):
    """gemm_tma's descriptors (KernelSource.tensor_maps) follow the buffers and the view's scalars: the generated
    launcher asks for them at each call, after writing the buffer slots, and passes them after the grid sizes; a
    view the engine cannot describe sends the call back to the full path (which refuses it, located)."""
    from iron.std.gemm_tma import gemm_tma

    maps = _Maps(refuse)
    variant = gemm_tma.variant(iron.f16, (128, 256, 4, False))
    a, b = FakeTensor(512 * 256, 0x1000000, F16), FakeTensor(256 * 512, 0x2000000, F16)
    c = FakeTensor(512 * 512, 0x3000000, F16)
    args = (a, b, c, 512, 512, 256, 0, 0, 0, 128, 256, 4, False)
    fast = cf.make_fast_launch(_TmaBackend(maps), gemm_tma, variant, args, {}, (2 * 256, 4, 1), (256, 1, 1), {})
    assert fast is not None
    if refuse:
        assert fast(args) is False and not recorder.calls
        return
    assert fast(args) is True
    call = recorder.calls[-1]
    assert [m[:4] for m in maps.calls] == [("A", 0x1000000, 512 * 256, {"M": 512, "K": 256, "SA": 0}),
                                           ("B", 0x2000000, 256 * 512, {"K": 256, "N": 512, "SB": 0})]
    assert maps.calls[0][4] == 1234 and maps.calls[0][5] == "gemm_tma"
    n = len(variant.kernel.params)  # the kernel's own parameters, then 3 grid sizes, then the descriptors
    assert _pointer_arg(call, n + 3) == 0x101000 and _pointer_arg(call, n + 4) == 0x102000
    a2 = FakeTensor(512 * 256, 0x4000000, F16)
    assert fast((a2, *args[1:])) is True and maps.calls[-2][1] == 0x4000000
