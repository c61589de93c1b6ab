"""The compile-only targets, one row each: toolchains that check every kernel variant with no device.

A row says how to probe for its toolchain (with the reason it is absent), how to emit a variant for it, how to build
a batch of emitted sources, what a good result is, and which variants it must refuse (table data: the variant's id and
the ``CompileError`` expected). Rows with ``random_examples`` also check the pass tests' random kernels, raw and
optimised. tests/backends/test_compile_targets.py runs every row over every variant.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: NVRTC warnings that unoptimised random IR legitimately triggers: a pointless comparison of an unsigned value with
#: 0 (186), a constant expression that overflows to inf (222), and a loop after an `if` on a constant-true condition
#: that returns (128: "loop is not reachable"); the passes fold all three away in real kernels
NVRTC_BENIGN_ON_RAW_IR = {"186", "222", "128"}

#: kernels whose variant exceeds Metal's 32 KiB of threadgroup memory: the emitter must refuse them, located
_OVER_METAL_THREADGROUP = {
    **{f"kernels.reverse_tiles-{dt}-BLOCK=256-TILE=16384": "over the 32 KiB that msl allows per group"
       for dt in ("f32", "f16", "bf16")},
    # the NVIDIA configuration of std/gemm: three 128 x 128 stages, 60 KiB
    **{f"gemm.gemm-{dt}-BM=128-BN=128-BK=32-WM=2-WN=4-STAGES=3-TRANS_B=True": "over the 32 KiB that msl allows"
       for dt in ("f16", "bf16")},
}


#: kernels with f64 or a 64-bit atomic (tracker issue 15): Metal has neither, so its emitter refuses them, located
_F64_ON_METAL = {f"wide_kernels.{name}-none": "f64 is not supported on Metal" for name in ("f64_ops", "f64_accumulate")}
_F64_ON_METAL["wide_kernels.atomic_add64-none"] = "unsupported op 'atomic_add' on i64 on backend msl"


@dataclass(frozen=True)
class CompileRow:
    """One compile-only target."""

    name: str
    #: None when the toolchain can run here, else why not
    unavailable_reason: Callable[[], str | None]
    #: variant -> what the toolchain takes (may raise the CompileError of an expected refusal)
    emit: Callable[[Any], Any]
    #: {case id: emitted} -> {case id: result}; the default builds them one by one
    build_all: Callable[[dict[str, Any]], dict[str, Any]]
    #: (case id, variant, emitted, result): asserts the result is good
    check: Callable[[str, Any, Any, Any], None]
    #: case id -> regex of the CompileError the emitter must raise for it
    refuses: dict[str, str] = field(default_factory=dict)
    #: how many random kernels (the pass tests' generator) to check, raw and optimised; 0: none
    random_examples: int = 0
    #: (raw or optimised random kernel IR) -> None, asserting it compiles
    check_random: Callable[[Any], None] | None = None


def _pool_map(fn: Callable, items: dict[str, Any]) -> dict[str, Any]:
    """fn over items on a thread pool (the compilers release the GIL); an exception is kept as that item's result."""

    def guarded(value):
        try:
            return fn(value)
        except Exception as e:  # reported by the case's own test
            return e

    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        futures = {key: pool.submit(guarded, value) for key, value in items.items()}
        return {key: f.result() for key, f in futures.items()}


# -- NVRTC: an sm_90 cubin, no warnings (issue 3, point 5) ------------------------------------------------------------


def _nvrtc_unavailable() -> str | None:
    from iron.codegen import nvrtc

    reason = nvrtc.unavailable_reason()
    return f"NVRTC unavailable: {reason}" if reason else None


def _nvrtc_emit(variant):
    from iron.codegen import emit_cuda

    return emit_cuda(variant.kernel)


def _nvrtc_build(sources: dict[str, Any]) -> dict[str, Any]:
    from iron.codegen.nvrtc import compile_cuda_log

    return _pool_map(lambda src: compile_cuda_log(src, arch="sm_90"), sources)


def _nvrtc_check(case: str, variant, src, result) -> None:
    cubin, log = result
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000
    assert log == "", f"NVRTC warnings for {variant.kernel.name}:\n{log}\n{src.source}"


def _nvrtc_random(kernel) -> None:
    from iron.codegen import emit_cuda
    from iron.codegen.nvrtc import compile_cuda_log

    cubin, log = compile_cuda_log(emit_cuda(kernel))
    warnings = re.findall(r"warning #(\d+)", log)
    assert cubin[:4] == b"\x7fELF" and set(warnings) <= NVRTC_BENIGN_ON_RAW_IR, log


