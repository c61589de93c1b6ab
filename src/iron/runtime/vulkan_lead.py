"""The busy lead of a timed Vulkan dispatch on a GPU: what ``torch.cuda._sleep`` is to the CUDA timer.

CUDA's timer (``cuda_timing``) queues a sleep kernel ahead of each timed repeat, so the kernel starts on a busy GPU,
already fed, and the interval is the GPU's own time for it. Vulkan's timer records each timed launch in a submission
of its own, after the host waited for the previous one: without a lead the dispatch starts on a GPU idle since then,
and its interval holds that start. With the lead, the submission first runs ``timing_lead`` (one invocation
spinning ``LEAD_ITERATIONS`` dependent multiply-adds, acc = acc / 2 + 1 from 1: no memory traffic but its 4-byte
store), then a barrier, then the timestamps around the timed dispatch, as CUDA's events after its sleep. The module
is built here with the SPIR-V builder (a dozen instructions; the runtime layer cannot reach the DSL's front-end).

``IRON_VULKAN_TIMING_LEAD``: "0" never, "1" on every device (tests on lavapipe), unset: on GPU devices.
"""

from __future__ import annotations

import os
from functools import cache

#: spin iterations of the lead (a dependent multiply-add each: ~0.1-0.2 ms on a 2 GHz GPU; CUDA's sleep is ~0.25 ms)
LEAD_ITERATIONS = 1 << 15


def wanted(is_gpu: bool) -> bool:
    """Whether timed dispatches get the lead (``IRON_VULKAN_TIMING_LEAD``, else on GPU devices)."""
    flag = os.environ.get("IRON_VULKAN_TIMING_LEAD", "")
    return flag == "1" or (flag != "0" and is_gpu)


@cache
def lead_kernel():
    """The lead as a SpirvKernel: buffer ``out`` (f32, binding 0), push constant ``n`` (u32 iterations)."""
    from ..codegen.spirv.builder import SpirvModuleBuilder
    from ..codegen.spirv.module import SpirvBuffer, SpirvKernel, SpirvPush
    from ..ir import types as t

    b = SpirvModuleBuilder()
    b.capability("Shader")
    void, u32, f32, boolean = b.type_void(), b.type_int(32, False), b.type_float(32), b.type_bool()
    arr = b.type_runtime_array(f32, 4)
    buf = b.type_struct([arr], key="lead_buf")
    b.decorate(buf, "Block")
    b.member_decorate(buf, 0, "Offset", 0)
    pcs = b.type_struct([u32], key="lead_push")
    b.decorate(pcs, "Block")
    b.member_decorate(pcs, 0, "Offset", 0)
    out = b.global_variable("StorageBuffer", buf)
    b.decorate(out, "DescriptorSet", 0)
    b.decorate(out, "Binding", 0)
    pc = b.global_variable("PushConstant", pcs)
    c0, c1 = b.const_uint(0), b.const_uint(1)
    f1, fmul, fadd = b.const_float(1.0), b.const_float(0.5), b.const_float(1.0)  # acc -> 2 - 2^-i
    main, fn = b.new_id(), b.type_function(void)
    entry, header, body, cont, merge = (b.new_id() for _ in range(5))
    pn, n, i, acc, more, prod, accn, inext, p0 = (b.new_id() for _ in range(9))
    b.entry_point("GLCompute", main, "timing_lead", [])
    b.execution_mode(main, "LocalSize", 1, 1, 1)
    b.code("OpFunction", void, main, 0, fn)
    b.code("OpLabel", entry)
    b.code("OpAccessChain", b.type_pointer("PushConstant", u32), pn, pc, c0)
    b.code("OpLoad", u32, n, pn)
    b.code("OpBranch", header)
    b.code("OpLabel", header)
    b.code("OpPhi", u32, i, c0, entry, inext, cont)
    b.code("OpPhi", f32, acc, f1, entry, accn, cont)
    b.code("OpULessThan", boolean, more, i, n)
    b.code("OpLoopMerge", merge, cont, 0)
    b.code("OpBranchConditional", more, body, merge)
    b.code("OpLabel", body)
    b.code("OpFMul", f32, prod, acc, fmul)
    b.code("OpFAdd", f32, accn, prod, fadd)
    b.code("OpBranch", cont)
    b.code("OpLabel", cont)
    b.code("OpIAdd", u32, inext, i, c1)
    b.code("OpBranch", header)
    b.code("OpLabel", merge)
    b.code("OpAccessChain", b.type_pointer("StorageBuffer", f32), p0, out, c0, c0)
    b.code("OpStore", p0, acc)
    b.code("OpReturn")
    b.code("OpFunctionEnd")
    return SpirvKernel(words=b.build(), entry="timing_lead", buffers=(SpirvBuffer("out", 0, t.f32, False),),
                       push=(SpirvPush("n", 0, t.u32),), push_size=4, local_size_spec_ids=(0, 1, 2),
                       shared_bytes=0, features=frozenset())


def record_lead(ctx, cmd) -> None:
    """Record the lead into ``cmd`` (a command buffer of ``ctx``, a VulkanContext, being recorded), then a barrier
    that holds every later dispatch until it has finished. Its descriptor set comes from the launch's pool (reset
    after the launch); its 4-byte buffer is the context's, kept for its lifetime."""
    import struct

    vk, spk = ctx.vk, lead_kernel()
    prog = ctx.program(spk)
    pipe = ctx.pipeline(spk, prog, (1, 1, 1))
    if getattr(ctx, "lead_buffer", None) is None:
        ctx.lead_buffer = ctx.get_buffer("unified" if ctx.unified else "device", 4)
    dset = vk.vkAllocateDescriptorSets(ctx.device, vk.VkDescriptorSetAllocateInfo(
        descriptorPool=ctx.desc_pool, descriptorSetCount=1, pSetLayouts=[prog.set_layout]))[0]
    info = vk.VkDescriptorBufferInfo(buffer=ctx.lead_buffer.handle, offset=0, range=4)
    vk.vkUpdateDescriptorSets(ctx.device, 1, [vk.VkWriteDescriptorSet(
        dstSet=dset, dstBinding=0, descriptorCount=1, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
        pBufferInfo=[info])], 0, None)
    vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipe)
    vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, prog.pipeline_layout, 0, 1, [dset], 0, None)
    iterations = int(os.environ.get("IRON_VULKAN_LEAD_ITERATIONS", LEAD_ITERATIONS))
    vk.vkCmdPushConstants(cmd, prog.pipeline_layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4,
                          ctx.ffi.new("char[]", struct.pack("<I", iterations)))
    vk.vkCmdDispatch(cmd, 1, 1, 1)
    ctx._barrier(cmd, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT,
                 vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)
