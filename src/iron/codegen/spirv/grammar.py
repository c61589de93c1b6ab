"""Opcodes and enumerants from the SPIR-V grammar JSON (Debian/Khronos ``spirv-headers``), loaded once.

Hand-typed opcode tables drift from the spec; the grammar files are the machine-readable source every SPIR-V tool
uses. ``IRON_SPIRV_GRAMMAR_DIR`` points elsewhere when the headers live outside /usr/include/spirv/unified1.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

_SEARCH = ("/usr/include/spirv/unified1", "/usr/local/include/spirv/unified1", "/usr/share/spirv-headers/unified1")


@dataclass(frozen=True)
class Grammar:
    version: tuple[int, int]
    opcodes: dict[str, int]  # "OpIAdd" -> 128
    opnames: dict[int, str]  # the reverse, for the fallback disassembler
    enums: dict[str, dict[str, int]]  # operand kind -> enumerant -> value ("Capability" -> "Shader" -> 1)
    glsl: dict[str, int]  # GLSL.std.450 instruction -> number ("Exp" -> 27)

    def op(self, name: str) -> int:
        return self.opcodes[name]

    def enum(self, kind: str, name: str) -> int:
        return self.enums[kind][name]


def _grammar_dir() -> Path:
    candidates = [os.environ["IRON_SPIRV_GRAMMAR_DIR"]] if os.environ.get("IRON_SPIRV_GRAMMAR_DIR") else []
    for d in candidates + list(_SEARCH):
        if (Path(d) / "spirv.core.grammar.json").is_file():
            return Path(d)
    raise FileNotFoundError("the SPIR-V grammar (spirv.core.grammar.json) was not found; install spirv-headers "
                            "(Debian: apt install spirv-headers) or set IRON_SPIRV_GRAMMAR_DIR")


#: what the emitter uses that is newer than the grammar Iron ships (``tables.json``, from Debian 12's spirv-headers
#: 1.3.239): SPV_KHR_cooperative_matrix and SPV_KHR_bfloat16, as spirv.core.grammar.json of SPIRV-Headers 1.4.335
#: numbers them (tests/codegen_spirv/test_coopmat.py checks them against any newer grammar it finds). Merged in only
#: where the grammar read lacks the name.
NEWER = {
    "opcodes": {"OpTypeCooperativeMatrixKHR": 4456, "OpCooperativeMatrixLoadKHR": 4457,
                "OpCooperativeMatrixStoreKHR": 4458, "OpCooperativeMatrixMulAddKHR": 4459,
                "OpCooperativeMatrixLengthKHR": 4460},
    "enums": {"Capability": {"CooperativeMatrixKHR": 6022, "BFloat16TypeKHR": 5116,
                             "BFloat16CooperativeMatrixKHR": 5118},
              "FPEncoding": {"BFloat16KHR": 0},
              "CooperativeMatrixUse": {"MatrixAKHR": 0, "MatrixBKHR": 1, "MatrixAccumulatorKHR": 2},
              "CooperativeMatrixLayout": {"RowMajorKHR": 0, "ColumnMajorKHR": 1}},
}


def _value(v: int | str) -> int:
    return int(v, 0) if isinstance(v, str) else int(v)


@lru_cache(maxsize=1)
def grammar() -> Grammar:
    """The grammar tables (cached for the process): the ones shipped with Iron (``tables.json``, generated from the
    Khronos grammar by ``scripts/gen_spirv_tables.py``), so emission needs no SPIR-V SDK and does not depend on the
    machine; ``IRON_SPIRV_GRAMMAR_DIR`` reads a grammar folder instead."""
    if os.environ.get("IRON_SPIRV_GRAMMAR_DIR"):
        return system_grammar()
    tables = json.loads((Path(__file__).parent / "tables.json").read_text())
    return _build(tables["version"], tables["opcodes"], tables["enums"], tables["glsl"])


def system_grammar() -> Grammar:
    """The grammar read from the installed Khronos JSON (``_grammar_dir``); raises FileNotFoundError without it."""
    d = _grammar_dir()
    core = json.loads((d / "spirv.core.grammar.json").read_text())
    glsl = json.loads((d / "extinst.glsl.std.450.grammar.json").read_text())
    enums: dict[str, dict[str, int | str]] = {}
    for kind in core["operand_kinds"]:
        if "enumerants" in kind:
            enums[kind["kind"]] = {e["enumerant"]: e["value"] for e in kind["enumerants"]}
    return _build((core["major_version"], core["minor_version"]), {i["opname"]: i["opcode"] for i in
                  core["instructions"]}, enums, {i["opname"]: i["opcode"] for i in glsl["instructions"]})


def _build(version, opcodes: dict[str, int], enums: dict[str, dict[str, int | str]], glsl: dict[str, int]) -> Grammar:
    opcodes = {**NEWER["opcodes"], **opcodes}
    enums = {kind: dict(values) for kind, values in enums.items()}
    for kind, values in NEWER["enums"].items():
        enums[kind] = {**values, **enums.get(kind, {})}
    return Grammar(
        version=tuple(version),
        opcodes=dict(opcodes),
        opnames={v: k for k, v in sorted(opcodes.items(), key=lambda kv: kv[0], reverse=True)},
        enums={kind: {name: _value(v) for name, v in values.items()} for kind, values in enums.items()},
        glsl=dict(glsl),
    )
