"""A fake ``libamdhip64``: the HIP runtime functions the hip backend calls, as Python methods that read and write
their arguments the way the C functions do (out-parameters through pointers, ``void**`` kernel arguments), record
every call, and -- for kernels registered in ``kernels`` -- run the launch in Iron's interpreter with the AMD
device's wavefront as its SIMD width. Device memory is host memory here; a device pointer is the address of a
ctypes buffer the fake allocated.

It checks the launch contract where a real GPU would misbehave: copies must stay inside an allocation, the grid
must be ceil(threads / group) groups per axis, and a function must come from a loaded code object that contains its
name.
"""

from __future__ import annotations

import ctypes
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from iron.codegen import emit_hip
from iron.interp.executor import run_kernel
from iron.runtime.hip import DeviceProps

#: HIP error codes (hip_runtime_api.h) the fake returns
ERRORS = {1: "hipErrorInvalidValue", 2: "hipErrorOutOfMemory", 100: "hipErrorNoDevice",
          101: "hipErrorInvalidDevice", 209: "hipErrorNoBinaryForGpu", 400: "hipErrorInvalidHandle",
          500: "hipErrorNotFound", 719: "hipErrorLaunchFailure"}
_NUMPY_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "f32": ctypes.c_float}


def address(arg: Any) -> int:
    """The address a C function would receive for ``arg``."""
    if arg is None:
        return 0
    if isinstance(arg, int):
        return arg
    if isinstance(arg, ctypes.c_void_p):
        return arg.value or 0
    if isinstance(arg, ctypes.Array | ctypes.Structure):
        return ctypes.addressof(arg)
    return ctypes.cast(arg, ctypes.c_void_p).value or 0  # a ctypes pointer


