"""``iron update``: upgrade the installed wh-iron through pip (release, local wheel or sdist, git commit or PR)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import click

DIST = "wh-iron"
#: the project's git repository, for --commit / --pr. To be set once the repository is public; until then (or to
#: use a fork) set the IRON_REPO_URL environment variable, e.g. https://github.com/OWNER/iron.git
REPO_URL = ""
REPO_ENV = "IRON_REPO_URL"

#: how commands are run (tests replace it)
run_command = subprocess.run


def repo_url() -> str:
    url = os.environ.get(REPO_ENV) or REPO_URL
    if not url:
        raise click.UsageError(f"--commit/--pr need the project's git URL: set {REPO_ENV} (e.g. "
                               f"{REPO_ENV}=https://github.com/OWNER/iron.git)")
    return url


def pip_command(pr: int | None = None, commit: str | None = None, path: str | None = None) -> list[str]:
    """The pip command line ``iron update`` runs for these options."""
    pip = [sys.executable, "-m", "pip", "install", "--upgrade"]
    if path is not None:
        return [*pip, os.path.abspath(path)]
    if commit is not None:
        return [*pip, f"{DIST} @ git+{repo_url()}@{commit}"]
    if pr is not None:
        return [*pip, f"{DIST} @ git+{repo_url()}@refs/pull/{pr}/head"]
    return [*pip, DIST]


def installed_version() -> str:
    """The installed wh-iron version, asked of a fresh interpreter (this one has the old metadata cached)."""
    probe = run_command([sys.executable, "-c", f"import importlib.metadata as m; print(m.version({DIST!r}))"],
                        capture_output=True, text=True)
    out = (probe.stdout or "").strip()
    return out.splitlines()[-1] if probe.returncode == 0 and out else "not installed"


@click.command(short_help="Upgrade wh-iron through pip (release, --path, --commit or --pr).")
@click.option("--pr", type=click.IntRange(min=1), default=None, metavar="N",
              help=f"Install pull request N of the project's git repository (refs/pull/N/head; needs {REPO_ENV}).")
@click.option("--commit", default=None, metavar="SHA",
              help=f"Install this commit (or branch or tag) of the project's git repository (needs {REPO_ENV}).")
@click.option("--path", default=None, metavar="WHEEL", type=click.Path(exists=True, dir_okay=True),
              help="Install this local wheel, sdist or source directory.")
@click.option("--force", is_flag=True,
              help="Reinstall even if the version is unchanged (pip --force-reinstall --no-deps).")
@click.option("--dry-run", is_flag=True, help="Only print the pip command; change nothing.")
def update(pr: int | None, commit: str | None, path: str | None, force: bool, dry_run: bool) -> None:
    """Upgrade the installed wh-iron through pip: the latest release, or --path / --commit / --pr.

    Prints the pip command, runs it with this Python, then reports the version now installed.
    """
    if sum(x is not None for x in (pr, commit, path)) > 1:
        raise click.UsageError("give at most one of --pr, --commit, --path")
    cmd = pip_command(pr=pr, commit=commit, path=path)
    if force:
        cmd[5:5] = ["--force-reinstall", "--no-deps"]
    click.echo(f"running: {shlex.join(cmd)}")
    if dry_run:
        return
    before = installed_version()
    result = run_command(cmd)
    if result.returncode != 0:
        click.echo(f"iron update: pip failed (exit code {result.returncode}); {DIST} stays at {before}", err=True)
        sys.exit(1)
    after = installed_version()
    if after == before:
        click.echo(f"{DIST} {after} (unchanged)")
    else:
        click.echo(f"{DIST} {before} -> {after}")
