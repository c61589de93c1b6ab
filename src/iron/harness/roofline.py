"""Ceilings and verdicts for ``iron bench -v``: %BW of a measured copy ceiling, %FLOP of a measured matrix rate,
arithmetic intensity, and whether a row is launch-, memory-, compute- or latency-bound or under-occupied.

The ceilings are measured, not taken from a data sheet: on CUDA a 4 GiB device-to-device copy and an 8192^3 bf16 matrix
product in torch; on the CPU backends (the interpreter, Vulkan on lavapipe, msl-cpu — all run on the host's cores and
memory) a NumPy copy of a 64 MiB buffer and a 1024^3 f32 NumPy matrix product. Ceilings are measured once per backend
and device and cached under the Iron cache directory.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass

import numpy as np

from ..frontend import kernel
from ..lang import Tensor, f32, num_threads, program_id, vload, vstore
from ..runtime import get_backend
from ..runtime.cache import store_file
from ..runtime.cuda_timing import event_seconds
from ..runtime.device_array import empty
from .baseline import bench_dir

#: a row this close to the launch overhead is dominated by it
LAUNCH_BOUND_FACTOR = 3.0
#: at least this share of the copy ceiling: memory-bound
MEMORY_BOUND_PCT = 50.0
#: at least this share of a copy of the row's own bytes (``sized_copy_gbps``): memory-bound at its size
SIZED_COPY_PCT = 85.0
#: FLOP per byte above which a kernel that is not near the copy ceiling is called compute-bound (the ridge point of
#: a device without a measured matrix rate: a conservative figure, between a CPU core's ~4 and an H200's ~200)
COMPUTE_INTENSITY = 8.0


#: below this share of the GPU's thread slots in use (occupancy), or with fewer groups than multiprocessors, a row
#: that is not near a ceiling is called under-occupied
UNDER_OCCUPIED_PCT = 25.0


@dataclass
class Ceiling:
    copy_gbps: float
    how: str
    #: the measured matrix-multiply rate (GFLOP/s) that ``%FLOP`` is relative to, and how it was measured
    matrix_gflops: float | None = None
    matrix_how: str = ""


def _median_time(fn, repeats: int = 7) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@kernel
def copy_words(src: Tensor[f32], dst: Tensor[f32], n: int):
    """dst = src in 16-byte words, thread t taking words t, t + threads, ... (n a multiple of 4): the copy ceiling's
    kernel on a GPU reached by device arrays."""
    for w in range(program_id(0), n // 4, num_threads(0)):
        vstore(dst, w * 4, vload(src, w * 4, 4))


def _kernel_copy_gbps(backend: str, nbytes: int = 256 << 20) -> float | None:
    """Read + write GB/s of ``copy_words`` over device arrays on ``backend``, by its GPU timer (None without one).
    NVIDIA's Vulkan driver runs vkCmdCopyBuffer at ~850 GB/s on an H200 (2026-12-01), a fifth of what its SMs
    copy: a ceiling from that command alone made kernels look faster than the memory."""
    be = get_backend(backend)
    n = nbytes // 4
    src, dst = empty(n, f32, backend=backend), empty(n, f32, backend=backend)
    threads = min(n // 4, 1 << 20)  # 4 words a thread on 256 MiB: within every device's group count
    seconds = be.gpu_time(lambda: copy_words[threads](src, dst, n, backend=backend), 5)
    return 2 * nbytes / seconds / 1e9 if seconds else None


def _host_copy_gbps(nbytes: int = 64 << 20) -> float:
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    return 2 * nbytes / _median_time(lambda: np.copyto(dst, src)) / 1e9


def _cuda_copy_gbps(nbytes: int = 4 << 30) -> float:
    """Device-to-device copy of ``nbytes`` (4 GiB: large enough that launch and ramp-up are lost in it)."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    seconds = event_seconds(lambda: dst.copy_(src), repeats=7)
    return 2 * nbytes / seconds / 1e9


