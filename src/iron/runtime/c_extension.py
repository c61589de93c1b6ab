"""Small C extensions of the runtime (the compiled launchers ``cuda_launch.c`` and ``vulkan_launch.c``), built at
first use with the system C compiler against this Python's headers and cached on disk.

No build system and no CUDA or Vulkan headers: each source declares the few driver types it calls through. The
shared object is keyed by its source, the Python version, the extension suffix and the compiler, and written
atomically (a temporary file, then ``os.replace``), so concurrent first uses in several processes are safe.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

#: where a fast launcher reads IRON_BACKEND: os.environ's underlying dict where CPython has one (bytes keys and
#: values on POSIX, kept in step by os.environ's own writes; a lookup there is ~20x cheaper than os.environ.get),
#: else os.environ itself
ENV_DATA = getattr(os.environ, "_data", os.environ)
BACKEND_ENV_KEY = os.environ.encodekey("IRON_BACKEND") if ENV_DATA is not os.environ else "IRON_BACKEND"

#: what a failed build raises (the callers keep the reason and fall back to their Python launcher)
BUILD_ERRORS = (OSError, RuntimeError, ImportError, subprocess.SubprocessError)


def build_extension(module_name: str, source: Path, kind: str, headers: tuple[Path, ...] = ()) -> ModuleType:
    """Import the extension ``module_name`` compiled from ``source`` (cached under the cache folder's ``kind``; the
    ``headers`` it includes from its folder are part of the key); raises one of ``BUILD_ERRORS`` with the reason when
    it cannot be built."""
    import importlib.util
    import shutil
    import sysconfig
    import tempfile

    from .cache import cache_dir, cache_key

    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        raise RuntimeError(f"no Python.h in {include} (install the Python development headers, e.g. python3-dev)")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build the compiled launcher")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    key = cache_key(kind, source.read_bytes(), sys.version, suffix, cc, *(h.read_bytes() for h in headers))
    folder = cache_dir() / kind
    path = folder / f"{module_name}_{key[:24]}{suffix}"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=suffix)
        os.close(fd)
        cmd = [cc, "-O2", "-shared", "-fPIC", "-I", include, "-o", tmp, str(source)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp)
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the compiled launcher {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
