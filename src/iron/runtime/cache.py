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


#: bytes of the sha256 that a ``checked`` entry ends with
_DIGEST = hashlib.sha256().digest_size


def cached_binary(kind: str, key: str, build: Callable[[], bytes], *, checked: bool = False) -> bytes:
    """Return the binary stored under ``kind/key``, or build, store and return it.

    ``checked``: the entry is stored with its sha256 and verified on each read; one that fails (truncated, overwritten,
    a flipped bit) is rebuilt and replaced, never returned. For binaries loaded into the process (a shared library),
    where a corrupt one would crash or compute garbage instead of failing with a message.
    """
    if os.environ.get("IRON_CACHE", "1") == "0":
        return build()
    folder = cache_dir() / kind
    path = folder / key
    try:
        stored = path.read_bytes()
    except OSError:
        stored = None
    if stored is not None and not checked:
        return stored
    if stored is not None and len(stored) >= _DIGEST:
        data, digest = stored[:-_DIGEST], stored[-_DIGEST:]
        if hashlib.sha256(data).digest() == digest:
            return data
    data = build()
    _store(folder, path, data + hashlib.sha256(data).digest() if checked else data)
    return data


def _store(folder: Path, path: Path, data: bytes) -> None:
    """Write ``path`` through a temporary file and ``os.replace``: a reader sees the old entry or the new one, whole."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    except OSError:
        return  # a read-only or full disk only costs a recompile next time
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
