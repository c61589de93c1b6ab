"""A stand-in for PyObjC's ``Metal`` module that executes dispatches on the CPU model of Metal.

It implements only the calls ``iron/runtime/metal.py`` makes, with PyObjC's spelling (selectors with underscores,
out-parameters returned as a second tuple element). ``commit`` runs the dispatched kernel through the msl-cpu
driver, using exactly what the runtime bound: the buffer at each index, the bytes set at each index, the threadgroup
memory lengths and the dispatch sizes -- so a wrong index, a wrong scalar encoding, a threadgroup array left unsized
or a wrong group count gives wrong results or an assertion here. The library source must be an MSL text the test
registered (``known``): the runtime must hand Metal the exact bytes Iron emits.
"""

from __future__ import annotations

import ctypes

import numpy as np

MTLLanguageVersion3_0 = 0x30000
MTLLanguageVersion3_1 = 0x30001
MTLMathModeSafe = 0
MTLResourceStorageModeShared = 0


def MTLSizeMake(w, h, d):  # noqa: N802 - Apple's name
    return (int(w), int(h), int(d))


class Recorder:
    def __init__(self):
        self.calls: list[tuple] = []
        self.known: dict[str, object] = {}  # MSL text -> KernelSource (the test registers what Iron emitted)


RECORD = Recorder()


class _Varlist:
    def __init__(self, storage: np.ndarray):
        self.storage = storage

    def as_buffer(self, n):
        return memoryview(self.storage)[:n]


class Buffer:
    def __init__(self, nbytes: int, data: bytes | None = None):
        self.storage = np.zeros(max(nbytes, 1), np.uint8)
        if data is not None:
            self.storage[:len(data)] = np.frombuffer(data, np.uint8)

    def contents(self):
        return _Varlist(self.storage)


class _Size:
    def __init__(self, width):
        self.width = width


class Function:
    def __init__(self, library, name):
        self.library, self.name = library, name


class Library:
    def __init__(self, source):
        self.source = source

    def newFunctionWithName_(self, name):  # noqa: N802
        return Function(self, name)


class Pipeline:
    def __init__(self, fn):
        self.fn = fn

    def maxTotalThreadsPerThreadgroup(self):  # noqa: N802
        return 1024


class Options:
    def init(self):
        return self

    def setLanguageVersion_(self, v):  # noqa: N802
        RECORD.calls.append(("languageVersion", v))

    def setMathMode_(self, v):  # noqa: N802
        RECORD.calls.append(("mathMode", v))


class MTLCompileOptions:
    @staticmethod
    def alloc():
        return Options()


class Encoder:
    def __init__(self, cb):
        self.cb = cb
        self.pipeline = None
        self.buffers: dict[int, tuple[Buffer, int]] = {}
        self.bytes: dict[int, bytes] = {}
        self.tg: dict[int, int] = {}
        self.dispatch = None

    def setComputePipelineState_(self, p):  # noqa: N802
        self.pipeline = p

    def setBuffer_offset_atIndex_(self, buf, offset, index):  # noqa: N802
        self.buffers[index] = (buf, offset)

    def setBytes_length_atIndex_(self, data, length, index):  # noqa: N802
        assert len(data) == length
        self.bytes[index] = bytes(data)

    def setThreadgroupMemoryLength_atIndex_(self, length, index):  # noqa: N802
        assert length % 16 == 0, "Metal wants threadgroup memory lengths in multiples of 16 bytes"
        self.tg[index] = length

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, threads):  # noqa: N802
        self.dispatch = (groups, threads)

    def endEncoding(self):  # noqa: N802
        self.cb.encoders.append(self)


class CommandBuffer:
    def __init__(self):
        self.encoders: list[Encoder] = []

    def computeCommandEncoder(self):  # noqa: N802
        return Encoder(self)

    def commit(self):
        for enc in self.encoders:
            _execute(enc)

    def waitUntilCompleted(self):  # noqa: N802
        pass

    def error(self):
        return None

    def GPUStartTime(self):  # noqa: N802
        return 1.0

    def GPUEndTime(self):  # noqa: N802
        return 1.25


class Queue:
    def commandBuffer(self):  # noqa: N802
        return CommandBuffer()


class Device:
    def name(self):
        return "Fake Metal device (CPU model)"

    def newCommandQueue(self):  # noqa: N802
        return Queue()

    def maxThreadsPerThreadgroup(self):  # noqa: N802
        return _Size(1024)

    def maxThreadgroupMemoryLength(self):  # noqa: N802
        return 32768

    def hasUnifiedMemory(self):  # noqa: N802
        return True

    def newLibraryWithSource_options_error_(self, source, options, error):  # noqa: N802
        RECORD.calls.append(("newLibraryWithSource", source))
        return Library(source), None

    def newComputePipelineStateWithFunction_error_(self, fn, error):  # noqa: N802
        return Pipeline(fn), None

    def newBufferWithBytes_length_options_(self, data, length, options):  # noqa: N802
        assert options == MTLResourceStorageModeShared
        RECORD.calls.append(("newBufferWithBytes", length))
        return Buffer(length, data)

    def newBufferWithLength_options_(self, length, options):  # noqa: N802
        return Buffer(length)


def MTLCreateSystemDefaultDevice():  # noqa: N802
    return Device()


def _execute(enc: Encoder) -> None:
    from iron.runtime import msl_cpu

    fn = enc.pipeline.fn
    src = RECORD.known.get(fn.library.source)
    assert src is not None, "the runtime compiled an MSL text that Iron did not emit"
    assert fn.name == src.entry
    lib = msl_cpu.Library(msl_cpu.build_library(src), src.source)
    keep = []
    args = (ctypes.c_void_p * max(len(src.params), 1))()
    for i, p in enumerate(src.params):
        if p.kind == "buffer":
            assert i in enc.buffers, f"nothing bound at buffer index {i} ({p.name})"
            buf, offset = enc.buffers[i]
            args[i] = buf.storage.ctypes.data + offset
        else:
            assert i in enc.bytes, f"no bytes set at buffer index {i} ({p.name})"
            box = ctypes.create_string_buffer(enc.bytes[i], 16)
            keep.append(box)
            args[i] = ctypes.addressof(box)
    for j, (name, size) in enumerate(src.threadgroup):
        assert enc.tg.get(j, 0) >= size, f"threadgroup index {j} ({name}) sized {enc.tg.get(j)} < {size}"
    tg = (ctypes.c_uint * max(len(src.threadgroup), 1))(*[enc.tg[j] for j in range(len(src.threadgroup))])
    groups, threads = enc.dispatch
    error = ctypes.create_string_buffer(1024)
    rc = lib.launch(args, tg, len(src.threadgroup), (ctypes.c_uint * 3)(*groups), (ctypes.c_uint * 3)(*threads),
                    msl_cpu.simd_width(), 1, 1, error, len(error))
    assert rc == 0, error.value.decode()
