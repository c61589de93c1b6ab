"""Regenerate src/iron/codegen/spirv/tables.json from the SPIR-V grammar JSON (Debian/Khronos spirv-headers).

The emitter must work where no SPIR-V SDK is installed (issue #4: "no SDK or shader compiler on the user's
machine"), so Iron ships the numeric tables it needs -- opcodes, operand enumerants, GLSL.std.450 instruction
numbers -- derived from the grammar, never typed by hand. tests/codegen_spirv checks the shipped tables against the
system grammar whenever spirv-headers is installed. Run: python scripts/gen_spirv_tables.py [GRAMMAR_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "iron" / "codegen" / "spirv" / "tables.json"


def main() -> None:
    d = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/include/spirv/unified1")
    core = json.loads((d / "spirv.core.grammar.json").read_text())
    glsl = json.loads((d / "extinst.glsl.std.450.grammar.json").read_text())
    enums = {}
    for kind in core["operand_kinds"]:
        if "enumerants" in kind:
            enums[kind["kind"]] = {e["enumerant"]: e["value"] for e in kind["enumerants"]}
    tables = {
        "source": "derived from spirv.core.grammar.json and extinst.glsl.std.450.grammar.json (Khronos SPIR-V "
                  "headers, MIT-style license) by scripts/gen_spirv_tables.py",
        "version": [core["major_version"], core["minor_version"]],
        "opcodes": {i["opname"]: i["opcode"] for i in core["instructions"]},
        "enums": enums,
        "glsl": {i["opname"]: i["opcode"] for i in glsl["instructions"]},
    }
    OUT.write_text(json.dumps(tables, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
