"""`iron build --backend metal`: the .metal written is byte for byte the MSL the Metal runtime loads and the msl-cpu
model compiles; the manifest says how to bind it; --metallib needs Apple's toolchain and says so elsewhere."""

from __future__ import annotations

import json
import os
import stat
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import iron
from iron.build import build, target_for
from iron.cli.build_cmd import build as build_cmd
from iron.errors import IronError
from iron.runtime import unavailable_reason

from . import kernels

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from frontend import kernels as K  # noqa: E402


def test_metal_sources_and_manifest(tmp_path):
    target = target_for(K.block_sum, {"BLOCK": 64})
    manifest = build([target], tmp_path, backends=["metal"])
    records = {a["file"]: a for a in manifest["artifacts"]}
    assert sorted(records) == [f"block_sum_{d}.metal" for d in ("bf16", "f16", "f32")]
    for dt in (iron.f32, iron.f16, iron.bf16):
        rec = records[f"block_sum_{dt}.metal"]
        written = (tmp_path / rec["file"]).read_bytes()
        assert written == K.block_sum.source("metal", dtype=dt, BLOCK=64).encode()
        m = rec["metal"]
        assert [p["name"] for p in m["params"]] == ["x", "out", "iron_n0", "iron_n1", "iron_n2"]
        (tg,) = m["threadgroup"]
        assert (tg["index"], tg["name"], tg["bytes"], tg["length"]) == (0, "red", 64 * 4, 64 * 4)
        assert "[[threadgroup(0)]]" in written.decode() and m["dispatch"] == "dispatchThreadgroups"
    text = (tmp_path / "manifest.txt").read_text()
    assert "threadgroup 0 " in text and "dispatch dispatchThreadgroups" in text
    assert json.loads((tmp_path / "manifest.json").read_text())["artifacts"][0]["backend"] == "metal"


@pytest.mark.skipif(unavailable_reason("msl-cpu") is not None, reason="needs the msl-cpu model (clang)")
def test_the_written_metal_is_what_the_model_compiled(tmp_path, rng):
    build([target_for(kernels.axpy_acc, {"SCALE": 2})], tmp_path, backends=["metal"], dtypes=["f32"])
    x = rng.standard_normal(100).astype(np.float32)
    acc = rng.standard_normal(100).astype(np.float32)
    before = acc.copy()
    out = np.full_like(x, np.nan)
    kernels.axpy_acc[100](x, acc, out, 0.5, 100, 2, backend="msl-cpu")
    np.testing.assert_array_equal(out, before)
    np.testing.assert_allclose(acc, before + np.float32(2 * 0.5) * x, rtol=1e-6)
    lib = kernels.axpy_acc.variant(iron.f32, (2,)).artifacts["msl-cpu"]
    assert lib.compiled_msl().encode() == (tmp_path / "axpy_acc_f32.metal").read_bytes()


def test_metallib_without_apples_tools_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(IronError, match=r"--metallib needs Apple's Metal compiler \(xcrun metal\)"):
        build([target_for(K.iron_exp)], tmp_path / "out", backends=["metal"], metallib=True)


def test_metallib_runs_xcrun_metal_then_metallib(tmp_path, monkeypatch):
    """A stand-in xcrun records its command lines and writes the outputs they name."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "xcrun.log"
    script = bin_dir / "xcrun"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
out=""
prev=""
for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
echo "compiled by fake xcrun" > "$out"
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    r = CliRunner().invoke(build_cmd, [f"{kernels.__name__}:axpy_acc", "-D", "SCALE=1", "--backend", "metal",
                                       "--metallib", "--dtype", "f32", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    calls = log.read_text().splitlines()
    assert calls[0].startswith("-sdk macosx metal -std=metal3.1 -fno-fast-math -c ")
    assert calls[1].startswith("-sdk macosx metallib ")
    assert (tmp_path / "out" / "axpy_acc_f32.metallib").read_text() == "compiled by fake xcrun\n"
