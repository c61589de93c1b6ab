"""The fuzz runner's worker processes: each runs one kernel at a time and sends its report back.

A worker whose Vulkan device timed out exits after its report and a fresh one takes its place: the device still runs
the kernel, so that process cannot use it again (seed 707002911 of the 10,500-kernel run hung lavapipe, and the ~120
kernels its worker ran next were all reported as mismatches with that message, none compared). A worker that dies
(a backend's crash: lavapipe's LLVM overflowed its stack on that run) is replaced too, its kernel reported as
``internal`` (``multiprocessing.Pool`` waited forever for the jobs of a dead worker). Hand-written over
``concurrent.futures``, whose pool breaks as a whole when one process dies.
"""

from __future__ import annotations

import os

#: kernels a worker runs before a fresh process replaces it (memory: every source kernel is a module of its own)
TASKS_PER_WORKER = 100


def _serve(conn, run) -> None:
    """A worker process: runs the jobs ``conn`` brings with ``run`` (``_one``), one at a time, sending each report
    back; leaves after a report whose device is lost (``device_lost``): os._exit, which also stops the kernel the
    device still runs (lavapipe runs it on a thread of this process)."""
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        report = run(job)
        conn.send(report)
        if report.get("device_lost"):
            conn.close()
            os._exit(0)


class _Worker:
    def __init__(self, ctx, run):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, run), daemon=True)
        self.proc.start()
        child.close()
        self.job: tuple | None = None
        self.done = 0

    def stop(self, wait: float = 0.0) -> None:
        """End the process: an idle one leaves by itself once its pipe closes (``wait`` seconds granted), else it is
        killed (a busy one at the end of a run)."""
        self.conn.close()
        self.proc.join(wait)
        if self.proc.exitcode is None:
            self.proc.kill()
            self.proc.join()


def reports(jobs: list[tuple], count: int, run, tasks_per_worker: int = TASKS_PER_WORKER):
    """The reports of ``jobs`` run with ``run`` (the runner's ``_one``) in ``count`` worker processes, in the order they
    finish. A worker is replaced after ``tasks_per_worker`` jobs, after a report whose device it lost
    (``device_lost``: its Vulkan device still runs the kernel that timed out), and when it dies; the job a worker
    died on is reported as ``internal``. Closing the generator stops the workers."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("spawn")
    queue = list(reversed(jobs))
    pool: list[_Worker] = []

    def give(w: _Worker) -> None:
        w.job = queue.pop()
        w.conn.send(w.job)

    try:
        for _ in range(min(count, len(queue))):
            pool.append(_Worker(ctx, run))
            give(pool[-1])
        while pool:
            ready = set(wait([w.conn for w in pool] + [w.proc.sentinel for w in pool]))
            for w in [w for w in pool if w.conn in ready or w.proc.sentinel in ready]:
                try:
                    report = w.conn.recv()
                except (EOFError, OSError):  # died without a report (a crash of a backend, or killed)
                    w.proc.join()
                    kind, seed = w.job[0], w.job[1]
                    report = {"kind": kind, "seed": seed, "outcome": "internal", "compared": 0,
                              "messages": [f"the worker process died (exit code {w.proc.exitcode}) running {kind} "
                                           f"seed {seed}"], "device_lost": True}
                w.done += 1
                yield report
                if report.get("device_lost") or w.done >= tasks_per_worker or not queue:
                    pool.remove(w)
                    w.stop(wait=30.0)
                    if queue:
                        pool.append(_Worker(ctx, run))
                        give(pool[-1])
                else:
                    give(w)
    finally:
        for w in pool:
            w.stop()
