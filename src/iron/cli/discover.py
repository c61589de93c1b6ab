"""``--module`` on ``iron test``/``bench``/``build``; the discovery itself is :mod:`iron.harness.discover` (bench
workers, below the CLI, run it too)."""

from __future__ import annotations

import os

import click

from ..harness.discover import DISCOVERED, ENV_VAR, DiscoveryError, discover, env_specs, import_spec

__all__ = ["DISCOVERED", "ENV_VAR", "DiscoveryError", "discover", "env_specs", "import_spec", "module_option"]


def module_option(fn):
    """``--module`` (repeatable) on a command: the specs arrive as the ``modules`` parameter."""
    return click.option("--module", "-m", "modules", multiple=True, metavar="MODULE|FILE.py|DIR",
                        help=f"Import this user module (pkg.mod), file or directory first, so that its "
                             f"@iron.bench/@iron.test_kernel kernels join the std library's (repeatable; "
                             f"{ENV_VAR} adds more, separated by '{os.pathsep}').")(fn)
