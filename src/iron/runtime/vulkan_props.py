"""What a Vulkan physical device offers Iron (``VulkanContext._query_properties``): its properties (limits, subgroup
size, driver, float controls), the features Iron's SPIR-V modules may rely on (``has``), the optional features the
logical device is created with (``enable``) and its memory types.

The property and feature structs are cffi memory: the ``pNext`` chains are built here, queried once, and the structs
kept alive by whoever reads them (``VulkanContext._props_keep`` for the properties, ``FeatureChain`` for the features).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_1_2 = 1 << 22 | 2 << 12
API_1_3 = 1 << 22 | 3 << 12
UCF = "VK_KHR_shader_subgroup_uniform_control_flow"
UCF_STYPE = "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SUBGROUP_UNIFORM_CONTROL_FLOW_FEATURES_KHR"


def read_properties(vk, ffi, phys) -> tuple[Any, Any, Any, Any]:
    """``(p2, drv, fc, sub)``: VkPhysicalDeviceProperties2 chained to the driver, float-controls (Vulkan 1.2+ only)
    and subgroup properties, filled in by the driver."""
    sub = ffi.new("VkPhysicalDeviceSubgroupProperties*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES})
    fc = ffi.new("VkPhysicalDeviceFloatControlsProperties*",
                 {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES, "pNext": sub})
    drv = ffi.new("VkPhysicalDeviceDriverProperties*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
                   "pNext": fc if phys.api >= API_1_2 else sub})
    p2 = ffi.new("VkPhysicalDeviceProperties2*",
                 {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": drv})
    vk.vkGetPhysicalDeviceProperties2(phys.handle, p2)
    return p2, drv, fc, sub


def denorm_preserve(vk, api: int, fc) -> bool:
    """DenormPreserve is declared for 32-bit floats only: legal unless every width must share one behaviour."""
    return (api >= API_1_2 and bool(fc.shaderDenormPreserveFloat32)
            and fc.denormBehaviorIndependence != vk.VK_SHADER_FLOAT_CONTROLS_INDEPENDENCE_NONE)


def float_controls(api: int, fc) -> dict[str, bool]:
    """Which float-controls execution modes modules may declare here (Vulkan 1.2 properties): a mode the device
    does not report makes the module invalid on it, so the emitter leaves it out (codegen/spirv/emit.py)."""
    if api < API_1_2:
        return {"ieee_specials": False, "rounding_rte": False}
    return {
        # SignedZeroInfNanPreserve for f32 and, where a kernel computes in f16, f16
        "ieee_specials": bool(fc.shaderSignedZeroInfNanPreserveFloat32
                              and fc.shaderSignedZeroInfNanPreserveFloat16),
        # RoundingModeRTE for every width a module may use (f16 math, f32, the f64 of precise.py)
        "rounding_rte": bool(fc.shaderRoundingModeRTEFloat16 and fc.shaderRoundingModeRTEFloat32
                             and fc.shaderRoundingModeRTEFloat64),
    }


@dataclass
class FeatureChain:
    """The queried feature structs: core (``f2``), Vulkan 1.1/1.2/1.3, and the extensions' (None where absent)."""

    f2: Any
    f11: Any
    f12: Any
    f13: Any
    fat: Any | None
    ucf: Any | None


