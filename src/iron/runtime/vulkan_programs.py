"""Shader modules and compute pipelines on a ``VulkanContext`` (vulkan_device.py): the checks a kernel must pass on
the device before anything is built (features, subgroup width, shared memory, group size, bindings, push constants),
one ``Program`` per distinct module (its shader module and layouts, cached in ``ctx.programs``) and one pipeline per
group size and run-time shared-array lengths (cached in ``Program.pipelines``, built through the context's
``VkPipelineCache``). The caller holds ``ctx.lock``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import LaunchError
from .vulkan_select import uses_local_size_id
from .vulkan_shared import check_lengths, describe, run_time_bytes, spec_constants

#: SPIR-V emitter feature name -> what the device must report (checked before a pipeline is built)
FEATURES = ("float16", "storage16", "subgroup_basic", "subgroup_arithmetic", "subgroup_shuffle", "subgroup_ballot",
            "atomic_float_add", "subgroup_uniform_control_flow", "float64", "denorm_preserve", "ieee_specials",
            "rounding_rte", "int16", "spirv_1_6", "vulkan_memory_model", "vulkan_memory_model_device_scope",
            "cooperative_matrix", "cooperative_matrix_bf16", "cooperative_matrix2", "int64", "int8", "storage8",
            "int64_atomics", "int64_shared_atomics")


@dataclass
class Program:
    """A shader module with its layouts; pipelines are built per group size (and lengths of run-time sized shared
    arrays: the key is the group, then the lengths)."""

    module: Any
    set_layout: Any
    pipeline_layout: Any
    pipelines: dict[tuple[int, ...], Any] = field(default_factory=dict)


def check_kernel(ctx, spk, group: tuple[int, int, int], lengths: tuple[int, ...] = ()) -> None:
    """LaunchError naming the feature and device when the module needs what this device lacks; ``lengths``: the
    launch's lengths of the run-time sized shared arrays (vulkan_shared.py)."""
    check_lengths(spk, lengths)
    if uses_local_size_id(spk.words) and not ctx.has["local_size_id"]:
        raise LaunchError(f"{spk.entry} sets its group size with LocalSizeId, which Vulkan device "
                          f"{ctx.phys.name} does not allow (it needs Vulkan 1.3 / maintenance4)")
    for feat in sorted(spk.features):
        if feat not in ctx.has:
            raise LaunchError(f"{spk.entry} needs Vulkan feature '{feat}', which this runtime does not know "
                              f"(known: {', '.join(FEATURES)})")
        if not ctx.has[feat]:
            raise LaunchError(f"{spk.entry} needs '{feat}', which Vulkan device {ctx.phys.name} "
                              f"({ctx.driver}) does not support")
    width = getattr(spk, "simd_width", 0)  # modules built elsewhere (run_spirv's callers) may not say
    if width and width != ctx.subgroup_size:
        raise LaunchError(f"{spk.entry} was emitted for subgroups of {width} lanes (matrix fragments' "
                          f"fallback); {ctx.phys.name} runs {ctx.subgroup_size}")
    lim = ctx.limits
    # plus the scratch tiles of cooperative matrices, one per SIMD group
    simd_groups = -(-math.prod(group) // ctx.subgroup_size)
    shared = spk.shared_bytes + simd_groups * getattr(spk, "scratch_bytes_per_simd_group", 0)
    shared += run_time_bytes(spk, lengths)
    if shared > lim.maxComputeSharedMemorySize:
        given = f" with {describe(spk, lengths)}" if lengths else ""
        raise LaunchError(f"{spk.entry} needs {shared} bytes of shared memory{given}; {ctx.phys.name} gives "
                          f"a group at most {lim.maxComputeSharedMemorySize}",
                          hint="pass smaller lengths (or split the work over more groups)" if lengths else None)
    if math.prod(group) > lim.maxComputeWorkGroupInvocations or any(
            g > lim.maxComputeWorkGroupSize[i] for i, g in enumerate(group)):
        raise LaunchError(f"group {group} exceeds {ctx.phys.name}'s limits (at most "
                          f"{tuple(lim.maxComputeWorkGroupSize[i] for i in range(3))} and "
                          f"{lim.maxComputeWorkGroupInvocations} threads)")
    if len(spk.buffers) > lim.maxPerStageDescriptorStorageBuffers:
        raise LaunchError(f"{spk.entry} has {len(spk.buffers)} buffers; {ctx.phys.name} binds at most "
                          f"{lim.maxPerStageDescriptorStorageBuffers}")
    if spk.push_size > lim.maxPushConstantsSize:
        raise LaunchError(f"{spk.entry} needs {spk.push_size} bytes of push constants; {ctx.phys.name} "
                          f"gives at most {lim.maxPushConstantsSize}")


def build_program(ctx, spk) -> Program:
    """``spk``'s program: its shader module, descriptor-set layout and pipeline layout, built once per distinct module
    (LaunchError when the driver rejects the SPIR-V)."""
    # keyed by what the module and its layouts depend on, so equal modules share one program
    key = (bytes(spk.words), spk.entry, tuple(b.binding for b in spk.buffers), spk.push_size)
    prog = ctx.programs.get(key)
    if prog is not None:
        return prog
    vk = ctx.vk
    words = bytes(spk.words)
    try:
        module = vk.vkCreateShaderModule(ctx.device, vk.VkShaderModuleCreateInfo(codeSize=len(words),
                                                                                 pCode=words), None)
    except vk.VkError as e:
        raise LaunchError(f"Vulkan rejected the SPIR-V module of {spk.entry} ({type(e).__name__})") from None
    bindings = [vk.VkDescriptorSetLayoutBinding(binding=b.binding, descriptorCount=1,
                                                descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                for b in spk.buffers]
    set_layout = vk.vkCreateDescriptorSetLayout(ctx.device, vk.VkDescriptorSetLayoutCreateInfo(
        bindingCount=len(bindings), pBindings=bindings or None), None)
    ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=spk.push_size)]
    layout = vk.vkCreatePipelineLayout(ctx.device, vk.VkPipelineLayoutCreateInfo(
        setLayoutCount=1, pSetLayouts=[set_layout], pushConstantRangeCount=1 if spk.push_size else 0,
        pPushConstantRanges=ranges if spk.push_size else None), None)
    prog = ctx.programs[key] = Program(module, set_layout, layout)
    return prog


