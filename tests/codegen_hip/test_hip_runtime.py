"""The HIP launch path without an AMD GPU: ``iron.runtime.hip`` talks to a fake ``libamdhip64`` (``fake_hip``) that
records every call and runs launched kernels in the interpreter with the device's wavefront. Checked here: the code
object that is loaded is hipRTC's for the device's processor, the ``void**`` argument array (decoded from memory)
holds the device pointers, the scalars in the C types of the emitted signature and the exact grid sizes, the grid
and group dimensions, the copies in and out, the module cache, and that every HIP error becomes an Iron error
naming the call. ``DeviceProps`` is checked against ROCm's own header with a C compiler.

What this cannot show: that a real AMD GPU and driver behave as the fake does. Nothing here has run on one.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import iron
import iron.runtime as runtime
import iron.runtime.hip as hip_rt
from iron import ExecutionError, LaunchError, Tensor, cast, f32, i32, program_id, simd_size, simd_sum, u32
from iron.codegen import emit_hip, hiprtc
from iron.runtime.hip import DeviceProps, HipBackend
from iron.std import attention
from iron.std.norm import rms_norm
from iron.std.unary import iron_exp

from .fake_hip import FakeHip, address

_NO_HIPRTC = hiprtc.unavailable_reason()
needs_hiprtc = pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
HIP_HEADER = Path("/usr/include/hip/hip_runtime_api.h")


@iron.kernel
def scaled_count(x: Tensor[f32], out: Tensor[u32], alpha: float, n: int, k: u32):
    i = program_id(0)
    if i < n:
        out[i] = cast(x[i] * alpha, u32) + k


@iron.kernel
def scale_2d(a: Tensor[f32], out: Tensor[f32], ncols: int, s: float):
    r = program_id(0)
    c = program_id(1)
    out[r * ncols + c] = a[r * ncols + c] * s


@iron.kernel
def wave_sum(x: Tensor[f32], out: Tensor[f32], width: Tensor[i32]):
    i = program_id(0)
    out[i] = simd_sum(x[i])
    width[i] = simd_size()


def _signature_ctypes(source: str, entry: str) -> list[tuple[str, object]]:
    """(parameter name, ctypes type) read from the emitted C signature: pointers are void*, scalars by their C type."""
    params = re.search(rf'extern "C" __global__ void {entry}\(([^)]*)\)', source).group(1)
    out = []
    for decl in params.split(","):
        words = decl.replace("*", " * ").split()
        name = words[-1]
        if "*" in words:
            out.append((name, ctypes.c_void_p))
        else:
            ctype = " ".join(w for w in words[:-1] if w != "const")
            out.append((name, {"float": ctypes.c_float, "int": ctypes.c_int, "unsigned": ctypes.c_uint}[ctype]))
    return out


def _decode(launch, source: str, entry: str) -> dict[str, object]:
    """The kernel's arguments as the GPU would read them: each slot of the void** points at the value."""
    sig = _signature_ctypes(source, entry)
    slots = (ctypes.c_void_p * len(sig)).from_address(launch.argv)
    return {name: ctype.from_address(slot).value for (name, ctype), slot in zip(sig, slots)}


def _htod_targets(fake: FakeHip) -> dict[int, int]:
    """host address -> device pointer, from the recorded hipMemcpyHtoD calls."""
    return {address(args[1]): address(args[0]) for name, args in fake.calls if name == "hipMemcpyHtoD"}


# -- the device ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("gcc") is None or not HIP_HEADER.exists(),
                    reason="needs gcc and ROCm's hip_runtime_api.h (apt install libamdhip64-dev)")
def test_device_props_layout_matches_rocms_header(tmp_path):
    """Every field of ``DeviceProps`` sits where ROCm's C header puts it, and the buffer handed to
    hipGetDeviceProperties is at least as large as the whole struct."""
    fields = [f[0] for f in DeviceProps._fields_]
    prog = tmp_path / "offsets.c"
    prog.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <hip/hip_runtime_api.h>\nint main(void) {\n"
                    + "".join(f'    printf("{f} %zu\\n", offsetof(hipDeviceProp_t, {f}));\n' for f in fields)
                    + '    printf("sizeof %zu\\n", sizeof(hipDeviceProp_t));\n    return 0;\n}\n')
    exe = tmp_path / "offsets"
    r = subprocess.run(["gcc", "-D__HIP_PLATFORM_AMD__", "-o", str(exe), str(prog)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    c_offsets = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                             check=True).stdout.splitlines())
    assert {f: getattr(DeviceProps, f).offset for f in fields} == {f: int(c_offsets[f]) for f in fields}
    assert hip_rt._PROPS_BYTES >= int(c_offsets["sizeof"]) > ctypes.sizeof(DeviceProps)


