"""Workers for ``iron bench`` and ``iron test``: each backend's rows run in a subprocess, so a kernel that kills its
process (a segfault, ``os._exit``, a lost device) becomes a failed row and the sweep goes on in a fresh worker.

The parent sends a job (JSON on the worker's stdin): the backend, the modules that registered the selected entries,
and the cases (kernel name, dtype, shape, seed). The worker imports those modules (so the entries register again),
runs each case and answers one JSON line per case on its stdout; anything the kernels print goes to its stderr. When
a worker dies, the case it was running is reported as ``worker died: signal N`` (or ``exit code N``) and a new
worker takes the remaining cases. A case that fails with an error that poisons the device for the rest of the process
(``STICKY_ERRORS``: an illegal address on CUDA, a lost Vulkan device) is reported as it failed, and the worker is
replaced too, so the rows after it run on a fresh context.

With several GPUs (CUDA device count > 1; ``IRON_BENCH_GPUS=N`` overrides the count) the cases are split round-robin
over one worker per GPU, each started with ``CUDA_VISIBLE_DEVICES`` set to its GPU, running in parallel.
``IRON_BENCH_TIMEOUT=S`` kills a worker that spends more than S seconds on one case (a hung kernel: that row fails
with "worker timed out"). ``IRON_BENCH_INPROCESS=1`` runs everything in the calling process instead (for a
debugger; no fault isolation).

An entry must register when its module is imported (the std library, ``--module``, ``IRON_KERNEL_PATH``) for a
worker to see it; one registered at run time (in a function, a REPL, ``__main__``) is reported as a failed row that
names this, unless ``IRON_BENCH_INPROCESS=1``.

Run as ``python -m iron.harness.worker`` (the parent does this).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from ..runtime import get_backend
from .check_case import test_case
from .discover import discover
from .measure import bench_case
from .registry import REGISTRY, load_all

INPROCESS_ENV = "IRON_BENCH_INPROCESS"
GPUS_ENV = "IRON_BENCH_GPUS"
TIMEOUT_ENV = "IRON_BENCH_TIMEOUT"


def inprocess() -> bool:
    return os.environ.get(INPROCESS_ENV, "").strip().lower() not in ("", "0", "false", "no")


def gpu_count(backend: str) -> int:
    """GPUs to spread the cases over: ``IRON_BENCH_GPUS`` if set, else the CUDA device count on CUDA, else 1."""
    forced = os.environ.get(GPUS_ENV, "").strip()
    if forced:
        return max(1, int(forced))
    if not get_backend(backend).torch_device:
        return 1
    try:
        import torch

        return max(1, torch.cuda.device_count())
    except Exception:
        return 1


def _visible_devices(count: int) -> list[str]:
    """Per worker, the value of its CUDA_VISIBLE_DEVICES: the parent's i-th visible device, else ``i``."""
    parent = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return [parent[i] if i < len(parent) else str(i) for i in range(count)]


def entry_modules(entries) -> list[list[str | None]]:
    """``[module name, file]`` of every module whose import registers one of ``entries``."""
    out: list[list[str | None]] = []
    for entry in entries:
        for obj in (entry.kernel, entry.setup, entry.launch, entry.oracle):
            inner = getattr(obj, "fn", obj)
            name = getattr(inner, "__module__", None)
            if not name or name == "__main__" or any(m[0] == name for m in out):
                continue
            module = sys.modules.get(name)
            out.append([name, getattr(module, "__file__", None)])
    return out


def _import(name: str, path: str | None) -> None:
    if name in sys.modules:
        return
    try:
        importlib.import_module(name)
        return
    except ImportError:
        if not path:
            raise
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


#: errors after which a GPU context answers every later call with the same error (CUDA's sticky errors, a lost
#: Vulkan device, HIP's equivalents): the worker that saw one answers its case and is replaced by a fresh process
STICKY_ERRORS = ("CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                 "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT",
                 "CUDA_ERROR_INVALID_PC", "CUDA_ERROR_LAUNCH_TIMEOUT", "CUDA_ERROR_ECC_UNCORRECTABLE",
                 "VK_ERROR_DEVICE_LOST", "VkErrorDeviceLost", "hipErrorIllegalAddress", "hipErrorLaunchFailure")


def execute(kind: str, case: dict, backend: str, options: dict) -> dict:
    """Run one case here and return its JSON-able result (``kind``: ``bench`` or ``test``); ``restart`` is set
    when the case left the device unusable (``STICKY_ERRORS``)."""
    entry = REGISTRY.get(case["kernel"])
    if entry is None:
        return {"error": f"{case['kernel']} is not registered in the worker: register it when its module is imported "
                         f"(or set {INPROCESS_ENV}=1)"}
    if kind == "bench":
        result = bench_case(entry, backend, case["dtype"], tuple(case["shape"]), case["seed"], options)
    else:
        result = test_case(entry, backend, case["dtype"], tuple(case["shape"]), case["seed"])
    if any(code in str(result.get("error", "")) for code in STICKY_ERRORS):
        result["restart"] = True
    return result


