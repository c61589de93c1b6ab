"""``iron build``: artifacts, manifest content, determinism, and the CLI command (issue 5, point 6)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from iron.build import WRITERS, build, std_targets, target_for
from iron.build.writers import MANIFEST_LINES
from iron.cli.build_cmd import build as build_cmd
from iron.codegen.nvrtc import unavailable_reason
from iron.errors import IronError

from . import kernels

KSPEC = f"{kernels.__name__}:axpy_acc"


def _invoke(*args: str):
    return CliRunner().invoke(build_cmd, list(args), catch_exceptions=True)


def _by_file(manifest: dict) -> dict[str, dict]:
    return {a["file"]: a for a in manifest["artifacts"]}


def test_manifest_describes_buffers_scalars_and_constexprs(tmp_path):
    r = _invoke(KSPEC, "--dtype", "f32,f16", "-D", "SCALE=2", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    files = _by_file(manifest)
    assert sorted(files) == sorted(f"axpy_acc_{dt}{suffix}" for dt in ("f16", "f32")
                                   for suffix in (".cu", ".metal", ".spv", "_wave32.hip", "_wave64.hip"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*files, "manifest.json", "manifest.txt"])
    assert manifest["format"] == 1 and manifest["iron_version"]

    spv = files["axpy_acc_f32.spv"]
    assert spv["kernel"] == "axpy_acc" and spv["entry"] == "axpy_acc" and spv["backend"] == "vulkan"
    assert spv["dtype"] == "f32" and spv["constexprs"] == {"SCALE": 2}
    assert spv["collectives"] is False and spv["shared_bytes"] == {"static": 0, "dynamic": 0}
    assert len(spv["source_hash"]) == 64
    import hashlib

    assert spv["sha256"] == hashlib.sha256((tmp_path / "axpy_acc_f32.spv").read_bytes()).hexdigest()
    assert spv["args"] == [
        {"name": "x", "kind": "buffer", "dtype": "f32", "access": "read", "binding": 0},
        {"name": "acc", "kind": "buffer", "dtype": "f32", "access": "readwrite", "binding": 1},
        {"name": "out", "kind": "buffer", "dtype": "f32", "access": "write", "binding": 2},
        {"name": "alpha", "kind": "scalar", "dtype": "f32", "access": "read", "offset": 0},
        {"name": "n", "kind": "scalar", "dtype": "i32", "access": "read", "offset": 4},
    ]
    vk = spv["vulkan"]
    assert [(p["name"], p["offset"]) for p in vk["push"]] == [("alpha", 0), ("n", 4), ("iron_n0", 8),
                                                              ("iron_n1", 12), ("iron_n2", 16)]
    assert vk["push_size"] == 20 and vk["group_size_spec_ids"] == [0, 1, 2] and vk["descriptor_set"] == 0

    cu = files["axpy_acc_f16.cu"]
    assert cu["dtype"] == "f16" and cu["args"][0] == {"name": "x", "kind": "buffer", "dtype": "f16", "access": "read"}
    assert [(p["name"], p["kind"]) for p in cu["cuda"]["params"]] == [
        ("x", "buffer"), ("acc", "buffer"), ("out", "buffer"), ("alpha", "scalar"), ("n", "scalar"),
        ("iron_n0", "grid"), ("iron_n1", "grid"), ("iron_n2", "grid")]
    assert cu["source_hash"] == spv["source_hash"]
    source = (tmp_path / "axpy_acc_f16.cu").read_text()
    assert f"void {cu['entry']}(" in source

    text = (tmp_path / "manifest.txt").read_text()
    assert "artifact axpy_acc_f32.spv\n" in text and "arg acc buffer f32 readwrite binding 1\n" in text
    assert "push n 4 i32\n" in text and "constexpr SCALE 2\n" in text and text.count("\nend\n") == 10


def test_constexpr_defaults_to_the_module_global(tmp_path):
    manifest = build([target_for(kernels.axpy_acc)], tmp_path, backends=["vulkan"], dtypes=["bf16"])
    assert [a["file"] for a in manifest["artifacts"]] == ["axpy_acc_bf16.spv"]
    assert manifest["artifacts"][0]["constexprs"] == {"SCALE": kernels.SCALE}


def test_vectorised_cuda_entry_and_collectives_are_recorded(tmp_path):
    manifest = build(std_targets(), tmp_path, backends=["cuda", "vulkan"], dtypes=["f32"])
    files = _by_file(manifest)
    vector = files["iron_exp_f32.cu"]["cuda"]["vector"]
    assert vector["width"] > 1 and vector["entry"] in (tmp_path / "iron_exp_f32.cu").read_text()
    softmax = files["softmax_f32.spv"]
    assert softmax["collectives"] is True and softmax["shared_bytes"]["static"] > 0
    assert softmax["constexprs"] == {"BLOCK": 256}
    assert files["softmax_f32.cu"]["cuda"]["vector"] is None


def test_std_build_covers_every_std_kernel_and_dtype(tmp_path):
    r = _invoke("--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    files = _by_file(json.loads((tmp_path / "manifest.json").read_text()))
    targets = std_targets()
    assert {"iron_exp", "softmax"} <= {t.name for t in targets}
    for target in targets:
        for dtype in target.dtypes(None):
            stem = target.name if dtype is None else f"{target.name}_{dtype}"
            for suffix in (".cu", ".spv", "_wave64.hip", "_wave32.hip", ".metal"):
                assert f"{stem}{suffix}" in files


def test_two_builds_are_byte_identical(tmp_path):
    """Once in this process and once in a fresh one (no compile cache shared, a different hash seed)."""
    args = [KSPEC, "-D", "SCALE=2"]
    assert _invoke(*args, "--out", str(tmp_path / "a")).exit_code == 0
    code = ("import sys; from click.testing import CliRunner; from iron.cli.build_cmd import build; "
            "r = CliRunner().invoke(build, sys.argv[1:]); print(r.output); sys.exit(r.exit_code)")
    r = subprocess.run([sys.executable, "-c", code, *args, "--out", str(tmp_path / "b")], capture_output=True,
                       text=True, cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONHASHSEED": "7"})
    assert r.returncode == 0, r.stdout + r.stderr
    a = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert a == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in a:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


COMMON_KEYS = {"kernel", "module", "backend", "file", "sha256", "bytes", "dtype", "constexprs", "entry", "args",
               "collectives", "shared_bytes", "source_hash"}


def test_each_writers_facts_have_their_manifest_lines(tmp_path):
    """Every writer puts its facts under one key of the record, and MANIFEST_LINES has that key's lines: they close the
    artifact's block in manifest.txt (a writer adding a key without lines fails here, not silently in the text)."""
    manifest = build([target_for(kernels.axpy_acc, {"SCALE": 2})], tmp_path, dtypes=["f32"])
    blocks = {}
    for block in (tmp_path / "manifest.txt").read_text().split("\nend\n")[:-1]:
        lines = block.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("artifact "))
        blocks[lines[start].split()[1]] = lines[start:]
    expected = {"vulkan": "push_size 20", "cuda": "param x buffer f32", "hip": "param acc buffer f32",
                "metal": "dispatch dispatchThreadgroups"}
    seen = set()
    for a in manifest["artifacts"]:
        (key,) = set(a) - COMMON_KEYS
        seen.add(key)
        own = MANIFEST_LINES[key](a[key])
        block = blocks[a["file"]]
        last_arg = max(i for i, line in enumerate(block) if line.startswith("arg "))
        assert block[last_arg + 1:] == own and own, a["file"]
        assert expected[key] in own, own
    assert seen == set(expected) == set(MANIFEST_LINES)


