"""CUDA C++ -> cubin (or PTX) with NVRTC, through NVIDIA's ``cuda.bindings.nvrtc``.

NVRTC needs no GPU and no driver: ``pip install cuda-bindings nvidia-cuda-nvrtc`` is enough to compile for any
``sm_XX`` on any machine, which is how CI proves that every kernel compiles. The emitted source includes no headers
(see ``cfamily/cuda.py``), so no include path is passed.

Options: C++17, and ``--fmad=false`` so that ``a * b + c`` is two rounded operations, as on every other backend
and in the interpreter; ``IRON_FMAD=1`` allows the contraction (faster, and results then differ in the last bits).

:func:`resource_report` compiles with ptxas's verbose flag and reads its log: registers, shared memory, stack frame,
spills and local memory per function (what ``iron inspect --backend cuda --resources`` prints). NVRTC hands the
``--ptxas-options`` to its built-in ptxas, so this needs no CUDA toolkit, no ``cuobjdump`` and no GPU.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from functools import lru_cache

from ..errors import CompileError
from .cfamily.printer import KernelSource

_HINT_MISSING = "install NVRTC into this environment: pip install cuda-bindings nvidia-cuda-nvrtc"


def fmad_enabled() -> bool:
    """Whether FMA contraction is allowed: ``IRON_FMAD=1`` (off by default, so results match across backends)."""
    return os.environ.get("IRON_FMAD", "0").strip().lower() in ("1", "true", "yes", "on")


def default_options(fmad: bool | None = None) -> list[str]:
    """The NVRTC options Iron compiles with (part of any binary cache key)."""
    if fmad is None:
        fmad = fmad_enabled()
    return ["--std=c++17", f"--fmad={'true' if fmad else 'false'}"]


@lru_cache(maxsize=1)
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CompileError(f"NVRTC is not available ({e})", hint=_HINT_MISSING) from None
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # the bindings load libnvrtc lazily: a missing library shows up here
        raise CompileError(f"NVRTC could not be loaded ({type(e).__name__}: {e})", hint=_HINT_MISSING) from None
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC could not be loaded ({err.name})", hint=_HINT_MISSING)
    return nvrtc


def unavailable_reason() -> str | None:
    """None when NVRTC can be used here, else why not (for tests that skip)."""
    try:
        _nvrtc()
    except CompileError as e:
        return e.message
    return None


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library in use (part of any binary cache key)."""
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return major, minor


def supported_archs() -> list[str]:
    """The ``sm_XX`` targets this NVRTC can compile for."""
    nvrtc = _nvrtc()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    _check(nvrtc, err, "nvrtcGetSupportedArchs")
    return [f"sm_{a}" for a in archs]


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC: {what} failed: {msg.decode(errors='replace') if msg else err.name}")


def compile_cuda(source: str | KernelSource, arch: str = "sm_90", options: Sequence[str] | None = None,
                 name: str | None = None) -> bytes:
    """Compile CUDA C++ for ``arch`` and return the cubin (``sm_XX``) or PTX text as bytes (``compute_XX``).

    ``options`` default to ``default_options()``. A rejected source raises ``CompileError`` carrying NVRTC's log;
    for emitted kernels that is a bug in Iron's CUDA emitter, and the message says so.
    """
    return compile_cuda_log(source, arch, options, name)[0]


