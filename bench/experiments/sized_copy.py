"""The copy ceiling at a row's own size: torch's device-to-device copy of N bytes (read N, write N), GPU time (CUDA
events behind a sleep kernel), three ways for each size:

- ``memset``: a 256 MiB memset before each repeat (how session 25's first readings were taken: it leaves up to an
  L2 of dirty lines, whose write-back the copy may pay);
- ``read``: a 256 MiB read before each repeat (L2 left clean: the copy's best case);
- ``rotate``: ``roofline.sized_copy_gbps``, what ``iron bench -v``'s %copy divides by since then: each repeat copies
  the next of enough pairs to span 4x the L2, no flush, as the bench's rows are timed (each paying for the lines its
  predecessor left dirty).

``iron bench``'s %BW divides by the copy rate of 4 GiB (launch and ramp lost in it). A 64 MiB row pays the launch,
the ramp-up and the tail in ~20 us, so its reachable rate is lower; this measures how much lower, and how much the
way L2 is emptied changes it. Run: python bench/experiments/sized_copy.py [out.json]; SIZED_MIB="32,64" picks the
bytes copied (MiB each way)."""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, "src")

MIB = tuple(float(v) for v in os.environ.get("SIZED_MIB", "1,4,8,16,32,64,128,512,2048").split(","))


def main() -> None:
    import torch

    from iron.harness.roofline import sized_copy_gbps
    from iron.runtime.cuda_timing import event_seconds

    buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    flushes = {"memset": buf.zero_, "read": lambda: buf.view(torch.int32).sum()}
    rows = []
    for mib in MIB:
        n = int(mib * (1 << 20)) // 4
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        row = {"mib_each_way": mib}
        for name, flush in flushes.items():
            seconds = event_seconds(lambda d=dst, s=src: d.copy_(s), repeats=20, warmup=3, before=flush)
            row[name] = 2 * n * 4 / seconds / 1e9
        assert torch.equal(dst, src)
        row["rotate"] = sized_copy_gbps("cuda", 2 * n * 4)
        rows.append(row)
        print(f"torch copy of {mib:g} MiB each way: memset-flushed {row['memset']:.0f} GB/s, read-flushed "
              f"{row['read']:.0f}, rotated (bench %copy) {row['rotate']:.0f}", flush=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
