"""VK_NV_cooperative_matrix2 on a Vulkan device: whether it has workgroup-scope cooperative matrices, flexible
dimensions and tensor addressing, what sizes it multiplies (``vkGetPhysicalDeviceCooperativeMatrixFlexible
DimensionsPropertiesNV``), and the feature struct a device is created with to use them.

Used where offered (``IRON_VULKAN_COOPMAT2=0`` leaves it off the device): the std GEMM's Vulkan module
(std/gemm_coopmat2.py) needs workgroup scope and tensor addressing; nothing the emitter writes needs it. The
extension (Vulkan headers 1.3.300+) is newer than the ``vulkan`` package, so its structs are raw memory laid out
as C does (the same way as vulkan_props' bfloat16 struct), their sTypes those of the registry's vk.xml.
"""

from __future__ import annotations

import os
from typing import Any

EXTENSION = "VK_NV_cooperative_matrix2"
FEATURES_STYPE, FLEXIBLE_STYPE, PROPERTIES_STYPE = 1000593000, 1000593001, 1000593002
FEATURES = ("cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions", "cooperativeMatrixReductions",
            "cooperativeMatrixConversions", "cooperativeMatrixPerElementOperations",
            "cooperativeMatrixTensorAddressing", "cooperativeMatrixBlockLoads")
PROPERTIES = ("cooperativeMatrixWorkgroupScopeMaxWorkgroupSize", "cooperativeMatrixFlexibleDimensionsMaxDimension",
              "cooperativeMatrixWorkgroupScopeReservedSharedMemory")
FLEXIBLE = ("MGranularity", "NGranularity", "KGranularity", "AType", "BType", "CType", "ResultType",
            "saturatingAccumulation", "scope", "workgroupInvocations")


def wanted() -> bool:
    """Whether to create the device with the extension where it is offered (``IRON_VULKAN_COOPMAT2=0``: never)."""
    return os.environ.get("IRON_VULKAN_COOPMAT2", "1") != "0"


class _Raw:
    """{sType, pNext, n x uint32} in cffi memory: ``values[name]``, the fields after VkBaseOutStructure."""

    def __init__(self, ffi, stype: int, fields: tuple[str, ...], pnext=None, values: dict[str, int] | None = None):
        head = ffi.sizeof("VkBaseOutStructure")
        self.fields = fields
        self.memory = ffi.new("char[]", head + 4 * len(fields))
        base = ffi.cast("VkBaseOutStructure*", self.memory)
        base.sType = stype
        base.pNext = ffi.cast("VkBaseOutStructure*", pnext if pnext is not None else ffi.NULL)
        self.words = ffi.cast("uint32_t*", self.memory + head)
        for k, v in (values or {}).items():
            self.words[fields.index(k)] = v
        self.pointer = ffi.cast("void*", self.memory)

    def read(self) -> dict[str, int]:
        return {k: int(self.words[i]) for i, k in enumerate(self.fields)}


def query(vk, ffi, instance, phys) -> dict[str, Any]:
    """The device's coopmat2 features, properties and flexible-dimension configurations."""
    feats = _Raw(ffi, FEATURES_STYPE, FEATURES)
    f2 = ffi.new("VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                 "pNext": feats.pointer})
    vk.vkGetPhysicalDeviceFeatures2(phys.handle, f2)
    props = _Raw(ffi, PROPERTIES_STYPE, PROPERTIES)
    p2 = ffi.new("VkPhysicalDeviceProperties2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                                   "pNext": props.pointer})
    vk.vkGetPhysicalDeviceProperties2(phys.handle, p2)
    out = {"features": feats.read(), "properties": props.read(), "flexible": []}
    raw = vk.lib.vkGetInstanceProcAddr(instance, b"vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
    if raw != ffi.NULL:
        fn = ffi.cast("VkResult (*)(VkPhysicalDevice, uint32_t*, void*)", raw)
        count = ffi.new("uint32_t*")
        if fn(phys.handle, count, ffi.NULL) == 0 and count[0]:
            size = ffi.sizeof("VkBaseOutStructure") + 4 * len(FLEXIBLE)
            size += -size % 8  # array elements keep the pointer's alignment
            mem = ffi.new("char[]", size * count[0])
            for i in range(count[0]):
                ffi.cast("VkBaseOutStructure*", mem + i * size).sType = FLEXIBLE_STYPE
            if fn(phys.handle, count, mem) in (0, 5):
                head = ffi.sizeof("VkBaseOutStructure")
                for i in range(count[0]):
                    w = ffi.cast("uint32_t*", mem + i * size + head)
                    out["flexible"].append({k: int(w[j]) for j, k in enumerate(FLEXIBLE)})
    return out


def chain(ffi, head, supported: dict[str, int]) -> tuple[Any, list[Any], list[str]]:
    """The feature struct enabling what the device supports of workgroup scope, flexible dimensions and tensor
    addressing: ``(new head, structs to keep alive, extension names)``."""
    want = {k: supported.get(k, 0) for k in ("cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
                                             "cooperativeMatrixTensorAddressing")}
    feats = _Raw(ffi, FEATURES_STYPE, FEATURES, head, want)
    return feats.pointer, [feats], [EXTENSION]