def sized_copy_gbps(backend: str, nbytes: int) -> float | None:
    """Read + write GB/s of torch's copy of ``nbytes`` in all (half read, half written) on the GPU ``backend`` runs
    on, timed as the bench times its rows: each repeat copies the next of enough source/destination pairs to span
    ``ROTATE_L2_FACTOR`` x the L2, so no repeat reads what L2 kept, and each pays (as a row does) for the lines its
    predecessor left dirty. What a kernel moving that many bytes can reach once launch, ramp-up and tail are paid.
    None where that GPU is not torch's (the CPU backends; a Vulkan or HIP device not NVIDIA's, or no torch)."""
    be = get_backend(backend)
    if not _torch_cuda() or not (be.torch_device or (be.is_gpu() and be.vendor() == "nvidia")) or nbytes < 8:
        return None
    key = (backend, nbytes)
    if key not in _SIZED:
        import torch

        from .measure import MAX_COPIES, ROTATE_L2_FACTOR

        n = max(1, nbytes // 8)  # f32 elements each way
        l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 64 << 20)
        pairs = [(torch.ones(n, device="cuda"), torch.empty(n, device="cuda"))
                 for _ in range(min(MAX_COPIES, max(1, -(-ROTATE_L2_FACTOR * l2 // (8 * n)))))]
        turn = [0]

        def step() -> None:
            src, dst = pairs[turn[0] % len(pairs)]
            turn[0] += 1
            dst.copy_(src)

        # 30 repeats: at ~8 MB (a ~6 us copy) 10 left a spread of about a third within one run (s26: 903 vs 1227
        # GB/s for two rows of the same bytes)
        seconds = event_seconds(step, repeats=30, warmup=3)
        _SIZED[key] = 8 * n / seconds / 1e9
    return _SIZED[key]


_SIZED: dict[tuple[str, int], float] = {}


def _host_matrix_gflops(n: int = 1024) -> float:
    a = np.ones((n, n), dtype=np.float32)
    b = np.ones((n, n), dtype=np.float32)
    return 2 * n**3 / _median_time(lambda: a @ b, repeats=5) / 1e9


def _cuda_matrix_gflops(n: int = 8192) -> float:
    """bf16 matrix product through torch (cuBLAS, tensor cores) on random data: the device's matrix rate."""
    import torch

    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    seconds = event_seconds(lambda: a @ b, repeats=5, warmup=3)
    return 2 * n**3 / seconds / 1e9


def _device_name(backend: str) -> str:
    try:
        return str(get_backend(backend).info()["name"])
    except Exception:
        return backend


def _cached_ceilings(path) -> dict:
    """The ceilings measured before (a cache: one that cannot be read or parsed counts as empty and is rewritten)."""
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return cached if isinstance(cached, dict) else {}


def copy_ceiling(backend: str, use_cache: bool = True) -> Ceiling:
    """The measured copy bandwidth (read + write bytes per second) that ``%BW`` is relative to."""
    device = _device_name(backend)
    key = f"{backend}:{device}"
    path = bench_dir() / "ceilings.json"
    cached = _cached_ceilings(path)
    if use_cache and key in cached:
        try:
            if cached[key].get("matrix_gflops"):
                return Ceiling(**cached[key])
        except (AttributeError, TypeError):  # an entry of another shape: measured again below
            pass
    be = get_backend(backend)
    gpu_copy = None
    if not be.torch_device and be.is_gpu():  # the faster of the API's copy command and a copy kernel
        gpu_copy = max((r for r in (be.copy_gbps(), _kernel_copy_gbps(backend)) if r), default=None)
    if be.torch_device:  # the rows run on torch device tensors: so does the ceiling
        ceiling = Ceiling(_cuda_copy_gbps(), f"device-to-device copy in torch on {device}",
                          _cuda_matrix_gflops(), f"8192^3 bf16 matrix product in torch (cuBLAS) on {device}")
    elif gpu_copy:  # a GPU reached another way (Vulkan): its copy rate through that backend
        matrix, how = None, "not measured (no torch on this GPU)"
        if be.vendor() == "nvidia" and _torch_cuda():
            matrix, how = _cuda_matrix_gflops(), "8192^3 bf16 matrix product in torch (cuBLAS) on the same GPU"
        ceiling = Ceiling(gpu_copy, f"device-to-device copy through {backend} on {device} (the faster of the copy "
                          "command and a 16-byte-per-thread copy kernel)", matrix, how)
    else:
        ceiling = Ceiling(_host_copy_gbps(), f"NumPy copy of 64 MiB on the host ({backend} runs on the host CPU)",
                          _host_matrix_gflops(), "1024^3 f32 matrix product in NumPy (BLAS) on the host")
    cached[key] = {"copy_gbps": ceiling.copy_gbps, "how": ceiling.how, "matrix_gflops": ceiling.matrix_gflops,
                   "matrix_how": ceiling.matrix_how}
    store_file(path, json.dumps(cached, indent=2).encode())  # a cache: one that cannot be written is measured again
    return ceiling


def _torch_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def verdict(iron_s: float, nbytes: int, flops: int, ceiling_gbps: float, launch_s: float | None,
            matrix_gflops: float | None = None, occupancy_pct: float | None = None, groups: int | None = None,
            processors: int | None = None, copy_pct: float | None = None) -> str:
    """The bound a row sits against, from its time, its traffic and its work, and (where the backend reports them)
    its occupancy and grid size: launch-bound, memory-bound, compute-bound, under-occupied or latency-bound.
    ``copy_pct``: the row's rate as a share of a copy of its own bytes (sized_copy_gbps); at ``SIZED_COPY_PCT`` or
    more the row moves its bytes as fast as a copy of them does, so it is memory-bound at its size whatever %BW
    says (an 8 MB row cannot reach the 4 GiB rate), and no occupancy change would help it."""
    if launch_s is not None and iron_s < LAUNCH_BOUND_FACTOR * launch_s:
        return "launch-bound"
    if nbytes and 100.0 * nbytes / iron_s / 1e9 / ceiling_gbps >= MEMORY_BOUND_PCT:
        return "memory-bound"
    if copy_pct is not None and copy_pct >= SIZED_COPY_PCT:
        return "memory-bound"
    if flops and matrix_gflops and 100.0 * flops / iron_s / 1e9 / matrix_gflops >= MEMORY_BOUND_PCT:
        return "compute-bound"
    ridge = matrix_gflops / ceiling_gbps if matrix_gflops else COMPUTE_INTENSITY
    if nbytes and flops / nbytes >= ridge:
        return "compute-bound"
    if (occupancy_pct is not None and occupancy_pct < UNDER_OCCUPIED_PCT) or \
            (groups is not None and processors and groups < processors):
        return "under-occupied"
    return "latency-bound"


def write_plot(rows: list[dict], ceiling: Ceiling | None, path: str, title: str = "iron bench roofline") -> None:
    """A roofline chart of bench rows as a PNG (or any format matplotlib infers from ``path``).

    x: arithmetic intensity (FLOP per byte moved, log); y: achieved GFLOP/s (log). The memory roof is the measured
    copy bandwidth (GB/s × FLOP/B = GFLOP/s), drawn as a line, with the compute-bound intensity
    (:data:`COMPUTE_INTENSITY`) marked where no matrix rate has been measured. One labelled point per row that has
    both traffic and work; rows with no FLOPs, no bytes or an error are listed under the chart instead.
    Raises ImportError naming ``pip install matplotlib`` when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the roofline chart needs matplotlib: pip install matplotlib "
                          "(or pip install 'wh-iron[plot]')") from None
    points, skipped = [], []
    for row in rows:
        label = f"{row['kernel']} {'x'.join(map(str, row['shape']))} {row['dtype']}"
        gflops, gbps = row.get("gflops"), row.get("iron_gbps")
        if row.get("error") or not gflops or not gbps:
            skipped.append(label)
            continue
        points.append((gflops / gbps, gflops, label, row.get("ok", True)))
    fig, ax = plt.subplots(figsize=(10, 6.5))
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p[0] for p in points] or [1.0]
    lo, hi = min(min(xs) / 4, 0.05), max(max(xs) * 4, COMPUTE_INTENSITY * 4)
    if ceiling is not None:
        grid = np.geomspace(lo, hi, 64)
        ax.plot(grid, grid * ceiling.copy_gbps, color="tab:blue",
                label=f"memory roof: {ceiling.copy_gbps:.1f} GB/s ({ceiling.how})")
    ax.axvline(COMPUTE_INTENSITY, color="tab:gray", linestyle="--",
               label=f"compute-bound from {COMPUTE_INTENSITY:g} FLOP/B (no measured matrix rate)")
    for k, (x, y, label, ok) in enumerate(sorted(points)):
        ax.scatter([x], [y], color="tab:green" if ok else "tab:red", zorder=3)
        # neighbours (the shapes of one kernel share an intensity) get staggered labels
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4 - 10 * (k % 3)), fontsize=7)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    if skipped:
        fig.text(0.01, 0.01, "not plotted (no FLOPs or bytes, or failed): " + ", ".join(skipped)[:300], fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
