"""``backend="msl-cpu"``: Iron's MSL executed on the CPU through a C++ model of Metal (issue 6, point 3).

The MSL is the exact text the Metal backend loads and ``iron build --backend metal`` writes (``emit_msl``). It is
compiled unchanged by clang (Debian ``clang++-16``) against ``msl_model/include/metal_model.h`` and the execution
driver ``metal_driver.h``, with a small generated trampoline that unpacks the launch's arguments, into a shared
library loaded with ctypes. The driver runs every threadgroup of a kernel with collectives as truly concurrent OS
threads (barriers and SIMD exchanges really synchronise), SIMD-groups of 32 lanes (``IRON_MSL_CPU_SIMD_WIDTH``: 8,
16, 32 or 64); kernels without collectives run their threads one after another, threadgroups spread over a few
OS threads. Libraries are cached by :func:`iron.runtime.cache.cached_binary` like every backend's binaries (keyed by
the MSL, the trampoline, the model's headers, clang's version and flags; stored with a digest, so a corrupt entry is
rebuilt rather than loaded); each process loads a private copy.

What this proves and what it cannot: see docs/backends/metal.md. In short, it executes the MSL's semantics (types,
conversions, control flow, our own emitter's bugs); it does not prove that Apple's compiler accepts the source, and
says nothing about speed. Buffer accesses are not bounds-checked here (use ``backend="cpu"`` for that).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CompileError, ExecutionError, LaunchError
from ..interp import shared_sizes
from ..ir.variant import uses_collectives
from .arrays import check_writable, host_array
from .backend import Backend
from .cache import cache_key, cached_binary
from .metal import emitted_msl

#: clang flags: IEEE float semantics (no contraction into FMA, no fast math), C++17 as the model needs
FLAGS = ("-x", "c++", "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-ffp-contract=off",
         "-fno-strict-aliasing", "-Wno-unknown-attributes", "-w")
_SCALAR_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "f32": ctypes.c_float, "bool": ctypes.c_bool,
                  "i64": ctypes.c_int64, "u64": ctypes.c_uint64}
#: Metal attribute -> the driver's field (``iron_model::Ids``)
_ATTRIBUTE_FIELDS = {
    "thread_position_in_grid": "thread_position_in_grid",
    "thread_position_in_threadgroup": "thread_position_in_threadgroup",
    "threadgroup_position_in_grid": "threadgroup_position_in_grid",
    "threads_per_threadgroup": "threads_per_threadgroup",
    "threadgroups_per_grid": "threadgroups_per_grid",
    "thread_index_in_simdgroup": "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup": "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup": "threads_per_simdgroup",
}
_LOCK = threading.Lock()
#: this process's folder of loaded libraries (made on first use, removed at exit)
_private: Path | None = None


def find_clangxx() -> str | None:
    """The C++ compiler driver: ``IRON_CLANGXX``, else clang++-16 / clang++ (found next to the model's clang)."""
    override = os.environ.get("IRON_CLANGXX")
    if override:
        return shutil.which(override)
    for name in ("clang++-16", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    return None


@lru_cache(maxsize=1)
def _clang_version(clang: str) -> str:
    try:
        return subprocess.run([clang, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def probe() -> str | None:
    """None when msl-cpu can run kernels here, else why not."""
    if find_clangxx() is None:
        return "no clang++ (install Debian's clang-16, or set IRON_CLANGXX)"
    return None


def simd_width() -> int:
    w = int(os.environ.get("IRON_MSL_CPU_SIMD_WIDTH", "32"))
    if w not in (8, 16, 32, 64):
        raise LaunchError(f"IRON_MSL_CPU_SIMD_WIDTH must be 8, 16, 32 or 64, got {w}")
    return w


def trampoline(src) -> str:
    """C++ that calls the kernel ``src`` (a ``KernelSource`` of the MSL dialect) for one thread: parameter i of
    ``src.params`` is ``args[i]`` (a buffer's data pointer, or a pointer to a scalar / grid size), threadgroup array
    i is ``groupmem[i]``, the attribute parameters come from the driver's ``Ids``."""
    parts = []
    for i, p in enumerate(src.params):
        if p.kind == "buffer":
            parts.append(f"static_cast<{p.ctype}*>(args[{i}])")
        else:
            parts.append(f"*static_cast<const {p.ctype}*>(args[{i}])")
    parts += [f"static_cast<threadgroup {_tg_ctype(src, name)}*>(groupmem[{i}])"
              for i, (name, _) in enumerate(src.threadgroup)]
    for ctype, _, attribute in src.attributes:
        field = _ATTRIBUTE_FIELDS[attribute]
        axis3 = field not in ("thread_index_in_simdgroup", "simdgroup_index_in_threadgroup", "threads_per_simdgroup")
        parts.append(f"ids.{field}" + (".x" if axis3 and ctype == "uint" else ""))
    call = f"{src.entry}(" + ", ".join(parts) + ");"
    return ("static void iron_invoke(void* const* args, void* const* groupmem, const iron_model::Ids& ids) {\n"
            "    (void)args;\n    (void)groupmem;\n    (void)ids;\n"
            f"    {call}\n}}\n\nIRON_MODEL_ENTRY(iron_invoke)\n")


def _tg_ctype(src, name: str) -> str:
    import re

    m = re.search(r"threadgroup (\w+) \*" + re.escape(name) + r" \[\[threadgroup\(", src.source)
    if m is None:
        raise CompileError(f"msl-cpu: threadgroup parameter {name} not found in the MSL of {src.kernel}")
    return m.group(1)


def _headers_digest() -> str:
    from ..codegen.msl_model import INCLUDE_DIR

    h = hashlib.sha256()
    for path in sorted(INCLUDE_DIR.iterdir()):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


#: Each ``threadgroup_barrier`` of kernel.metal, by its line there: the last thread of a group to arrive checks that
#: every thread waiting at a barrier waits at this one. Threads of one group at different barriers is a divergent
#: barrier, an error on Iron's CPU backends (the interpreter's rule); ``_launch_failure`` locates it. (A thread that
#: skipped a barrier and then finished looks like one that returned, which Iron allows: not caught here.)
BARRIER_CHECK = """
namespace iron_model {
inline void barrier_at(int line) {
    Thread& t = me();
    Group& g = *t.group;
    std::unique_lock<std::mutex> lock(g.m);
    g.lanes[t.index].arg = line;
    if (g.at_barrier + g.finished + 1 == g.size) {
        for (unsigned i = 0; i < g.size; ++i) {
            const Lane& l = g.lanes[i];
            if (l.state == AT_BARRIER && l.arg != line) {
                const int lo = l.arg < line ? l.arg : line, hi = l.arg < line ? line : l.arg;
                throw std::runtime_error("divergent barrier at kernel.metal lines " + std::to_string(lo) + " and " +
                                         std::to_string(hi));
            }
        }
    }
    g.wait(lock, t.index, AT_BARRIER);
}
}  // namespace iron_model
#define threadgroup_barrier(flags) ::iron_model::barrier_at(__LINE__)
"""


def translation_unit(src) -> str:
    """The C++ clang compiles (``launch.cpp``): the driver, the barrier check, the kernel's MSL (``kernel.metal``, the
    exact text), the trampoline, and that text again as bytes in ``iron_model_msl``, so a loaded library says what it
    was built from."""
    text = ", ".join(str(b) for b in src.source.encode())
    return ('#include "metal_driver.h"\n' + BARRIER_CHECK + '#include "kernel.metal"\n\n' + trampoline(src)
            + f'\nextern "C" const unsigned char iron_model_msl[] = {{{text}, 0}};\n')


class Library:
    """One compiled kernel: the shared library and the MSL text it was built from (byte for byte)."""

    def __init__(self, path: Path, msl: str):
        self.path = path
        self.msl = msl
        self.dll = ctypes.CDLL(str(path))
        fn = self.dll.iron_model_launch
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint), ctypes.c_uint,
                       ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint), ctypes.c_uint, ctypes.c_int,
                       ctypes.c_uint, ctypes.c_char_p, ctypes.c_uint]
        self.launch = fn

    def compiled_msl(self) -> str:
        """The MSL that clang compiled into this library (read back from the library itself)."""
        return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(self.dll, "iron_model_msl"))).decode()


