"""Finding a kernel from the shell: ``pkg.module:name`` or ``path/to/file.py:name``."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

import click

from ..frontend.kernel import KernelFunction
from ..harness.discover import package_module_name


def load_kernel(spec: str) -> KernelFunction:
    """Import ``spec`` ("module:attr" or "file.py:attr") and return the kernel it names."""
    if ":" not in spec:
        raise click.BadParameter(f"expected MODULE:KERNEL or FILE.py:KERNEL, got {spec!r}")
    mod_name, _, attr = spec.rpartition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            path = os.path.abspath(mod_name)
            if not os.path.exists(path):
                raise click.BadParameter(f"no such file: {mod_name}")
            dotted = package_module_name(path)
            if dotted is not None:  # a file inside a package: import it as part of it (relative imports work)
                root, name = dotted
                if root not in sys.path:
                    sys.path.insert(0, root)
                module = importlib.import_module(name)
            else:
                name = os.path.splitext(os.path.basename(path))[0]
                loader_spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(loader_spec)
                sys.modules[name] = module
                loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except ImportError as e:
        raise click.BadParameter(f"cannot import {mod_name}: {e}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        kernels = [n for n, v in vars(module).items() if isinstance(v, KernelFunction)]
        raise click.BadParameter(f"{mod_name} has no attribute {attr!r}; kernels there: {', '.join(kernels) or 'none'}")
    if not isinstance(obj, KernelFunction):
        raise click.BadParameter(f"{spec} is not an @iron.kernel")
    return obj


def parse_constexprs(pairs: tuple[str, ...]) -> dict[str, object]:
    """``-D BLOCK=256`` -> {"BLOCK": 256} (ints, floats, True/False); ``-D bias=None`` asks for the variant
    without the optional buffer ``bias``."""
    out: dict[str, object] = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"expected NAME=VALUE, got {pair!r}")
        k, _, v = pair.partition("=")
        value: object
        if v in ("True", "False", "true", "false"):
            value = v.lower() == "true"
        elif v in ("None", "none"):
            value = None
        else:
            try:
                value = int(v, 0)
            except ValueError:
                try:
                    value = float(v)
                except ValueError:
                    raise click.BadParameter(f"constexpr {k} must be a number, a bool or None (an absent optional "
                                             f"buffer), got {v!r}") from None
        out[k] = value
    return out
