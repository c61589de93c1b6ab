"""HIP C++ -> AMD code object with hipRTC, through ctypes (no Python bindings needed).

hipRTC needs no GPU and no driver: Debian's ``libamdhip64-dev`` (ROCm 5.2) is enough to compile for any ``gfxNNN`` on
any machine, which is how CI proves that every kernel compiles for AMD. The runtime headers are built into hipRTC,
so the emitted source includes nothing. hipRTC lives in ``libhiprtc.so`` from ROCm 6 and inside ``libamdhip64.so``
before; both are tried.

Options: C++17, ``-ffp-contract=off`` so that ``a * b + c`` is two rounded operations, as on every other backend and
in the interpreter (``IRON_FMAD=1`` allows the contraction, as for CUDA), ``-O3``, and ``--offload-arch`` of the
target. The output is a code object (an ELF for ``amdgcn-amd-amdhsa``) that ``hipModuleLoadData`` takes.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
from collections.abc import Sequence
from functools import lru_cache

from ..errors import CompileError
from .cfamily.printer import KernelSource
from .nvrtc import fmad_enabled

_HINT_MISSING = "install hipRTC: apt-get install libamdhip64-dev (Debian 12 / Ubuntu), or ROCm from AMD"
_LIBRARIES = ("libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.5", "libamdhip64.so", "libamdhip64.so.6",
              "libamdhip64.so.5")
#: clang warnings that are not worth failing a build over: none so far. Everything else in the log fails the tests.
BENIGN_WARNINGS: frozenset[str] = frozenset()


def default_options(fmad: bool | None = None) -> list[str]:
    """The hipRTC options Iron compiles with, before the target (part of any binary cache key)."""
    if fmad is None:
        fmad = fmad_enabled()
    return ["-std=c++17", "-O3", f"-ffp-contract={'fast' if fmad else 'off'}"]


@lru_cache(maxsize=1)
def _hiprtc() -> ctypes.CDLL:
    errors = []
    for name in (os.environ.get("IRON_HIPRTC_LIBRARY") or "", *_LIBRARIES):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.hiprtcCompileProgram  # noqa: B018 -- libamdhip64 without hipRTC (ROCm 6+) lacks it
        except (OSError, AttributeError) as e:
            errors.append(str(e))
            continue
        c_prog_p = ctypes.POINTER(ctypes.c_void_p)
        lib.hiprtcGetErrorString.restype = ctypes.c_char_p
        lib.hiprtcGetErrorString.argtypes = [ctypes.c_int]
        lib.hiprtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.hiprtcCreateProgram.argtypes = [c_prog_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                            ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]
        lib.hiprtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.hiprtcDestroyProgram.argtypes = [c_prog_p]
        for fn in ("hiprtcGetProgramLogSize", "hiprtcGetCodeSize"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        for fn in ("hiprtcGetProgramLog", "hiprtcGetCode"):
            getattr(lib, fn).argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        for fn in ("hiprtcVersion", "hiprtcCreateProgram", "hiprtcCompileProgram", "hiprtcDestroyProgram",
                   "hiprtcGetProgramLogSize", "hiprtcGetCodeSize", "hiprtcGetProgramLog", "hiprtcGetCode"):
            getattr(lib, fn).restype = ctypes.c_int
        return lib
    raise CompileError(f"hipRTC is not available (tried {', '.join(_LIBRARIES)}: {errors[-1] if errors else '?'})",
                       hint=_HINT_MISSING)


def unavailable_reason() -> str | None:
    """None when hipRTC can be used here, else why not (for tests that skip)."""
    try:
        _hiprtc()
    except CompileError as e:
        return e.message
    return None


def hiprtc_version() -> tuple[int, int]:
    """(major, minor) of the hipRTC library in use (part of any binary cache key)."""
    lib = _hiprtc()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.hiprtcVersion(ctypes.byref(major), ctypes.byref(minor)), "hiprtcVersion")
    return major.value, minor.value


def _check(lib, err: int, what: str) -> None:
    if err != 0:
        msg = lib.hiprtcGetErrorString(err)
        raise CompileError(f"hipRTC: {what} failed: {msg.decode(errors='replace') if msg else err}")


_TARGET = re.compile(r"gfx[0-9a-f]{3,4}(:[a-z]+[+-])*")


def compile_hip(source: str | KernelSource, target: str = "gfx90a", options: Sequence[str] | None = None,
                name: str | None = None) -> bytes:
    """Compile HIP C++ for the AMD ``target`` and return the code object.

    ``options`` default to ``default_options()``. A rejected source raises ``CompileError`` carrying hipRTC's log;
    for emitted kernels that is a bug in Iron's HIP emitter, and the message says so.
    """
    return compile_hip_log(source, target, options, name)[0]


#: ROCm 5.2's hipRTC crashes when programs compile concurrently in one process (seen in CI's thread-pooled test):
#: compiles are serialised; run separate processes for parallelism
_COMPILE_LOCK = threading.Lock()


def compile_hip_log(source: str | KernelSource, target: str = "gfx90a", options: Sequence[str] | None = None,
                    name: str | None = None) -> tuple[bytes, str]:
    """``compile_hip``, also returning hipRTC's log (warnings; empty when there are none)."""
    with _COMPILE_LOCK:
        return _compile_hip_log(source, target, options, name)