def build_pipeline(ctx, spk, prog: Program, group: tuple[int, int, int], lengths: tuple[int, ...] = (),
                   capture_statistics: bool = False):
    """``prog``'s compute pipeline for ``group`` and the run-time shared-array ``lengths`` (specialization constants),
    with the device's subgroup size required where the context pins it (``ctx._subgroup_pin``).
    ``capture_statistics``: a new pipeline, not cached, whose statistics the driver keeps (vulkan_stats.py)."""
    key = tuple(group) + tuple(lengths)
    pipe = None if capture_statistics else prog.pipelines.get(key)
    if pipe is not None:
        return pipe
    vk, ffi = ctx.vk, ctx.ffi
    consts = spec_constants(spk, group, lengths)  # the group size, then the run-time lengths
    entries = [vk.VkSpecializationMapEntry(constantID=sid, offset=4 * i, size=4) for i, (sid, _) in
               enumerate(consts)]
    data = ffi.new(f"uint32_t[{len(consts)}]", [v for _, v in consts])
    spec = vk.VkSpecializationInfo(mapEntryCount=len(consts), pMapEntries=entries, dataSize=4 * len(consts),
                                   pData=data)
    pinned, flags = ctx._subgroup_pin(group)
    stage = vk.VkPipelineShaderStageCreateInfo(stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=prog.module,
                                               pName=spk.entry, pSpecializationInfo=spec, flags=flags,
                                               pNext=pinned if pinned is not None else ffi.NULL)
    flags = vk.VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR if capture_statistics else 0
    info = vk.VkComputePipelineCreateInfo(stage=stage, layout=prog.pipeline_layout, flags=flags)
    try:
        cache = ffi.NULL if capture_statistics else ctx.pipeline_cache  # a capture is compiled afresh, not kept
        pipe = vk.vkCreateComputePipelines(ctx.device, cache, 1, [info], None)[0]
    except vk.VkError as e:
        given = f" and {describe(spk, lengths)}" if lengths else ""
        raise LaunchError(f"Vulkan could not build the pipeline of {spk.entry} for group {group}{given} "
                          f"({type(e).__name__})") from None
    if not capture_statistics:
        prog.pipelines[key] = pipe
    return pipe
