"""The Vulkan runtime on a hand-assembled SPIR-V kernel (no emitter needed): device choice, subgroup size, exact
grids that are not multiples of the group, push constants, staging copies, timing, and user-facing errors."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from iron.errors import LaunchError
from iron.ir import types as t

HERE = Path(__file__).parent

try:  # the emitter's dataclasses once it has landed; the runtime only reads their fields
    from iron.codegen.spirv import SpirvBuffer, SpirvKernel, SpirvPush
except ImportError:

    @dataclass(frozen=True)
    class SpirvBuffer:
        param: str
        binding: int
        dtype: t.ScalarType
        readonly: bool

    @dataclass(frozen=True)
    class SpirvPush:
        name: str
        offset: int
        dtype: t.ScalarType

    @dataclass(frozen=True)
    class SpirvKernel:
        words: bytes
        entry: str
        buffers: tuple
        push: tuple
        push_size: int
        local_size_spec_ids: tuple
        shared_bytes: int
        features: frozenset


@pytest.fixture(scope="module")
def exp_affine(tmp_path_factory) -> SpirvKernel:
    """``out[y*n0 + x] = exp(x_in[...]) * scale + bias`` assembled from exp_affine.spvasm."""
    if shutil.which("spirv-as") is None:
        pytest.skip("spirv-as (spirv-tools) is not installed")
    out = tmp_path_factory.mktemp("spv") / "exp_affine.spv"
    subprocess.run(["spirv-as", "--target-env", "vulkan1.2", str(HERE / "exp_affine.spvasm"), "-o", str(out)],
                   check=True)
    if shutil.which("spirv-val"):
        subprocess.run(["spirv-val", "--target-env", "vulkan1.3", str(out)], check=True)
    push = (SpirvPush("scale", 0, t.f32), SpirvPush("bias", 4, t.i32), SpirvPush("iron_n0", 8, t.i32, 0),
            SpirvPush("iron_n1", 12, t.i32, 1), SpirvPush("iron_n2", 16, t.i32, 2))
    buffers = (SpirvBuffer("x", 0, t.f32, True), SpirvBuffer("out", 1, t.f32, False))
    return SpirvKernel(out.read_bytes(), "main", buffers, push, 20, (0, 1, 2), 0, frozenset())


def _oracle(x: np.ndarray, scale: float, bias: int) -> np.ndarray:
    return np.exp(x.astype(np.float64)) * np.float64(np.float32(scale)) + bias


def test_probe_finds_a_device_with_its_subgroup_size(vk_backend):
    info = vk_backend.info()
    for key in ("name", "type", "api_version", "driver", "subgroup_size", "max_group_size", "max_group_invocations",
                "max_shared_bytes", "features"):
        assert key in info
    assert vk_backend.simd_width() == info["subgroup_size"]
    if "llvmpipe" in info["name"]:  # lavapipe, the CI device
        assert info["type"] == "cpu"
        assert vk_backend.simd_width() == 8


@pytest.mark.parametrize("grid,group", [((1, 1, 1), (64, 1, 1)), ((1000, 1, 1), (64, 1, 1)), ((257, 1, 1), (256, 1, 1)),
                                        ((37, 11, 1), (8, 4, 1)), ((130, 3, 1), (32, 2, 1)), ((5, 7, 1), (1, 1, 1))])
def test_exact_grids_match_the_oracle(vk_backend, exp_affine, rng, grid, group):
    n0, n1, _ = grid
    x = rng.uniform(-4, 4, n0 * n1).astype(np.float32)
    out = np.full(n0 * n1 + 13, np.nan, np.float32)  # NaN-poisoned, with a tail no thread may touch
    ms = vk_backend.run_spirv(exp_affine, {"x": x, "out": out}, {"scale": np.float32(0.75), "bias": np.int32(-3)},
                              grid, group)
    np.testing.assert_allclose(out[: n0 * n1], _oracle(x, 0.75, -3), rtol=2e-5, atol=1e-5)
    assert np.isnan(out[n0 * n1:]).all()
    assert ms is None or ms >= 0
    assert vk_backend.last_gpu_time_ms == ms


def test_push_constant_scalars_change_between_launches(vk_backend, exp_affine, rng):
    x = rng.uniform(-2, 2, 300).astype(np.float32)
    for scale, bias in ((1.0, 0), (-2.5, 7), (1e-3, -100000)):
        out = np.full(300, np.nan, np.float32)
        vk_backend.run_spirv(exp_affine, {"x": x, "out": out}, {"scale": np.float32(scale), "bias": np.int32(bias)},
                             (300, 1, 1), (128, 1, 1))
        np.testing.assert_allclose(out, _oracle(x, scale, bias), rtol=2e-5, atol=1e-5)


def test_inputs_are_not_written_back(vk_backend, exp_affine, rng):
    x = rng.uniform(-1, 1, 50).astype(np.float32)
    x.flags.writeable = False  # a read-only input is fine: the kernel never writes x
    out = np.full(50, np.nan, np.float32)
    vk_backend.run_spirv(exp_affine, {"x": x, "out": out}, {"scale": np.float32(1), "bias": np.int32(0)}, (50, 1, 1),
                         (16, 1, 1))
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)), rtol=2e-5)


def test_read_only_output_is_refused(vk_backend, exp_affine):
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(LaunchError, match="'out' is read-only"):
        vk_backend.run_spirv(exp_affine, {"x": np.zeros(8, np.float32), "out": out},
                             {"scale": np.float32(1), "bias": np.int32(0)}, (8, 1, 1), (8, 1, 1))


def test_staging_path_matches(exp_affine, rng):
    """The device-local + staging-copy path a discrete GPU takes, forced on whatever device is here."""
    from iron.runtime.vulkan import VulkanBackend

    be = VulkanBackend()
    try:
        try:
            ctx = be.context()
        except LaunchError as e:
            pytest.skip(str(e))
        ctx.unified = False
        x = rng.uniform(-3, 3, 999).astype(np.float32)
        out = np.full(999, np.nan, np.float32)
        be.run_spirv(exp_affine, {"x": x, "out": out}, {"scale": np.float32(2), "bias": np.int32(1)}, (999, 1, 1),
                     (64, 1, 1))
        np.testing.assert_allclose(out, _oracle(x, 2, 1), rtol=2e-5, atol=1e-5)
    finally:
        be.close()


def test_repeat_dispatch_timing(vk_backend, exp_affine, rng):
    x = rng.uniform(-1, 1, 4096).astype(np.float32)
    out = np.full(4096, np.nan, np.float32)
    ms = vk_backend.run_spirv(exp_affine, {"x": x, "out": out}, {"scale": np.float32(1), "bias": np.int32(0)},
                              (4096, 1, 1), (256, 1, 1), repeat=5)
    np.testing.assert_allclose(out, np.exp(x.astype(np.float64)), rtol=2e-5)
    if vk_backend.info()["timestamps"]:
        assert ms is not None and ms > 0


def test_pipelines_are_cached_per_group_size(vk_backend, exp_affine):
    ctx = vk_backend.context()
    args = {"x": np.zeros(64, np.float32), "out": np.zeros(64, np.float32)}
    scalars = {"scale": np.float32(1), "bias": np.int32(0)}
    vk_backend.run_spirv(exp_affine, args, scalars, (64, 1, 1), (32, 1, 1))
    vk_backend.run_spirv(exp_affine, args, scalars, (64, 1, 1), (16, 1, 1))
    vk_backend.run_spirv(exp_affine, args, scalars, (64, 1, 1), (32, 1, 1))
    prog = ctx.program(exp_affine)
    assert {(32, 1, 1), (16, 1, 1)} <= set(prog.pipelines)


def test_non_contiguous_array_is_refused(vk_backend):
    a = np.zeros((8, 8), np.float32)[:, ::2]
    with pytest.raises(LaunchError, match="'x' is not C-contiguous"):
        vk_backend.check_array("x", a, lambda: None)
    with pytest.raises(LaunchError, match="'x' is a builtins.list"):
        vk_backend.check_array("x", [1.0], lambda: None)


def test_missing_feature_names_feature_and_device(vk_backend, exp_affine, monkeypatch):
    ctx = vk_backend.context()
    monkeypatch.setitem(ctx.has, "float16", False)
    needs_f16 = replace(exp_affine, features=frozenset({"float16"}))
    with pytest.raises(LaunchError, match=r"needs 'float16'.*" + ctx.phys.name.split(" ")[0]):
        vk_backend.run_spirv(needs_f16, {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)},
                             {"scale": np.float32(1), "bias": np.int32(0)}, (4, 1, 1), (4, 1, 1))


def test_limits_are_checked(vk_backend, exp_affine):
    big = replace(exp_affine, shared_bytes=1 << 30)
    with pytest.raises(LaunchError, match="bytes of shared memory"):
        vk_backend.run_spirv(big, {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)},
                             {"scale": np.float32(1), "bias": np.int32(0)}, (4, 1, 1), (4, 1, 1))
    with pytest.raises(LaunchError, match="exceeds"):
        vk_backend.run_spirv(exp_affine, {"x": np.zeros(4, np.float32), "out": np.zeros(4, np.float32)},
                             {"scale": np.float32(1), "bias": np.int32(0)}, (4, 1, 1), (2048, 1, 1))


def test_device_choice_by_name_and_index(monkeypatch):
    from iron.runtime.vulkan_select import PhysicalInfo, choose_device

    v13 = 1 << 22 | 3 << 12
    devs = [PhysicalInfo(0, None, "llvmpipe", "cpu", v13, 0), PhysicalInfo(1, None, "NVIDIA H200", "discrete", v13, 0),
            PhysicalInfo(2, None, "Intel UHD", "integrated", v13, 0)]
    monkeypatch.delenv("IRON_VULKAN_DEVICE", raising=False)
    assert choose_device(devs).name == "NVIDIA H200"
    monkeypatch.setenv("IRON_VULKAN_DEVICE", "2")
    assert choose_device(devs).name == "Intel UHD"
    monkeypatch.setenv("IRON_VULKAN_DEVICE", "LLVM")
    assert choose_device(devs).name == "llvmpipe"
    monkeypatch.setenv("IRON_VULKAN_DEVICE", "radeon")
    with pytest.raises(LaunchError, match="matches no Vulkan device"):
        choose_device(devs)


def test_close_then_relaunch(exp_affine):
    from iron.runtime.vulkan import VulkanBackend, probe

    if probe():
        pytest.skip(probe())
    be = VulkanBackend()
    args = {"x": np.ones(10, np.float32), "out": np.zeros(10, np.float32)}
    be.run_spirv(exp_affine, args, {"scale": np.float32(1), "bias": np.int32(0)}, (10, 1, 1), (4, 1, 1))
    be.close()
    be.close()  # idempotent
    be.run_spirv(exp_affine, args, {"scale": np.float32(1), "bias": np.int32(1)}, (10, 1, 1), (4, 1, 1))
    np.testing.assert_allclose(args["out"], np.e + 1, rtol=2e-5)
    be.close()


def test_probe_reports_a_missing_loader(monkeypatch):
    """The `vulkan` package raises OSError at import when libvulkan.so.1 is missing: probe says so, no traceback."""
    import builtins

    from iron.runtime import vulkan as vkmod

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "vulkan":
            raise OSError("Cannot find Vulkan SDK version")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "vulkan", raising=False)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    assert "no Vulkan loader (libvulkan.so.1)" in vkmod._probe()
    monkeypatch.setattr(builtins, "__import__", real_import)


def test_clean_teardown_at_exit(exp_affine, tmp_path):
    """A process that launched exits with status 0 and nothing on stderr (atexit destroys every Vulkan object)."""
    from iron.runtime.vulkan import probe

    if probe():
        pytest.skip(probe())
    spv = tmp_path / "k.spv"
    spv.write_bytes(exp_affine.words)
    script = f"""
import numpy as np
from iron.ir import types as t
from iron.runtime.vulkan import VulkanBackend
from types import SimpleNamespace as NS
spk = NS(words=open({str(spv)!r}, "rb").read(), entry="main", push_size=20, local_size_spec_ids=(0, 1, 2),
         shared_bytes=0, features=frozenset(),
         buffers=(NS(param="x", binding=0, readonly=True), NS(param="out", binding=1, readonly=False)),
         push=tuple(NS(name=n, offset=o, dtype=d, axis=a) for n, o, d, a in
                    (("scale", 0, t.f32, None), ("bias", 4, t.i32, None), ("iron_n0", 8, t.i32, 0),
                     ("iron_n1", 12, t.i32, 1), ("iron_n2", 16, t.i32, 2))))
out = np.zeros(5, np.float32)
VulkanBackend().run_spirv(spk, {{"x": np.zeros(5, np.float32), "out": out}}, {{"scale": 1.0, "bias": 2}}, (5, 1, 1),
                          (4, 1, 1))
assert (out == 3).all(), out
print("ok")
"""
    r = subprocess.run([__import__("sys").executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
