"""Issue 17: launches from several Python threads at once must neither crash the process nor mix up results.

Eight threads launch 200 times each, mixing NumPy-array launches and device-array launches, on their own arrays and
on one input shared (read-only) by all of them; every result is checked against NumPy. The body runs in a child
process, so a segfault (Vulkan used to die with SIGSEGV here) is a failed test naming the exit code, not a dead
pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from iron.runtime import unavailable_reason

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BODY = textwrap.dedent("""
    import sys, threading, traceback
    import numpy as np
    import iron
    from iron import Tensor, program_id

    BACKEND, THREADS, LAUNCHES, N = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 256

    @iron.kernel
    def axpb(x: Tensor[iron.f32], s: Tensor[iron.f32], y: Tensor[iron.f32], a: float, n: int):
        i = program_id(0)
        if i < n:
            y[i] = x[i] * a + s[i]

    shared_np = np.arange(N, dtype=np.float32) * 0.5
    shared_dev = iron.asarray(shared_np, backend=BACKEND)
    errors = []

    def work(t):
        rng = np.random.default_rng(t)
        try:
            for j in range(LAUNCHES):
                x = rng.standard_normal(N).astype(np.float32)
                a = float(t + 1) + j * 0.25
                want = x * np.float32(a) + shared_np
                mode = (t + j) % 4
                if mode == 0:  # NumPy arrays: copied in and back, waits
                    y = np.zeros(N, np.float32)
                    axpb[N](x, shared_np, y, a, N, backend=BACKEND)
                    got = y
                elif mode == 1:  # device arrays, the shared input on the device
                    xd, yd = iron.asarray(x, backend=BACKEND), iron.empty(N, iron.f32, backend=BACKEND)
                    axpb[N](xd, shared_dev, yd, a, N)
                    got = yd.numpy()
                elif mode == 2:  # several recorded launches before one read (the fast launcher after the first)
                    xd, yd = iron.asarray(x, backend=BACKEND), iron.empty(N, iron.f32, backend=BACKEND)
                    for _ in range(3):
                        axpb[N](xd, shared_dev, yd, a, N)
                    iron.synchronize(BACKEND)
                    got = yd.numpy()
                else:  # mixed: a NumPy input beside device arrays
                    yd = iron.empty(N, iron.f32, backend=BACKEND)
                    axpb[N](x, shared_dev, yd, a, N)
                    got = yd.numpy()
                if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    bad = int(np.argmax(np.abs(got - want)))
                    errors.append(f"thread {t} launch {j} mode {mode}: [{bad}] {got[bad]} != {want[bad]}")
                    return
        except BaseException:
            errors.append(f"thread {t}: " + traceback.format_exc())

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        print("\\n".join(errors[:5]))
        sys.exit(3)
    if not np.array_equal(shared_dev.numpy(), shared_np):
        print("the shared input changed")
        sys.exit(4)
    print("ok")
""")


def run_threads(tmp_path, backend: str, threads: int = 8, launches: int = 200, timeout: float = 600) -> None:
    script = tmp_path / "threads_body.py"  # Iron reads kernels from their source file: not ``python -c``
    script.write_text(BODY)
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    env.pop("IRON_BACKEND", None)
    proc = subprocess.run([sys.executable, str(script), backend, str(threads), str(launches)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    detail = f"exit code {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, detail
    assert proc.stdout.strip().endswith("ok"), detail


@pytest.mark.parametrize("backend", ["vulkan", "cpu", "msl-cpu"])
def test_eight_threads_launch_at_once(backend, tmp_path):
    reason = unavailable_reason(backend)
    if reason:
        pytest.skip(reason)
    run_threads(tmp_path, backend)


def test_an_array_finalizer_never_waits_for_the_vulkan_lock():
    """An array may be freed in any thread, inside any section that holds the queue's lock (a GC pass runs wherever
    it is triggered): its finalizer must not wait for the lock, or a thread waiting on that thread deadlocks."""
    import threading
    import time

    import iron
    from iron.runtime import get_backend

    reason = unavailable_reason("vulkan")
    if reason:
        pytest.skip(reason)
    queue = get_backend("vulkan").queue()
    x = iron.empty(1024, iron.f32, backend="vulkan")
    buf = x.store.buf
    held, done = threading.Event(), threading.Event()

    def hold():
        with queue.lock:
            held.set()
            done.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    start = time.perf_counter()
    del x  # the finalizer runs here, in this thread, while another thread holds the lock
    waited = time.perf_counter() - start
    done.set()
    holder.join()
    assert waited < 1.0, f"the finalizer waited {waited:.1f} s for the lock"
    iron.synchronize("vulkan")  # drains the freed buffer back to the pool
    assert not queue.released and any(b is buf for bufs in queue.ctx.pool.values() for b in bufs)
