"""What a Vulkan physical device offers Iron (``VulkanContext._query_properties``): its properties (limits, subgroup
size, driver, float controls), the features Iron's SPIR-V modules may rely on (``has``), the optional features the
logical device is created with (``enable``), its cooperative-matrix configurations (``coopmat_dtypes``) and its
memory types.

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
COOPMAT = "VK_KHR_cooperative_matrix"
BF16 = "VK_KHR_shader_bfloat16"
#: VK_KHR_shader_bfloat16 (Vulkan headers 1.4.311) is newer than the ``vulkan`` package's: its feature struct's sType
#: and VK_COMPONENT_TYPE_BFLOAT16_KHR, both 1000141000 in the registry's vk.xml
BF16_STYPE = 1000141000
BF16_COMPONENT = 1000141000
#: the fragment shape every target offers (ir.types.MMA_SHAPE) and the component types Iron asks for
_MMA = (16, 16, 16)
_F16, _F32, _SUBGROUP = 0, 1, 3  # VK_COMPONENT_TYPE_FLOAT16/FLOAT32_KHR, VK_SCOPE_SUBGROUP_KHR


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


def multiprocessors(vk, ffi, phys, extensions: set[str]) -> int:
    """The device's streaming multiprocessors where its driver says (NVIDIA: VK_NV_shader_sm_builtins'
    shaderSMCount, read from the properties without enabling the extension); 0 elsewhere. The row kernels size
    their persistent grids by it (std/softmax.py ``processors``), as on CUDA."""
    if "VK_NV_shader_sm_builtins" not in extensions:
        return 0
    sm = ffi.new("VkPhysicalDeviceShaderSMBuiltinsPropertiesNV*",
                 {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV})
    p2 = ffi.new("VkPhysicalDeviceProperties2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                   "pNext": sm})
    vk.vkGetPhysicalDeviceProperties2(phys.handle, p2)
    return int(sm.shaderSMCount)


def subgroup_size_control(vk, ffi, phys, f13) -> tuple[int, int] | None:
    """``(min, max)`` subgroup sizes a compute pipeline may require (Vulkan 1.3 subgroupSizeControl, compute among
    requiredSubgroupSizeStages), or None where a pipeline cannot pin its size."""
    if phys.api < API_1_3 or f13 is None or not f13.subgroupSizeControl:
        return None
    sc = ffi.new("VkPhysicalDeviceSubgroupSizeControlProperties*",
                 {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES})
    p2 = ffi.new("VkPhysicalDeviceProperties2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                  "pNext": sc})
    vk.vkGetPhysicalDeviceProperties2(phys.handle, p2)
    if not sc.requiredSubgroupSizeStages & vk.VK_SHADER_STAGE_COMPUTE_BIT:
        return None
    return int(sc.minSubgroupSize), int(sc.maxSubgroupSize)


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
    coop: Any | None = None  # VkPhysicalDeviceCooperativeMatrixFeaturesKHR
    bf16: Any | None = None  # VkPhysicalDeviceShaderBfloat16FeaturesKHR, as raw words (``_Bf16Features``)


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
    coop = bf16 = None
    if COOPMAT in extensions and api13:
        coop = ffi.new("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*",
                       {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, "pNext": head})
        head = coop
        if BF16 in extensions:
            bf16 = _Bf16Features(ffi, head)
            head = bf16.pointer
    f2 = ffi.new("VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "pNext": head})
    if phys.api >= API_1_2:  # the Vulkan11/12 feature structs may only be chained on a 1.2+ device
        vk.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
    else:
        f2.features = vk.vkGetPhysicalDeviceFeatures(phys.handle)
    return FeatureChain(f2, f11, f12, f13, fat, ucf, coop, bf16)


class _Bf16Features:
    """VkPhysicalDeviceShaderBfloat16FeaturesKHR {sType, pNext, shaderBFloat16Type, shaderBFloat16DotProduct,
    shaderBFloat16CooperativeMatrix} in raw cffi memory (the ``vulkan`` package does not define it), laid out as C
    does: the three VkBool32 follow VkBaseOutStructure."""

    FIELDS = ("shaderBFloat16Type", "shaderBFloat16DotProduct", "shaderBFloat16CooperativeMatrix")

    def __init__(self, ffi, pnext, values: dict[str, int] | None = None):
        head = ffi.sizeof("VkBaseOutStructure")
        self.memory = ffi.new("char[]", head + 4 * len(self.FIELDS))
        base = ffi.cast("VkBaseOutStructure*", self.memory)
        base.sType = BF16_STYPE
        base.pNext = ffi.cast("VkBaseOutStructure*", pnext)
        self.bools = ffi.cast("uint32_t*", self.memory + head)
        for k, v in (values or {}).items():
            self.bools[self.FIELDS.index(k)] = v
        self.pointer = ffi.cast("void*", self.memory)

    def __getattr__(self, name: str) -> int:
        if name in _Bf16Features.FIELDS:
            return int(self.bools[_Bf16Features.FIELDS.index(name)])
        raise AttributeError(name)


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
        "int16": bool(feats.f2.features.shaderInt16),
        # the dtypes of tracker issue 15: i64/u64 registers, i8/u8 buffers (f64 is "float64" above)
        "int64": bool(feats.f2.features.shaderInt64),
        "int8": api12 and bool(f12.shaderInt8),
        "storage8": api12 and bool(f12.storageBuffer8BitAccess),
        "int64_atomics": api12 and bool(f12.shaderBufferInt64Atomics),
        "int64_shared_atomics": api12 and bool(f12.shaderSharedInt64Atomics),
        # modules with cooperative matrices: SPIR-V 1.6 under the Vulkan memory model (codegen/spirv/coopmat.py)
        "spirv_1_6": api13,
        "vulkan_memory_model": api12 and bool(f12.vulkanMemoryModel),
        "vulkan_memory_model_device_scope": api12 and bool(f12.vulkanMemoryModelDeviceScope),
    }


def coopmat_configs(vk, ffi, instance, phys) -> list[tuple[int, ...]]:
    """The device's cooperative-matrix configurations, (M, N, K, A, B, C, Result, saturating, scope) each
    (``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR``, called through its pointer so that every entry carries
    its sType, as the spec asks)."""
    raw = vk.lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
    if raw == ffi.NULL:
        return []
    fn = ffi.cast("PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR", raw)
    count = ffi.new("uint32_t*")
    if fn(phys.handle, count, ffi.NULL) != 0 or not count[0]:
        return []
    props = ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
    for i in range(count[0]):
        props[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
    if fn(phys.handle, count, props) not in (0, 5):  # VK_SUCCESS, VK_INCOMPLETE
        return []
    return [(p.MSize, p.NSize, p.KSize, p.AType, p.BType, p.CType, p.ResultType, p.saturatingAccumulation, p.scope)
            for p in (props[i] for i in range(count[0]))]


def coopmat_dtypes(configs: list[tuple[int, ...]], feats: FeatureChain, api: int) -> frozenset[str]:
    """The fragment input dtypes ("f16", "bf16") Iron's modules may multiply as cooperative matrices here: a
    subgroup-scope 16 x 16 x 16 configuration with them as A and B and f32 as C and result, the feature, SPIR-V 1.6
    and the Vulkan memory model (which the extension requires); bf16 also needs VK_KHR_shader_bfloat16's bfloat16
    type and cooperative matrices."""
    if feats.coop is None or not feats.coop.cooperativeMatrix or api < API_1_3 or not feats.f12.vulkanMemoryModel:
        return frozenset()
    have = {(a, b) for (m, n, k, a, b, c, r, sat, scope) in configs
            if (m, n, k) == _MMA and c == r == _F32 and not sat and scope == _SUBGROUP}
    out = set()
    if (_F16, _F16) in have:
        out.add("f16")
    bf16 = feats.bf16
    if (BF16_COMPONENT, BF16_COMPONENT) in have and bf16 is not None and bf16.shaderBFloat16Type \
            and bf16.shaderBFloat16CooperativeMatrix:
        out.add("bf16")
    return frozenset(out)


def coopmat_chain(vk, ffi, head, dtypes: frozenset[str]) -> tuple[Any, list[Any], list[str]]:
    """The feature structs and extensions a device that multiplies ``dtypes`` as cooperative matrices is created
    with (none for an empty set): ``(new head of the pNext chain, structs to keep alive, extension names)``."""
    if not dtypes:
        return head, [], []
    coop = ffi.new("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*",
                   {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR, "pNext": head,
                    "cooperativeMatrix": 1})
    if "bf16" not in dtypes:
        return coop, [coop], [COOPMAT]
    bf16 = _Bf16Features(ffi, coop, {"shaderBFloat16Type": 1, "shaderBFloat16CooperativeMatrix": 1})
    return bf16.pointer, [coop, bf16], [COOPMAT, BF16]


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
              "vulkanMemoryModelDeviceScope", "shaderBufferInt64Atomics", "shaderSharedInt64Atomics"):
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
