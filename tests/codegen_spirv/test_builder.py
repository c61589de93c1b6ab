"""SpirvModuleBuilder: types and constants deduplicated, capabilities collected, a well-formed header; the grammar
tables; the erf approximation's accuracy; the disassembler's fallback."""

from __future__ import annotations

import math
import struct

import numpy as np

from iron.codegen.erf import erf_f32_reference
from iron.codegen.spirv import SpirvModuleBuilder, disassemble
from iron.codegen.spirv import _plain_listing as plain_listing
from iron.codegen.spirv.grammar import grammar


def test_grammar_tables():
    g = grammar()
    assert g.op("OpIAdd") == 128 and g.op("OpCapability") == 17
    assert g.enum("Capability", "Shader") == 1
    assert g.enum("BuiltIn", "WorkgroupSize") == 25
    assert g.glsl["Exp"] == 27 and g.glsl["NMax"] == 80
    assert grammar() is g  # loaded once


def test_types_and_constants_are_deduplicated():
    b = SpirvModuleBuilder()
    i32, u32 = b.type_int(32, True), b.type_int(32, False)
    assert i32 != u32 and b.type_int(32, True) == i32
    assert b.type_float(32) == b.type_float(32)
    assert b.type_pointer("StorageBuffer", i32) == b.type_pointer("StorageBuffer", i32)
    assert b.type_pointer("Function", i32) != b.type_pointer("StorageBuffer", i32)
    assert b.const_int(7) == b.const_int(7) and b.const_int(7) != b.const_uint(7)
    assert b.const_float(1.5) == b.const_float(1.5) and b.const_float(0.0) != b.const_float(-0.0)
    assert b.const_bool(True) == b.const_bool(True) != b.const_bool(False)
    assert b.type_runtime_array(i32, 4) == b.type_runtime_array(i32, 4)
    s1, s2 = b.type_struct([i32]), b.type_struct([i32])
    assert s1 != s2  # decorated structs are never merged implicitly
    words = struct.unpack(f"<{len(b.build()) // 4}I", b.build())
    ops = _opcodes(words)
    assert ops.count(grammar().op("OpTypeInt")) == 2
    assert ops.count(grammar().op("OpConstant")) == 5  # 7, 7u, 1.5, 0.0, -0.0: one each
    assert ops.count(grammar().op("OpTypeStruct")) == 2


def _opcodes(words: tuple[int, ...]) -> list[int]:
    out, i = [], 5
    while i < len(words):
        out.append(words[i] & 0xFFFF)
        i += words[i] >> 16
    return out


def test_header_capabilities_and_strings():
    b = SpirvModuleBuilder()
    b.capability("Shader")
    b.capability("Float16")
    b.capability("Shader")
    b.extension("SPV_EXT_shader_atomic_float_add")
    data = b.build()
    words = struct.unpack(f"<{len(data) // 4}I", data)
    assert words[0] == 0x07230203 and words[1] == 0x00010300 and words[4] == 0
    assert _opcodes(words).count(grammar().op("OpCapability")) == 2
    assert b"SPV_EXT_shader_atomic_float_add\0" in data
    listing = plain_listing(data)
    assert "OpCapability" in listing and "OpMemoryModel" in listing
    assert "OpCapability" in disassemble(data)


def test_erf_approximation_is_within_a_few_ulp():
    x = np.concatenate([np.linspace(-6, 6, 400001, dtype=np.float32),
                        np.float32(10) ** np.linspace(-30, 0, 2000, dtype=np.float32)])
    ref = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    got = erf_f32_reference(x)
    ulp = np.abs(got - ref) / np.spacing(np.abs(ref).astype(np.float32))
    assert ulp.max() < 4
    assert np.isnan(erf_f32_reference(np.array([np.nan], np.float32)))[0]
    assert list(erf_f32_reference(np.array([np.inf, -np.inf], np.float32))) == [1.0, -1.0]


def test_shipped_tables_match_the_installed_grammar():
    """Iron ships tables.json so that emission needs no SPIR-V SDK; it must agree with the Khronos grammar JSON
    wherever that is installed (regenerate with scripts/gen_spirv_tables.py when spirv-headers moves on)."""
    import pytest

    from iron.codegen.spirv.grammar import grammar, system_grammar

    try:
        system = system_grammar()
    except FileNotFoundError:
        pytest.skip("spirv-headers is not installed")
    shipped = grammar()
    assert shipped.version == system.version
    for name, code in shipped.opcodes.items():
        assert system.opcodes.get(name) == code, name
    for kind, values in shipped.enums.items():
        for name, value in values.items():
            assert system.enums[kind].get(name) == value, (kind, name)
    assert shipped.glsl == system.glsl


def test_emission_needs_no_installed_grammar(monkeypatch):
    """With no grammar folder on the machine (as on the H200 image), the shipped tables still emit valid modules."""
    from iron.codegen.spirv import emit_spirv
    from iron.codegen.spirv import grammar as grammar_module
    from iron.std.unary import iron_exp

    monkeypatch.setattr(grammar_module, "_SEARCH", ())
    monkeypatch.delenv("IRON_SPIRV_GRAMMAR_DIR", raising=False)
    grammar_module.grammar.cache_clear()
    try:
        words = emit_spirv(iron_exp.variant(iron_exp.dtypes[0]).kernel).words
    finally:
        grammar_module.grammar.cache_clear()
    assert words[:4] == (0x07230203).to_bytes(4, "little")
