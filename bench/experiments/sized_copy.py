"""The copy ceiling at a row's own size: torch's device-to-device copy of N bytes (read N, write N), L2 flushed
before each repeat, GPU time (CUDA events behind a sleep kernel), for the byte counts of the bench's smaller
memory-bound rows.

``iron bench``'s %BW divides by the copy rate of 4 GiB (launch and ramp lost in it). A 64 MiB row pays the launch,
the ramp-up and the tail in ~20 us, so its reachable rate is lower; this measures how much lower, so that a row's
miss can be read against what a copy of its own bytes achieves (RoPE 4096 x 32 x 128 bf16 moves 2 x 32 MiB).
Run: python bench/experiments/sized_copy.py [out.json]; SIZED_MIB="32,64" picks the bytes copied (MiB each way)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, "src")

MIB = tuple(float(v) for v in os.environ.get("SIZED_MIB", "1,4,8,16,32,64,128,512,2048").split(","))


def main() -> None:
    import torch

    from iron.runtime import get_backend
    from iron.runtime.cuda_timing import event_seconds

    flush = get_backend("cuda").l2_flush()
    rows = []
    for mib in MIB:
        n = int(mib * (1 << 20)) // 4
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        seconds = event_seconds(lambda: dst.copy_(src), repeats=20, warmup=3, before=flush)
        assert torch.equal(dst, src)
        gbps = 2 * n * 4 / seconds / 1e9
        rows.append({"mib_each_way": mib, "us": seconds * 1e6, "gbps": gbps})
        print(f"torch copy of {mib:g} MiB (read + write {2 * mib:g} MiB): {seconds * 1e6:.1f} us = {gbps:.0f} GB/s",
              flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