def case_timeout() -> float | None:
    """Seconds a worker may take over one case before it is killed (``IRON_BENCH_TIMEOUT``; default: no limit)."""
    value = os.environ.get(TIMEOUT_ENV, "").strip()
    return float(value) if value and float(value) > 0 else None


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _died(rc: int, stderr_tail: str) -> str:
    if rc < 0:
        try:
            name = f" ({signal.Signals(-rc).name})"
        except ValueError:
            name = ""
        text = f"worker died: signal {-rc}{name}"
    else:
        text = f"worker died: exit code {rc}"
    return text + (f"; last stderr: {stderr_tail}" if stderr_tail else "")


def _worker_env(device: str | None) -> dict:
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop(INPROCESS_ENV, None)
    if device is not None:
        env["CUDA_VISIBLE_DEVICES"] = device
    return env


def _drive(kind: str, todo: list[int], cases: list[dict], backend: str, options: dict, modules: list,
           device: str | None, results: list, done: Callable[[int], None]) -> None:
    """Run the cases ``todo`` (indices into ``cases``) through workers, restarting one after each death."""
    todo = list(todo)
    while todo:
        job = {"kind": kind, "backend": backend, "options": options, "modules": modules, "device": device,
               "cases": [dict(cases[i], index=i) for i in todo]}
        with tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([sys.executable, "-m", "iron.harness.worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=err, text=True, env=_worker_env(device))
            proc.stdin.write(json.dumps(job))
            proc.stdin.close()
            lines_in: queue.Queue = queue.Queue()
            threading.Thread(target=_pump, args=(proc.stdout, lines_in), daemon=True).start()
            timed_out = restart = False
            while True:
                try:
                    line = lines_in.get(timeout=case_timeout())
                except queue.Empty:  # the case in flight hangs: kill the worker, the next one takes the rest
                    proc.kill()
                    timed_out = True
                    break
                if line is None:
                    break
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                i = msg["index"]
                restart = bool(msg["result"].pop("restart", False))
                if i in todo:
                    results[i] = msg["result"]
                    todo.remove(i)
                    done(i)
                if restart:  # the device is poisoned for this process: a fresh worker takes the rest
                    break
            rc = proc.wait()
            err.seek(0)
            lines = [ln for ln in err.read().splitlines() if ln.strip()]
        if os.environ.get("IRON_AUTOTUNE_LOG", "0") == "1":  # the candidates' times the worker measured
            for ln in lines:
                if ln.startswith("iron autotune "):
                    print(ln, file=sys.stderr)
        if todo and not restart:  # the worker died (or hung) on the first case it had not answered
            i = todo.pop(0)
            tail = lines[-1].strip() if lines else ""
            results[i] = {"error": f"worker timed out after {case_timeout():g} s ({TIMEOUT_ENV})" if timed_out
                          else _died(rc, tail)}
            if device is not None:
                results[i]["device"] = device
            done(i)


def run_cases(kind: str, cases: list[dict], backend: str, entries, options: dict | None = None,
              on_done: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Results of ``cases`` (dicts with kernel, dtype, shape, seed), in order: through workers, or in this process
    with ``IRON_BENCH_INPROCESS=1``. ``on_done(index, result)`` is called as each case finishes (the progress
    bar)."""
    options = options or {}
    results: list[Any] = [None] * len(cases)

    def done(i: int) -> None:
        if on_done is not None:
            on_done(i, results[i])
    if inprocess():
        for i, case in enumerate(cases):
            results[i] = execute(kind, case, backend, options)
            results[i].pop("restart", None)  # no fault isolation in one process
            done(i)
        return results
    modules = entry_modules(entries)
    count = min(gpu_count(backend), max(1, len(cases)))
    if count == 1:
        _drive(kind, list(range(len(cases))), cases, backend, options, modules, None, results, done)
        return results
    lock = threading.Lock()

    def locked_done(i: int) -> None:
        with lock:
            done(i)

    threads = [threading.Thread(target=_drive, args=(kind, list(range(len(cases)))[g::count], cases, backend, options,
                                                     modules, device, results, locked_done))
               for g, device in enumerate(_visible_devices(count))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results


def main() -> None:
    job = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the kernels print (Python or C) goes to stderr, not into the answers
    sys.stdout = sys.stderr
    load_all()
    try:  # the user modules the parent CLI found (--module / IRON_KERNEL_PATH, exported to the environment)
        discover()
    except BaseException as e:  # noqa: BLE001 - a broken user module must not kill the worker; the rows say why
        print(f"iron worker: kernel discovery failed: {type(e).__name__}: {e}", file=sys.stderr)
    for name, path in job["modules"]:
        try:
            _import(name, path)
        except Exception as e:
            print(f"iron worker: could not import {name}: {type(e).__name__}: {e}", file=sys.stderr)
    for case in job["cases"]:
        result = execute(job["kind"], case, job["backend"], job["options"])
        if job.get("device") is not None:  # one worker per GPU: say which GPU this worker saw
            result["device"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        out.write(json.dumps({"index": case["index"], "result": result}) + "\n")
        out.flush()
        if result.get("restart"):
            os._exit(0)  # nothing after a sticky device error can be trusted in this process


if __name__ == "__main__":
    main()
