"""`iron inspect --resources --group N`: groups an SM holds, by the occupancy calculator's arithmetic
(``iron.codegen.occupancy``), against figures worked by hand from NVIDIA's per-capability limits and the driver's
own answer on the H100 (attn_prefill_wg: 254 registers, 256 threads, 12 % in `iron bench -v`)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.codegen.nvrtc import unavailable_reason
from iron.codegen.occupancy import occupancy

_REASON = unavailable_reason()
needs_nvrtc = pytest.mark.skipif(_REASON is not None, reason=f"NVRTC unavailable: {_REASON}")


@pytest.mark.parametrize("arch, threads, regs, smem, groups, limiter", [
    ("sm_90", 256, 56, 0, 4, "registers"),     # 1792 registers a warp: 36 warps, 4 groups of 8
    ("sm_90", 256, 110, 0, 2, "registers"),    # layer_norm_rows EPT 32 with its weight and bias held: 3584 a warp
    ("sm_90", 256, 72, 0, 3, "registers"),     # the same without the bias
    ("sm_90a", 256, 254, 0, 1, "registers"),   # attn_prefill_wg: 8 warps of 64, the driver's 12 %
    ("sm_90", 512, 67, 4096, 1, "registers"),  # layer_norm_rows EPT 16, measured 358.8 us (58 registers: 2, 232.9)
    ("sm_90", 1024, 32, 0, 2, "warps"),        # a tie with registers: the limit fewer registers cannot lift
    ("sm_90", 128, 32, 48 << 10, 4, "shared memory"),  # 48 KiB + 1 KiB reserved a group of 228 KiB
    ("sm_90", 32, 16, 0, 32, "groups"),
    ("sm_86", 1024, 32, 0, 1, "warps"),        # 48 warps an SM
    ("sm_75", 128, 32, 0, 8, "warps"),         # 32 warps an SM
    ("sm_90", 64, 112, 0, 8, "registers"),     # 3584 a warp: 4 warps a sub-partition, 16 an SM (not 65536 // 3584)
    ("sm_90", 32, 88, 0, 20, "registers"),     # 2816 a warp: 5 a sub-partition
    ("sm_75", 64, 32, 4865, 12, "shared memory"),  # 256-byte units on 7.x: 5120 a group (13 at 128-byte units)
])
def test_groups_an_sm_holds(arch, threads, regs, smem, groups, limiter):
    occ = occupancy(arch, threads, regs, smem)
    assert (occ.groups, occ.limiter) == (groups, limiter)
    assert occ.warps == groups * -(-threads // 32) and 0 < occ.percent <= 100


def test_a_group_too_big_for_the_register_file_does_not_launch():
    """25 warps at 2560 registers each, rounded up to 28 warps (whole sub-partition sets): 71680 > 65536."""
    occ = occupancy("sm_90", 800, 80)
    assert (occ.groups, occ.limiter, occ.percent) == (0, "registers", 0.0)
    assert occupancy("sm_90", 768, 80).groups == 1  # 24 warps: 61440 registers


def test_unknown_targets_and_group_sizes_are_refused():
    with pytest.raises(ValueError, match="no occupancy limits for 'sm_61'"):
        occupancy("sm_61", 256, 32)
    with pytest.raises(ValueError, match="1 to 1024"):
        occupancy("sm_90", 2048, 32)


@needs_nvrtc
def test_the_resources_table_gains_the_column(monkeypatch):
    monkeypatch.delenv("IRON_CUDA_ARCH", raising=False)
    r = CliRunner().invoke(cli, ["inspect", "iron.std.layer_norm:layer_norm_rows", "--backend", "cuda", "--resources",
                                 "--dtype", "bf16", "-D", "BLOCK=256", "-D", "VEC=8", "-D", "PER=4", "-D", "HAS_BIAS=1",
                                 "-D", "LATE=1", "--group", "256"])
    assert r.exit_code == 0, r.output
    header, row = r.output.strip().splitlines()[-2:]
    assert "groups/SM at 256" in header
    regs = int(row.split()[1])
    assert f"{occupancy('sm_90', 256, regs, 2048).groups} (" in row


def test_group_needs_resources_and_a_known_target():
    r = CliRunner().invoke(cli, ["inspect", "iron.std.layer_norm:layer_norm_rows", "--group", "256"])
    assert r.exit_code != 0 and "--group sizes the occupancy column of --resources" in r.output
    r = CliRunner().invoke(cli, ["inspect", "iron.std.layer_norm:layer_norm_rows", "--backend", "cuda", "--resources",
                                 "--arch", "sm_61", "--group", "256"])  # refused before anything compiles
    assert r.exit_code != 0 and "no occupancy limits for 'sm_61'" in r.output
