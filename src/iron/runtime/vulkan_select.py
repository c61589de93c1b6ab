"""Vulkan device discovery for the ``vulkan`` backend: loading the package, the instance, listing and choosing
physical devices, plus the two small byte-level helpers a launch needs (push-constant packing, a SPIR-V scan)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LaunchError

_TYPE_RANK = {"discrete": 0, "integrated": 1, "virtual": 2, "cpu": 3, "other": 4}
_TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}


def load_vulkan():
    """The ``vulkan`` module, or LaunchError with why not (the package loads libvulkan at import time)."""
    try:
        import vulkan
    except ImportError:
        raise LaunchError("the 'vulkan' Python package is not installed (pip install 'wh-iron[vulkan]')") from None
    except OSError:
        raise LaunchError("no Vulkan loader (libvulkan.so.1) on this machine; install libvulkan1 and a driver "
                          "(e.g. mesa-vulkan-drivers)") from None
    except Exception as e:  # cffi errors from a broken install
        raise LaunchError(f"the 'vulkan' package failed to load: {type(e).__name__}: {e}") from None
    return vulkan


def version_text(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


@dataclass
class PhysicalInfo:
    """What Iron needs to know about one physical device."""

    index: int
    handle: Any
    name: str
    type: str
    api: int
    queue_family: int | None
    timestamp_bits: int = 0


def create_instance(vk):
    """A Vulkan 1.2+ instance (portability enumeration on where offered, so MoltenVK devices are listed)."""
    exts = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
    enabled, flags = [], 0
    if "VK_KHR_portability_enumeration" in exts:
        enabled.append("VK_KHR_portability_enumeration")
        flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
    app = vk.VkApplicationInfo(pApplicationName="iron", applicationVersion=1, pEngineName="iron", engineVersion=1,
                               apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    info = vk.VkInstanceCreateInfo(pApplicationInfo=app, flags=flags, enabledExtensionCount=len(enabled),
                                   ppEnabledExtensionNames=enabled or None)
    return vk.vkCreateInstance(info, None)


def list_devices(vk, instance) -> list[PhysicalInfo]:
    out = []
    for i, pd in enumerate(vk.vkEnumeratePhysicalDevices(instance)):
        p = vk.vkGetPhysicalDeviceProperties(pd)
        qf, bits = None, 0
        for j, q in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(pd)):
            if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT:
                # a compute-capable family; prefer one that also times (timestampValidBits > 0)
                if qf is None or (bits == 0 and q.timestampValidBits > 0):
                    qf, bits = j, q.timestampValidBits
        out.append(PhysicalInfo(i, pd, p.deviceName, _TYPE_NAMES.get(p.deviceType, "other"), p.apiVersion, qf, bits))
    return out


def choose_device(devices: list[PhysicalInfo]) -> PhysicalInfo:
    """``IRON_VULKAN_DEVICE`` (index or name substring) if set, else discrete > integrated > virtual > CPU."""
    usable = [d for d in devices if d.queue_family is not None and d.api >= (1 << 22 | 1 << 12)]
    names = "; ".join(f"{d.index}: {d.name} ({d.type}, Vulkan {version_text(d.api)})" for d in devices) or "none"
    want = os.environ.get("IRON_VULKAN_DEVICE", "").strip()
    if want:
        if want.isdigit():
            pick = [d for d in devices if d.index == int(want)]
        else:
            pick = [d for d in devices if want.lower() in d.name.lower()]
        if not pick:
            raise LaunchError(f"IRON_VULKAN_DEVICE={want!r} matches no Vulkan device (devices: {names})")
        if pick[0] not in usable:
            raise LaunchError(f"Vulkan device {pick[0].name} has no compute queue or is older than Vulkan 1.1")
        return pick[0]
    if not usable:
        raise LaunchError(f"no Vulkan device with a compute queue and Vulkan 1.1 (devices: {names})")
    return min(usable, key=lambda d: (_TYPE_RANK[d.type], d.index))


def uses_local_size_id(words: bytes) -> bool:
    """Whether a module has ``OpExecutionModeId ... LocalSizeId`` (a scan of the instruction stream)."""
    w = np.frombuffer(bytes(words), dtype="<u4")
    i = 5  # after the header
    while i < len(w):
        count, op = int(w[i]) >> 16, int(w[i]) & 0xFFFF
        if op == 331 and count >= 3 and int(w[i + 2]) == 38:  # OpExecutionModeId, LocalSizeId
            return True
        if op == 54 or count == 0:  # OpFunction: execution modes all come before the first function
            return False
        i += count
    return False
