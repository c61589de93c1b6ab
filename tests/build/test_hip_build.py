"""``iron build --backend hip [--target gfx90a,gfx1030]``: HIP sources per wavefront size, AMD code objects per
target, their manifest records, and clear errors for targets that cannot be built (issue 7, point 3)."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
from click.testing import CliRunner

from iron.build import build, std_targets, target_for
from iron.cli.build_cmd import build as build_cmd
from iron.codegen import emit_hip, hiprtc
from iron.errors import IronError

from . import kernels

_NO_HIPRTC = hiprtc.unavailable_reason()
needs_hiprtc = pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
TARGETS = {"gfx90a": 64, "gfx1030": 32}
#: the std kernels built here
BUILT_STD = ("iron_exp", "softmax")
#: ELF facts of an AMD code object (LLVM's AMDGPUUsage): e_machine EM_AMDGPU, EI_OSABI ELFOSABI_AMDGPU_HSA, and the
#: processor in the low byte of e_flags (EF_AMDGPU_MACH_AMDGCN_*)
EM_AMDGPU, ELFOSABI_AMDGPU_HSA = 224, 64
EF_AMDGPU_MACH = {"gfx90a": 0x3F, "gfx1030": 0x36}


def _variants(targets):
    for target in targets:
        for dt in target.dtypes(None):
            stem = target.name if dt is None else f"{target.name}_{dt}"
            yield target, dt, stem


@pytest.fixture(scope="module")
def hip_build(tmp_path_factory):
    if _NO_HIPRTC is not None:
        pytest.skip(f"hipRTC unavailable: {_NO_HIPRTC}")
    out = tmp_path_factory.mktemp("hip")
    # two std kernels (elementwise and collective) and a test kernel with a constexpr: the build's files, records and
    # code objects; that every variant compiles for both processors is tests/backends/test_compile_targets.py's part
    # (hipRTC takes seconds a kernel: all of iron.std, twice, took over 20 minutes of CI's budget)
    targets = [*(t for t in std_targets() if t.name in BUILT_STD), target_for(kernels.axpy_acc)]
    manifest = build(targets, out, backends=["hip"], compile_targets=list(TARGETS))
    return out, targets, manifest, {a["file"]: a for a in manifest["artifacts"]}


@needs_hiprtc
def test_each_variant_gets_a_source_per_wavefront_and_a_code_object_per_target(hip_build):
    out, targets, manifest, files = hip_build
    expected = set()
    for _, _, stem in _variants(targets):
        expected |= {f"{stem}_wave64.hip", f"{stem}_wave32.hip", f"{stem}_gfx90a.hsaco", f"{stem}_gfx1030.hsaco"}
    assert set(files) == expected
    assert sorted(p.name for p in out.iterdir()) == sorted([*expected, "manifest.json", "manifest.txt"])
    assert {"iron_exp_f32_gfx90a.hsaco", "softmax_bf16_gfx1030.hsaco", "axpy_acc_f16_wave32.hip"} <= expected
    for name, record in files.items():
        data = (out / name).read_bytes()
        assert record["backend"] == "hip" and record["sha256"] == hashlib.sha256(data).hexdigest()
        assert record["bytes"] == len(data) > 0


@needs_hiprtc
def test_code_objects_are_amd_elf_for_their_target(hip_build):
    out, targets, _, files = hip_build
    for _, _, stem in _variants(targets):
        for target, wave in TARGETS.items():
            code = (out / f"{stem}_{target}.hsaco").read_bytes()
            record = files[f"{stem}_{target}.hsaco"]
            assert code[:4] == b"\x7fELF" and code[4] == 2 and code[7] == ELFOSABI_AMDGPU_HSA, stem
            assert struct.unpack_from("<H", code, 18)[0] == EM_AMDGPU
            assert struct.unpack_from("<I", code, 48)[0] & 0xFF == EF_AMDGPU_MACH[target], (stem, target)
            assert record["entry"].encode() + b"\0" in code  # the kernel's symbol
            assert record["hip"]["target"] == target and record["hip"]["wavefront"] == wave


@needs_hiprtc
def test_hip_sources_are_what_k_source_shows_for_the_target(hip_build, monkeypatch):
    out, targets, _, files = hip_build
    for target, dt, stem in _variants(targets):
        for gfx, wave in TARGETS.items():
            monkeypatch.setenv("IRON_HIP_TARGET", gfx)
            text = (out / f"{stem}_wave{wave}.hip").read_text()
            assert text == target.kernel.source("hip", dtype=dt, **dict(target.constexprs)), (stem, gfx)
            assert f"// wavefront: {wave} lanes" in text
            record = files[f"{stem}_wave{wave}.hip"]
            assert record["hip"]["wavefront"] == wave and record["hip"]["targets"] == [gfx]


@needs_hiprtc
def test_the_written_source_compiles_to_the_written_code_object(hip_build):
    out, _, _, _ = hip_build
    for stem in ("softmax_f16", "axpy_acc_f32"):
        for target, wave in TARGETS.items():
            src = (out / f"{stem}_wave{wave}.hip").read_text()
            assert hiprtc.compile_hip(src, target=target) == (out / f"{stem}_{target}.hsaco").read_bytes()


@needs_hiprtc
def test_manifest_records_params_shared_memory_and_access(hip_build):
    out, _, manifest, files = hip_build
    axpy = files["axpy_acc_f16_gfx90a.hsaco"]
    src = emit_hip(kernels.axpy_acc.variant(kernels.axpy_acc.dtypes[1], (kernels.SCALE,)).kernel, 64)
    assert axpy["dtype"] == "f16" and axpy["constexprs"] == {"SCALE": kernels.SCALE} and axpy["entry"] == src.entry
    assert [(p["name"], p["kind"], p["ctype"], p["dtype"]) for p in axpy["hip"]["params"]] == [
        ("x", "buffer", "iron_f16", "f16"), ("acc", "buffer", "iron_f16", "f16"), ("out", "buffer", "iron_f16", "f16"),
        ("alpha", "scalar", "float", "f32"), ("n", "scalar", "int", "i32"),
        ("iron_n0", "grid", "int", "i32"), ("iron_n1", "grid", "int", "i32"), ("iron_n2", "grid", "int", "i32")]
    assert [p.get("axis") for p in axpy["hip"]["params"]][-3:] == [0, 1, 2]
    assert [(a["name"], a["access"]) for a in axpy["args"]] == [
        ("x", "read"), ("acc", "readwrite"), ("out", "write"), ("alpha", "read"), ("n", "read")]
    softmax = files["softmax_f32_gfx1030.hsaco"]
    assert softmax["collectives"] is True and softmax["shared_bytes"] == {"static": 256 * 4, "dynamic": 0}
    assert files["iron_exp_f32_wave64.hip"]["hip"]["vector"]["width"] > 1  # the elementwise entry, as for CUDA
    text = (out / "manifest.txt").read_text()

    def block(name: str) -> list[str]:
        return text.split(f"artifact {name}\n", 1)[1].split("\nend\n", 1)[0].splitlines()

    assert {"wavefront 64", "target gfx90a", "param alpha scalar f32"} <= set(block("axpy_acc_f16_gfx90a.hsaco"))
    assert {"wavefront 32", "targets gfx1030"} <= set(block("axpy_acc_f16_wave32.hip"))
    assert json.loads((out / "manifest.json").read_text()) == manifest


def test_without_target_both_wavefront_sources_and_no_code_object(tmp_path):
    r = CliRunner().invoke(build_cmd, [f"{kernels.__name__}:axpy_acc", "--backend", "hip", "--dtype", "f32", "--out",
                                       str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["axpy_acc_f32_wave32.hip", "axpy_acc_f32_wave64.hip",
                                                         "manifest.json", "manifest.txt"]
    variant = kernels.axpy_acc.variant(kernels.axpy_acc.dtypes[0], (kernels.SCALE,))
    for wave in (32, 64):
        assert (tmp_path / f"axpy_acc_f32_wave{wave}.hip").read_text() == emit_hip(variant.kernel, wave).source
    records = json.loads((tmp_path / "manifest.json").read_text())["artifacts"]
    assert [(a["hip"]["wavefront"], a["hip"]["targets"]) for a in records] == [(32, []), (64, [])]


@needs_hiprtc
def test_cli_target_flag_writes_code_objects(tmp_path):
    r = CliRunner().invoke(build_cmd, ["iron.std.unary:iron_exp", "--backend", "hip", "--target", "gfx1030",
                                       "--target", "gfx90a,gfx1030", "--dtype", "bf16", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([
        "iron_exp_bf16_gfx1030.hsaco", "iron_exp_bf16_gfx90a.hsaco", "iron_exp_bf16_wave32.hip",
        "iron_exp_bf16_wave64.hip", "manifest.json", "manifest.txt"])
    assert "iron_exp_bf16_gfx90a.hsaco" in r.output and "4 artifacts" in r.output


@pytest.mark.parametrize("args,words", [
    (["--backend", "hip", "--target", "gfx9999"], ["--target gfx9999", "unknown AMD processor 'gfx9999'"]),
    (["--backend", "hip", "--target", "sm_90"], ["--target sm_90", "bad AMD target", "for --backend hip"]),
    (["--backend", "hip", "--target", "gfx90a:xnack-"], ["--target gfx90a:xnack-", "--target gfx90a"]),
    (["--backend", "cuda,vulkan", "--target", "gfx90a"], ["--target gfx90a", "none of the backends", "cuda, vulkan"]),
])
def test_bad_targets_are_clear_errors_before_anything_is_written(tmp_path, args, words):
    out = tmp_path / "out"
    r = CliRunner().invoke(build_cmd, ["iron.std.unary:iron_exp", *args, "--out", str(out)])
    assert isinstance(r.exception, IronError), r.output
    for w in words:
        assert w in str(r.exception)
    assert not out.exists()
