"""On-disk cache of compiled binaries (cubins, code objects, shared libraries), keyed by everything that changes the
output.

Every entry ends with a sha256 of its kind, its key and its bytes, checked on each read: a truncated, overwritten or
bit-flipped entry, or another kernel's binary copied or renamed into place, is rebuilt and replaced, never returned
(it would be loaded into the GPU driver or the process). Writes are atomic (a file of this process's own in the same
folder, then ``os.replace``), so concurrent processes filling one entry all succeed and a reader sees a whole entry.
Entries get the usual mode (0666 less the umask), so a shared cache can be read by its other users.

``IRON_CACHE_DIR`` moves the cache (default ``$XDG_CACHE_HOME/iron``, else ``~/.cache/iron``); ``IRON_CACHE=0``
disables it. A folder that cannot be created or written, or that belongs to another user (who could plant binaries
in it), is replaced by a private one of this user's in the temporary folder, with one ``CacheWarning``.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import shutil
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path


class CacheWarning(UserWarning):
    """The configured cache folder cannot be used; a private one is used instead."""


_LOCK = threading.Lock()
#: configured folder -> the folder used for it (itself, or the private fallback), decided once per process
_RESOLVED: dict[Path, Path] = {}
#: bytes of the sha256 that each entry ends with
_DIGEST = hashlib.sha256().digest_size


def configured_dir() -> Path:
    """The cache folder the environment asks for (``IRON_CACHE_DIR``, else the per-user default)."""
    base = os.environ.get("IRON_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "iron")
    return Path(base)


def cache_dir() -> Path:
    """The cache folder in use: ``configured_dir()``, or this user's private fallback when that cannot be used."""
    base = configured_dir()
    with _LOCK:
        used = _RESOLVED.get(base)
        if used is None:
            used = _RESOLVED[base] = _usable_or_private(base)
    return used


def _usable_or_private(base: Path) -> Path:
    reason = _unusable(base)
    if reason is None:
        return base
    private = _private_dir()
    if private is None:
        return base  # nowhere to write: reads still verify every entry, writes fail quietly
    warnings.warn(f"Iron's cache folder {base} {reason}; caching in {private} instead (IRON_CACHE_DIR chooses "
                  f"another folder, IRON_CACHE=0 turns the cache off)", CacheWarning, stacklevel=3)
    return private


def _unusable(base: Path) -> str | None:
    """Why ``base`` cannot hold this user's cache, or None when it can (it is created if missing)."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        st = base.stat()
    except OSError as e:
        return f"cannot be created ({e.strerror or e})"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"belongs to another user (uid {st.st_uid}), who could replace its binaries"
    if not os.access(base, os.W_OK | os.X_OK):
        return "is not writable"
    return None


def _private_dir() -> Path | None:
    """``<tmp>/iron-cache-<uid>`` (mode 0700, ours, not a link), else a new folder removed at exit; None if neither."""
    owner = os.geteuid() if hasattr(os, "geteuid") else None
    path = Path(tempfile.gettempdir()) / f"iron-cache-{owner if owner is not None else os.getpid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
        if (stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077 == 0 and (owner is None or st.st_uid == owner)
                and os.access(path, os.W_OK | os.X_OK)):
            return path
    except OSError:
        pass
    try:  # someone else made that name (or it is a link): a fresh folder, for this process only
        path = Path(tempfile.mkdtemp(prefix="iron-cache-"))
    except OSError:
        return None
    atexit.register(shutil.rmtree, path, True)
    return path


def cache_key(*parts: object) -> str:
    """A stable hex key for the given parts (source text, target, options, toolchain version, ...)."""
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else repr(part).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def seal(kind: str, key: str, data: bytes) -> bytes:
    """The trailer stored after ``data`` in entry ``kind/key``: a sha256 of the kind, the key and the bytes."""
    h = hashlib.sha256(f"iron-cache-entry\0{kind}\0{key}\0".encode())
    h.update(data)
    return h.digest()


def unseal(kind: str, key: str, stored: bytes) -> bytes | None:
    """The binary in the stored entry ``kind/key``, or None when it is damaged or belongs to another key."""
    if len(stored) < _DIGEST:
        return None
    data = stored[:-_DIGEST]
    return data if seal(kind, key, data) == stored[-_DIGEST:] else None


def cached_binary(kind: str, key: str, build: Callable[[], bytes], *, checked: bool = True) -> bytes:
    """Return the binary stored under ``kind/key``, or build, store and return it.

    The entry is verified on each read (``unseal``); one that fails is rebuilt and replaced, never returned.
    ``checked=False`` stores and returns raw bytes, unverified: only for data that the caller checks itself.
    """
    if os.environ.get("IRON_CACHE", "1") == "0":
        return build()
    folder = cache_dir() / kind
    path = folder / key
    try:
        stored = path.read_bytes()
    except OSError:
        stored = None
    if stored is not None:
        data = unseal(kind, key, stored) if checked else stored
        if data is not None:
            return data
    data = build()
    store_file(path, data + seal(kind, key, data) if checked else data)
    return data


def store_file(path: Path, data: bytes) -> bool:
    """Write ``path`` through a new file of this process's in its folder and ``os.replace``: a reader sees the old
    file or the new one, whole, and concurrent writers all succeed. False when it could not be written (a full or
    read-only disk only costs a rebuild next time)."""
    tmp = path.parent / f".tmp-{os.getpid()}-{secrets.token_hex(8)}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # os.open, not mkstemp: mkstemp's mode 0600 would hide the entry from the cache's other users
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