def build_library(src) -> Path:
    """Compile the MSL of ``src`` (a ``KernelSource``) with the model into a shared library, through the common binary
    cache; returns the path of this process's private copy, ready for ``ctypes.CDLL``."""
    clang = find_clangxx()
    if clang is None:
        raise LaunchError(f"backend 'msl-cpu' is not available: {probe()}")
    unit = translation_unit(src)
    key = cache_key("msl-cpu", src.source, unit, _headers_digest(), FLAGS, _clang_version(clang))
    data = cached_binary("msl-cpu", key, lambda: compile_library(clang, src, unit), checked=True)
    return _private_copy(data, key)


def compile_library(clang: str, src, unit: str) -> bytes:
    """clang's shared library for the translation unit ``unit`` of ``src``, built in a folder of its own (so that
    processes and threads building the same kernel never share a file)."""
    from ..codegen.msl_model import INCLUDE_DIR

    with tempfile.TemporaryDirectory(prefix="iron-msl-cpu-build-") as tmp:
        work = Path(tmp)
        (work / "kernel.metal").write_text(src.source)
        (work / "launch.cpp").write_text(unit)
        cmd = [clang, *FLAGS, "-I", str(INCLUDE_DIR), "-o", str(work / "kernel.so"), str(work / "launch.cpp")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"clang could not compile the MSL of kernel '{src.kernel}' against the CPU model of "
                               f"Metal:\n{proc.stderr.strip()}",
                               hint="this is a bug in Iron's MSL emitter or the model; `iron inspect --backend "
                                    "metal` shows the source")
        return (work / "kernel.so").read_bytes()


