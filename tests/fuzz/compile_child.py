"""Compile source-fuzzer kernels for the compile-only targets, in a process of their own:

    python -m tests.fuzz.compile_child TARGET SEED [SEED ...]

TARGET is ``sm_90`` (NVRTC, the CUDA source) or a hipRTC processor (``gfx90a``, ``gfx1030``: the HIP source). It
prints ``try SEED`` before each compile and ``ok SEED`` or ``error SEED: message`` after it, then ``done``. A
compiler that aborts the process (hipRTC's LLVM did, s36: test_source_compile.py) leaves ``try`` as the last line,
which names the seed; the caller reads it, as ``test_source_compile.py`` does. A sweep: pass it a range of seeds
(``python -m tests.fuzz.compile_child gfx1030 $(seq 0 999)``) and restart it after the last ``try`` when it dies.
"""

from __future__ import annotations

import sys

import iron
from iron.errors import IronError

from . import runner
from . import source_gen as sg


def compile_one(seed: int, target: str) -> None:
    """The kernel of ``seed`` compiled for ``target``; raises what the compiler or Iron raised."""
    program = sg.random_source(seed)
    module = runner.load_program(program)
    kw = {"C": program.constexpr}
    if program.generic:
        kw["dtype"] = getattr(iron, program.dtype)
    if target.startswith("sm_"):
        from iron.codegen.nvrtc import compile_cuda

        compile_cuda(module.k.source("cuda", **kw), target)
    else:
        from iron.codegen.hiprtc import compile_hip

        compile_hip(module.k.source("hip", **kw), target)


def main(argv: list[str]) -> int:
    target, seeds = argv[0], [int(s) for s in argv[1:]]
    for seed in seeds:
        print(f"try {seed}", flush=True)
        try:
            compile_one(seed, target)
        except IronError as e:
            print(f"error {seed}: {type(e).__name__}: {e}".replace("\n", " | "), flush=True)
            continue
        print(f"ok {seed}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
