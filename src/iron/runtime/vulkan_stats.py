"""What a Vulkan driver made of a compute pipeline, through VK_KHR_pipeline_executable_properties: per executable
its statistics (on NVIDIA's driver the registers a thread, shared memory, instruction and binary sizes; AMD's RADV
and Intel's ANV report theirs), for ``iron inspect --backend vulkan --resources`` — the Vulkan twin of the ptxas
report ``--backend cuda --resources`` reads.

The device must offer the extension (NVIDIA's driver does; lavapipe does not) and the context must have enabled it
when the device was created: ``IRON_VULKAN_STATS=1`` (``iron inspect`` sets it before anything creates the context;
nothing else pays for it). A statistics pipeline is built with ``CAPTURE_STATISTICS`` and destroyed after the query;
the launch pipelines are untouched. The entry points are read through vkGetDeviceProcAddr and called with the
statistics' sType set on every element, which the `vulkan` package's wrappers leave zero.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..errors import LaunchError

EXTENSION = "VK_KHR_pipeline_executable_properties"
#: VkPipelineExecutableStatisticFormatKHR -> the union member that holds the value
_FORMATS = {0: "b32", 1: "i64", 2: "u64", 3: "f64"}


@dataclass
class Statistic:
    name: str
    value: Any  # bool, int or float, as the driver's format says
    description: str


@dataclass
class Executable:
    """One executable of a pipeline (a compute pipeline has one) with its statistics, in the driver's order."""

    name: str
    description: str
    subgroup_size: int
    statistics: list[Statistic]


def wanted() -> bool:
    """Whether contexts created from now on enable the extension (``IRON_VULKAN_STATS=1``)."""
    return os.environ.get("IRON_VULKAN_STATS", "0") == "1"


def chain(vk, ffi, head) -> tuple[Any, list[Any], list[str]]:
    """(new pNext head, structs to keep alive, extension names): the feature struct asking for the statistics."""
    feats = ffi.new("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR*", {
        "sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, "pNext": head,
        "pipelineExecutableInfo": 1})
    return feats, [feats], [EXTENSION]


def _text(ffi, chars) -> str:
    return ffi.string(chars).decode(errors="replace")


def _procs(ctx) -> tuple[Any, Any]:
    lib, ffi, dev = ctx.vk.lib, ctx.ffi, ctx.device
    props = lib.vkGetDeviceProcAddr(dev, b"vkGetPipelineExecutablePropertiesKHR")
    stats = lib.vkGetDeviceProcAddr(dev, b"vkGetPipelineExecutableStatisticsKHR")
    if props == ffi.NULL or stats == ffi.NULL:
        raise LaunchError(f"Vulkan device {ctx.phys.name}: {EXTENSION}'s entry points are missing")
    return (ffi.cast("PFN_vkGetPipelineExecutablePropertiesKHR", props),
            ffi.cast("PFN_vkGetPipelineExecutableStatisticsKHR", stats))


def _list(ctx, fn, info, ctype: str, stype: int, convert) -> list:
    """The count-then-fill query ``fn(device, info, count, array)`` with every element's sType set; each element
    goes through ``convert`` while the array is alive (an element's cdata does not keep its array)."""
    ffi = ctx.ffi
    count = ffi.new("uint32_t*")
    if fn(ctx.device, info, count, ffi.NULL) != 0:
        raise LaunchError(f"Vulkan device {ctx.phys.name}: counting the pipeline's {ctype} failed")
    items = ffi.new(f"{ctype}[]", count[0])
    for i in range(count[0]):
        items[i].sType = stype
    if fn(ctx.device, info, count, items) != 0:
        raise LaunchError(f"Vulkan device {ctx.phys.name}: reading the pipeline's {ctype} failed")
    return [convert(items[i]) for i in range(count[0])]


def _value(stat) -> Any:
    fmt = int(stat.format)
    value = getattr(stat.value, _FORMATS.get(fmt, "u64"))
    return bool(value) if fmt == 0 else value


def query(ctx, pipe) -> list[Executable]:
    """The executables of ``pipe`` (built with capture_statistics=True) and their statistics."""
    vk, ffi = ctx.vk, ctx.ffi
    get_props, get_stats = _procs(ctx)
    info = ffi.new("VkPipelineInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, "pipeline": pipe})
    executables = _list(ctx, get_props, info, "VkPipelineExecutablePropertiesKHR",
                        vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                        lambda e: (_text(ffi, e.name), _text(ffi, e.description), int(e.subgroupSize)))
    out = []
    for index, (name, description, width) in enumerate(executables):
        which = ffi.new("VkPipelineExecutableInfoKHR*", {"sType": vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR,
                                                         "pipeline": pipe, "executableIndex": index})
        stats = _list(ctx, get_stats, which, "VkPipelineExecutableStatisticKHR",
                      vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
                      lambda s: Statistic(_text(ffi, s.name), _value(s), _text(ffi, s.description)))
        out.append(Executable(name, description, width, stats))
    return out


def pipeline_statistics(ctx, spk, group: tuple[int, int, int], lengths: tuple[int, ...] = ()) -> list[Executable]:
    """Build ``spk``'s pipeline for ``group`` with its statistics captured, read them, destroy it. LaunchError
    where the device does not offer them or the context was created without them."""
    from . import vulkan_programs as vprog

    if EXTENSION not in ctx.extensions:
        raise LaunchError(f"Vulkan device {ctx.phys.name} ({ctx.driver}) does not offer {EXTENSION}: it reports no "
                          "pipeline statistics (NVIDIA's, AMD's RADV and Intel's ANV drivers do; lavapipe does not)")
    if not ctx.has.get("pipeline_statistics"):
        raise LaunchError(f"this process's Vulkan context was created without {EXTENSION}: set IRON_VULKAN_STATS=1 "
                          "before the first Vulkan launch")
    with ctx.lock:
        vprog.check_kernel(ctx, spk, group, lengths)
        prog = vprog.build_program(ctx, spk)
        pipe = vprog.build_pipeline(ctx, spk, prog, group, lengths, capture_statistics=True)
        try:
            return query(ctx, pipe)
        finally:
            ctx.vk.vkDestroyPipeline(ctx.device, pipe, None)
