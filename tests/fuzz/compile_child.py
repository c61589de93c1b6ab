"""Compile source-fuzzer kernels for the compile-only targets, in a process of their own:

    python -m tests.fuzz.compile_child ROW SEED [SEED ...]

ROW is one of tests/backends/compile_targets.py's ``COMPILE_ROWS`` (``nvrtc-sm_90``, ``nvrtc-sm_90a``,
``hiprtc-gfx90a``, ``hiprtc-gfx1030``, ``spirv-val``, ``spirv-val-lanes``, ``clang-metal-model``): the row emits the
kernel's variant, builds it and checks the result, as for the conformance kernels, except that warnings pass (the
rows refuse them from Iron's own kernels; a random kernel's dead arrays and self-comparisons earn them). It prints
``try SEED`` before each kernel and ``ok SEED`` or ``error SEED: message`` after it, then ``done``. A compiler
that aborts the process (hipRTC's LLVM did, s36: test_source_compile.py) leaves ``try`` as the last line, which
names the seed; the caller reads it, as ``test_source_compile.py`` does. A sweep: pass it a range of seeds
(``python -m tests.fuzz.compile_child hiprtc-gfx1030 $(seq 0 999)``) and restart it after the last ``try`` when it
dies.
"""

from __future__ import annotations

import re
import sys

import iron

from ..backends.compile_targets import COMPILE_ROWS
from . import runner
from . import source_gen as sg


def compile_one(seed: int, row_name: str) -> None:
    """The kernel of ``seed`` through compile row ``row_name``; raises what the row's build or check raised."""
    program = sg.random_source(seed)
    module = runner.load_program(program)
    variant = module.k.variant(getattr(iron, program.dtype) if program.generic else None, (program.constexpr,), None)
    row = COMPILE_ROWS[row_name]
    emitted = row.emit(variant)
    result = row.build_all({"k": emitted})["k"]
    if isinstance(result, Exception):
        raise result
    try:
        row.check(f"seed {seed}", variant, emitted, result)
    except AssertionError as e:  # the rows also refuse warnings, which a random kernel's dead code earns
        if ERROR.search(str(e)) or "warning" not in str(e):
            raise


#: a compiler's error diagnostic (NVRTC ``k.cu(3): error: ...``, clang ``f.metal:1:2: error: ...``, spirv-val
#: ``error: line 5: ...``); a row's complaint with none of these but a warning is the kernel's own dead code
ERROR = re.compile(r"(^|[\s|:)])(fatal )?error( #\d+(-D)?)?:")


def main(argv: list[str]) -> int:
    row, seeds = argv[0], [int(s) for s in argv[1:]]
    for seed in seeds:
        print(f"try {seed}", flush=True)
        try:
            compile_one(seed, row)
        except Exception as e:  # noqa: BLE001 - any failure is this seed's finding, reported by the caller
            print(f"error {seed}: {type(e).__name__}: {e}".replace("\n", " | "), flush=True)
            continue
        print(f"ok {seed}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
