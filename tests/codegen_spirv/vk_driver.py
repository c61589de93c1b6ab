"""A minimal throwaway Vulkan compute driver for testing emitted modules on lavapipe (the real runtime is
``iron.runtime.vulkan``): host-visible buffers, one descriptor set, push constants, group size by specialization."""

from __future__ import annotations

import struct
from functools import lru_cache

import numpy as np

from iron.codegen.spirv import SpirvKernel


class VkUnavailable(Exception):
    pass


@lru_cache(maxsize=1)
def context():
    try:
        import vulkan as vk
    except Exception as e:  # the loader (libvulkan.so.1) missing raises OSError at import
        raise VkUnavailable(f"python vulkan package unusable: {e}") from None
    app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
    try:
        inst = vk.vkCreateInstance(vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                                           pApplicationInfo=app), None)
        phys = vk.vkEnumeratePhysicalDevices(inst)
    except Exception as e:
        raise VkUnavailable(f"no Vulkan instance/device: {e}") from None
    if not phys:
        raise VkUnavailable("no Vulkan device")
    pd = phys[0]
    exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
    qfam = next(i for i, q in enumerate(vk.vkGetPhysicalDeviceQueueFamilyProperties(pd))
                if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
    atomic = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
        shaderBufferFloat32AtomicAdd=True, shaderSharedFloat32AtomicAdd=True)
    f12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                              shaderFloat16=True,
                                              pNext=atomic if "VK_EXT_shader_atomic_float" in exts else None)
    f11 = vk.VkPhysicalDeviceVulkan11Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                              storageBuffer16BitAccess=True, pNext=f12)
    feats = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=f11)
    queue_info = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                            queueFamilyIndex=qfam, queueCount=1, pQueuePriorities=[1.0])
    dev_exts = [e for e in ("VK_EXT_shader_atomic_float",) if e in exts]
    device = vk.vkCreateDevice(pd, vk.VkDeviceCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=feats, queueCreateInfoCount=1,
        pQueueCreateInfos=[queue_info], enabledExtensionCount=len(dev_exts), ppEnabledExtensionNames=dev_exts), None)
    return vk, inst, pd, device, vk.vkGetDeviceQueue(device, qfam, 0), qfam


def _memory_type(vk, pd, bits: int) -> int:
    props = vk.vkGetPhysicalDeviceMemoryProperties(pd)
    want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
    for i in range(props.memoryTypeCount):
        if bits & (1 << i) and props.memoryTypes[i].propertyFlags & want == want:
            return i
    raise VkUnavailable("no host-visible memory")


def run(module: SpirvKernel, arrays: dict[str, np.ndarray], scalars: dict[str, int | float],
        grid: tuple[int, int, int], group: tuple[int, int, int]) -> None:
    """Launch ``module`` on ``grid`` threads in groups of ``group``; buffers are copied back into ``arrays``."""
    vk, _, pd, device, queue, qfam = context()
    made = []
    buffers, memories = [], []
    for b in module.buffers:
        data = np.ascontiguousarray(arrays[b.param])
        size = max(data.nbytes, 4)
        buf = vk.vkCreateBuffer(device, vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size,
            usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
        req = vk.vkGetBufferMemoryRequirements(device, buf)
        mem = vk.vkAllocateMemory(device, vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
            memoryTypeIndex=_memory_type(vk, pd, req.memoryTypeBits)), None)
        vk.vkBindBufferMemory(device, buf, mem, 0)
        ptr = vk.vkMapMemory(device, mem, 0, size, 0)
        ptr[:data.nbytes] = data.tobytes()
        vk.vkUnmapMemory(device, mem)
        buffers.append((buf, size))
        memories.append(mem)
    n = len(module.buffers)
    bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                for i in range(n)]
    dsl = vk.vkCreateDescriptorSetLayout(device, vk.VkDescriptorSetLayoutCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, bindingCount=n, pBindings=bindings), None)
    push_range = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=module.push_size)
    layout = vk.vkCreatePipelineLayout(device, vk.VkPipelineLayoutCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1, pSetLayouts=[dsl],
        pushConstantRangeCount=1, pPushConstantRanges=[push_range]), None)
    shader = vk.vkCreateShaderModule(device, vk.VkShaderModuleCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(module.words), pCode=module.words), None)
    spec_data = vk.ffi.new("uint32_t[3]", list(group))  # keep alive until the pipeline exists
    entries = [vk.VkSpecializationMapEntry(constantID=sid, offset=4 * i, size=4)
               for i, sid in enumerate(module.local_size_spec_ids)]
    spec = vk.VkSpecializationInfo(mapEntryCount=3, pMapEntries=entries, dataSize=12,
                                   pData=vk.ffi.cast("void *", spec_data))
    stage = vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                               stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=shader,
                                               pName=module.entry, pSpecializationInfo=spec)
    pipeline = vk.vkCreateComputePipelines(device, None, 1, [vk.VkComputePipelineCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=layout)], None)[0]
    pool = vk.vkCreateDescriptorPool(device, vk.VkDescriptorPoolCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=1, poolSizeCount=1,
        pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=max(n, 1))]),
        None)
    dset = vk.vkAllocateDescriptorSets(device, vk.VkDescriptorSetAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, descriptorPool=pool, descriptorSetCount=1,
        pSetLayouts=[dsl]))[0]
    writes = [vk.VkWriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=dset, dstBinding=i,
                                      descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=buf, offset=0, range=size)])
              for i, (buf, size) in enumerate(buffers)]
    if writes:
        vk.vkUpdateDescriptorSets(device, len(writes), writes, 0, None)
    values = {**scalars, "iron_n0": grid[0], "iron_n1": grid[1], "iron_n2": grid[2]}
    push = b"".join(struct.pack({"i32": "<i", "u32": "<I", "f32": "<f"}[p.dtype.name], values[p.name])
                    for p in module.push)
    cpool = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=qfam), None)
    cmd = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=cpool,
        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
    vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, [dset], 0, None)
    push_data = vk.ffi.new("char[]", push)
    vk.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push), vk.ffi.cast("void *", push_data))
    vk.vkCmdDispatch(cmd, *(-(-g // s) for g, s in zip(grid, group)))
    vk.vkEndCommandBuffer(cmd)
    vk.vkQueueSubmit(queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                                                pCommandBuffers=[cmd])], None)
    vk.vkQueueWaitIdle(queue)
    for b, (buf, size), mem in zip(module.buffers, buffers, memories):
        ptr = vk.vkMapMemory(device, mem, 0, size, 0)
        out = arrays[b.param]
        out[...] = np.frombuffer(bytes(ptr[:out.nbytes]), dtype=out.dtype).reshape(out.shape)
        vk.vkUnmapMemory(device, mem)
        vk.vkDestroyBuffer(device, buf, None)
        vk.vkFreeMemory(device, mem, None)
    vk.vkDestroyCommandPool(device, cpool, None)
    vk.vkDestroyDescriptorPool(device, pool, None)
    vk.vkDestroyPipeline(device, pipeline, None)
    vk.vkDestroyShaderModule(device, shader, None)
    vk.vkDestroyPipelineLayout(device, layout, None)
    vk.vkDestroyDescriptorSetLayout(device, dsl, None)
    del made
