"""``iron update``: the pip command for each option (pip replaced by a recorder), and, behind
``IRON_TEST_UPDATE_WHEEL=1`` (it builds two wheels and a venv: over a minute), a real upgrade from a local wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from iron.cli import update as update_mod
from iron.cli.main import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def pip_calls(monkeypatch):
    """Record commands instead of running them; the version probe answers 0.1.0, then 0.2.0 after an install."""
    calls: list[list[str]] = []
    state = {"version": "0.1.0"}

    def fake_run(cmd, **kwargs):
        calls.append(list(cmd))
        if cmd[1] == "-c":  # the version probe
            return SimpleNamespace(returncode=0, stdout=state["version"] + "\n", stderr="")
        state["version"] = "0.2.0"
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(update_mod, "run_command", fake_run)
    monkeypatch.delenv(update_mod.REPO_ENV, raising=False)
    return calls


def invoke(*args):
    return CliRunner().invoke(cli, ["update", *args])


def test_default_upgrades_release(pip_calls):
    result = invoke()
    assert result.exit_code == 0, result.output
    pip = [c for c in pip_calls if c[1] == "-m"]
    assert pip == [[sys.executable, "-m", "pip", "install", "--upgrade", "wh-iron"]]
    assert "running: " in result.output and "wh-iron 0.1.0 -> 0.2.0" in result.output


def test_path(pip_calls, tmp_path):
    wheel = tmp_path / "wh_iron-0.2.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    result = invoke("--path", str(wheel))
    assert result.exit_code == 0, result.output
    assert [c for c in pip_calls if c[1] == "-m"][0][-1] == str(wheel)


def test_force(pip_calls, tmp_path):
    result = invoke("--path", str(tmp_path), "--force")
    assert result.exit_code == 0, result.output
    cmd = [c for c in pip_calls if c[1] == "-m"][0]
    assert cmd[3:7] == ["install", "--upgrade", "--force-reinstall", "--no-deps"]


def test_commit_and_pr_use_repo_url(pip_calls, monkeypatch):
    monkeypatch.setenv(update_mod.REPO_ENV, "https://example.org/iron.git")
    assert invoke("--commit", "abc123").exit_code == 0
    assert invoke("--pr", "42").exit_code == 0
    pips = [c[-1] for c in pip_calls if c[1] == "-m"]
    assert pips == ["wh-iron @ git+https://example.org/iron.git@abc123",
                    "wh-iron @ git+https://example.org/iron.git@refs/pull/42/head"]


def test_commit_without_repo_url_is_a_usage_error(pip_calls, monkeypatch):
    monkeypatch.setattr(update_mod, "REPO_URL", "")
    result = invoke("--commit", "abc123")
    assert result.exit_code == 2 and update_mod.REPO_ENV in result.output
    assert pip_calls == []


def test_dry_run_runs_nothing(pip_calls):
    result = invoke("--dry-run")
    assert result.exit_code == 0
    assert pip_calls == [] and "pip install --upgrade wh-iron" in result.output


def test_options_are_exclusive(pip_calls, tmp_path):
    result = invoke("--pr", "1", "--path", str(tmp_path))
    assert result.exit_code == 2 and "at most one" in result.output


def test_pip_failure_exits_1(pip_calls, monkeypatch):
    def failing(cmd, **kwargs):
        if cmd[1] == "-c":
            return SimpleNamespace(returncode=0, stdout="0.1.0\n", stderr="")
        return SimpleNamespace(returncode=3, stdout="", stderr="")

    monkeypatch.setattr(update_mod, "run_command", failing)
    result = invoke()
    assert result.exit_code == 1 and "pip failed (exit code 3)" in result.output


def _wheel(tmp_path, version: str) -> str:
    """A wheel of this repository with its version set to ``version``, built from a copy."""
    src = tmp_path / f"src-{version}"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build",
                                                               "iron-build", ".pytest_cache", ".ruff_cache"))
    pyproject = src / "pyproject.toml"
    text = pyproject.read_text()
    assert 'version = "' in text
    start = text.index('version = "')
    end = text.index('"', start + len('version = "'))
    pyproject.write_text(text[:start] + f'version = "{version}' + text[end:])
    out = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(src)], check=True)
    return str(next(out.glob(f"wh_iron-{version}-*.whl")))


@pytest.mark.skipif(os.environ.get("IRON_TEST_UPDATE_WHEEL") != "1",
                    reason="builds wheels and a venv (slow); set IRON_TEST_UPDATE_WHEEL=1")
def test_update_from_local_wheel_in_throwaway_venv(tmp_path):
    old, new = _wheel(tmp_path, "0.0.1"), _wheel(tmp_path, "99.0.0")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    py = str(bindir / "python")
    # the venv's own site-packages come first; the project venv's follow through a .pth file, so numpy, click and
    # rich resolve without a network (and pip may not uninstall anything outside the throwaway venv)
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(purelib, "_deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([py, "-m", "pip", "install", "--no-deps", "-q", old], check=True)
    proc = subprocess.run([str(bindir / "iron"), "update", "--path", new], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wh-iron 0.0.1 -> 99.0.0" in proc.stdout, proc.stdout
    probe = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('wh-iron'))"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "99.0.0"
