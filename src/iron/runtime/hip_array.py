"""Device memory of ``iron.Array`` on the HIP backend (issue 16): a ``hipMalloc`` allocation from the backend's pool.

Launches take these arrays by pointer (store address + view offset), with no copies and no wait: the kernel runs on
the null stream, in order with every other launch and copy of the backend, and ``iron.synchronize("hip")``,
``x.numpy()`` or a write to an array wait for it. The memory goes back to the pool when the array (and every view of it)
is gone; later work on it is ordered after earlier work by the same null stream.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np


class HipStore:
    """``nbytes`` of AMD GPU memory (``ptr``: its device address) for one iron Array; the backend does the copies."""

    def __init__(self, backend: Any, nbytes: int):
        self.backend = backend
        self.nbytes = nbytes
        self.device = backend.device().index
        self.ptr, size = backend.allocate(nbytes)
        weakref.finalize(self, backend.release, self.ptr, size)

    def write(self, offset: int, data: np.ndarray) -> None:
        self.backend.copy_to_device(self.ptr + offset, np.ascontiguousarray(data))

    def read(self, offset: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, np.uint8)
        self.backend.copy_from_device(out, self.ptr + offset)
        return out


class HipBuffer:
    """A launch argument already in HIP device memory: its address and size (what ``check_array`` returns)."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr: int, nbytes: int):
        self.ptr, self.nbytes = ptr, nbytes
