"""The SASS of gemm_tma (std/gemm_tma.py) for sm_90a: writes the cubin and the instruction counts that show the
copy engine (UTMALDG), the mbarriers (SYNCS) and the warpgroup MMAs (HGMMA). Usage: tma_sass.py OUT_DIR
(run where cuobjdump is: the H200 machine)."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

import iron
from iron.codegen import compile_cuda, emit_cuda
from iron.std.gemm_tma import gemm_tma


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for dtype in (iron.bf16, iron.f16):
        src = emit_cuda(gemm_tma.variant(dtype, (128, 256, 4, False)).kernel, arch="sm_90")
        cubin = out / f"gemm_tma_{dtype}.cubin"
        cubin.write_bytes(compile_cuda(src, arch="sm_90a"))
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        (out / f"gemm_tma_{dtype}.sass").write_text(sass)
        ops = collections.Counter(m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass))
        keep = {k: v for k, v in sorted(ops.items()) if k.split(".")[0] in ("UTMALDG", "HGMMA", "SYNCS", "LDG", "LDGSTS",
                                                                               "STG", "BAR", "WARPGROUP")}
        print(dtype, keep)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
