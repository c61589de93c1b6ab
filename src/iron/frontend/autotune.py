"""Autotuning: a launch with a small list of configurations (group size, tile sizes, stages, elements per thread)
takes the fastest. The first launch per (backend, device, code path, kernel, dtype, shape bucket) times every
configuration (the code path: what else decides the code, ``Backend.autotune_tag``, e.g. Vulkan's fragment path) with
the backend's GPU timer (host time where it has none) and remembers the winner in the Iron cache folder
(``autotune.json``, written atomically); later launches, in this process or the next, read it. A configuration the
device refuses (too much shared memory, a group too large) is skipped.

- ``IRON_AUTOTUNE=0`` takes the first configuration without timing anything;
- ``IRON_AUTOTUNE=each`` runs every configuration once, untimed, and takes the first that runs (under
  compute-sanitizer: every configuration checked, at a sixth of the launches);
- ``IRON_AUTOTUNE_LOG=1`` prints every candidate's time to stderr as it is measured;
- ``iron bench -v`` prints the configuration each row ran (``CHOSEN``).

Usage (a std module's launch function)::

    cfg = tune("std/gemm", CONFIGS, lambda c: run(c), backend=name, dtype="bf16", key=(m, n, k))
    run(cfg)

Tuning tables (a std module's configurations per backend) are read through ``table_for``: a Vulkan device that is a
GPU (NVIDIA's or AMD's driver; not lavapipe) times CUDA's list, as the hardware is the same class (on the H200 it is
the same GPU); a CPU device times nothing, so tests there run one configuration, deterministically.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import IronError
from ..runtime import get_backend
from ..runtime.cache import cache_dir, store_file

#: the configuration each (kernel, dtype, shape) ran last in this process, for ``iron bench -v``
CHOSEN: dict[str, dict[str, Any]] = {}
#: the last choice made (the bench records it with the row it measured)
LAST: dict[str, Any] = {}
_MEMORY: dict[str, int] = {}  # cache key -> index of the winner, this process
_QUICK: dict[tuple, int] = {}  # (backend object, name, dtype, key, configs) -> index of the winner, this process
_DEVICE: dict[int, str] = {}  # id(backend object) -> its device's name
_REPEATS = 5


_BORROWS: dict[str, bool] = {}  # backend name -> whether it takes CUDA's tuning tables (this process)


def table_for(table: dict[str, Any], backend: str) -> Any:
    """``backend``'s entry of a tuning table: its own; CUDA's for a Vulkan device that is a GPU; else None (also
    where Vulkan is not available here)."""
    if backend in table:
        return table[backend]
    if backend != "vulkan":
        return None
    try:
        borrows = _BORROWS.get(backend)
        if borrows is None:
            borrows = _BORROWS[backend] = bool(get_backend(backend).is_gpu())
    except IronError:  # no Vulkan here: nothing to borrow for
        return None
    return table.get("cuda") if borrows else None


def bucket(key: Sequence[int]) -> tuple[int, ...]:
    """Shapes tune alike within a power of two: each dimension rounded up to one."""
    return tuple(1 << max(0, int(k) - 1).bit_length() for k in key)


def tune(name: str, configs: Sequence[dict[str, Any]], run: Callable[[dict[str, Any]], Any], *, backend: str | None,
         dtype: str, key: Sequence[int], cold: bool = False) -> dict[str, Any]:
    """The configuration to launch ``name`` with (timing ``run(config)`` for each on the first call per bucket).
    ``cold``: time each repeat with the L2 flushed first where the backend can (``l2_flush``: CUDA), for kernels
    that stream their inputs from memory in use (a decode step's GEMVs: 2.5 GB of weights per token, while the
    same matrix timed again and again sits in a 50 MB L2 and the choice is made for the wrong regime)."""
    if not configs:
        raise ValueError(f"{name}: autotune needs at least one configuration")
    be = get_backend(backend)
    mode = os.environ.get("IRON_AUTOTUNE", "1")
    if mode == "0" or len(configs) == 1:
        _choose(name, dtype, key, configs[0])
        return configs[0]
    if mode == "each":  # every candidate once (under a sanitizer: each configuration checked, none timed)
        return _run_each(name, dtype, key, configs, run, be)
    # a launch helper asks once per launch: the answer for these exact arguments comes from memory, without the
    # device query and the digest below (on CUDA those cost more than the launch)
    tag = be.autotune_tag() if hasattr(be, "autotune_tag") else ""  # e.g. Vulkan's matrix-fragment path
    try:
        quick = (id(be), tag, name, dtype, tuple(key), tuple(tuple(c.items()) for c in configs), cold)
        index = _QUICK.get(quick)
    except TypeError:  # an unhashable configuration value
        quick, index = None, None
    if index is not None:
        _choose(name, dtype, key, configs[index])
        return configs[index]
    device = _DEVICE.get(id(be))
    if device is None:
        device = _DEVICE[id(be)] = str(be.info().get("name", ""))
    digest = hashlib.sha256(json.dumps([dict(c) for c in configs], sort_keys=True, default=str).encode()).hexdigest()
    ckey = f"{be.name}|{device}{'|' + tag if tag else ''}|{name}|{dtype}|{bucket(key)}|{digest[:16]}"
    cold = cold and hasattr(be, "l2_flush")
    ckey += "|cold" if cold else ""
    index = _MEMORY.get(ckey)
    if index is None:
        index = _load().get(ckey)
    if (index is None or not 0 <= index < len(configs)) and be.recording():
        _choose(name, dtype, key, configs[0])  # nothing runs while iron.graph() records: untimed, not remembered
        return configs[0]
    if index is None or not 0 <= index < len(configs):
        index = _measure(name, configs, run, be, be.l2_flush() if cold else None)
        _store(ckey, index)
    _MEMORY[ckey] = index
    if quick is not None:
        _QUICK[quick] = index
    _choose(name, dtype, key, configs[index])
    return configs[index]


def _run_each(name: str, dtype: str, key: Sequence[int], configs: Sequence[dict[str, Any]], run, be) -> dict:
    """Run each configuration once, untimed, and take the first the device accepts; remember nothing."""
    if be.recording():
        _choose(name, dtype, key, configs[0])
        return configs[0]
    ran = []
    first_error: IronError | None = None
    for cfg in configs:
        try:
            run(cfg)
            ran.append(cfg)
        except IronError as e:  # this configuration does not fit the device
            first_error = first_error or e
    if not ran:
        raise first_error if first_error else IronError(f"{name}: no configuration ran")
    _choose(name, dtype, key, ran[0])
    return ran[0]


def forget() -> None:
    """Forget this process's choices, as a new process would: the next ``tune`` reads the cache file again."""
    _MEMORY.clear()
    _QUICK.clear()