def _sm90a_emit(variant):
    """The source the cuda backend makes on an H200 (arch sm_90): wgmma for kernels whose warpgroup_mma qualifies."""
    from iron.codegen import emit_cuda

    return emit_cuda(variant.kernel, arch="sm_90")


def _sm90a_build(sources: dict[str, Any]) -> dict[str, Any]:
    from iron.codegen.nvrtc import PTXAS_VERBOSE, compile_cuda_log, default_options

    wgmma = {case: src for case, src in sources.items() if src.arch == "sm_90a"}  # the rest is the sm_90 row's
    built = _pool_map(lambda src: compile_cuda_log(src, arch="sm_90a", options=[*default_options(), PTXAS_VERBOSE]),
                      wgmma)
    return {case: built.get(case) for case in sources}


def _sm90a_check(case: str, variant, src, result) -> None:
    if result is None:
        assert "wgmma" not in src.source
        return
    cubin, log = result
    assert cubin[:4] == b"\x7fELF" and "wgmma.mma_async" in src.source
    # ptxas's C7515/C7518: the wgmmas would run one at a time
    assert "serialized" not in log and "warning" not in log.lower(), f"{variant.kernel.name}:\n{log}"


# -- hipRTC: the runtime's own compile path, gfx90a (CDNA2, wavefront 64) and gfx1030 (RDNA2, wavefront 32) -----------


def _hiprtc_unavailable() -> str | None:
    from iron.codegen import hiprtc

    reason = hiprtc.unavailable_reason()
    return f"hipRTC unavailable: {reason}" if reason else None


def _hiprtc_job(source: str, entry: str, target: str) -> tuple[str, Any, str]:
    """One hipRTC compile in a worker process: ("ok", code object, log) or ("error", message, "")."""
    from iron.codegen import hiprtc

    try:
        code, log = hiprtc.compile_hip_log(source, target=target, name=entry)
    except Exception as e:  # reported by the case's own test
        return "error", f"{type(e).__name__}: {e}", ""
    return "ok", code, log


