"""Issue 15: a Vulkan pipeline runs at the subgroup size its module was compiled for. simd_size() folds to the
device's subgroupSize in the SPIR-V; where the device lets a compute pipeline choose its size (subgroupSizeControl;
AMD and Intel drivers vary it), the pipeline requires that size, and full subgroups where the group's x size is a
whole number of them. Devices with one subgroup size (lavapipe, NVIDIA) are not pinned; the request is checked
with the pin forced on."""

from __future__ import annotations

import numpy as np
import pytest

from .subgroup_kernels import width_and_lane


def _ctx(vk_backend):
    return vk_backend.context()


def test_pipelines_pin_the_subgroup_size_where_it_could_vary(vk_backend, monkeypatch):
    """Pinned only where the device offers a range of sizes (lavapipe and NVIDIA have one): the struct and flags
    asked for, checked with the pin forced on."""
    ctx = _ctx(vk_backend)
    info = vk_backend.info()
    assert info["subgroup_size_pinned"] == ctx.pin_subgroup
    if not ctx.pin_subgroup:
        pinned, flags = ctx._subgroup_pin((2 * ctx.subgroup_size, 1, 1))
        assert pinned is None and flags == 0
        monkeypatch.setattr(ctx, "pin_subgroup", True)
    pinned, flags = ctx._subgroup_pin((2 * ctx.subgroup_size, 1, 1))
    assert pinned.requiredSubgroupSize == ctx.subgroup_size
    assert bool(flags) == ctx.full_subgroups
    _, partial = ctx._subgroup_pin((ctx.subgroup_size + 1, 1, 1))
    assert partial == 0  # full subgroups need x a multiple of the size


@pytest.mark.parametrize("group", [None, 1, 3])
def test_lanes_and_width_under_the_pinned_size(vk_backend, group):
    """Each thread reads simd_size() * 1000 + simd_lane(): the compiled width, lanes numbered within each SIMD
    group, for groups of several whole subgroups, a part of one and an odd size (not pinned to full)."""
    w = _ctx(vk_backend).subgroup_size
    size = {None: 4 * w, 1: 1, 3: w + 3}[group]
    n = 5 * size
    o = np.full(n, -1, np.int32)
    width_and_lane[n, size](o, backend="vulkan")
    local = np.arange(n) % size
    np.testing.assert_array_equal(o, w * 1000 + local % w)
