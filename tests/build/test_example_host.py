"""examples/vulkan_host/run_spv.c: a C host with no Python in it runs an ``iron build`` artifact through Vulkan
(lavapipe in CI) and checks it against libm (issue 5, points 6 and 11)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from iron.cli.build_cmd import build as build_cmd

from . import kernels

HOST = Path(__file__).resolve().parents[2] / "examples" / "vulkan_host" / "run_spv.c"


def _vulkan_header_missing() -> str | None:
    if shutil.which("gcc") is None:
        return "gcc is not on PATH"
    probe = subprocess.run(["gcc", "-E", "-x", "c", "-"], input="#include <vulkan/vulkan.h>\n", capture_output=True,
                           text=True)
    return None if probe.returncode == 0 else "vulkan/vulkan.h not found (apt install libvulkan-dev)"


@pytest.fixture(scope="module")
def run_spv(tmp_path_factory) -> Path:
    reason = _vulkan_header_missing()
    if reason:
        pytest.skip(f"cannot compile the example host: {reason}")
    from iron.runtime import unavailable_reason

    reason = unavailable_reason("vulkan")
    if reason:
        pytest.skip(f"no Vulkan device to run the example host on: {reason}")
    exe = tmp_path_factory.mktemp("host") / "run_spv"
    r = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-o", str(exe), str(HOST),
                        "-lvulkan", "-lm"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def _build(out: Path, spec: str) -> None:
    r = CliRunner().invoke(build_cmd, [spec, "--backend", "vulkan", "--dtype", "f32", "--out", str(out)])
    assert r.exit_code == 0, r.output


def test_example_host_runs_std_exp(run_spv, tmp_path):
    _build(tmp_path, "iron.std.unary:iron_exp")
    r = subprocess.run([str(run_spv), str(tmp_path), "iron_exp_f32.spv"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 mismatches" in r.stdout and r.stdout.strip().endswith("OK")


def test_example_host_reports_a_wrong_kernel(run_spv, tmp_path):
    _build(tmp_path, f"{kernels.__name__}:exp_plus_one")
    r = subprocess.run([str(run_spv), str(tmp_path), "exp_plus_one_f32.spv", "1000"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1000 mismatches" in r.stdout and "FAIL" in r.stdout


def test_example_host_refuses_what_it_cannot_launch(run_spv, tmp_path):
    r = subprocess.run([str(run_spv), str(tmp_path), "iron_exp_f32.spv"], capture_output=True, text=True)
    assert r.returncode == 2 and "manifest.txt" in r.stderr
    CliRunner().invoke(build_cmd, [f"{kernels.__name__}:axpy_acc", "--backend", "vulkan", "--dtype", "f32",
                                   "--out", str(tmp_path)])
    r = subprocess.run([str(run_spv), str(tmp_path), "axpy_acc_f32.spv"], capture_output=True, text=True)
    assert r.returncode == 2 and "one read buffer and one write buffer" in r.stderr