def _hiprtc_processes(sources: dict[str, Any], target: str) -> dict[str, Any]:
    """Every source compiled by hipRTC on a pool of processes (ROCm 5.2's hipRTC cannot compile concurrently in
    one process, and a few kernels take minutes: the register-tile attention is ~840 KB of HIP at wavefront 32),
    largest first so the long compiles overlap; a failure is kept as that case's ``CompileError``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from iron import CompileError

    order = sorted(sources, key=lambda case: -len(sources[case].source))
    with ProcessPoolExecutor(max(2, os.cpu_count() or 2), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {case: pool.submit(_hiprtc_job, sources[case].source, sources[case].entry, target) for case in order}
        results = {}
        for case, future in futures.items():
            status, value, log = future.result()
            results[case] = (value, log) if status == "ok" else CompileError(value)
    return results


def _hiprtc_row(target: str) -> CompileRow:
    def emit(variant):
        from iron.runtime.hip import HipBackend

        return HipBackend().emitted(variant, target)

    def build_all(sources: dict[str, Any]) -> dict[str, Any]:
        return _hiprtc_processes(sources, target)

    def check(case: str, variant, src, result) -> None:
        from iron.codegen import hiprtc

        code, log = result
        assert code[:4] == b"\x7fELF" and len(code) > 1000
        assert not hiprtc.warnings_in(log), f"hipRTC warnings for {case} on {target}:\n{log}\n{src.source}"

    return CompileRow(f"hiprtc-{target}", _hiprtc_unavailable, emit, build_all, check)


# -- spirv-val --target-env vulkan1.2 (issue 4, points 1 and 4): the plain module and the lanes module ----------------


def _spirv_val_unavailable() -> str | None:
    return None if shutil.which("spirv-val") else "spirv-val is not on PATH"


def _spirv_emit(variant):
    from iron.codegen.spirv import emit_spirv

    return emit_spirv(variant.kernel)


def _spirv_build(modules: dict[str, Any]) -> dict[str, Any]:
    from iron.codegen.spirv import validate

    return _pool_map(validate, modules)


def _spirv_check(case: str, variant, module, err) -> None:
    from iron.codegen.spirv import disassemble, emit_spirv

    ir = variant.kernel
    assert err is None, f"spirv-val rejects {ir.name}:\n{err}\n{disassemble(module)}"
    assert module.entry == ir.name
    assert [b.binding for b in module.buffers] == list(range(len(module.buffers)))
    assert [p.name for p in module.push[-3:]] == ["iron_n0", "iron_n1", "iron_n2"]
    # 4-byte fields packed, 8-byte ones (i64, u64, f64) 8-aligned
    end = max(p.offset + (8 if p.dtype.is_wide else 4) for p in module.push)
    assert module.push_size == end and all(p.offset % (8 if p.dtype.is_wide else 4) == 0 for p in module.push)
    assert emit_spirv(ir).words == module.words  # emission is a pure function of the IR


def _lanes_emit(variant):
    """The lanes module (several elements per invocation) of a kernel that has one, else None."""
    from iron.codegen.spirv import emit_spirv, lanes_plan

    plan = lanes_plan(variant.kernel)
    return None if plan is None else (plan, emit_spirv(variant.kernel, lanes=plan))


def _lanes_build(emitted: dict[str, Any]) -> dict[str, Any]:
    from iron.codegen.spirv import validate

    return _pool_map(lambda e: None if e is None else validate(e[1]), emitted)


def _lanes_check(case: str, variant, emitted, err) -> None:
    from iron.codegen.spirv import disassemble, emit_spirv

    if emitted is None:
        return  # no lanes module for this kernel
    plan, module = emitted
    ir = variant.kernel
    assert err is None, f"spirv-val rejects the lanes module of {ir.name}:\n{err}\n{disassemble(module)}"
    assert module.lanes == plan.width > 1
    assert emit_spirv(ir, lanes=plan).words == module.words


def _spirv_random(kernel) -> None:
    from iron.codegen.spirv import disassemble, emit_spirv, validate

    module = emit_spirv(kernel)
    err = validate(module)
    assert err is None, f"{err}\n{disassemble(module)}"


# -- clang against the project's model of Metal (issue 6, point 5) ---------------------------------------------------


def _clang_unavailable() -> str | None:
    from iron.codegen.msl_model import find_clang

    return None if find_clang() else "clang not installed (apt-get install clang-16)"


def _msl_emit(variant) -> str:
    from iron.codegen import emit_msl

    return emit_msl(variant.kernel).source


def _clang_build(sources: dict[str, str]) -> dict[str, Any]:
    """A few clang processes, several files each, so the whole table costs seconds: (exit status, that file's
    diagnostics) per case."""
    from iron.codegen.msl_model import clang_command, find_clang

    clang = find_clang()
    with tempfile.TemporaryDirectory(prefix="iron-msl-all-") as tmp:
        files = {}
        for i, (case, text) in enumerate(sorted(sources.items())):
            path = Path(tmp) / f"v{i}.metal"
            path.write_text(text)
            files[str(path)] = case
        paths = list(files)
        jobs = max(1, min(8, os.cpu_count() or 1))
        chunks = [paths[i::jobs] for i in range(jobs)]

        def run(chunk: list[str]) -> tuple[list[str], str, int]:
            if not chunk:
                return chunk, "", 0
            cmd = clang_command(clang, chunk[0])[:-1] + chunk
            proc = subprocess.run(cmd, capture_output=True, text=True)
            return chunk, proc.stderr, proc.returncode

        results: dict[str, Any] = {}
        with ThreadPoolExecutor(jobs) as pool:
            for chunk, log, rc in pool.map(run, chunks):
                for path in chunk:
                    mine = "\n".join(line for line in log.splitlines() if path in line)
                    failed = rc != 0 and re.search(re.escape(path) + r":\d+:\d+: (fatal )?error", log) is not None
                    results[files[path]] = (1 if failed else 0, mine)
    return results


def _clang_check(case: str, variant, source: str, result) -> None:
    rc, log = result
    assert rc == 0 and "warning" not in log, f"clang on the MSL of {case}:\n{log}\n{source}"


COMPILE_ROWS: dict[str, CompileRow] = {
    row.name: row
    for row in (
        CompileRow("nvrtc-sm_90", _nvrtc_unavailable, _nvrtc_emit, _nvrtc_build, _nvrtc_check,
                   random_examples=15, check_random=_nvrtc_random),
        CompileRow("nvrtc-sm_90a", _nvrtc_unavailable, _sm90a_emit, _sm90a_build, _sm90a_check),
        _hiprtc_row("gfx90a"),
        _hiprtc_row("gfx1030"),
        CompileRow("spirv-val", _spirv_val_unavailable, _spirv_emit, _spirv_build, _spirv_check,
                   random_examples=25, check_random=_spirv_random),
        CompileRow("spirv-val-lanes", _spirv_val_unavailable, _lanes_emit, _lanes_build, _lanes_check),
        CompileRow("clang-metal-model", _clang_unavailable, _msl_emit, _clang_build, _clang_check,
                   refuses={**_OVER_METAL_THREADGROUP, **_F64_ON_METAL}),
    )
}
