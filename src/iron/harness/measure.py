"""Measuring one bench row: Iron's time, the reference's, and the oracle check (what a worker runs per case).

On the host-array backends: the backend's own GPU timer where it has one (``Backend.gpu_time``), else host
wall-clock (median of repeats after a warm-up), against NumPy. On a backend that takes torch device tensors (CUDA):
inputs live on the device as torch tensors, both Iron and the torch reference are timed with CUDA events (median after
a warm-up), and the output is copied back only to check it against the float64 oracle. On another backend whose device
is a GPU (Vulkan on a GPU, HIP, Metal): Iron on device arrays by the backend's timer, beside torch on the same GPU
where it is NVIDIA's (``measure_arrays``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from ..frontend import autotune, kernel
from ..frontend.launch import full_path
from ..ir import types as t
from ..lang import Tensor, f32, program_id
from ..runtime import cuda_timing, get_backend
from ..runtime.device_array import Array, asarray
from .checking import compare


def median_wall(fn, repeats: int, warmup: int = 1) -> float:
    """The median wall time of ``repeats`` calls of ``fn`` after ``warmup`` untimed ones (the first compiles)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _to_torch(arr: np.ndarray):
    import torch

    if arr.dtype == t.bf16.np_dtype:
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(arr).cuda()


def _to_numpy(tensor, like: np.ndarray) -> np.ndarray:
    import torch

    if tensor.dtype == torch.bfloat16:  # NumPy has no bf16: the bits, viewed as ml_dtypes' bfloat16
        return tensor.view(torch.int16).cpu().numpy().view(t.bf16.np_dtype).reshape(like.shape)
    return tensor.cpu().numpy().reshape(like.shape)


def _event_time(fn, repeats: int) -> float:
    """Median GPU seconds of ``fn`` by CUDA events, the host's launch latency kept out (``cuda_timing``)."""
    return cuda_timing.event_seconds(fn, repeats)


#: the inputs of a timed row are cycled through enough copies to span this many times the GPU's L2 cache, so that
#: no repeat reads what the previous one left in L2 (rows larger than that need no copies)
ROTATE_L2_FACTOR = 4
MAX_COPIES = 64


def _rotated_event_time(fns: list, repeats: int) -> float:
    """``_event_time`` with repeat i running ``fns[i % len(fns)]`` (one per copy of the inputs)."""
    count = [0]

    def step():
        fn = fns[count[0] % len(fns)]
        count[0] += 1
        fn()

    return _event_time(step, repeats)


