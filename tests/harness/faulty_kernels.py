"""Throwaway registrations for the harness tests, made when this module is imported (so that the bench's worker
subprocesses, which import it again, see them too). Not collected by pytest; the ``broken_kernels`` fixture of
``test_cli`` imports it and unregisters everything on teardown.

- ``broken/wrong``: computes a + 1 where the oracle wants a; ``broken/fault``: its launch raises.
- ``crash/exit``: its launch calls ``os._exit(3)``; ``crash/segv``: it sends itself SIGSEGV (a kernel that kills its
  process, as an illegal address or a lost device does); ``crash/good``: a correct kernel between them.
- ``hang/sleep``: its launch sleeps for a minute (a hung kernel, for ``IRON_BENCH_TIMEOUT``).
- ``gpufault/oob``: a real kernel writing 4 GiB past its output (an illegal address on a GPU: run on CUDA only);
  ``gpufault/after``: a correct kernel after it.
- ``sticky/fault``: raises CUDA's illegal-address error and poisons this process as CUDA poisons a context;
  ``sticky/after``: a correct kernel that fails with the same error in a poisoned process.
- ``tuned/two``: add_one launched through ``autotune.tune`` over two configurations (both time on any backend),
  and a line of other stderr noise from the launch.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

import iron
from iron.harness.registry import InputGen, bench, test_kernel

NAMES = ("broken/wrong", "broken/fault", "crash/exit", "crash/segv", "crash/good", "hang/sleep", "sticky/fault",
         "sticky/after", "gpufault/oob", "gpufault/after", "tuned/two")
_POISONED = []  # set by sticky/fault: every later launch in this process fails, as on a CUDA context after a fault


@iron.kernel
def off_by_one(a: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    out[i] = a[i] + 1.0


@iron.kernel
def add_one(a: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    out[i] = a[i] + 1.0


def setup(gen: InputGen):
    return {"a": gen.random(), "out": gen.poisoned()}


def identity(d):
    return d["a"].astype(np.float64)


def plus_one(d):
    return d["a"].astype(np.float64) + 1.0


def launch_off_by_one(d, backend):
    off_by_one[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend)


def launch_add_one(d, backend):
    add_one[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend)


def fault(d, backend):
    raise RuntimeError("device lost (simulated)")


def exit_process(d, backend):
    os._exit(3)


def segfault(d, backend):
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(d, backend):
    time.sleep(60)


@iron.kernel
def write_far(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32], far: int):
    i = iron.program_id(0)
    out[i * far + far] = a[i]


def launch_write_far(d, backend):
    write_far[int(np.prod(d["a"].shape))](d["a"], d["out"], 1 << 30, backend=backend)


def gpu_after(d, backend):
    launch_add_one(d, backend)


def gpu_after_kernel():
    """Stands for add_one."""


def sticky_fault(d, backend):
    _POISONED.append(True)
    raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (simulated)")


def after_sticky(d, backend):
    if _POISONED:
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (simulated, sticky)")
    launch_add_one(d, backend)


def launch_tuned(d, backend):
    import sys

    from iron.frontend.autotune import tune

    print("noise from a launch", file=sys.stderr)
    n = int(np.prod(d["a"].shape))
    cfg = tune("tuned/two", [{"SPLIT": 1}, {"SPLIT": 2}], lambda c: launch_add_one(d, backend), backend=backend,
               dtype="f32", key=(n,))
    assert cfg in ({"SPLIT": 1}, {"SPLIT": 2})
    launch_add_one(d, backend)


def tuned_kernel():
    """Stands for add_one."""


def sticky_kernel():
    pass


def after_kernel():
    """Stands for add_one (registered once already, as crash/good)."""


def hanging_kernel():
    pass


def faulting_kernel():
    """Stands for the kernels of the entries whose launch is the fault itself."""


def exiting_kernel():
    pass


def segfaulting_kernel():
    pass


_ONE = dict(setup=setup, shapes=[(64,)], dtypes=("f32",))
test_kernel("broken/wrong", oracle=identity, launch=launch_off_by_one, **_ONE)(off_by_one)
bench("broken/fault", launch=fault, oracle=identity, **_ONE)(faulting_kernel)
bench("crash/exit", launch=exit_process, oracle=identity, **_ONE)(exiting_kernel)
bench("crash/segv", launch=segfault, oracle=identity, **_ONE)(segfaulting_kernel)
bench("crash/good", launch=launch_add_one, oracle=plus_one, references={"numpy": lambda d: d["a"] + 1},
      bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize, flops=lambda shape: int(np.prod(shape)),
      **_ONE)(add_one)
bench("hang/sleep", launch=hang, oracle=identity, **_ONE)(hanging_kernel)
bench("gpufault/oob", launch=launch_write_far, oracle=identity, **_ONE)(write_far)
bench("gpufault/after", launch=gpu_after, oracle=plus_one, **_ONE)(gpu_after_kernel)
bench("sticky/fault", launch=sticky_fault, oracle=identity, **_ONE)(sticky_kernel)
bench("sticky/after", launch=after_sticky, oracle=plus_one, **_ONE)(after_kernel)
bench("tuned/two", launch=launch_tuned, oracle=plus_one, **_ONE)(tuned_kernel)