def read_features(vk, ffi, phys, extensions: set[str]) -> FeatureChain:
    """VkPhysicalDeviceFeatures2 -> [subgroup uniform control flow] -> [atomic float] -> 1.2 -> 1.1 -> [1.3]."""
    api13 = phys.api >= API_1_3
    f13 = ffi.new("VkPhysicalDeviceVulkan13Features*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES})
    f11 = ffi.new("VkPhysicalDeviceVulkan11Features*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                   "pNext": f13 if api13 else ffi.NULL})
    f12 = ffi.new("VkPhysicalDeviceVulkan12Features*",
                  {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, "pNext": f11})
    head = f12
    fat = None
    if "VK_EXT_shader_atomic_float" in extensions:
        fat = ffi.new("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*",
                      {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
                       "pNext": f12})
        head = fat
    ucf = None
    if UCF in extensions:
        ucf = ffi.new("VkPhysicalDeviceShaderSubgroupUniformControlFlowFeaturesKHR*",
                      {"sType": getattr(vk, UCF_STYPE), "pNext": head})
        head = ucf
    f2 = ffi.new("VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "pNext": head})
    if phys.api >= API_1_2:  # the Vulkan11/12 feature structs may only be chained on a 1.2+ device
        vk.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
    else:
        f2.features = vk.vkGetPhysicalDeviceFeatures(phys.handle)
    return FeatureChain(f2, f11, f12, f13, fat, ucf)


def supported(vk, api: int, ops: int, feats: FeatureChain) -> dict[str, bool]:
    """What Iron's modules may use on the device (the emitter's feature names, see ``FEATURES``), less the float
    controls (``float_controls``, ``denorm_preserve``); ``ops``: the subgroup operations of compute shaders."""
    api12, api13 = api >= API_1_2, api >= API_1_3
    f11, f12, f13, fat, ucf = feats.f11, feats.f12, feats.f13, feats.fat, feats.ucf
    return {
        "float16": api12 and bool(f12.shaderFloat16),
        "storage16": api12 and bool(f11.storageBuffer16BitAccess),
        "subgroup_basic": bool(ops & vk.VK_SUBGROUP_FEATURE_BASIC_BIT),
        "subgroup_arithmetic": bool(ops & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT),
        "subgroup_shuffle": bool(ops & vk.VK_SUBGROUP_FEATURE_SHUFFLE_BIT),
        "subgroup_ballot": bool(ops & vk.VK_SUBGROUP_FEATURE_BALLOT_BIT),
        "atomic_float_add": fat is not None and api12 and bool(fat.shaderBufferFloat32AtomicAdd),
        # LocalSizeId (group size from specialization constants) is legal only with maintenance4 (1.3 core)
        "local_size_id": api13 and bool(f13.maintenance4),
        # lanes reconverge after branches and loops the whole subgroup entered (see codegen/spirv/emit.py)
        "subgroup_uniform_control_flow": ucf is not None and api12 and bool(ucf.shaderSubgroupUniformControlFlow),
        # sin, cos and float % in double precision (codegen/spirv/precise.py)
        "float64": bool(feats.f2.features.shaderFloat64),
    }


def features_to_enable(api: int, feats: FeatureChain) -> dict[str, dict[str, int]]:
    """What the device is created with: exactly the optional features Iron's modules may declare, per struct."""
    api12, api13 = api >= API_1_2, api >= API_1_3
    enable: dict[str, dict[str, int]] = {"f11": {}, "f12": {}, "f13": {}, "fat": {}, "core": {}}
    for k in ("maintenance4", "subgroupSizeControl", "computeFullSubgroups"):
        if api13 and getattr(feats.f13, k):
            enable["f13"][k] = 1
    for k in ("storageBuffer16BitAccess", "uniformAndStorageBuffer16BitAccess", "storagePushConstant16"):
        if api12 and getattr(feats.f11, k):
            enable["f11"][k] = 1
    for k in ("shaderFloat16", "shaderInt8", "storageBuffer8BitAccess", "vulkanMemoryModel",
              "vulkanMemoryModelDeviceScope"):
        if api12 and getattr(feats.f12, k):
            enable["f12"][k] = 1
    if feats.fat is not None and api12:
        for k in ("shaderBufferFloat32AtomicAdd", "shaderBufferFloat32Atomics", "shaderSharedFloat32AtomicAdd",
                  "shaderSharedFloat32Atomics"):
            if getattr(feats.fat, k):
                enable["fat"][k] = 1
    for k in ("shaderInt16", "shaderInt64", "shaderFloat64"):
        if getattr(feats.f2.features, k):
            enable["core"][k] = 1
    return enable


def memory_layout(vk, pd) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``(memory types as (propertyFlags, heapIndex), heaps as (size, flags))`` of physical device ``pd``."""
    mem = vk.vkGetPhysicalDeviceMemoryProperties(pd)
    types = [(mem.memoryTypes[i].propertyFlags, mem.memoryTypes[i].heapIndex) for i in range(mem.memoryTypeCount)]
    heaps = [(mem.memoryHeaps[i].size, mem.memoryHeaps[i].flags) for i in range(mem.memoryHeapCount)]
    return types, heaps
