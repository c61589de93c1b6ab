"""HIP C++ -> AMD code object with hipRTC, through ctypes (no Python bindings needed).

hipRTC needs no GPU and no driver: Debian's ``libamdhip64-dev`` (ROCm 5.2) is enough to compile for any ``gfxNNN`` on
any machine, which is how CI proves that every kernel compiles for AMD. The runtime headers are built into hipRTC,
so the emitted source includes nothing. hipRTC lives in ``libhiprtc.so`` from ROCm 6 and inside ``libamdhip64.so``
before; both are tried.

Options: C++17, ``-ffp-contract=off`` so that ``a * b + c`` is two rounded operations, as on every other backend and
in the interpreter (``IRON_FMAD=1`` allows the contraction, as for CUDA), ``-O3``, and ``--offload-arch`` of the
target. The output is a code object (an ELF for ``amdgcn-amd-amdhsa``) that ``hipModuleLoadData`` takes.

Targets are checked before hipRTC sees them (``check_target``): ROCm 5.2's hipRTC does not reject a processor its
LLVM does not know -- it aborts the whole process (``munmap_chunk(): invalid pointer``) -- so an unknown name is an
error here, and a processor newer than ROCm 5.2 is first compiled once in a child process to learn whether this
hipRTC knows it.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
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

#: AMD processors that the hipRTC of ROCm 5.2 (Debian 12's ``libamdhip64-dev``, the oldest Iron supports) compiles,
#: each checked with a one-line kernel: GCN gfx6-gfx9, CDNA1/2 (gfx908, gfx90a) and RDNA1/2 (gfx101x, gfx103x)
BASELINE_PROCESSORS: frozenset[str] = frozenset(
    "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 gfx805 gfx810 gfx900 "
    "gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 "
    "gfx1033 gfx1034 gfx1035 gfx1036".split())
#: processors added by later ROCm releases (CDNA3 MI300, RDNA3/3.5/4): ROCm 5.2's hipRTC crashes on them, so whether
#: the hipRTC in use knows one is learnt by compiling in a child process (``check_target``)
NEWER_PROCESSORS: frozenset[str] = frozenset(
    "gfx940 gfx941 gfx942 gfx950 gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153 gfx1200 "
    "gfx1201".split())
AMD_PROCESSORS: frozenset[str] = BASELINE_PROCESSORS | NEWER_PROCESSORS
#: target features (``gfx90a:xnack-``) and the processors that have them (LLVM's AMDGPU table; hipRTC 5.2 aborts on
#: a feature the processor lacks, e.g. ``gfx1030:xnack-``, so they are checked here too)
TARGET_FEATURES: dict[str, frozenset[str]] = {
    "xnack": frozenset("gfx801 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx940 gfx941 gfx942 "
                       "gfx950 gfx1010 gfx1011 gfx1012 gfx1013".split()),
    "sramecc": frozenset("gfx906 gfx908 gfx90a gfx940 gfx941 gfx942 gfx950".split()),
}
_PROBE_SOURCE = 'extern "C" __global__ void iron_probe(int* p) { p[0] = 1; }'
_PROBED: dict[tuple[str, str], str | None] = {}


def _processor_order(name: str) -> tuple[int, str]:
    return len(name), name


def check_target(target: str) -> str:
    """``target`` if hipRTC here can compile for it, else a ``CompileError`` saying why.

    A target is a processor (``gfx90a``) optionally followed by feature settings (``gfx90a:sramecc+:xnack-``, as
    ``gcnArchName`` reports it). Unknown processors are refused without calling hipRTC (ROCm 5.2's aborts the
    process on them); one newer than ROCm 5.2 is compiled once in a child process, whose crash is then a message.
    """
    if not _TARGET.fullmatch(target):
        raise CompileError(f"bad AMD target {target!r}: expected gfxNNN, e.g. gfx90a (CDNA2) or gfx1030 (RDNA2)")
    processor, *features = target.split(":")
    if processor not in AMD_PROCESSORS:
        raise CompileError(f"unknown AMD processor {processor!r}; known: "
                           f"{', '.join(sorted(AMD_PROCESSORS, key=_processor_order))}")
    names = [f[:-1] for f in features]
    for name in names:
        if name not in TARGET_FEATURES:
            raise CompileError(f"bad AMD target {target!r}: unknown feature {name!r} (known: xnack, sramecc)")
        if processor not in TARGET_FEATURES[name]:
            raise CompileError(f"bad AMD target {target!r}: {processor} has no {name} setting")
    if len(set(names)) != len(names):
        raise CompileError(f"bad AMD target {target!r}: a feature is set twice")
    if processor in NEWER_PROCESSORS:
        library = _hiprtc()._name
        key = (library, processor)
        if key not in _PROBED:
            _PROBED[key] = _probe_in_child(processor)
        if _PROBED[key] is not None:
            raise CompileError(f"this hipRTC ({library}) cannot compile for {processor}: {_PROBED[key]}",
                               hint="the processor is newer than this ROCm's compiler; install a ROCm release that "
                                    "supports it (libhiprtc from ROCm 6 or later)")
    return target


def _probe_in_child(processor: str) -> str | None:
    """None when a one-line kernel compiles for ``processor`` in a child process, else what went wrong."""
    code = ("import sys; from iron.codegen import hiprtc; "
            "hiprtc._compile_hip_log(hiprtc._PROBE_SOURCE, sys.argv[1], None, 'iron_probe')")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the folder above iron/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
    try:
        r = subprocess.run([sys.executable, "-c", code, processor], capture_output=True, text=True, env=env,
                           timeout=300)
    except subprocess.TimeoutExpired:
        return "a test compile did not finish in 300 s"
    if r.returncode == 0:
        return None
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    last = lines[-1].strip() if lines else "no output"
    how = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
    return f"a one-line test compile failed in a child process ({how}: {last})"


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
    check_target(target)
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
