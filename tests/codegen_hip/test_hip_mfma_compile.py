"""Matrix fragments in the HIP source and in hipRTC's code objects (issue 14, points 4 and 9): the std GEMM
(``iron.std.gemm.gemm``) and ``frag_gemm`` (tests/frontend/kernels.py) compile for gfx90a with MFMA -- the code
object's instructions are read back, by llvm-objdump where it is installed and always by their encoding in the
``.text`` section -- for gfx906 (wave64 without MFMA: shuffles and fmas), and for gfx1030 (wave32 RDNA2: the scalar
fallback); the NVIDIA run of the HIP source uses CUDA's ``mma.sync`` and compiles with NVRTC.

What runs where is in test_hip_mfma_model.py and test_hip_mfma_host.py (the layout on a CPU wavefront); nothing
here has run on an AMD GPU.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

import iron
from iron.codegen import emit_hip, hiprtc, nvrtc
from iron.codegen.cfamily.hip import HIP_ON_NVIDIA, emit_source, for_nvidia
from iron.runtime.hip import HipBackend
from iron.std.gemm import gemm

from ..frontend import kernels as FK

_NO_HIPRTC = hiprtc.unavailable_reason()
needs_hiprtc = pytest.mark.skipif(_NO_HIPRTC is not None, reason=f"hipRTC unavailable: {_NO_HIPRTC}")
_NO_NVRTC = nvrtc.unavailable_reason()

MNEMONIC = {"f16": "v_mfma_f32_16x16x16f16", "bf16": "v_mfma_f32_16x16x16bf16_1k"}
#: the high 16 bits of the first dword of each (VOP3P-MAI encoding 0b110100111, then the 7-bit opcode 0x4D / 0x67:
#: AMD CDNA2 ISA, "VOP3P-MAI"; the calculator's -d prints the same opcodes)
ENCODING = {"f16": 0xD3CD, "bf16": 0xD3E7}

# (kernel, constexprs, MFMAs per k step of one SIMD group: MT * NT * BK / 16 for gemm, MT * NT for frag_gemm)
CASES = [
    pytest.param(gemm, (32, 32, 16, 2, 1, 2, False), 1 * 2 * 1, id="gemm-32x32x16-MT1-NT2"),
    pytest.param(gemm, (128, 128, 32, 2, 4, 3, True), 4 * 2 * 2, id="gemm_nt-128x128x32-MT4-NT2"),
    pytest.param(FK.frag_gemm, (1, 1, False, False), 1, id="frag_gemm-MT1-NT1"),
    pytest.param(FK.frag_gemm, (2, 2, True, True), 4, id="frag_gemm-MT2-NT2-trans"),
]


def _objdump() -> str | None:
    for name in ("llvm-objdump-16", "llvm-objdump-17", "llvm-objdump-18", "llvm-objdump"):
        path = shutil.which(name)
        if path and "amdgcn" in subprocess.run([path, "--version"], capture_output=True, text=True).stdout:
            return path
    return None


OBJDUMP = _objdump()


def _text(code: bytes) -> bytes:
    """The ``.text`` section of an ELF64 little-endian code object."""
    shoff, = struct.unpack_from("<Q", code, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", code, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", code, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    for name, _, _, _, offset, size in sections:
        if code[names + name:code.index(b"\0", names + name)] == b".text":
            return code[offset:offset + size]
    raise AssertionError("no .text section")


def mfma_by_encoding(code: bytes) -> dict[str, int]:
    """MFMAs in ``.text`` by their first dword (a later dword of another instruction could alias one; where
    llvm-objdump is installed the two counts are checked equal)."""
    words = struct.unpack(f"<{len(_text(code)) // 4}I", _text(code)[: len(_text(code)) // 4 * 4])
    return {e: sum(1 for w in words if w >> 16 == enc) for e, enc in ENCODING.items()}


def mfma_by_disassembly(code: bytes, target: str, tmp_path) -> dict[str, int]:
    path = tmp_path / f"{target}.hsaco"
    path.write_bytes(code)
    out = subprocess.run([OBJDUMP, "-d", f"--mcpu={target}", str(path)], capture_output=True, text=True, check=True)
    found = re.findall(r"^\s*(v_mfma\w*)", out.stdout, re.M)
    assert set(found) <= set(MNEMONIC.values()), f"unexpected matrix instructions {set(found)}"
    return {e: found.count(m) for e, m in MNEMONIC.items()}


@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("kernel,constexprs,per_step", CASES)
def test_source_spells_fragments_per_target(kernel, constexprs, per_step, dtype):
    k = kernel.variant(dtype, constexprs).kernel
    wave64, wave32, nvidia = emit_hip(k, 64).source, emit_hip(k, 32).source, emit_source(k, HIP_ON_NVIDIA).source
    builtin = MNEMONIC[dtype.name].replace("v_", "__builtin_amdgcn_")
    assert f"iron_mfma_mma_{dtype.name}(" in wave64 and f"{builtin}(" in wave64
    assert "defined(__gfx90a__)" in wave64 and "__shfl(" in wave64  # MFMA on CDNA2+, shuffles on other gfx9
    assert "mfma" not in wave32 and "iron_frag" not in wave32  # RDNA2: the scalar fallback (local arrays, fmas)
    assert "mma.sync.aligned.m16n8k16" in nvidia and "mfma" not in nvidia
    assert emit_hip(k, 64).source == wave64  # reproducible


@needs_hiprtc
@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16], ids=["f16", "bf16"])
@pytest.mark.parametrize("kernel,constexprs,per_step", CASES)
def test_gfx90a_code_object_has_mfma(kernel, constexprs, per_step, dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    code = HipBackend().compile(kernel.variant(dtype, constexprs), target="gfx90a")
    assert code[:4] == b"\x7fELF"
    counts = mfma_by_encoding(code)
    other = "bf16" if dtype.name == "f16" else "f16"
    assert counts[dtype.name] == per_step and counts[other] == 0, counts  # ROCm 5.2's hipRTC does not unroll k
    if OBJDUMP:
        assert mfma_by_disassembly(code, "gfx90a", tmp_path) == counts


@needs_hiprtc
@pytest.mark.parametrize("target,dtype,kernel,constexprs", [
    ("gfx906", iron.bf16, FK.frag_gemm, (2, 2, True, True)),
    ("gfx906", iron.f16, gemm, (32, 32, 16, 2, 1, 2, False)),
    ("gfx1030", iron.f16, FK.frag_gemm, (1, 1, False, False)),
    ("gfx1030", iron.bf16, gemm, (32, 32, 16, 2, 1, 2, False)),
], ids=["gfx906-frag_gemm-bf16", "gfx906-gemm-f16", "gfx1030-frag_gemm-f16", "gfx1030-gemm-bf16"])
def test_targets_without_mfma_compile_without_it(target, dtype, kernel, constexprs, tmp_path, monkeypatch):
    """gfx906 (wave64, GCN) takes the shuffle path of the same wave64 source; gfx1030 (wave32) the fallback."""
    monkeypatch.setenv("IRON_CACHE_DIR", str(tmp_path))
    variant = kernel.variant(dtype, constexprs)
    code, log = hiprtc.compile_hip_log(HipBackend().emitted(variant, target), target=target)
    assert code[:4] == b"\x7fELF" and not hiprtc.warnings_in(log), log
    assert mfma_by_encoding(code) == {"f16": 0, "bf16": 0}
    if OBJDUMP:
        assert mfma_by_disassembly(code, target, tmp_path) == {"f16": 0, "bf16": 0}


@pytest.mark.skipif(_NO_NVRTC is not None, reason=f"NVRTC unavailable: {_NO_NVRTC}")
@pytest.mark.parametrize("dtype", [iron.f16, iron.bf16], ids=["f16", "bf16"])
def test_nvidia_run_uses_cudas_mma_sync(dtype):
    """hip-on-cuda: the HIP source for NVIDIA spells fragments as CUDA does (mma.sync, ldmatrix), behind the
    compatibility header, and NVRTC compiles it without a warning."""
    for kernel, constexprs in ((gemm, (128, 128, 32, 2, 4, 3, True)), (FK.frag_gemm, (2, 2, True, True))):
        src = emit_source(kernel.variant(dtype, constexprs).kernel, HIP_ON_NVIDIA)
        cubin, log = nvrtc.compile_cuda_log(for_nvidia(src.source), arch="sm_90", name=src.entry)
        assert cubin[:4] == b"\x7fELF" and log == "", log