def test_backend_selection_and_errors(tmp_path):
    r = _invoke(KSPEC, "-D", "SCALE=1", "--backend", "vulkan", "--dtype", "f32", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".spv", ".txt"]
    assert set(WRITERS) == {"cuda", "vulkan", "hip", "metal"}
    r = _invoke(KSPEC, "-D", "SCALE=1", "--backend", "nope", "--out", str(tmp_path))
    assert isinstance(r.exception, IronError) and "unknown backend" in str(r.exception)
    r = _invoke(KSPEC, "-D", "SCALE=1", "--backend", "vulkan", "--metallib", "--out", str(tmp_path))
    assert isinstance(r.exception, IronError) and "add --backend metal" in str(r.exception)
    r = _invoke(KSPEC, "--out", str(tmp_path))  # SCALE is a module global here, so this works ...
    assert r.exit_code == 0
    r = _invoke(KSPEC, "-D", "BLOCK=1", "--out", str(tmp_path))  # ... but a -D no kernel has is a mistake
    assert isinstance(r.exception, IronError) and "BLOCK" in str(r.exception)
    with pytest.raises(IronError, match="dtype"):
        build([target_for(kernels.axpy_acc)], tmp_path, dtypes=["f64x"])


def test_missing_constexpr_is_reported(tmp_path, monkeypatch):
    monkeypatch.delitem(kernels.axpy_acc.fn.__globals__, "SCALE")
    with pytest.raises(IronError, match="-D SCALE=VALUE"):
        target_for(kernels.axpy_acc)


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val not on PATH (apt install spirv-tools)")
def test_spv_artifacts_pass_spirv_val(tmp_path):
    from iron.codegen.spirv import validate

    targets = [*std_targets(), target_for(kernels.axpy_acc)]
    manifest = build(targets, tmp_path, backends=["vulkan"])
    assert len(manifest["artifacts"]) == sum(len(t.dtypes(None)) for t in targets)
    for a in manifest["artifacts"]:
        assert validate((tmp_path / a["file"]).read_bytes()) is None, a["file"]


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")
def test_cu_artifacts_compile_with_nvrtc(tmp_path):
    from iron.codegen import compile_cuda

    targets = [*std_targets(), target_for(kernels.axpy_acc)]
    manifest = build(targets, tmp_path, backends=["cuda"])
    assert len(manifest["artifacts"]) == sum(len(t.dtypes(None)) for t in targets)
    for a in manifest["artifacts"]:
        assert compile_cuda((tmp_path / a["file"]).read_text(), arch="sm_90"), a["file"]
