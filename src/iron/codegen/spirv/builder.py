"""``SpirvModuleBuilder``: assembles a SPIR-V binary module section by section.

Types and constants are deduplicated (SPIR-V forbids two identical non-aggregate type declarations, and one id per
constant keeps modules small); capabilities and extensions are collected as they are needed and written sorted, so
the output is a pure function of the calls made. Operands are ints (ids, literals, enumerant values) or ``str``
(a literal string, nul-terminated and padded to words as the spec requires).
"""

from __future__ import annotations

import struct

from .grammar import grammar

MAGIC = 0x07230203
#: generator magic: 0 = "unregistered"; the low half is our own version
GENERATOR = 0x0000_0001

Operand = int | str


def encode_string(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


class SpirvModuleBuilder:
    """Collects instructions per module section (spec 2.4 "Logical Layout of a Module") and writes the binary."""

    def __init__(self, version: tuple[int, int] = (1, 3), memory_model: str = "GLSL450"):
        self.g = grammar()
        self.version = version
        self.memory_model = memory_model  # "Vulkan": the Vulkan memory model (cooperative matrices require it)
        self._bound = 1
        self.capabilities: set[str] = set()
        self.extensions: set[str] = set()
        self._ext_imports: dict[str, int] = {}
        self._entry_points: list[list[int]] = []
        self._exec_modes: list[list[int]] = []
        self._debug: list[list[int]] = []
        self._annotations: list[list[int]] = []
        self._globals: list[list[int]] = []  # types, constants, global variables (in dependency order)
        self._functions: list[list[int]] = []
        self._types: dict[tuple, int] = {}
        self._constants: dict[tuple, int] = {}
        self.global_variables: list[int] = []  # from SPIR-V 1.4 on, the entry point's interface lists them all

    # -- ids and raw instructions --------------------------------------------------------------------------------

    def new_id(self) -> int:
        self._bound += 1
        return self._bound - 1

    def instruction(self, opname: str, *operands: Operand) -> list[int]:
        words: list[int] = []
        for o in operands:
            if isinstance(o, str):
                words += encode_string(o)
            else:
                if not 0 <= o < 2**32:
                    raise ValueError(f"operand {o} of {opname} is not a 32-bit word")
                words.append(o)
        return [(len(words) + 1) << 16 | self.g.op(opname)] + words

    def code(self, opname: str, *operands: Operand) -> None:
        """Append an instruction to the function section (the caller writes OpFunction ... OpFunctionEnd)."""
        self._functions.append(self.instruction(opname, *operands))

    def extend_function(self, instructions: list[list[int]]) -> None:
        """Append already encoded instructions (from ``instruction``) to the function section."""
        self._functions.extend(instructions)

    def enum(self, kind: str, name: str) -> int:
        return self.g.enum(kind, name)

    # -- module-level sections -----------------------------------------------------------------------------------

    def capability(self, name: str) -> None:
        self.g.enum("Capability", name)  # fail early on a misspelling
        self.capabilities.add(name)

    def extension(self, name: str) -> None:
        self.extensions.add(name)

    def ext_import(self, name: str = "GLSL.std.450") -> int:
        if name not in self._ext_imports:
            self._ext_imports[name] = self.new_id()
        return self._ext_imports[name]

    def entry_point(self, model: str, function: int, name: str, interface: list[int]) -> None:
        self._entry_points.append(
            self.instruction("OpEntryPoint", self.enum("ExecutionModel", model), function, name, *interface))

    def execution_mode(self, function: int, mode: str, *args: int) -> None:
        self._exec_modes.append(
            self.instruction("OpExecutionMode", function, self.enum("ExecutionMode", mode), *args))

    def name(self, target: int, text: str) -> None:
        self._debug.append(self.instruction("OpName", target, text))

    def decorate(self, target: int, decoration: str, *args: int) -> None:
        self._annotations.append(
            self.instruction("OpDecorate", target, self.enum("Decoration", decoration), *args))

    def member_decorate(self, struct_id: int, member: int, decoration: str, *args: int) -> None:
        self._annotations.append(
            self.instruction("OpMemberDecorate", struct_id, member, self.enum("Decoration", decoration), *args))

    # -- types (deduplicated) ------------------------------------------------------------------------------------

    def _type(self, key: tuple, opname: str, *operands: int) -> int:
        tid = self._types.get(key)
        if tid is None:
            tid = self._types[key] = self.new_id()
            self._globals.append(self.instruction(opname, tid, *operands))
        return tid

    def type_void(self) -> int:
        return self._type(("void",), "OpTypeVoid")

    def type_bool(self) -> int:
        return self._type(("bool",), "OpTypeBool")

    def type_int(self, width: int, signed: bool) -> int:
        return self._type(("int", width, signed), "OpTypeInt", width, int(signed))

    def type_float(self, width: int, encoding: str | None = None) -> int:
        """A float type; ``encoding`` "BFloat16KHR" (SPV_KHR_bfloat16) for bfloat16."""
        if encoding is None:
            return self._type(("float", width), "OpTypeFloat", width)
        return self._type(("float", width, encoding), "OpTypeFloat", width, self.enum("FPEncoding", encoding))

    def type_vector(self, elem: int, count: int) -> int:
        return self._type(("vector", elem, count), "OpTypeVector", elem, count)

    def type_array(self, elem: int, length: int, stride: int | None = None) -> int:
        """A sized array; ``stride`` decorates it with ArrayStride (needed for explicitly laid out storage)."""
        n = self.const_uint(length)
        key = ("array", elem, length, stride)
        fresh = key not in self._types
        tid = self._type(key, "OpTypeArray", elem, n)
        if fresh and stride is not None:
            self.decorate(tid, "ArrayStride", stride)
        return tid

    def type_array_of(self, elem: int, length_id: int) -> int:
        """An array whose length is the constant (or specialization constant) ``length_id``."""
        return self._type(("array_of", elem, length_id), "OpTypeArray", elem, length_id)

    def type_cooperative_matrix(self, component: int, rows: int, cols: int, use: str) -> int:
        """A subgroup-scope ``rows`` x ``cols`` cooperative matrix (SPV_KHR_cooperative_matrix) of ``use``
        "MatrixAKHR", "MatrixBKHR" or "MatrixAccumulatorKHR"."""
        operands = (self.const_uint(self.enum("Scope", "Subgroup")), self.const_uint(rows), self.const_uint(cols),
                    self.const_uint(self.enum("CooperativeMatrixUse", use)))
        return self._type(("coopmat", component, *operands), "OpTypeCooperativeMatrixKHR", component, *operands)

    def type_runtime_array(self, elem: int, stride: int) -> int:
        key = ("runtime_array", elem, stride)
        fresh = key not in self._types
        tid = self._type(key, "OpTypeRuntimeArray", elem)
        if fresh:
            self.decorate(tid, "ArrayStride", stride)
        return tid

    def type_struct(self, members: list[int], key: object = None) -> int:
        """A struct; structs carry decorations, so they are shared only between callers passing the same ``key``."""
        if key is None:
            tid = self.new_id()
            self._globals.append(self.instruction("OpTypeStruct", tid, *members))
            return tid
        return self._type(("struct", key, tuple(members)), "OpTypeStruct", *members)

    def type_pointer(self, storage: str, pointee: int) -> int:
        sc = self.enum("StorageClass", storage)
        return self._type(("pointer", sc, pointee), "OpTypePointer", sc, pointee)

    def type_function(self, ret: int, *params: int) -> int:
        return self._type(("function", ret, params), "OpTypeFunction", ret, *params)

    # -- constants (deduplicated) --------------------------------------------------------------------------------

    def constant(self, type_id: int, *words: int) -> int:
        key = ("const", type_id, words)
        cid = self._constants.get(key)
        if cid is None:
            cid = self._constants[key] = self.new_id()
            self._globals.append(self.instruction("OpConstant", type_id, cid, *words))
        return cid

    def const_bool(self, value: bool) -> int:
        key = ("bool", bool(value))
        cid = self._constants.get(key)
        if cid is None:
            cid = self._constants[key] = self.new_id()
            self._globals.append(self.instruction("OpConstantTrue" if value else "OpConstantFalse",
                                                  self.type_bool(), cid))
        return cid

    def const_uint(self, value: int) -> int:
        return self.constant(self.type_int(32, False), value & 0xFFFFFFFF)

    def const_int(self, value: int) -> int:
        return self.constant(self.type_int(32, True), value & 0xFFFFFFFF)

    def const_float(self, value: float) -> int:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        return self.constant(self.type_float(32), bits)

    def const_composite(self, type_id: int, *parts: int) -> int:
        key = ("composite", type_id, parts)
        cid = self._constants.get(key)
        if cid is None:
            cid = self._constants[key] = self.new_id()
            self._globals.append(self.instruction("OpConstantComposite", type_id, cid, *parts))
        return cid

    def spec_constant(self, type_id: int, default: int, spec_id: int) -> int:
        cid = self.new_id()
        self._globals.append(self.instruction("OpSpecConstant", type_id, cid, default))
        self.decorate(cid, "SpecId", spec_id)
        return cid

    def spec_op(self, type_id: int, opname: str, *operands: int) -> int:
        """``OpSpecConstantOp``: ``opname`` applied to (specialization) constants when the pipeline is built."""
        cid = self.new_id()
        self._globals.append(self.instruction("OpSpecConstantOp", type_id, cid, self.g.op(opname), *operands))
        return cid

    def spec_composite(self, type_id: int, *parts: int) -> int:
        cid = self.new_id()
        self._globals.append(self.instruction("OpSpecConstantComposite", type_id, cid, *parts))
        return cid

    def global_variable(self, storage: str, pointee: int) -> int:
        vid = self.new_id()
        ptr = self.type_pointer(storage, pointee)
        self._globals.append(self.instruction("OpVariable", ptr, vid, self.enum("StorageClass", storage)))
        self.global_variables.append(vid)
        return vid

    # -- the binary ------------------------------------------------------------------------------------------------

    def build(self) -> bytes:
        major, minor = self.version
        words = [MAGIC, (major << 16) | (minor << 8), GENERATOR, self._bound, 0]
        for cap in sorted(self.capabilities, key=lambda c: self.enum("Capability", c)):
            words += self.instruction("OpCapability", self.enum("Capability", cap))
        for ext in sorted(self.extensions):
            words += self.instruction("OpExtension", ext)
        for name, iid in sorted(self._ext_imports.items(), key=lambda kv: kv[1]):
            words += self.instruction("OpExtInstImport", iid, name)
        words += self.instruction("OpMemoryModel", self.enum("AddressingModel", "Logical"),
                                  self.enum("MemoryModel", self.memory_model))
        for section in (self._entry_points, self._exec_modes, self._debug, self._annotations, self._globals,
                        self._functions):
            for inst in section:
                words += inst
        return struct.pack(f"<{len(words)}I", *words)