def _choose(name: str, dtype: str, key: Sequence[int], config: dict[str, Any]) -> None:
    CHOSEN[f"{name}|{dtype}|{'x'.join(map(str, key))}"] = dict(config)
    LAST.clear()
    LAST.update(config)


def _measure(name: str, configs: Sequence[dict[str, Any]], run, be, flush=None) -> int:
    times: list[float] = []
    first_error: IronError | None = None
    for cfg in configs:
        try:
            run(cfg)  # compiles, and warms up
            fn = lambda c=cfg: run(c)  # noqa: E731
            seconds = be.gpu_time(fn, _REPEATS, before=flush) if flush else be.gpu_time(fn, _REPEATS)
            if seconds is None:
                be.synchronize()
                start = time.perf_counter()
                for _ in range(_REPEATS):
                    run(cfg)
                be.synchronize()
                seconds = (time.perf_counter() - start) / _REPEATS
        except IronError as e:  # this configuration does not fit the device: skip it
            first_error = first_error or e
            seconds = float("inf")
        times.append(seconds)
    if os.environ.get("IRON_AUTOTUNE_LOG", "0") == "1":  # every candidate's time, for the bench logs
        for cfg, seconds in zip(configs, times):
            print(f"iron autotune {name}: {seconds * 1e6:.1f} us {dict(cfg)}", file=sys.stderr)
    best = min(range(len(configs)), key=times.__getitem__)
    if times[best] == float("inf"):
        raise first_error if first_error else IronError(f"{name}: no configuration ran")
    return best


def _path():
    return cache_dir() / "autotune.json"


def _load() -> dict[str, int]:
    if os.environ.get("IRON_CACHE", "1") == "0":
        return {}
    try:
        data = json.loads(_path().read_bytes())
    except (OSError, ValueError, RecursionError):  # no file yet, or a damaged one (deep nesting: RecursionError)
        return {}  # tune again; the next store rewrites the file whole
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if type(v) is int}


def _store(ckey: str, index: int) -> None:
    if os.environ.get("IRON_CACHE", "1") == "0":
        return
    data = _load()
    data[ckey] = index
    # atomic; a read-only cache folder only means tuning again next time
    store_file(_path(), json.dumps(data, indent=1, sort_keys=True).encode())
