"""Kernels written to a file at test time (the front-end reads a kernel's source from its file), for tests of the
errors a kernel's text provokes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

#: the lines every such kernel file starts with, up to its ``def``
HEADER = "import iron\n\n\n@iron.kernel\n"


def module_from_source(folder: Path, name: str, text: str) -> ModuleType:
    """Write ``text`` to ``folder/<name>.py`` and import it as module ``name``."""
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
