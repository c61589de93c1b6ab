"""`iron bench -v` over several kernel patterns at each kernel's largest device shape only (issue 18's elementwise
target is at 2^28 elements, and the full sweep of every op x dtype x shape does not fit one device call).

    python bench/experiments/bench_largest.py out.json BACKEND DTYPES PATTERN [PATTERN ...]
    python bench/experiments/bench_largest.py out.json cuda f32,f16,bf16 std/elementwise std/cast
"""

from __future__ import annotations

import sys

import iron.harness.runner as runner


def main() -> int:
    out, backend, dtypes, *patterns = sys.argv[1:]
    original = runner.selected

    def largest(pattern=None, **kw):
        entries = [e for p in patterns for e in original(p, **kw)]
        for e in entries:
            if e.device_shapes:
                e.device_shapes = [max(e.device_shapes, key=lambda s: (len(s), s[0] if s else 0))]
        return entries

    runner.selected = largest
    ok = runner.run_bench(None, backend, tuple(dtypes.split(",")), json_path=out, verbose=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