def test_this_machine_has_no_amd_gpu_and_says_so():
    reason = hip_rt.probe()
    if reason is None:
        pytest.skip("an AMD GPU is present")
    assert reason.startswith(("no HIP runtime", "no AMD GPU"))


def test_no_runtime_and_no_device_are_clear(install, monkeypatch):
    monkeypatch.setattr(hip_rt, "_runtime", lambda: "no HIP runtime (libamdhip64.so: not found); install ROCm")
    monkeypatch.setitem(runtime._INSTANCES, "hip", HipBackend())
    a, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(LaunchError, match=r"cannot launch iron_exp on the hip backend: no HIP runtime") as e:
        iron_exp[8](a, out, backend="hip")
    assert "k.compile('hip', target='gfx90a') work without a GPU" in str(e.value)

    fake, _ = install(init_error=101)
    with pytest.raises(LaunchError, match=r"no AMD GPU or driver \(hipInit: hipErrorInvalidDevice: invalid device"):
        iron_exp[8](a, out, backend="hip")
    fake, _ = install(devices=0)
    with pytest.raises(LaunchError, match=r"no AMD GPU \(hipGetDeviceCount found none\)"):
        iron_exp[8](a, out, backend="hip")
    assert "hipModuleLoadData" not in fake.names() and "hipMalloc" not in fake.names()
    assert not out.any()


def test_iron_device_says_why_or_that_hip_is_available(install):
    from iron.cli.main import cli

    install(devices=0)
    r = CliRunner().invoke(cli, ["device"])
    row = next(line for line in r.output.splitlines() if line.startswith("│ hip"))
    assert r.exit_code == 0 and "unavailable" in row and "no AMD GPU (hipGetDeviceCount found none)" in row
    install()
    r = CliRunner().invoke(cli, ["device"])
    hip_rows = r.output.split("│ hip", 1)[1].split("│ metal", 1)[0]
    assert "available" in hip_rows and "unavailable" not in hip_rows
    text = " ".join(hip_rows.replace("│", " ").split())
    assert "Fake AMD Instinct" in text and "gfx90a" in text and "verified: no" in text


def test_device_arch_and_wavefront_come_from_the_properties(install, monkeypatch):
    _, backend = install(arch="gfx90a:sramecc+:xnack-", warp_size=64)
    monkeypatch.setenv("IRON_HIP_TARGET", "gfx1030")  # the device wins over the compile-only default
    assert backend.target == "gfx1030"
    info = backend.info()
    assert info["arch"] == "gfx90a:sramecc+:xnack-" and info["target"] == "gfx90a" and info["wavefront"] == 64
    assert info["name"] == "Fake AMD Instinct" and info["compute_units"] == 104 and info["memory_gib"] == 64.0
    assert backend.target == "gfx90a" and "wavefront: 64 lanes" in backend.source(iron_exp.variant(iron.f32))

    _, backend = install(arch="gfx1030", warp_size=64)  # a wavefront Iron would not emit for that processor
    with pytest.raises(LaunchError, match="reports a wavefront of 64 lanes, but Iron compiles gfx1030 for 32"):
        backend.device()
    monkeypatch.setenv("IRON_HIP_DEVICE", "2")
    _, backend = install(devices=2)
    with pytest.raises(LaunchError, match="IRON_HIP_DEVICE=2, but there are 2 AMD GPUs"):
        backend.device()


# -- launches (need hipRTC for the code object) -------------------------------------------------------------------


@needs_hiprtc
@pytest.mark.parametrize("arch,warp,other", [("gfx1030", 32, "gfx90a"), ("gfx90a:sramecc+:xnack-", 64, "gfx1030")])
def test_loaded_code_object_is_hiprtcs_for_the_device(install, arch, warp, other):
    fake, backend = install(arch=arch, warp_size=warp)
    fake.kernels["iron_exp"] = variant = iron_exp.variant(iron.f32)
    a = np.linspace(-3, 3, 1000, dtype=np.float32)
    out = np.zeros_like(a)
    iron_exp[1000](a, out, backend="hip")
    processor = arch.split(":")[0]
    (code,) = fake.loaded.values()
    direct = hiprtc.compile_hip(emit_hip(variant.kernel, warp), target=processor)
    assert code == direct == backend.compile(variant, processor)
    assert code != backend.compile(variant, other) and processor.encode() in code
    assert list(fake.functions.values()) == [(next(iter(fake.loaded)), "iron_exp")]
    np.testing.assert_allclose(out, np.exp(a), rtol=2e-6)  # the fake ran it in the interpreter


