"""A C++ model of Metal for checking the emitted MSL without Apple's compiler (issue 6, point 5).

``include/metal_model.h`` declares what Iron's MSL uses (see its opening comment); ``include/metal_stdlib`` stands in
for Apple's header so the emitted ``#include <metal_stdlib>`` resolves to the model. ``syntax_check`` runs
``clang -fsyntax-only`` over one source with errors on the warnings that matter for Iron's kernels: implicit
conversions that lose precision or change the value, and values computed but never used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

INCLUDE_DIR = Path(__file__).parent / "include"
HEADER = INCLUDE_DIR / "metal_model.h"
#: clang executables tried in order (Debian's clang-16 first: the version CI installs)
CLANG_NAMES = ("clang-16", "clang++-16", "clang")
#: -Werror on: implicit conversions that lose precision (float->half, double->float, int->float, 64->32 bit, ...),
#: and unused values/variables; Metal attributes are unknown to clang and ignored on purpose
WARNINGS = (
    "-Wall", "-Wextra", "-Wno-unknown-attributes", "-Wno-unused-parameter", "-Wno-unused-function",
    "-Werror=implicit-float-conversion", "-Werror=implicit-int-float-conversion", "-Werror=implicit-int-conversion",
    "-Werror=float-conversion", "-Werror=shorten-64-to-32", "-Werror=literal-conversion",
    "-Werror=unused-value", "-Werror=unused-variable", "-Werror=unused-but-set-variable",
)


def find_clang() -> str | None:
    """The clang to use (``IRON_CLANG`` if set), or None when none is installed."""
    override = os.environ.get("IRON_CLANG")
    if override:
        return shutil.which(override)
    for name in CLANG_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def clang_command(clang: str, path: str | Path) -> list[str]:
    return [clang, "-x", "c++", "-std=c++17", "-fsyntax-only", "-I", str(INCLUDE_DIR), "-include", str(HEADER),
            *WARNINGS, str(path)]


def syntax_check(source: str, clang: str | None = None, name: str = "kernel") -> tuple[bool, str]:
    """(accepted, diagnostics) of ``clang -fsyntax-only`` on ``source`` against the model; raises RuntimeError when
    no clang is installed."""
    clang = clang or find_clang()
    if clang is None:
        raise RuntimeError("no clang found (install Debian's clang-16, or set IRON_CLANG)")
    with tempfile.TemporaryDirectory(prefix="iron-msl-") as tmp:
        path = Path(tmp) / f"{name}.metal"
        path.write_text(source)
        proc = subprocess.run(clang_command(clang, path), capture_output=True, text=True)
    return proc.returncode == 0, proc.stderr


__all__ = ["HEADER", "INCLUDE_DIR", "WARNINGS", "clang_command", "find_clang", "syntax_check"]
