"""Ceilings and verdicts for ``iron bench -v``: %BW of a measured copy ceiling, arithmetic intensity, and whether a
row is launch-, memory-, compute- or latency-bound.

The ceiling is measured, not taken from a data sheet: on CUDA a device-to-device copy in torch; on the CPU backends
(the interpreter, Vulkan on lavapipe — both run on the host's cores and memory) a NumPy copy of a 64 MiB buffer.
Ceilings are measured once per backend and device and cached under the Iron cache directory.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass

import numpy as np

from .baseline import bench_dir

#: a row this close to the launch overhead is dominated by it
LAUNCH_BOUND_FACTOR = 3.0
#: at least this share of the copy ceiling: memory-bound
MEMORY_BOUND_PCT = 50.0
#: FLOP per byte above which a kernel that is not near the copy ceiling is called compute-bound (the ridge point of
#: a device without a measured matrix rate: a conservative figure, between a CPU core's ~4 and an H200's ~200)
COMPUTE_INTENSITY = 8.0


@dataclass
class Ceiling:
    copy_gbps: float
    how: str


def _median_time(fn, repeats: int = 7) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _host_copy_gbps(nbytes: int = 64 << 20) -> float:
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return 2 * nbytes / _median_time(lambda: np.copyto(dst, src)) / 1e9


def _cuda_copy_gbps(nbytes: int = 1 << 30) -> float:
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    samples = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3)
    return 2 * nbytes / statistics.median(samples) / 1e9


def _device_name(backend: str) -> str:
    from ..runtime import get_backend

    info = getattr(get_backend(backend), "info", None)
    try:
        return str(info()["name"]) if info else backend
    except Exception:
        return backend


def copy_ceiling(backend: str, use_cache: bool = True) -> Ceiling:
    """The measured copy bandwidth (read + write bytes per second) that ``%BW`` is relative to."""
    device = _device_name(backend)
    key = f"{backend}:{device}"
    path = bench_dir() / "ceilings.json"
    cached = json.loads(path.read_text()) if path.exists() else {}
    if use_cache and key in cached:
        return Ceiling(**cached[key])
    if backend == "cuda":
        ceiling = Ceiling(_cuda_copy_gbps(), f"device-to-device copy in torch on {device}")
    else:
        ceiling = Ceiling(_host_copy_gbps(), f"NumPy copy of 64 MiB on the host ({backend} runs on the host CPU)")
    cached[key] = {"copy_gbps": ceiling.copy_gbps, "how": ceiling.how}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cached, indent=2))
    tmp.replace(path)
    return ceiling


def verdict(iron_s: float, nbytes: int, flops: int, ceiling_gbps: float, launch_s: float | None) -> str:
    """The bound a row sits against, from its time, its traffic and its work."""
    if launch_s is not None and iron_s < LAUNCH_BOUND_FACTOR * launch_s:
        return "launch-bound"
    if nbytes and 100.0 * nbytes / iron_s / 1e9 / ceiling_gbps >= MEMORY_BOUND_PCT:
        return "memory-bound"
    if nbytes and flops / nbytes >= COMPUTE_INTENSITY:
        return "compute-bound"
    return "latency-bound"