@needs_hiprtc
def test_argument_array_holds_pointers_scalars_and_grid(install):
    fake, backend = install(arch="gfx90a", warp_size=64)
    variant = scaled_count.variant(None)
    fake.kernels["scaled_count"] = variant
    src = emit_hip(variant.kernel, 64)
    fake.on_launch = lambda launch: _decode(launch, src.source, src.entry)
    x = np.arange(300, dtype=np.float32)
    out = np.zeros(300, np.uint32)
    scaled_count[(300,), (128,)](x, out, 2.5, 250, 3_000_000_000, backend="hip")
    (launch,) = fake.launches
    args = launch.args
    device_of = _htod_targets(fake)
    assert args["x"] == device_of[x.ctypes.data] and args["out"] == device_of[out.ctypes.data]
    assert args["x"] != args["out"]
    assert args["alpha"] == 2.5 and args["n"] == 250 and args["k"] == 3_000_000_000
    assert (args["iron_n0"], args["iron_n1"], args["iron_n2"]) == (300, 1, 1)
    assert launch.blocks == (3, 1, 1) and launch.threads == (128, 1, 1) and launch.shared_bytes == 0
    assert launch.stream == 0 and launch.entry == "scaled_count"
    expect = np.zeros(300, np.uint32)
    expect[:250] = (x[:250] * np.float32(2.5)).astype(np.uint32) + np.uint32(3_000_000_000)
    np.testing.assert_array_equal(out, expect)
    # only the buffer the kernel writes comes back
    dtoh = [address(a[0]) for n, a in fake.calls if n == "hipMemcpyDtoH"]
    assert dtoh == [out.ctypes.data]


@needs_hiprtc
def test_two_dimensional_grid_and_default_group(install, rng):
    fake, _ = install(arch="gfx1030", warp_size=32)
    fake.kernels["scale_2d"] = scale_2d.variant(None)
    src = emit_hip(scale_2d.variant(None).kernel, 32)
    fake.on_launch = lambda launch: _decode(launch, src.source, src.entry)
    rows, cols = 70, 33
    a = rng.standard_normal(rows * cols).astype(np.float32)
    out = np.zeros_like(a)
    scale_2d[(rows, cols), (16, 8)](a, out, cols, 0.5, backend="hip")
    scale_2d[(rows, cols), None](a, out, cols, 0.25, backend="hip")  # default 2-D group: 16 x 16
    first, second = fake.launches
    assert first.blocks == (5, 5, 1) and first.threads == (16, 8, 1)
    assert second.blocks == (5, 3, 1) and second.threads == (16, 16, 1)
    args = second.args
    assert (args["iron_n0"], args["iron_n1"], args["iron_n2"]) == (rows, cols, 1) and args["ncols"] == cols
    np.testing.assert_array_equal(out, a * np.float32(0.25))


@needs_hiprtc
@pytest.mark.parametrize("arch,warp", [("gfx90a", 64), ("gfx1030", 32)])
def test_simd_ops_run_with_the_devices_wavefront(install, arch, warp, rng):
    fake, _ = install(arch=arch, warp_size=warp)
    fake.kernels["wave_sum"] = wave_sum.variant(None)
    x = rng.integers(-8, 8, 512).astype(np.float32)
    out, width = np.zeros_like(x), np.zeros(512, np.int32)
    wave_sum[512, 256](x, out, width, backend="hip")
    assert (width == warp).all()
    np.testing.assert_array_equal(out, np.repeat(x.reshape(-1, warp).sum(axis=1), warp))


@needs_hiprtc
def test_std_rms_norm_through_the_fake(install, rng):
    fake, _ = install(arch="gfx90a", warp_size=64)
    variant = rms_norm.variant(iron.f32, (256,))
    fake.kernels[emit_hip(variant.kernel, 64).entry] = variant
    rows, cols = 4, 300
    x, w = rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    out = np.zeros_like(x)
    rms_norm[rows * 256, 256](x, w, out, cols, 1e-6, 256, backend="hip")
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out, x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * w, rtol=2e-5,
                               atol=1e-6)