def compile_cuda_log(source: str | KernelSource, arch: str = "sm_90", options: Sequence[str] | None = None,
                     name: str | None = None) -> tuple[bytes, str]:
    """``compile_cuda``, also returning NVRTC's log (warnings; empty when there are none)."""
    if isinstance(source, KernelSource):
        name = name or source.entry
        source = source.source
    if not (arch.startswith("sm_") or arch.startswith("compute_")) or not arch.split("_", 1)[1].rstrip("af").isdigit():
        raise CompileError(f"bad CUDA target {arch!r}: expected sm_XX (cubin) or compute_XX (PTX), e.g. sm_90")
    nvrtc = _nvrtc()
    opts = [*(default_options() if options is None else options), f"--gpu-architecture={arch}"]
    filename = f"{name or 'iron'}.cu"
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _log(nvrtc, prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(
                f"NVRTC rejected the CUDA source of kernel '{name or '?'}' for {arch} ({err.name}):\n{log}",
                hint="this is a bug in Iron's CUDA emitter; please report it with `iron inspect --backend cuda` "
                     "output")
        if arch.startswith("sm_"):
            err, size = nvrtc.nvrtcGetCUBINSize(prog)
            _check(nvrtc, err, "nvrtcGetCUBINSize")
            buf = b" " * size
            (err,) = nvrtc.nvrtcGetCUBIN(prog, buf)
            _check(nvrtc, err, "nvrtcGetCUBIN")
        else:
            err, size = nvrtc.nvrtcGetPTXSize(prog)
            _check(nvrtc, err, "nvrtcGetPTXSize")
            buf = b" " * size
            (err,) = nvrtc.nvrtcGetPTX(prog, buf)
            _check(nvrtc, err, "nvrtcGetPTX")
            buf = buf.rstrip(b"\0")
        return bytes(buf), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace").strip()


#: the ptxas option that makes it report each function's resources in the log (NVRTC 12 and 13 accept it)
PTXAS_VERBOSE = "--ptxas-options=-v"

_FUNCTION = re.compile(r"Function properties for (\S+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
#: "N bytes <what>" fields of ptxas's report lines, by the name the report gives them
_BYTES = {
    "stack frame": "stack_frame_bytes", "spill stores": "spill_store_bytes", "spill loads": "spill_load_bytes",
    "smem": "shared_bytes", "lmem": "local_bytes", "cumulative stack size": "cumulative_stack_bytes",
}
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_BYTE_FIELD = re.compile(r"(\d+) bytes (stack frame|spill stores|spill loads|smem|lmem|cumulative stack size)")


def _empty_resources(entry: bool) -> dict:
    return {"entry": entry, "registers": 0, "barriers": 0, "shared_bytes": 0, "stack_frame_bytes": 0,
            "spill_store_bytes": 0, "spill_load_bytes": 0, "local_bytes": 0, "cumulative_stack_bytes": 0}


def parse_ptxas_log(log: str) -> dict[str, dict]:
    """Per function (in the log's order), what ``ptxas -v`` reported: ``registers``, ``barriers``, ``shared_bytes``
    (static ``__shared__``), ``stack_frame_bytes``, ``spill_store_bytes``/``spill_load_bytes``, ``local_bytes``
    (older ptxas's ``lmem``), ``cumulative_stack_bytes``, ``entry`` (a ``__global__`` function) and
    ``local_memory``: whether the function touches per-thread local memory at all (a stack frame, spills or lmem),
    which is where a register array indexed at run time goes when ptxas cannot keep it in registers."""
    functions: dict[str, dict] = {}
    entries: set[str] = set()
    current: dict | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entries.add(m.group(1))
            continue
        if m := _FUNCTION.search(line):
            current = functions.setdefault(m.group(1), _empty_resources(m.group(1) in entries))
            continue
        if current is None:
            continue
        if m := _USED.search(line):
            current["registers"] = int(m.group(1))
        if m := _BARRIERS.search(line):
            current["barriers"] = int(m.group(1))
        for count, what in _BYTE_FIELD.findall(line):
            current[_BYTES[what]] = int(count)
    for res in functions.values():
        res["local_memory"] = any(res[k] for k in ("stack_frame_bytes", "spill_store_bytes", "spill_load_bytes",
                                                    "local_bytes"))
    return functions


def resource_report(source: str | KernelSource, arch: str = "sm_90", options: Sequence[str] | None = None,
                    name: str | None = None) -> dict[str, dict]:
    """Compile ``source`` for ``arch`` (an ``sm_XX``: ptxas runs only for machine code) with ptxas's verbose report
    and return it per function name, as :func:`parse_ptxas_log` reads it. ``options`` default to
    ``default_options()`` (the report is of the binary Iron would load)."""
    if not arch.startswith("sm_"):
        raise CompileError(f"a resource report needs machine code: give an sm_XX target, not {arch!r}")
    opts = [*(default_options() if options is None else options), PTXAS_VERBOSE]
    _, log = compile_cuda_log(source, arch, opts, name)
    report = parse_ptxas_log(log)
    if not report:
        # NVRTC 13.0 (the H200's) answers with an empty log when it has assembled the same PTX before in the process
        # (2026-12-01: a changed comment did not help; the PTX must differ): compile again beside a uniquely named
        # empty kernel, whose line is dropped from the report
        if isinstance(source, KernelSource):
            name = name or source.entry
            source = source.source
        marker = f"iron_resource_report_{uuid.uuid4().hex}"
        _, log = compile_cuda_log(f'{source}\nextern "C" __global__ void {marker}() {{}}\n', arch, opts, name)
        report = {k: v for k, v in parse_ptxas_log(log).items() if k != marker}
    if not report:
        raise CompileError(f"NVRTC's log for {arch} has no ptxas resource report (does this NVRTC pass "
                           f"{PTXAS_VERBOSE} to ptxas?):\n{log}")
    return report
