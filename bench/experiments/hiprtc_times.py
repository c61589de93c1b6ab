"""hipRTC's compile time per kernel variant (the cases of tests/backends' compile targets), largest sources first,
one at a time in this process: ``python bench/experiments/hiprtc_times.py gfx1030 14 [substring ...]`` times the 14
largest (or those whose case id holds a substring). s34 found every f16 variant 10-25x slower than its bf16 twin
this way (the f16 conversion helpers' branches; docs/developing.md)."""

from __future__ import annotations

import sys
import time

sys.path[:0] = ["src", "."]
from tests.backends.compile_targets import COMPILE_ROWS, _hiprtc_job  # noqa: E402
from tests.backends.variants import make_variant, variants  # noqa: E402


def main() -> None:
    target, count, subs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    row = COMPILE_ROWS["hiprtc-" + target]
    sized = []
    for case in variants():
        if subs and not any(s in case.id for s in subs):
            continue
        try:
            emitted = row.emit(make_variant(*case.values))
        except Exception:  # refused or a front-end error: the test reports it
            continue
        sized.append((len(emitted.source), case.id, emitted))
    sized.sort(key=lambda t: -t[0])
    print(f"{len(sized)} sources, {sum(s for s, _, _ in sized) // 1000} KB", flush=True)
    for size, case, emitted in sized[:count]:
        start = time.time()
        status, _, _ = _hiprtc_job(emitted.source, emitted.entry, target)
        print(f"{time.time() - start:7.1f} s {size // 1000:5d} KB {status} {case}", flush=True)


if __name__ == "__main__":
    main()