def _private_copy(data: bytes, key: str) -> Path:
    """``data`` in a new file of this process's private folder. A new file each time: dlopen hands out the library
    already loaded from a path, and rewriting a file that is mapped would change code that is running."""
    global _private
    with _LOCK:
        if _private is None:
            _private = Path(tempfile.mkdtemp(prefix="iron-msl-cpu-"))
            atexit.register(shutil.rmtree, _private, True)
        fd, name = tempfile.mkstemp(dir=_private, prefix=f"{key[:16]}-", suffix=".so")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name)


class MslCpuBackend(Backend):
    name = "msl-cpu"

    def info(self) -> dict[str, Any]:
        clang = find_clangxx()
        if clang is None:
            raise LaunchError(f"the msl-cpu backend is not available: {probe()}")
        return {"name": "CPU model of Metal (MSL compiled by clang, threadgroups as concurrent threads)",
                "compiler": _clang_version(clang).splitlines()[0], "simd_width": simd_width(),
                "workers": _workers(), "verified": "models Metal's semantics; not Apple's compiler or GPU"}

    def simd_width(self) -> int:
        """The SIMD-group width kernels see (32 as on Apple GPUs; ``IRON_MSL_CPU_SIMD_WIDTH`` changes it)."""
        return simd_width()

    def emitted(self, variant):
        return emitted_msl(variant)

    def source(self, variant, target: str | None = None) -> str:
        return self.emitted(variant).source

    def library(self, variant) -> Library:
        src = self.emitted(variant)
        lib = variant.artifacts.get("msl-cpu")
        if lib is None or lib.msl != src.source:  # built for another IRON_MSL_VERSION
            lib = variant.artifacts["msl-cpu"] = Library(build_library(src), src.source)
        return lib

    def compile(self, variant, target: str | None = None) -> bytes:
        """The shared library (bytes) that runs this variant on the CPU model of Metal."""
        return self.library(variant).path.read_bytes()

    def check_array(self, param: str, value: Any, where) -> np.ndarray:
        return host_array("msl-cpu", param, value, where)

    def launch(self, variant, arrays, scalars, grid, group) -> None:
        k = variant.kernel
        check_writable(k, arrays)
        if any(g == 0 for g in grid):
            return
        lib = self.library(variant)
        src = self.emitted(variant)
        by_source = {p.name: p for p in k.params}
        keep: list[Any] = []
        staged: list[tuple[np.ndarray, np.ndarray]] = []  # (the caller's misaligned array, its aligned copy) if written
        args = (ctypes.c_void_p * max(len(src.params), 1))()
        for i, p in enumerate(src.params):
            if p.kind == "buffer":
                arr = arrays[p.source]
                if arr.ctypes.data % BUFFER_ALIGN:  # a view: the model's 16-byte accesses need an aligned start
                    copy = aligned_copy(arr)
                    if not by_source[p.source].readonly:
                        staged.append((arr, copy))
                    arr = copy
                args[i] = arr.ctypes.data
                keep.append(arr)
                continue
            if p.kind == "grid":
                box: Any = ctypes.c_int32(grid[p.axis])
            else:
                st = by_source[p.source].value.type
                box = _SCALAR_CTYPES[st.name](scalars[p.source])
            keep.append(box)
            args[i] = ctypes.addressof(box)
        if src.runtime_shared:  # threadgroup arrays sized by this launch's values: checked against Metal's 32 KiB
            shared_sizes.lengths(k, scalars, 32 * 1024, "msl-cpu (Metal's limit)", static=src.shared_bytes)
        tg = (ctypes.c_uint * max(len(src.threadgroup), 1))(*src.threadgroup_bytes(scalars))
        groups = (ctypes.c_uint * 3)(*[-(-n // g) for n, g in zip(grid, group)])
        dims = (ctypes.c_uint * 3)(*group)
        concurrent = uses_collectives(k)
        error = ctypes.create_string_buffer(1024)
        rc = lib.launch(args, tg, len(src.threadgroup), groups, dims, simd_width(), int(concurrent), _workers(),
                        error, len(error))
        if rc != 0:
            raise _launch_failure(k, grid, error.value.decode(errors="replace"), src.source)
        for arr, copy in staged:
            arr[...] = copy


#: where every buffer starts (docs/dsl.md: "buffers start 16-byte aligned"; the model's vector accesses are aligned
#: loads): a NumPy or Array view that starts elsewhere runs through an aligned copy, as a misaligned Vulkan view does
BUFFER_ALIGN = 16


def aligned_copy(arr: np.ndarray) -> np.ndarray:
    """A copy of the flat array ``arr`` starting on a BUFFER_ALIGN-byte boundary."""
    raw = np.empty(arr.nbytes + BUFFER_ALIGN, np.uint8)
    start = -raw.ctypes.data % BUFFER_ALIGN
    out = raw[start:start + arr.nbytes].view(arr.dtype)
    out[...] = arr
    return out


#: the model's report of an integer division or remainder by zero (``iron_model::divisor`` in metal_driver.h)
_ZERO_DIVISOR = re.compile(r"zero divisor at line (\d+), thread_position_in_grid (\d+),(\d+),(\d+)")


#: the barrier check's report (``BARRIER_CHECK``): two lines of kernel.metal, and the driver's threadgroup
_DIVERGENT = re.compile(r"divergent barrier at kernel.metal lines (\d+) and (\d+)(?: \(threadgroup ([\d,]+)\))?")


def _launch_failure(kernel, grid, why: str, msl: str = "") -> ExecutionError:
    """The ``ExecutionError`` for a launch the model reported failed with ``why``. A zero divisor is located at the
    kernel's ``//`` or ``%`` on the reported source line, a divergent barrier at the first of its ``barrier()`` calls,
    both worded as the interpreter words them."""
    d = _DIVERGENT.search(why)
    if d is not None:
        return _divergent_barrier(kernel, msl, int(d.group(1)), int(d.group(2)), d.group(3))
    m = _ZERO_DIVISOR.search(why)
    if m is None:
        return ExecutionError(f"kernel {kernel.name} failed on msl-cpu: {why}", kernel.loc)
    line, pid = int(m.group(1)), tuple(int(g) for g in m.group(2, 3, 4))
    op = next((o for o in kernel.walk() if o.opcode in ("div", "rem") and o.result.type.is_int
               and o.loc is not None and o.loc.line == line), None)
    what = "integer remainder by zero" if op is not None and op.opcode == "rem" else "integer division by zero"
    thread = pid[0] if tuple(grid[1:]) == (1, 1) else pid
    at = "" if op is not None else f" (source line {line})"
    return ExecutionError(f"{what} in kernel '{kernel.name}', thread program_id {thread}{at}",
                          op.loc if op is not None else kernel.loc)


def _python_line(msl: str, metal_line: int) -> int | None:
    """The kernel's source line of line ``metal_line`` of its MSL: the ``// line N:`` comment at or above it."""
    lines = msl.splitlines()
    for text in reversed(lines[:metal_line]):
        m = re.match(r"\s*// line (\d+):", text)
        if m:
            return int(m.group(1))
    return None


def _divergent_barrier(kernel, msl: str, first: int, second: int, group: str | None) -> ExecutionError:
    barriers = [o for o in kernel.walk() if o.opcode == "barrier" and o.loc is not None]
    lines = [_python_line(msl, n) for n in (first, second)]
    op = next((o for n in lines for o in barriers if o.loc.line == n), None)
    shown = " and ".join(str(n) for n in dict.fromkeys(lines) if n is not None)
    where = f"threadgroup {group}" if group else "a threadgroup"
    return ExecutionError(f"barrier() reached by only part of {where} (divergent control flow): its threads wait at "
                          f"different barriers (lines {shown or '?'}) in kernel '{kernel.name}'",
                          op.loc if op is not None else kernel.loc,
                          "every thread of a group that has not returned must reach the same barrier() calls")


def _workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))