def elf_size(addr: int) -> int:
    """Size of the ELF64 image at ``addr``, from its header: the section header table ends the file, as it does in
    the code objects hipRTC writes (what a loader that is given only a pointer has to work from)."""
    header = ctypes.string_at(addr, 64)
    assert header[:4] == b"\x7fELF", "hipModuleLoadData was not given an ELF image"
    (shoff,) = struct.unpack_from("<Q", header, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
    return shoff + shentsize * shnum


def stand_in_code_object(source: str, entry: str) -> bytes:
    """An ELF64 image that holds ``entry``'s symbol and a digest of ``source``: what the fake needs of a code object
    (``elf_size`` reads its size from the header), without hipRTC's seconds a kernel."""
    import hashlib

    body = entry.encode() + b"\0" + hashlib.sha256(source.encode()).digest()
    header = bytearray(64)
    header[:8] = b"\x7fELF\x02\x01\x01\x40"  # 64-bit, little-endian, version 1, ELFOSABI_AMDGPU_HSA
    struct.pack_into("<Q", header, 0x28, 64 + len(body))  # e_shoff: the (empty) section header table ends the file
    struct.pack_into("<HH", header, 0x3A, 64, 0)  # e_shentsize, e_shnum
    return bytes(header) + body


@dataclass
class Launch:
    function: int
    entry: str
    blocks: tuple[int, int, int]
    threads: tuple[int, int, int]
    shared_bytes: int
    stream: int
    argv: int  # the void** array's address: valid only during the call, as in C
    args: dict[str, Any] = field(default_factory=dict)  # what ``on_launch`` decoded from it


@dataclass
class FakeHip:
    arch: str = "gfx90a:sramecc+:xnack-"
    warp_size: int = 64
    devices: int = 1
    init_error: int = 0
    #: HIP function name -> the error code it returns instead of working
    fail: dict[str, int] = field(default_factory=dict)
    #: entry name -> the Variant the fake runs in the interpreter when it is launched
    kernels: dict[str, Any] = field(default_factory=dict)
    #: code object -> its Variant (checked before ``kernels``: variants of one kernel share the entry name)
    programs: dict[bytes, Any] = field(default_factory=dict)
    #: called with each Launch during hipModuleLaunchKernel, while the argument array is alive; returns its decoding
    on_launch: Callable[[Launch], dict[str, Any]] | None = None
    calls: list[tuple[str, tuple]] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    loaded: dict[int, bytes] = field(default_factory=dict)
    functions: dict[int, tuple[int, str]] = field(default_factory=dict)
    memory: dict[int, Any] = field(default_factory=dict)  # device pointer -> its ctypes buffer
    filled: dict[int, int] = field(default_factory=dict)  # device pointer -> bytes copied in
    current_device: int = -1

    def _call(self, name: str, *args) -> int:
        self.calls.append((name, args))
        return self.fail.get(name, 0)

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]

    # -- errors, device ---------------------------------------------------------------------------------------------

    def hipGetErrorName(self, err):  # noqa: N802 - HIP's names
        return ERRORS.get(err, "hipErrorUnknown").encode()

    def hipGetErrorString(self, err):  # noqa: N802
        return {101: b"invalid device ordinal", 719: b"unspecified launch failure"}.get(err, b"")

    def hipInit(self, flags):  # noqa: N802
        return self._call("hipInit", flags) or self.init_error

    def hipGetDeviceCount(self, pcount):  # noqa: N802
        err = self._call("hipGetDeviceCount", pcount)
        ctypes.c_int.from_address(address(pcount)).value = self.devices
        return err

    def hipSetDevice(self, index):  # noqa: N802
        err = self._call("hipSetDevice", index)
        if not err:
            if not 0 <= index < self.devices:
                return 101
            self.current_device = index
        return err

    def hipGetDeviceProperties(self, pprops, index):  # noqa: N802
        err = self._call("hipGetDeviceProperties", pprops, index)
        props = DeviceProps.from_address(address(pprops))
        props.name = b"Fake AMD Instinct"
        props.gcnArchName = self.arch.encode()
        props.warpSize = self.warp_size
        props.totalGlobalMem = 64 << 30
        props.sharedMemPerBlock = 64 << 10
        props.multiProcessorCount = 104
        return err

    def hipRuntimeGetVersion(self, pversion):  # noqa: N802
        err = self._call("hipRuntimeGetVersion", pversion)
        ctypes.c_int.from_address(address(pversion)).value = 50221153
        return err

    # -- modules -------------------------------------------------------------------------------------------------

    def hipModuleLoadData(self, pmodule, image):  # noqa: N802
        err = self._call("hipModuleLoadData", pmodule, image)
        if err:
            return err
        addr = address(image)
        handle = 0x1000 + len(self.loaded)
        self.loaded[handle] = ctypes.string_at(addr, elf_size(addr))
        ctypes.c_void_p.from_address(address(pmodule)).value = handle
        return 0

    def hipModuleGetFunction(self, pfunction, module, name):  # noqa: N802
        err = self._call("hipModuleGetFunction", pfunction, module, name)
        if err:
            return err
        code = self.loaded.get(address(module))
        if code is None:
            return 400
        if name + b"\0" not in code:  # the ELF string table holds each kernel's symbol
            return 500
        handle = 0x2000 + len(self.functions)
        self.functions[handle] = (address(module), name.decode())
        ctypes.c_void_p.from_address(address(pfunction)).value = handle
        return 0

    # -- memory --------------------------------------------------------------------------------------------------

    def hipMalloc(self, pptr, size):  # noqa: N802
        err = self._call("hipMalloc", pptr, size)
        if err:
            return err
        buf = ctypes.create_string_buffer(size)
        self.memory[ctypes.addressof(buf)] = buf
        ctypes.c_void_p.from_address(address(pptr)).value = ctypes.addressof(buf)
        return 0

    def _base(self, ptr: int) -> int | None:
        """The allocation holding ``ptr`` (a device array's view points inside one)."""
        if ptr in self.memory:
            return ptr
        return next((b for b, buf in self.memory.items() if b <= ptr < b + ctypes.sizeof(buf)), None)

    def _fits(self, ptr: int, nbytes: int) -> bool:
        base = self._base(ptr)
        return base is not None and ptr + nbytes <= base + ctypes.sizeof(self.memory[base])

    def hipMemcpyHtoD(self, dst, src, nbytes):  # noqa: N802
        err = self._call("hipMemcpyHtoD", dst, src, nbytes)
        if err:
            return err
        if not self._fits(address(dst), nbytes):
            return 1
        ctypes.memmove(address(dst), address(src), nbytes)
        self.filled[address(dst)] = nbytes
        return 0

    def hipMemcpyDtoH(self, dst, src, nbytes):  # noqa: N802
        err = self._call("hipMemcpyDtoH", dst, src, nbytes)
        if err:
            return err
        if not self._fits(address(src), nbytes):
            return 1
        ctypes.memmove(address(dst), address(src), nbytes)
        return 0

    # -- launch --------------------------------------------------------------------------------------------------

    def hipModuleLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, argv, extra):  # noqa: N802
        err = self._call("hipModuleLaunchKernel", f, gx, gy, gz, bx, by, bz, shared, stream, argv, extra)
        if err:
            return err
        if address(f) not in self.functions or address(extra) != 0:
            return 400 if address(f) not in self.functions else 1
        module, entry = self.functions[address(f)]
        launch = Launch(address(f), entry, (gx, gy, gz), (bx, by, bz), shared, address(stream), address(argv))
        self.launches.append(launch)
        if self.on_launch is not None:
            launch.args = self.on_launch(launch)
        variant = self.programs.get(self.loaded[module]) or self.kernels.get(entry)
        if variant is not None:
            return self._run(variant, launch)
        return 0

    def _run(self, variant, launch: Launch) -> int:
        """Run the launch in the interpreter: decode the void** with the emitted parameter list, check the grid."""
        params = emit_hip(variant.kernel, self.warp_size).params
        slots = (ctypes.c_void_p * len(params)).from_address(launch.argv)
        args: dict[str, Any] = {}
        sizes = [0, 0, 0]
        for p, slot in zip(params, slots):
            if p.kind == "buffer":
                ptr = ctypes.c_void_p.from_address(slot).value
                base = self._base(ptr)
                if base is None:
                    return 1
                # a staged NumPy array: the bytes copied in; a device array (or a view into one): the rest of its
                # allocation
                room = self.filled.get(ptr) or ctypes.sizeof(self.memory[base]) - (ptr - base)
                n = room // p.dtype.np_dtype.itemsize
                raw = np.ctypeslib.as_array((ctypes.c_uint8 * (n * p.dtype.np_dtype.itemsize)).from_address(ptr))
                args[p.source] = raw.view(p.dtype.np_dtype)
            elif p.kind == "scalar":
                args[p.source] = p.dtype.np_dtype.type(_NUMPY_CTYPES[str(p.dtype)].from_address(slot).value)
            else:
                sizes[p.axis] = ctypes.c_int32.from_address(slot).value
        if tuple(math.ceil(n / b) for n, b in zip(sizes, launch.threads)) != launch.blocks:
            return 1  # the grid does not cover the threads exactly
        run_kernel(variant.kernel, args, tuple(sizes), launch.threads, self.warp_size)
        return 0

    def hipStreamSynchronize(self, stream):  # noqa: N802
        return self._call("hipStreamSynchronize", stream)
