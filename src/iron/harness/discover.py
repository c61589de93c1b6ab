"""Kernels from user modules: ``--module pkg.mod`` and ``IRON_KERNEL_PATH``.

Importing a module runs its ``@iron.bench`` / ``@iron.test_kernel`` decorators, so its kernels register beside the
std library's. A spec is a module name (``pkg.mod``; the current directory is on the path), a ``.py`` file (one inside
a package imports as part of it, so relative imports work) or a directory (every ``.py`` file in it, in name order,
skipping those starting with ``_``). ``IRON_KERNEL_PATH`` holds specs separated by ``os.pathsep``.

After discovery the specs are written back to ``IRON_KERNEL_PATH`` of this process (files as absolute paths), so that
subprocesses (bench workers) that call :func:`discover` import the same modules. The CLI's ``--module`` option is
:func:`iron.cli.discover.module_option`.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable
from types import ModuleType

import click

ENV_VAR = "IRON_KERNEL_PATH"

#: modules imported by :func:`discover` in this process, by spec (``iron build`` builds their kernels too)
DISCOVERED: dict[str, list[ModuleType]] = {}


def package_module_name(path: str) -> tuple[str, str] | None:
    """(folder to put on sys.path, dotted module name) when ``path`` lies inside a package, else None."""
    folder, base = os.path.split(path)
    parts = [os.path.splitext(base)[0]]
    while os.path.exists(os.path.join(folder, "__init__.py")):
        folder, pkg = os.path.split(folder)
        parts.insert(0, pkg)
    return (folder, ".".join(parts)) if len(parts) > 1 else None


class DiscoveryError(click.ClickException):
    """A user module that cannot be imported: one line naming it, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"iron: {self.format_message()}", err=True, file=file)


def env_specs(environ: dict[str, str] | None = None) -> list[str]:
    """The specs listed in ``IRON_KERNEL_PATH`` (empty entries ignored)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [s.strip() for s in value.split(os.pathsep) if s.strip()]


def _is_path(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or (os.altsep is not None and os.altsep in spec) \
        or os.path.isdir(spec)


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of the failure, when there is one."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" ({last.filename}:{last.lineno})"


def _import_file(path: str) -> ModuleType:
    dotted = package_module_name(path)
    if dotted is not None:  # a file inside a package: import it as part of it (relative imports work)
        root, name = dotted
        if root not in sys.path:
            sys.path.insert(0, root)
        return importlib.import_module(name)
    name = os.path.splitext(os.path.basename(path))[0]
    existing = sys.modules.get(name)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") == path:
        return existing
    loader_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _import_spec(spec: str) -> list[ModuleType]:
    if _is_path(spec):
        path = os.path.abspath(os.path.expanduser(spec))
        if os.path.isdir(path):
            files = sorted(f for f in os.listdir(path) if f.endswith(".py") and not f.startswith("_"))
            return [_import_file(os.path.join(path, f)) for f in files]
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such file or directory: {path}")
        return [_import_file(path)]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return [importlib.import_module(spec)]


def import_spec(spec: str, source: str = "--module") -> list[ModuleType]:
    """Import one spec; any failure becomes a :class:`DiscoveryError` naming the module and where it failed."""
    try:
        modules = _import_spec(spec)
    except ModuleNotFoundError as e:
        if e.name and (spec == e.name or spec.startswith(e.name + ".")):
            raise DiscoveryError(f"kernel module {spec!r} (from {source}) not found: no module named {e.name!r}"
                                 ) from None
        raise DiscoveryError(f"cannot import kernel module {spec!r} (from {source}): "
                             f"{type(e).__name__}: {e}{_where(e)}") from None
    except FileNotFoundError as e:
        raise DiscoveryError(f"kernel module {spec!r} (from {source}) not found: {e}") from None
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else ""
        raise DiscoveryError(f"cannot import kernel module {spec!r} (from {source}): "
                             f"{type(e).__name__}: {msg}{_where(e)}") from None
    DISCOVERED[spec] = modules
    return modules


def discover(modules: Iterable[str] = ()) -> list[ModuleType]:
    """Import the ``--module`` specs, then those of ``IRON_KERNEL_PATH``; export them all to ``IRON_KERNEL_PATH``."""
    imported: list[ModuleType] = []
    specs: list[str] = []
    for source, group in (("--module", list(modules)), (ENV_VAR, env_specs())):
        for spec in group:
            exported = os.path.abspath(os.path.expanduser(spec)) if _is_path(spec) else spec
            if exported in specs:  # named twice (or by --module and the exported variable): import once
                continue
            specs.append(exported)
            imported += [m for m in import_spec(spec, source) if m not in imported]
    if specs:
        os.environ[ENV_VAR] = os.pathsep.join(specs)
    return imported