def _input_copies(dev: dict, uses: int = MAX_COPIES) -> list[dict]:
    """``dev`` and enough clones of it that together they exceed ``ROTATE_L2_FACTOR`` times the L2 size (no more
    than ``uses``, the launches that will cycle through them)."""
    import torch

    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 64 << 20)
    nbytes = sum(v.numel() * v.element_size() for v in dev.values()) or 1
    copies = min(MAX_COPIES, uses, max(1, -(-ROTATE_L2_FACTOR * l2 // nbytes)))
    return [dev] + [{k: v.clone() for k, v in dev.items()} for _ in range(copies - 1)]


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


HOST_TIMING = "host wall-clock"
#: what the torch-device path times with
EVENTS_TIMING = "CUDA events"


def on_torch_device(backend: str) -> bool:
    """Whether rows on ``backend`` run on torch device tensors beside the torch reference (CUDA with torch)."""
    return get_backend(backend).torch_device and _have_torch()


def timing_of(backend: str) -> str:
    """How rows on ``backend`` are timed when none reported it (the table's title on an empty sweep)."""
    return EVENTS_TIMING if on_torch_device(backend) else get_backend(backend).timer_name or HOST_TIMING


def _device_time(fn, backend: str, repeats: int) -> tuple[float | None, str]:
    """(seconds, how) of ``fn`` by the backend's own GPU timer, or (None, host wall-clock) where it has none."""
    be = get_backend(backend)
    # rows on a torch-device backend that fall back to NumPy arrays are staged through the host: host clock
    seconds = be.gpu_time(fn, repeats) if be.timer_name and not be.torch_device else None
    return seconds, be.timer_name if seconds is not None else HOST_TIMING


@dataclass
class Measured:
    """One row's measurement: Iron's time and output, how Iron was timed, the input copies the repeats cycled
    through, each reference's time by family (``numpy`` on the host; ``torch``, ``triton`` on CUDA) and, for each
    declared reference that was not timed, why (its package is missing, it raised, or its output failed the
    oracle)."""

    iron_s: float
    out: np.ndarray
    timing: str
    copies: int
    ref_s: dict[str, float] = field(default_factory=dict)
    ref_errors: dict[str, str] = field(default_factory=dict)
    on_device: bool = False  # ran on torch device tensors (CUDA) rather than host arrays


def check_peer(fn, dev: dict, like: np.ndarray, expected: np.ndarray | None, tol: tuple[float, float]
               ) -> str | None:
    """Run a device reference once on a poisoned ``ref_out`` and compare its output with the oracle: None when it
    matches (or there is no oracle), else what went wrong. This call is also the peer's warm-up (Triton compiles
    and autotunes here, outside any timed interval)."""
    dev["ref_out"].fill_(float("nan"))
    try:
        result = fn(dev)
        got = _to_numpy(result if result is not None else dev["ref_out"], like)
    except Exception as e:  # noqa: BLE001 - a broken peer is reported beside the row, which goes on
        return f"raised {type(e).__name__}: {e}"
    if expected is None:
        return None
    comparison = compare(got, expected, tol)
    return None if comparison.ok else f"wrong output, not timed: {comparison.describe()}"


def measure(entry, inputs: dict, backend: str, repeats: int, expected: np.ndarray | None = None,
            tol: tuple[float, float] = (0.0, 0.0)) -> Measured:
    """Time Iron and the references on one row. On CUDA every device reference (torch, triton) is first checked
    against ``expected`` (the oracle's output, within ``tol``): a wrong one is reported, not timed."""
    refs, missing = entry.device_references()
    if refs and on_torch_device(backend):
        dev = {k: _to_torch(v) for k, v in inputs.items()}
        dev["ref_out"] = dev[entry.output].clone()
        sets = _input_copies(dev, repeats + 1)  # rotated, so that L2 does not serve a repeat its inputs
        iron_s = _rotated_event_time([lambda d=d: entry.launch(d, backend) for d in sets], repeats)
        covered = cuda_timing.last_lead_ok
        with full_path():  # once more by the full path: the row's statistics are of the kernel it timed (an
            entry.launch(sets[0], backend)  # autotuned helper's fast launchers bypass the record of the winner)
        out = _to_numpy(dev[entry.output], inputs[entry.output])
        ref_s, errors, peers_covered = time_peers(refs, missing, dev, sets, inputs[entry.output], expected, tol,
                                                  repeats)
        covered = covered and peers_covered
        timing = EVENTS_TIMING if covered else f"{EVENTS_TIMING} (host launch latency included)"
        return Measured(iron_s, out, timing, len(sets), ref_s, errors, on_device=True)
    iron_s, timing = _device_time(lambda: entry.launch(inputs, backend), backend, repeats)
    if iron_s is None:
        iron_s = median_wall(lambda: entry.launch(inputs, backend), repeats)
    host = entry.reference
    ref_s = {"numpy": median_wall(lambda: host(inputs), repeats)} if host else {}
    return Measured(iron_s, inputs[entry.output], timing, 1, ref_s)


def time_peers(refs: dict, missing: dict, dev: dict, sets: list, out: np.ndarray, expected, tol, repeats: int):
    """(seconds per family, why a family was not timed, whether every timing kept the host's launch out): each peer
    checked against the oracle on ``dev`` first (a wrong one is reported, not timed), then timed by CUDA events over
    the rotated input ``sets``."""
    ref_s, errors, covered = {}, dict(missing), True
    for family, fn in refs.items():
        problem = check_peer(fn, dev, out, expected, tol)
        if problem:
            errors[family] = problem
            continue
        ref_s[family] = _rotated_event_time([lambda d=d, fn=fn: fn(d) for d in sets], repeats)
        covered = covered and cuda_timing.last_lead_ok
    return ref_s, errors, covered


# -- rows on a GPU reached without torch tensors (Vulkan on a GPU; HIP and Metal by the same rule), issue 16: Iron on
# device arrays (iron.asarray of the inputs, cycled through copies spanning ROTATE_L2_FACTOR x a 64 MiB L2, as Vulkan
# does not report the cache's size), timed by the backend's GPU timer; the reference torch on the same GPU by CUDA
# events where the device is NVIDIA's and torch sees it (each peer checked against the oracle first), else NumPy on
# the host, and the table says which.

#: the L2 size assumed where the backend cannot report it (the H200 has 50 MiB; larger than most GPUs')
L2_GUESS = 64 << 20
TORCH_REFERENCE = "torch on the same GPU (CUDA events)"
HOST_REFERENCE = "NumPy on the host CPU (host wall-clock)"


def on_gpu_arrays(backend: str) -> bool:
    """Whether rows on ``backend`` run on device arrays of a GPU (not torch tensors, not the host CPU)."""
    be = get_backend(backend)
    return not on_torch_device(backend) and be.timer_name is not None and be.is_gpu()


def torch_same_gpu(backend: str) -> bool:
    """Whether torch can time references on the GPU ``backend`` runs on (an NVIDIA GPU that torch sees)."""
    if get_backend(backend).vendor() != "nvidia" or not _have_torch():
        return False
    import torch

    return torch.cuda.is_available()


#: seconds of back-to-back launches before a GPU row on device arrays is timed: the timer waits for each dispatch,
#: and a GPU idle in between stays at low clocks
RAMP_SECONDS = 0.3


def hold_cuda_context(backend: str) -> None:
    """Open torch's CUDA context before a row on ``backend`` is timed, where torch times its references on the same
    NVIDIA GPU. Measured on the H200 (2026-12-02, bench/experiments/vgemm_bench_case.py): in a process holding only
    a Vulkan device the GPU fell to about a quarter of its clocks after the autotuner's first configuration (gemm
    4096^3: 1090 us, then every configuration and the row itself ~4.5x slower, 5.0 ms, for as long as the process
    held no CUDA context); with torch's context open first, the same row timed 1047 us. The Vulkan rows are timed as
    the GPU runs them beside a CUDA process, which is how the torch reference in the same row runs."""
    if torch_same_gpu(backend):
        import torch

        torch.zeros(1, device="cuda")


def ramp(step, synchronize, seconds: float = RAMP_SECONDS) -> None:
    """Run ``step`` in batches of 8 launches, waiting after each batch (so the queue never holds more than 8),
    for ``seconds``: the GPU leaves its idle clocks before it is timed."""
    start = time.perf_counter()
    while True:
        for _ in range(8):
            step()
        synchronize()
        if time.perf_counter() - start >= seconds:
            return


def measure_arrays(entry, inputs: dict, backend: str, repeats: int, expected: np.ndarray | None,
                   tol: tuple[float, float]) -> tuple[Measured, str]:
    """(the row's measurement, the reference's name) on device arrays; see the module docstring."""
    be = get_backend(backend)
    nbytes = sum(v.nbytes for v in inputs.values() if isinstance(v, np.ndarray)) or 1
    copies = min(MAX_COPIES, repeats + 1, max(1, -(-ROTATE_L2_FACTOR * L2_GUESS // nbytes)))
    hold_cuda_context(backend)
    sets = [{k: asarray(v, backend=backend) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
            for _ in range(copies)]
    count = [0]

    def step() -> None:
        entry.launch(sets[count[0] % copies], backend)
        count[0] += 1

    ramp(step, be.synchronize)
    iron_s = be.gpu_time(step, repeats)
    timing = be.timer_name
    if iron_s is None:
        def waited() -> None:
            step()
            be.synchronize()

        iron_s, timing = median_wall(waited, repeats), "host wall-clock (launch + wait)"
    last = sets[(count[0] - 1) % copies][entry.output]
    out = last.numpy() if isinstance(last, Array) else last
    refs, missing = entry.device_references()
    if refs and torch_same_gpu(backend):
        dev = {k: _to_torch(v) for k, v in inputs.items()}
        dev["ref_out"] = dev[entry.output].clone()
        tsets = _input_copies(dev, repeats + 1)
        ref_s, errors, _ = time_peers(refs, missing, dev, tsets, inputs[entry.output], expected, tol, repeats)
        return Measured(iron_s, out, timing, copies, ref_s, errors, on_device=True), TORCH_REFERENCE
    host = entry.reference
    ref_s = {"numpy": median_wall(lambda: host(inputs), repeats)} if host else {}
    return Measured(iron_s, out, timing, copies, ref_s), HOST_REFERENCE


#: the reference in the table's Ref columns: torch beside a CUDA row, NumPy beside a host row
PRIMARY_REFERENCE = {True: "torch", False: "numpy"}


def bench_case(entry, backend: str, dname: str, shape: tuple[int, ...], seed: int, options: dict) -> dict:
    """One row, as a worker answers it (JSON-able): the times and the oracle check, or ``{"error": ...}``.
    ``ref_s`` is the primary reference's time (torch on CUDA, NumPy on the host); ``refs`` every reference's by
    family, ``ref_errors`` why a declared reference was not timed."""
    try:
        if entry.row is not None:  # a row that measures itself (a model)
            return entry.row(backend, dname, shape, seed, options)
        inputs = entry.make(shape, t.SCALAR_TYPES[dname].np_dtype, np.random.default_rng(seed))
        # the oracle reads only the inputs: computed once, for Iron's output and each peer's
        expected = entry.oracle(inputs) if entry.oracle else None
        autotune.LAST.clear()
        reference = None
        if on_gpu_arrays(backend):
            m, reference = measure_arrays(entry, inputs, backend, options.get("repeats", 5), expected,
                                          entry.tolerance[dname])
        else:
            m = measure(entry, inputs, backend, options.get("repeats", 5), expected, entry.tolerance[dname])
        result = compare(m.out, expected, entry.tolerance[dname]) if expected is not None else None
    except Exception as e:  # a faulting kernel is a failed row; the sweep goes on
        return {"error": f"{type(e).__name__}: {e}"}
    return {"iron_s": m.iron_s, "ref_s": m.ref_s.get(PRIMARY_REFERENCE[m.on_device]), "refs": m.ref_s,
            "ref_errors": m.ref_errors, "timing": m.timing, "input_copies": m.copies,
            "ok": result.ok if result else True, "max_abs": result.max_abs if result else float("nan"),
            "failure": result.describe() if result and not result.ok else None, "stats": launch_stats(backend),
            "config": dict(autotune.LAST) or None, **({"reference": reference} if reference else {})}


def launch_stats(backend: str) -> dict | None:
    """Registers and occupancy of the row's kernel where the backend reports them (CUDA), else None."""
    try:
        return get_backend(backend).launch_stats()
    except Exception:  # noqa: BLE001 - statistics are extra information; a row never fails for them
        return None


def check(out: np.ndarray, expected: np.ndarray, tol: tuple[float, float]) -> tuple[bool, float]:
    """(within atol + rtol*|expected| everywhere, max abs error); NaN anywhere in ``out`` fails."""
    result = compare(out, expected, tol)
    return result.ok, result.max_abs


@kernel
def _empty(out: Tensor[f32]):
    out[program_id(0)] = 0.0


def launch_overhead(backend: str, repeats: int = 5) -> float:
    """Seconds for one launch of a one-thread kernel: the floor under every row's time."""
    out = np.zeros(1, dtype=np.float32)
    if on_torch_device(backend):  # rows run on torch tensors, timed by CUDA events: so is the floor
        dev = _to_torch(out)
        return _event_time(lambda: _empty[1](dev, backend=backend), repeats)
    launch = lambda: _empty[1](out, backend=backend)  # noqa: E731
    # timed like the rows it is a floor of
    device_s, _ = _device_time(launch, backend, repeats)
    return device_s if device_s is not None else median_wall(launch, repeats)