def _compile_hip_log(source: str | KernelSource, target: str, options: Sequence[str] | None,
                     name: str | None) -> tuple[bytes, str]:
    if isinstance(source, KernelSource):
        name = name or source.entry
        source = source.source
    if not _TARGET.fullmatch(target):
        raise CompileError(f"bad AMD target {target!r}: expected gfxNNN, e.g. gfx90a (CDNA2) or gfx1030 (RDNA2)")
    lib = _hiprtc()
    opts = [*(default_options() if options is None else options), f"--offload-arch={target}"]
    prog = ctypes.c_void_p()
    filename = f"{name or 'iron'}.hip"
    _check(lib, lib.hiprtcCreateProgram(ctypes.byref(prog), source.encode(), filename.encode(), 0, None, None),
           "hiprtcCreateProgram")
    try:
        c_opts = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
        err = lib.hiprtcCompileProgram(prog, len(opts), c_opts)
        log = _log(lib, prog)
        if err != 0:
            raise CompileError(
                f"hipRTC rejected the HIP source of kernel '{name or '?'}' for {target} "
                f"({lib.hiprtcGetErrorString(err).decode(errors='replace')}):\n{log}",
                hint="this is a bug in Iron's HIP emitter; please report it with `iron inspect --backend hip` output")
        size = ctypes.c_size_t()
        _check(lib, lib.hiprtcGetCodeSize(prog, ctypes.byref(size)), "hiprtcGetCodeSize")
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.hiprtcGetCode(prog, buf), "hiprtcGetCode")
        return buf.raw[: size.value], log
    finally:
        lib.hiprtcDestroyProgram(ctypes.byref(prog))


def warnings_in(log: str) -> list[str]:
    """The compiler warnings in a hipRTC log that matter (clang's ``warning: ... [-Wname]`` lines, less
    ``BENIGN_WARNINGS``)."""
    found = []
    for line in log.splitlines():
        if "warning:" not in line:
            continue
        flag = re.search(r"\[(-W[\w-]+)", line)
        if flag is None or flag.group(1) not in BENIGN_WARNINGS:
            found.append(line.strip())
    return found


def _log(lib, prog) -> str:
    size = ctypes.c_size_t()
    if lib.hiprtcGetProgramLogSize(prog, ctypes.byref(size)) != 0 or size.value <= 1:
        return ""
    buf = ctypes.create_string_buffer(size.value)
    lib.hiprtcGetProgramLog(prog, buf)
    return buf.value.decode(errors="replace").strip()
