"""Kernel discovery from user modules: ``--module`` and ``IRON_KERNEL_PATH`` on ``iron test`` and ``iron bench``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.harness import discover
from iron.harness.registry import REGISTRY, unregister

KERNEL_SOURCE = '''
import numpy as np

import iron


def _setup(gen):
    return {{"a": gen.random(), "out": gen.poisoned()}}


def _launch(d, backend):
    user_double[int(np.prod(d["a"].shape))](d["a"], d["out"], backend=backend)


@iron.bench("{name}", setup=_setup, launch=_launch, references={{"numpy": lambda d: d["a"] * 2}},
            bytes_moved=lambda shape, itemsize: 2 * int(np.prod(shape)) * itemsize)
@iron.test_kernel(oracle=lambda d: d["a"].astype(np.float64) * 2, shapes=[(64,)], dtypes=("f32",))
@iron.kernel
def user_double(a: iron.Tensor[iron.T], out: iron.Tensor[iron.T]):
    i = iron.program_id(0)
    out[i] = a[i] * 2.0
'''


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    """No inherited IRON_KERNEL_PATH; discovery writes it back, monkeypatch restores it; cache in tmp."""
    monkeypatch.delenv(discover.ENV_VAR, raising=False)
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path / "cache"))
    before = set(sys.modules)
    yield
    for name in [n for n in REGISTRY if n.startswith("user/")]:
        unregister(name)
    for name in set(sys.modules) - before:
        if name.startswith("userk_"):
            del sys.modules[name]
    discover.DISCOVERED.clear()


@pytest.fixture
def user_module(tmp_path):
    """A module file ``userk_<id>.py`` in tmp_path registering ``user/double_<id>``: (folder, module, kernel name)."""
    tag = uuid.uuid4().hex[:8]
    name = f"user/double_{tag}"
    module = f"userk_{tag}"
    (tmp_path / f"{module}.py").write_text(KERNEL_SOURCE.format(name=name))
    return tmp_path, module, name


def invoke(*args, env=None):
    return CliRunner().invoke(cli, list(args), env=env)


def test_module_option_by_name(user_module, monkeypatch):
    folder, module, name = user_module
    monkeypatch.chdir(folder)
    result = invoke("test", "--backend", "cpu", "--filter", name, "--module", module)
    assert result.exit_code == 0, result.output
    assert name in result.output
    assert os.environ[discover.ENV_VAR] == module  # exported for subprocess workers


def test_module_option_by_file_beside_std(user_module):
    folder, module, name = user_module
    result = invoke("test", "--backend", "cpu", "--filter", "user/", "-m", str(folder / f"{module}.py"))
    assert result.exit_code == 0, result.output
    assert name in result.output
    assert "std/unary/exp" in REGISTRY and name in REGISTRY  # the user kernel sits beside the std library's


def test_kernel_path_env_file_and_directory(user_module, tmp_path):
    folder, module, name = user_module
    for spec in (str(folder / f"{module}.py"), str(folder)):
        result = invoke("test", "--backend", "cpu", "--filter", name, env={discover.ENV_VAR: spec})
        assert result.exit_code == 0, result.output
        assert name in result.output


def test_kernel_path_env_several_entries(user_module, tmp_path):
    folder, module, name = user_module
    other = tmp_path / "other"
    other.mkdir()
    (other / "userk_other.py").write_text(KERNEL_SOURCE.format(name="user/other").replace("user_double", "user_o"))
    value = os.pathsep.join([str(folder / f"{module}.py"), "", str(other / "userk_other.py")])
    result = invoke("test", "--backend", "cpu", "--filter", "user/", env={discover.ENV_VAR: value})
    assert result.exit_code == 0, result.output
    assert name in result.output and "user/other" in result.output


def test_file_inside_package_imports_as_part_of_it(tmp_path):
    pkg = tmp_path / "userk_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("SCALE = 2.0\n")
    (pkg / "ops.py").write_text("from . import SCALE  # a relative import works\n"
                                + KERNEL_SOURCE.format(name="user/pkg_double"))
    result = invoke("test", "--backend", "cpu", "--filter", "user/pkg_double", "-m", str(pkg / "ops.py"))
    assert result.exit_code == 0, result.output
    assert "userk_pkg.ops" in sys.modules


def test_bench_with_module(user_module):
    folder, module, name = user_module
    result = invoke("bench", "--backend", "cpu", "--filter", name, "-m", str(folder / f"{module}.py"))
    assert result.exit_code == 0, result.output
    assert name in result.output


def test_missing_module_is_one_line_exit_2():
    result = invoke("test", "--backend", "cpu", "--module", "userk_no_such_module")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "userk_no_such_module" in lines[0] and "not found" in lines[0], result.output


def test_missing_file_in_env_is_one_line_exit_2(tmp_path):
    result = invoke("test", "--backend", "cpu", env={discover.ENV_VAR: str(tmp_path / "userk_gone.py")})
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "userk_gone.py" in lines[0] and discover.ENV_VAR in lines[0], result.output


@pytest.mark.parametrize("body, expected", [
    ("import userk_missing_dependency\n", "No module named 'userk_missing_dependency'"),
    ("x = 1\nraise RuntimeError('broken on purpose')\n", "RuntimeError: broken on purpose"),
    ("def f(:\n", "SyntaxError"),
])
def test_error_inside_user_module_is_one_line_exit_2(tmp_path, monkeypatch, body, expected):
    (tmp_path / "userk_broken.py").write_text(body)
    monkeypatch.chdir(tmp_path)
    result = invoke("test", "--backend", "cpu", "--module", "userk_broken")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "'userk_broken'" in lines[0] and expected in lines[0], result.output
    assert "userk_broken" not in sys.modules


def test_real_entry_point_with_env(user_module):
    """The installed ``iron`` script, in a fresh process, with only IRON_KERNEL_PATH."""
    folder, module, name = user_module
    iron_script = os.path.join(os.path.dirname(sys.executable), "iron")
    if not os.path.exists(iron_script):
        pytest.skip("no iron script beside this Python")
    env = {**os.environ, discover.ENV_VAR: str(folder / f"{module}.py")}
    proc = subprocess.run([iron_script, "test", "--backend", "cpu", "--filter", name], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert name in proc.stdout


def test_discover_unit(user_module):
    folder, module, name = user_module
    mods = discover.discover([str(folder / f"{module}.py")])
    assert [m.__name__ for m in mods] == [module]
    again = discover.discover([str(folder / f"{module}.py")])  # idempotent: same module object, no re-registration
    assert again == mods and name in REGISTRY
