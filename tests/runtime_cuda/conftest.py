"""The generated-Python fast launcher (runtime/cuda_fast.py) over a recording ctypes driver: no GPU needed. The
``recorder`` fixture swaps the driver library for a ``Recorder`` and the torch stream getter for a constant."""

from __future__ import annotations

import ctypes
import types

import pytest

import iron.runtime.cuda_fast as cf


class Recorder:
    """The driver's two launch entry points: ``calls`` keeps cuLaunchKernel's arguments, ``ex`` a decoded record of
    each cuLaunchKernelEx (grid, block, shared memory, stream, attributes, function, the first two pointers)."""

    def __init__(self):
        self.calls, self.ex = [], []

    def cuLaunchKernel(self, *args):  # noqa: N802 - the driver's names
        self.calls.append(args)
        return 0

    def cuLaunchKernelEx(self, *args):  # noqa: N802
        config = ctypes.cast(args[0].value, ctypes.POINTER(cf.LaunchConfig)).contents
        attr = config.attrs[0] if config.num_attrs else None
        argv = ctypes.cast(args[2].value, ctypes.POINTER(ctypes.c_void_p))
        self.ex.append({"grid": list(config.grid), "block": list(config.block), "shmem": config.shmem,
                        "stream": config.stream, "attrs": [(attr.id, attr.value.flag)] if attr else [],
                        "function": args[1].value,
                        "pointers": [ctypes.cast(argv[i], ctypes.POINTER(ctypes.c_void_p))[0] for i in (0, 1)],
                        "extra": args[3]})
        return 0


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()
    fake_ctypes = types.SimpleNamespace(**{k: getattr(ctypes, k) for k in dir(ctypes) if not k.startswith("__")})
    fake_ctypes.CDLL = fake_ctypes.PyDLL = lambda name: rec
    monkeypatch.setattr(cf, "ctypes", fake_ctypes)
    monkeypatch.setattr(cf, "_torch_stream_getter", lambda: (lambda dev: 1234))
    monkeypatch.setenv("IRON_CUDA_LAUNCHER", "python")  # the generated-Python launcher (the C one: test_fast_c.py)
    return rec
