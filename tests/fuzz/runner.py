"""The differential fuzzer's driver: ``python -m tests.fuzz.runner N`` (what ``scripts/fuzz.sh`` runs).

Each kernel runs on the interpreter (``cpu``, the reference) and on every other backend asked for, and every output
element must agree: bit for bit for integers and for the floats every backend rounds alike (on Vulkan +0.0 equals
-0.0: lavapipe does not keep the sign of zero), NaN equal to NaN; the source generator's ``oa`` output (math
functions, division, fma) within a tolerance. Kinds of kernel: ``source`` (tests/fuzz/source_gen.py: Python source
through the whole pipeline) and ``ir`` (tests/passes/passes_kernel_gen.py's exact profile, as
tests/fuzz/test_differential.py runs it).

A Vulkan device that does not report ``denorm_preserve`` (NVIDIA's driver; docs/backends/vulkan.md) may flush f32
subnormals to zero, inputs and results of any float instruction, and NVIDIA's does so instruction by instruction
(seed 708000410: a bf16 subnormal compared equal to 0.0 in one place and went through ``ceil`` and a product
unflushed in another). There an element that disagrees with the interpreter is also compared with a second
reference, the interpreter on the kernel with its f32 subnormals flushed (``flushed_program``: subnormal float
literals such as the generator's ``1e-40`` spelled ``0.0``; ``flush_subnormals``: f32 and bf16 inputs of subnormal
value sent to a zero of their sign), and one that agrees with it is an *allowance* (counted with lavapipe's, listed
under ``allowed``), not a mismatch: every other element is still compared bit for bit, and one that matches neither
reference is still a mismatch, unless the device agrees with that second reference bit for bit when run on the
flushed kernel and inputs too (``_agrees_without_subnormals``) and every differing element is one whose reference
value the flushing changes (``_only_where_subnormals_count``): then the difference lives only where some
instructions flushed a subnormal and others kept it (seed 710000802), an allowance. The inputs keep their subnormal
(``xf[9]``), so devices that keep subnormals are
still tested on them, and so is everything a flushing device computes away from them. lavapipe reports no
``denorm_preserve`` either but keeps subnormals (measured; the fuzzer found Iron's log and pow of subnormals there),
so it stays strict. A difference of the sign of a zero alone (``[zero signs only]``, tagged only where both sides
are zeros) is the KNOWN row of float min/max on every backend: which zero min(+0.0, -0.0) returns is unspecified
(docs/dsl.md); on Vulkan +0.0 equals -0.0 anyway.

Outcomes are counted apart: ``mismatch`` (a backend disagrees with the interpreter: an Iron bug, or a difference the
docs allow that the generator should avoid), ``refused`` (a CompileError on generated source: a generator bug or an
Iron bug), ``exec_error`` (the interpreter raised an IronError: the generator wrote undefined behaviour),
``internal`` (an exception that is not an IronError, anywhere: an Iron bug), ``hang`` (a launch that did not finish
within ``IRON_VULKAN_TIMEOUT``: an endless loop, or a driver too slow for the kernel; it fails the run like a
mismatch, the kernel was not compared). Each mismatch,
internal error, refusal and hang is saved (source, inputs, outputs, message) under ``--out`` (``IRON_FUZZ_DIR``,
default /tmp/iron-fuzz-failures).

Kernels run in worker processes (``--jobs``, tests/fuzz/workers.py), one kernel at a time each; a worker whose
Vulkan device timed out, or that died, is replaced.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

from iron.errors import CompileError, IronError, LaunchError

from . import source_gen as sg
from . import workers

#: the interpreter and msl-cpu run at lavapipe's subgroup size, so SIMD ops agree across the three; set by ``main``
#: and by the tests' fixtures, never at import (an import would change the width for a whole pytest session)
SIMD_ENV = {"IRON_CPU_SIMD_WIDTH": "8", "IRON_MSL_CPU_SIMD_WIDTH": "8"}

#: the messages of a backend's disagreement (source and IR runners alike: ``compare`` and ``fuzz_ir``)
ZERO_SIGN_STARTS = ("msl-cpu disagrees", "cuda disagrees", "hip disagrees", "vulkan disagrees")
#: Iron bugs the fuzzer found and tests/fuzz/found/ pins (xfail strict): a failure whose message holds the marker is
#: counted as ``known`` (reported, not failing the run). Remove a row with the fix.
KNOWN = [("msl-cpu: CompileError", "undeclared identifier 'simd_lane_id'",
          "MSL simd_shuffle_up/down without simd_lane() (test_found.py::test_msl_shuffle_up_down_without_simd_lane)"),
         ("msl-cpu: CompileError", "no matching constructor for initialization of 'const bfloat'",
          "MSL model: bf16 shared element read into a local (test_found.py::test_msl_bf16_shared_read_into_local)"),
         (ZERO_SIGN_STARTS, "[zero signs only]", "float min/max of +0.0 and -0.0: which zero is unspecified "
          "(docs/dsl.md); the interpreter returns the second operand, msl-cpu and CUDA may return the first "
          "(test_found.py::test_min_max_of_zeros_and_values)"),
         ("", "`break` outside a loop", "helper returning from a loop, inlined into a while condition "
          "(test_found.py::test_helper_with_loop_return_in_while_condition)")]
#: the runtime's message for a launch past IRON_VULKAN_TIMEOUT, and for every later launch of that process
#: (runtime/vulkan_device.py, vulkan_queue.py)
HANG = "cannot use it again"
APPROX_RTOL = 2e-5
APPROX_ATOL = 1e-5
_MODULES = Path(tempfile.gettempdir()) / f"iron-fuzz-src-{os.getpid()}"


def available_backends(wanted: list[str] | None = None) -> list[str]:
    from iron.runtime import unavailable_reason

    names = wanted or ["vulkan", "msl-cpu", "cuda", "hip"]
    return [b for b in names if b != "cpu" and unavailable_reason(b) is None]


# -- source kernels -----------------------------------------------------------------------------------------------

def load_program(program: sg.Program, folder: Path = _MODULES):
    """Write the program to a real file (the front-end reads kernels with inspect.getsource) and import it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"fuzz_k{program.seed}.py"
    path.write_text(program.source)
    spec = importlib.util.spec_from_file_location(f"iron_fuzz_k{program.seed}_{time.monotonic_ns()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source_inputs(program: sg.Program) -> dict[str, np.ndarray]:
    with np.errstate(over="ignore"):
        return _source_inputs(program)


def _source_inputs(program: sg.Program) -> dict[str, np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(program.seed)
    n = sg.IN_SIZE
    xi = rng.integers(-(2**31), 2**31, n, dtype=np.int64).astype(np.int32)
    xi[:8] = [0, 1, -1, 7, -(2**31), 2**31 - 1, 3, -8]
    xi[8:24] = rng.integers(-9, 10, 16)
    xu = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    xu[:6] = [0, 1, 2**31, 2**32 - 1, 5, 31]
    xf = (rng.standard_normal(n) * rng.choice([1, 100, 1e6], n)).astype(np.float32)
    xf[:10] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -2.5, 2.0**31, -(2.0**32), 1e-40]
    halfs = (rng.standard_normal(n) * 50).astype(np.float32)
    halfs[:4] = [0.5, -0.0, np.inf, 70000.0]
    size = sg.N_THREADS * sg.SITES
    arrays = {"xi": xi, "xu": xu, "xf": xf, "xh": halfs.astype(np.float16), "xb": halfs.astype(ml_dtypes.bfloat16),
              "oi": np.full(size, -12345, np.int32), "ou": np.full(size, 0xDEADBEEF, np.uint32),
              "of": np.full(size, np.nan, np.float32), "oh": np.full(size, np.nan, np.float16),
              "ob": np.full(size, np.nan, ml_dtypes.bfloat16), "oa": np.full(size, np.nan, np.float32),
              "ai": rng.integers(-100, 100, sg.ATOMIC_SLOTS).astype(np.int32),
              "au": rng.integers(0, 2**32, sg.ATOMIC_SLOTS, dtype=np.uint64).astype(np.uint32),
              "ap": rng.integers(-1000, 1000, sg.N_THREADS * sg.PRIVATE).astype(np.int32)}
    if program.generic:
        dt = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[program.dtype]
        arrays["xt"] = halfs[: sg.N_THREADS].astype(dt)
        arrays["ot"] = np.full(size, np.nan, dt)
    return arrays


def run_source(module, program: sg.Program, backend: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrays = {k: v.copy() for k, v in inputs.items()}
    scalars = {"si": -7, "su": 3000000000, "sf": 2.75, "C": program.constexpr}
    module.k[sg.N_THREADS, sg.GROUP](**arrays, **scalars, backend=backend)
    return arrays


def _skip_vulkan(module, program: sg.Program) -> str | None:
    """Why lavapipe's allowances rule this kernel out of the Vulkan comparison (None: compare it)."""
    from iron.runtime import get_backend

    from .test_differential import _folds_on_lavapipe

    if "llvmpipe" not in str(get_backend("vulkan").info().get("name", "")):
        return None
    if "zsign" in program.features:
        return "an integer depends on the sign of a float zero"
    import iron

    dtype = getattr(iron, program.dtype) if program.generic else None
    if _folds_on_lavapipe(module.k.variant(dtype, (program.constexpr,), sg.SIMD).kernel):
        return "a float add/sub/mul/div by a zero the driver folds"
    return None


def flushes_subnormals(backend: str) -> bool:
    """Whether ``backend`` may flush f32 subnormals to zero: a Vulkan device that does not report
    ``denorm_preserve`` (the runtime then declares no DenormPreserve mode), except lavapipe, which keeps them."""
    if backend != "vulkan":
        return False
    from iron.runtime import get_backend

    info = get_backend("vulkan").info()
    return "denorm_preserve" not in info.get("features", ()) and "llvmpipe" not in str(info.get("name", ""))


_F32_TINY = float(np.finfo(np.float32).tiny)
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+(?:[eE][-+]?\d+)?)(?![\w.])")


def flushed_program(program: sg.Program) -> sg.Program:
    """``program`` with every float literal of f32 subnormal magnitude (``1e-40``) spelled ``0.0`` (its sign is a
    separate negation in the source, kept)."""
    def flush(m: re.Match) -> str:
        return "0.0" if 0.0 < float(m.group()) < _F32_TINY else m.group()

    return dataclasses.replace(program, source=_FLOAT_LITERAL.sub(flush, program.source))


def flush_subnormals(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The f32 and bf16 arrays with their subnormal values (f32's range: bf16 has f32's exponent) sent to a zero of
    their sign; other arrays as they are."""
    import ml_dtypes

    out = {}
    for name, a in inputs.items():
        if a.dtype in (np.float32, ml_dtypes.bfloat16):
            f = a.astype(np.float32)
            tiny = (f != 0) & (np.abs(f) < _F32_TINY)
            if tiny.any():
                f[tiny] = np.copysign(np.float32(0), f[tiny])
                a = f.astype(a.dtype)
        out[name] = a
    return out


def _as_f32(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype.kind == "V" or a.dtype.itemsize == 2 else a


def differences(name: str, want: np.ndarray, got: np.ndarray, backend: str) -> np.ndarray:
    """Indices where ``got`` disagrees with the interpreter's ``want``."""
    if want.dtype.kind in "iu":
        return np.flatnonzero(want != got)
    w, g = _as_f32(want), _as_f32(got)
    both_nan = np.isnan(w) & np.isnan(g)
    if name == "oa":
        close = np.isclose(g, w, rtol=APPROX_RTOL, atol=APPROX_ATOL) | (np.isinf(w) & (g == w))
        return np.flatnonzero(~(close | both_nan))
    if backend == "vulkan":
        same = w == g
    else:
        same = np.all(want.view(np.uint8).reshape(want.size, -1) == got.view(np.uint8).reshape(got.size, -1), 1)
    return np.flatnonzero(~(same | both_nan))


def lavapipe_zero_fold(want: np.ndarray, got: np.ndarray, bad: np.ndarray) -> bool:
    """Whether every difference is a NaN the interpreter computed where Vulkan gave 0: lavapipe's gallivm folds
    ``x * 0.0`` to 0 (docs/backends/vulkan.md) also where the zero is only known after its own folding (``v - v``,
    ``i % 1`` cast to float) in shapes that tests/fuzz/test_differential.py's ``_driver_constant`` cannot see (nor
    the SPIR-V emitter, which spells the zeros it does see without one)."""
    w, g = _as_f32(want)[bad], _as_f32(got)[bad]
    return want.dtype.kind not in "iu" and bool(np.all(np.isnan(w) & (g == 0)))


def compare(want: dict, got: dict, backend: str, sites: int, allowed: list | None = None,
            flushed: dict | None = None) -> list[str]:
    """Messages for the outputs where ``got`` disagrees with ``want``. ``flushed``: the interpreter's results with f32
    subnormals flushed (``flushes_subnormals`` devices): an element that agrees with it is an allowance."""
    out = []
    for name in want:
        if name.startswith("x"):
            continue
        bad = differences(name, want[name], got[name], backend)
        if bad.size and flushed is not None:
            still = np.intersect1d(bad, differences(name, flushed[name], got[name], backend))
            if still.size < bad.size and allowed is not None:
                first = int(np.setdiff1d(bad, still)[0])
                allowed.append(f"{backend}: {name}: {bad.size - still.size} elements (first {name}[{first}]) as with "
                               "f32 subnormals flushed to zero (the device reports no denorm_preserve)")
            bad = still
        if bad.size and backend == "vulkan" and allowed is not None and lavapipe_zero_fold(want[name], got[name], bad):
            allowed.append(f"vulkan: {name}: {bad.size} NaN -> 0 (lavapipe folds x * 0.0)")
            continue
        if bad.size:
            i = int(bad[0])
            zeros = want[name].dtype.kind not in "iu" and bool(np.all(_as_f32(want[name])[bad] == 0)
                                                                & np.all(_as_f32(got[name])[bad] == 0))
            out.append(f"{backend} disagrees with the interpreter on {name}[{i}] (thread {i // sites}, site "
                       f"{i % sites}): {got[name][i]!r} != {want[name][i]!r} ({bad.size} elements)"
                       + (" [zero signs only]" if zeros else ""))
    return out


def _save(folder: Path, tag: str, report: dict, source: str, arrays: dict[str, dict[str, np.ndarray]]) -> str:
    where = folder / tag
    where.mkdir(parents=True, exist_ok=True)
    (where / "kernel.py").write_text(source)
    (where / "report.json").write_text(json.dumps(report, indent=1, default=str))
    for run, values in arrays.items():
        np.savez(where / f"{run}.npz", **{k: (v.view(np.uint16) if v.dtype.kind == "V" else v)
                                          for k, v in values.items()})
    return str(where)


def fuzz_source(seed: int, backends: list[str], folder: Path) -> dict:
    """One source kernel on the interpreter and ``backends``: {"outcome": ..., "compared": n, ...}."""
    program = sg.random_source(seed)
    report: dict = {"kind": "source", "seed": seed, "outcome": "ok", "compared": 0, "messages": []}
    arrays: dict[str, dict] = {}
    try:
        module = load_program(program)
        inputs = source_inputs(program)
        arrays["inputs"] = inputs
        try:
            arrays["cpu"] = want = run_source(module, program, "cpu", inputs)
        except CompileError as e:
            report.update(outcome="internal" if "internal compiler error" in str(e) else "refused",
                          messages=[str(e)])
        except IronError as e:
            report.update(outcome="exec_error", messages=[str(e)])
        if report["outcome"] == "ok":
            _against(module, program, backends, inputs, want, report, arrays)
    except Exception as e:  # noqa: BLE001 - any non-Iron exception is an Iron (or fuzzer) bug, reported
        report.update(outcome="internal", messages=[f"{type(e).__name__}: {e}\n{traceback.format_exc()}"])
    _known(report)
    if report["outcome"] != "ok":
        report["saved"] = _save(folder, f"source-{seed}", report, program.source, arrays)
    return report


def _known(report: dict) -> None:
    """A mismatch every message of which is a known bug becomes ``known``."""
    if report["outcome"] not in ("mismatch", "internal"):
        return
    bugs = [next((bug for start, marker, bug in KNOWN if m.startswith(start) and marker in m), None)
            for m in report["messages"]]
    if all(bugs):
        report["outcome"] = "known"
        report["known"] = sorted(set(bugs))


def _against(module, program, backends, inputs, want, report, arrays) -> None:
    for backend in backends:
        if backend == "vulkan":
            why = _skip_vulkan(module, program)
            if why:
                report.setdefault("skipped", []).append(f"vulkan: {why}")
                continue
        try:
            want_here = _reference_at(module, program, inputs, want, backend, arrays)
        except IronError as e:  # the kernel at that backend's SIMD width: the interpreter refuses it there
            report.setdefault("skipped", []).append(f"{backend}: the interpreter at its SIMD width: {e}")
            continue
        try:
            arrays[backend] = got = run_source(module, program, backend, inputs)
        except LaunchError as e:  # e.g. past IRON_VULKAN_TIMEOUT, or refused where the interpreter ran it
            _launch_failed(report, backend, e)
            continue
        except CompileError as e:  # a backend that cannot spell what the front-end accepted
            report["outcome"] = "mismatch"
            report["messages"].append(f"{backend}: CompileError: {e}")
            continue
        report["compared"] += 1
        allowed: list[str] = []
        bad = compare(want_here, got, backend, sg.SITES, allowed)
        if bad and flushes_subnormals(backend):
            flushed = _flushed_reference(module, program, inputs, backend, arrays)
            if flushed is not None:
                allowed = []
                bad = compare(want_here, got, backend, sg.SITES, allowed, flushed)
            if (bad and flushed is not None and _only_where_subnormals_count(want_here, flushed, got, backend)
                    and _agrees_without_subnormals(module, program, inputs, backend, flushed, report)):
                allowed.append(f"{backend}: {len(bad)} outputs differ only while a subnormal is in the kernel or "
                               "its inputs (the device flushes f32 subnormals instruction by instruction): "
                               + "; ".join(bad[:3]))
                bad = []
        report.setdefault("allowed", []).extend(allowed)
        if bad:
            report["outcome"] = "mismatch"
            report["messages"] += bad


def _launch_failed(report: dict, backend: str, e: LaunchError) -> None:
    """Record a LaunchError: a ``hang`` (the device lost to this process: ``device_lost``, so its worker is
    replaced) where the launch ran past IRON_VULKAN_TIMEOUT, else a ``mismatch`` (refused where the interpreter ran
    it). A mismatch of another backend of the same kernel outranks the hang."""
    if HANG in str(e):
        report["device_lost"] = True
        if report["outcome"] == "ok":
            report["outcome"] = "hang"
    else:
        report["outcome"] = "mismatch"
    report["messages"].append(f"{backend}: LaunchError: {e}")


def _flushed_module(module, program: sg.Program):
    """``(module, program)`` of ``flushed_program(program)``: a module of its own where the source changed (the
    original's file stays what it compiled)."""
    flushed = flushed_program(program)
    return (load_program(flushed, _MODULES / "ftz") if flushed.source != program.source else module), flushed


def _only_where_subnormals_count(want: dict, flushed: dict, got: dict, backend: str) -> bool:
    """Whether every element where ``got`` differs from the interpreter is one whose reference value itself changes
    when the subnormals are flushed (so the subnormals reach it): a difference anywhere else is never allowed."""
    for name in want:
        if name.startswith("x"):
            continue
        bad = differences(name, want[name], got[name], backend)
        if bad.size and np.setdiff1d(bad, differences(name, want[name], flushed[name], backend)).size:
            return False
    return True


def _agrees_without_subnormals(module, program, inputs, backend, flushed_ref: dict, report: dict) -> bool:
    """Whether ``backend`` agrees with the flushed reference bit for bit when no subnormal enters the kernel (its
    literals and inputs flushed): then its disagreements came from flushing some instructions' subnormals and not
    others (NVIDIA's driver, seed 710000802: ``x == 0.0`` true and ``ceil(x)`` 1 for x = 1e-40 in one kernel). A
    launch past IRON_VULKAN_TIMEOUT marks the device lost, as any other launch does."""
    module, flushed = _flushed_module(module, program)
    try:
        got = run_source(module, flushed, backend, flush_subnormals(inputs))
    except LaunchError as e:
        if HANG in str(e):
            report["device_lost"] = True
        return False
    except IronError:
        return False
    return not compare(flushed_ref, got, backend, sg.SITES)


def _flushed_reference(module, program, inputs, backend, arrays) -> dict | None:
    """The interpreter at ``backend``'s SIMD width on the kernel and inputs with f32 subnormals flushed
    (``flushed_program``, ``flush_subnormals``), kept as ``cpu-ftz@W``; None where the interpreter refuses it (an
    IronError: flushing changed what the kernel does into something undefined, say)."""
    from iron.runtime import get_backend

    key = f"cpu-ftz@{get_backend(backend).simd_width()}"
    if key not in arrays:
        module, flushed = _flushed_module(module, program)
        try:
            arrays[key] = _interpret_at(module, flushed, flush_subnormals(inputs), get_backend(backend).simd_width())
        except IronError:
            return None
    return arrays[key]


def _interpret_at(module, program, inputs, width: int) -> dict:
    old = os.environ.get("IRON_CPU_SIMD_WIDTH")
    os.environ["IRON_CPU_SIMD_WIDTH"] = str(width)
    try:
        return run_source(module, program, "cpu", inputs)
    finally:
        if old is None:
            os.environ.pop("IRON_CPU_SIMD_WIDTH")
        else:
            os.environ["IRON_CPU_SIMD_WIDTH"] = old


def _reference_at(module, program, inputs, want, backend, arrays) -> dict:
    """The interpreter's results at ``backend``'s SIMD width: ``want`` (the run at the interpreter's own width,
    lavapipe's 8 by default) where the widths agree; else a run at that width (NVIDIA's 32 on the H200: SIMD ops,
    ``simd_size()`` and shuffles see 32 lanes there), kept as ``cpu@W``."""
    from iron.runtime import get_backend
    from iron.runtime.cpu import simd_width

    w = get_backend(backend).simd_width()
    if w == simd_width():
        return want
    key = f"cpu@{w}"
    if key not in arrays:
        arrays[key] = _interpret_at(module, program, inputs, w)
    return arrays[key]


# -- IR kernels (the exact profile of the pass tests' generator) --------------------------------------------------

def fuzz_ir(seed: int, backends: list[str], folder: Path) -> dict:
    from iron.ir import print_kernel
    from iron.ir.rewrite import clone_kernel
    from iron.passes import PassManager, default_pipeline
    from iron.runtime import get_backend

    from . import test_differential as td

    report: dict = {"kind": "ir", "seed": seed, "outcome": "ok", "compared": 0, "messages": []}
    text = ""
    try:
        kernel = td.gen.random_kernel(seed, budget=60, exact=True)
        inputs = td._inputs()
        for k in (PassManager(default_pipeline()).run(clone_kernel(kernel)), kernel):
            text = print_kernel(k)
            for backend in backends:
                lavapipe = backend == "vulkan" and "llvmpipe" in str(get_backend("vulkan").info().get("name", ""))
                if lavapipe and td._folds_on_lavapipe(k):
                    continue
                simd = get_backend("vulkan").simd_width() if backend == "vulkan" else td.SIMD
                want = td._on("cpu", k, inputs, simd)
                try:
                    got = td._on(backend, k, inputs)
                except LaunchError as e:
                    _launch_failed(report, backend, e)
                    if report.get("device_lost"):
                        raise _Lost from None
                    continue
                report["compared"] += 1
                for name in ("oi", "ou", "of"):
                    bad = td._differences(want[name], got[name], zero_sign=backend != "vulkan")
                    if bad.size:
                        report["outcome"] = "mismatch"
                        zeros = name == "of" and bool(np.all(want[name][bad] == 0) & np.all(got[name][bad] == 0))
                        report["messages"].append(f"{backend} disagrees on {name}[{bad[0]}]: {got[name][bad[0]]!r}"
                                                  f" != {want[name][bad[0]]!r} ({bad.size} elements)"
                                                  + (" [zero signs only]" if zeros else ""))
    except _Lost:  # the kernel that hung is ``text``; nothing more can run on that device in this process
        pass
    except IronError as e:
        report.update(outcome="exec_error", messages=[str(e)])
    except Exception as e:  # noqa: BLE001
        report.update(outcome="internal", messages=[f"{type(e).__name__}: {e}\n{traceback.format_exc()}"])
    _known(report)
    if report["outcome"] != "ok":
        report["saved"] = _save(folder, f"ir-{seed}", report, text, {})
    return report


class _Lost(Exception):
    """A launch of an IR kernel hung: the device is lost to this process, the kernel's other runs are skipped."""


# -- the command line ---------------------------------------------------------------------------------------------

def _one(job: tuple) -> dict:
    kind, seed, backends, folder = job
    start = time.perf_counter()
    report = (fuzz_source if kind == "source" else fuzz_ir)(seed, backends, Path(folder))
    report["seconds"] = time.perf_counter() - start
    return report


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/fuzz.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("n", type=int, nargs="?", default=200, help="kernels to run (split between the kinds)")
    p.add_argument("--backends", default="", help="comma-separated backends to compare with the interpreter "
                   "(default: every one present)")
    p.add_argument("--seed", type=int, default=None, help="first seed (default: fresh; printed for replay)")
    p.add_argument("--kind", choices=["ir", "source", "both"], default="both")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--out", default=os.environ.get("IRON_FUZZ_DIR", "/tmp/iron-fuzz-failures"),
                   help="where reproducers of failures go (IRON_FUZZ_DIR)")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop after this long (the summary counts the kernels that finished)")
    p.add_argument("-v", "--verbose", action="store_true", help="print every failure's messages")
    return p.parse_args(argv)


def _jobs(args, backends: list[str]) -> list[tuple]:
    kinds = ["ir", "source"] if args.kind == "both" else [args.kind]
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy) % 10**9
    args.seed = seed
    per = [args.n // len(kinds) + (1 if i < args.n % len(kinds) else 0) for i in range(len(kinds))]
    jobs = [(kind, seed + i, backends, args.out) for i in range(max(per)) for kind, count in zip(kinds, per)
            if i < count]
    return jobs  # interleaved, so a run cut short (--max-seconds) still has both kinds


def _summary(reports: list[dict], args, backends: list[str], seconds: float) -> str:
    lines = [f"iron fuzz: {len(reports)} kernels (first seed {args.seed}, kinds {args.kind}) on cpu (reference) vs "
             f"{', '.join(backends) or 'nothing'} in {seconds:.0f} s with {args.jobs} workers"]
    for kind in ("ir", "source"):
        mine = [r for r in reports if r["kind"] == kind]
        if not mine:
            continue
        counts = Counter(r["outcome"] for r in mine)
        skipped = sum(len(r.get("skipped", [])) + len(r.get("allowed", [])) for r in mine)
        lines.append(f"  {kind:6}: {len(mine)} kernels, {sum(r['compared'] for r in mine)} comparisons "
                     f"({skipped} skipped for driver allowances), mismatches {counts['mismatch']}, compile refusals "
                     f"{counts['refused']}, interpreter errors {counts['exec_error']}, internal errors "
                     f"{counts['internal']}, known bugs {counts['known']}, hangs {counts['hang']}")
    for r in reports:
        if r["outcome"] != "ok":
            first = r["messages"][0].splitlines()[0] if r["messages"] else ""
            lines.append(f"  {r['outcome']}: {r['kind']} seed {r['seed']} -> {r.get('saved')}: {first[:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    for name, value in SIMD_ENV.items():
        os.environ.setdefault(name, value)
    args = _parse(sys.argv[1:] if argv is None else argv)
    backends = available_backends([b.strip() for b in args.backends.split(",") if b.strip()] or None)
    jobs = _jobs(args, backends)
    print(f"fuzzing {len(jobs)} kernels, first seed {args.seed} (--seed {args.seed} replays), backends cpu + "
          f"{', '.join(backends)}; failures go to {args.out}", flush=True)
    start = time.perf_counter()
    reports = []
    results = workers.reports(jobs, max(args.jobs, 1), _one)
    for i, report in enumerate(results, 1):
        reports.append(report)
        if report["outcome"] != "ok" and args.verbose:
            print(f"{report['outcome']}: {report['kind']} seed {report['seed']}: "
                  + "\n".join(report["messages"])[:3000], flush=True)
        if i % 100 == 0:
            bad = sum(r["outcome"] != "ok" for r in reports)
            print(f"  {i}/{len(jobs)} kernels, {bad} not ok, {time.perf_counter() - start:.0f} s", flush=True)
        if args.max_seconds is not None and time.perf_counter() - start > args.max_seconds:
            print(f"  stopped after {args.max_seconds:.0f} s (--max-seconds)", flush=True)
            break
    results.close()  # stops the workers
    print(_summary(reports, args, backends, time.perf_counter() - start))
    failed = any(r["outcome"] in ("mismatch", "internal", "hang") for r in reports)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