@needs_hiprtc
def test_modules_and_buffers_are_reused(install):
    fake, _ = install()
    fake.kernels["iron_exp"] = iron_exp.variant(iron.f32)
    a, out = np.zeros(256, np.float32), np.zeros(256, np.float32)
    iron_exp[256](a, out, backend="hip")
    before = fake.names()
    iron_exp[256](a + 1, out, backend="hip")
    again = fake.names()[len(before):]
    assert before.count("hipModuleLoadData") == 1 and before.count("hipMalloc") == 2
    assert "hipModuleLoadData" not in again and "hipModuleGetFunction" not in again and "hipMalloc" not in again
    assert again.count("hipModuleLaunchKernel") == 1 and again.count("hipStreamSynchronize") == 1
    np.testing.assert_allclose(out, np.e, rtol=1e-6)


@needs_hiprtc
@pytest.mark.parametrize("call,code,name", [
    ("hipSetDevice", 101, "hipErrorInvalidDevice"),
    ("hipModuleLoadData", 209, "hipErrorNoBinaryForGpu"),
    ("hipModuleGetFunction", 500, "hipErrorNotFound"),
    ("hipMalloc", 2, "hipErrorOutOfMemory"),
    ("hipMemcpyHtoD", 1, "hipErrorInvalidValue"),
    ("hipModuleLaunchKernel", 1, "hipErrorInvalidValue"),
    ("hipMemcpyDtoH", 1, "hipErrorInvalidValue"),
])
def test_hip_errors_become_launch_errors_naming_the_call(install, call, code, name):
    fake, _ = install(fail={call: code})
    a, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(LaunchError, match=rf"HIP: {call}(\(\w+\))? failed[^:]*: {name}"):
        iron_exp[64](a, out, backend="hip")
    fake.fail.clear()  # the runtime recovers: buffers went back to the pool, the next launch works
    fake.kernels["iron_exp"] = iron_exp.variant(iron.f32)
    iron_exp[64](a, out, backend="hip")
    np.testing.assert_allclose(out, np.e, rtol=1e-6)


@needs_hiprtc
def test_a_fault_while_running_is_an_execution_error(install):
    fake, _ = install(fail={"hipStreamSynchronize": 719})
    a, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(ExecutionError, match=r"iron_exp failed on the AMD GPU \(hipStreamSynchronize: "
                                             r"hipErrorLaunchFailure: unspecified launch failure\)"):
        iron_exp[64](a, out, backend="hip")
    assert "hipMemcpyDtoH" not in fake.names() and not out.any()


@needs_hiprtc
def test_read_only_output_is_refused_before_anything_runs(install):
    fake, _ = install()
    a, out = np.ones(64, np.float32), np.zeros(64, np.float32)
    out.flags.writeable = False
    with pytest.raises(LaunchError, match="argument 'out' is read-only but iron_exp writes to it"):
        iron_exp[64](a, out, backend="hip")
    assert "hipModuleLaunchKernel" not in fake.names()


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_every_registered_std_kernel_matches_the_cpu_backend_bit_for_bit(launching, monkeypatch, dtype):
    """Each std kernel's own launch callback, on its smallest test shape: through the HIP launch path (copies,
    argument array, grid) into the fake, which runs the interpreter at wavefront 32, against the cpu backend, which
    runs the same interpreter at SIMD width 32 on the arrays directly. Any slip in the HIP path shows as a mismatch.
    The code objects are stand-ins (``launching``): hipRTC's for every std kernel took 20 minutes of CI."""
    from iron.harness.registry import selected
    from iron.ir.types import SCALAR_TYPES

    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", "32")
    fake, _ = launching
    # attention picks its tiles by the backend's shared memory: the cpu backend is given HIP's, so both launches run
    # the same tiles (and the same rounding of the online softmax)
    monkeypatch.setitem(attention.LIMITS, "cpu", attention.LIMITS["hip"])
    entries = [r for r in selected(tested=True) if r.launch is not None and dtype in r.dtypes]
    assert {"std/unary/exp", "std/softmax/row", "std/norm/rms_norm"} <= {r.name for r in entries}
    for entry in entries:
        shape = min(entry.shapes, key=np.prod)
        arrays = entry.make(shape, SCALAR_TYPES[dtype].np_dtype, np.random.default_rng(7))
        on_cpu = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
        launched = len(fake.launches)
        entry.launch(arrays, "hip")
        entry.launch(on_cpu, "cpu")
        assert len(fake.launches) > launched, entry.name
        assert not np.isnan(on_cpu[entry.output].astype(np.float32)).any(), entry.name
        np.testing.assert_array_equal(arrays[entry.output].view(np.uint8), on_cpu[entry.output].view(np.uint8),
                                      err_msg=entry.name)
