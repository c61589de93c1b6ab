"""On-disk cache of compiled binaries (cubins, code objects), keyed by everything that changes the output.

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so concurrent processes never see a
half-written binary. ``IRON_CACHE_DIR`` moves the cache; ``IRON_CACHE=0`` disables it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("IRON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "iron")
    return Path(base)


def cache_key(*parts: object) -> str:
    """A stable hex key for the given parts (source text, target, options, toolchain version, ...)."""
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def cached_binary(kind: str, key: str, build: Callable[[], bytes]) -> bytes:
    """Return the binary stored under ``kind/key``, or build, store and return it."""
    if os.environ.get("IRON_CACHE", "1") == "0":
        return build()
    folder = cache_dir() / kind
    path = folder / key
    try:
        return path.read_bytes()
    except OSError:
        pass
    data = build()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or full disk only costs a recompile next time
    return data
