"""DLPack export of device memory (``x.__dlpack__()`` for CUDA arrays, issue 16): a ``"dltensor"`` capsule holding a
``DLManagedTensor`` that points at the array's memory and keeps the array alive until the consumer calls its deleter.

Hand-written with ctypes because nothing Iron depends on builds a DLPack capsule from a raw device pointer
(cuda.core's ``Buffer`` exports bytes only; NumPy exports host memory only). The structures are DLPack's unversioned
ABI (dlpack.h v0.8, what every consumer accepts): DLDevice, DLDataType, DLTensor, DLManagedTensor. A capsule never
consumed is released by its destructor, which calls the deleter itself, as the protocol asks.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

#: DLPack device types
CPU, CUDA = 1, 2
#: DLDataTypeCode by NumPy kind (bf16 has its own code)
_CODES = {"i": 0, "u": 1, "f": 2}
_BFLOAT = 4
_NAME = b"dltensor"
_USED = b"used_dltensor"

#: address of each live DLManagedTensor -> what it keeps alive (the struct, its shape array, the owner)
_LIVE: dict[int, tuple[Any, ...]] = {}

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_DELETER
def _deleter(managed) -> None:
    _LIVE.pop(ctypes.addressof(managed.contents), None)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # consumed capsules are renamed "used_dltensor" and their consumer calls the deleter; an unconsumed one is ours
    if _api.PyCapsule_IsValid(capsule, _NAME):
        address = _api.PyCapsule_GetPointer(capsule, _NAME)
        _LIVE.pop(address, None)


def data_type(dtype: np.dtype) -> DLDataType:
    """The DLPack type of a NumPy dtype (ml_dtypes' bfloat16 included)."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return DLDataType(_BFLOAT, 16, 1)
    if dtype.kind not in _CODES:
        raise BufferError(f"no DLPack type for {dtype}")
    return DLDataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)


def capsule(ptr: int, shape: tuple[int, ...], dtype: np.dtype, device: tuple[int, int], owner: Any) -> Any:
    """A "dltensor" capsule for the C-contiguous array of ``shape`` and ``dtype`` at ``ptr`` on ``device`` (DLPack
    device type, index); ``owner`` is kept alive until the consumer is done with it."""
    managed = DLManagedTensor()
    dims = (ctypes.c_int64 * max(1, len(shape)))(*shape)
    t = managed.dl_tensor
    t.data = ptr
    t.device = DLDevice(*device)
    t.ndim = len(shape)
    t.dtype = data_type(dtype)
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = None  # C-contiguous
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _deleter
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, dims, owner)
    return _api.PyCapsule_New(address, _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def live_exports() -> int:
    """How many exported capsules' memory is still held for a consumer (tests)."""
    return len(_LIVE)
