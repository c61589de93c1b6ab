"""What the SPIR-V emitter hands the Vulkan runtime: the module's words and how to bind and launch it."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.types import ScalarType

#: device feature names ``SpirvKernel.features`` may hold
FEATURES = frozenset({"float16", "storage16", "subgroup_basic", "subgroup_arithmetic", "subgroup_shuffle",
                      "subgroup_ballot",
                      "atomic_float_add", "subgroup_uniform_control_flow", "float64",
                      "denorm_preserve", "rounding_rte", "int16", "cooperative_matrix", "cooperative_matrix_bf16",
                      "vulkan_memory_model", "vulkan_memory_model_device_scope", "spirv_1_6",
                      "int64", "int8", "storage8", "int64_atomics", "int64_shared_atomics"})


@dataclass(frozen=True)
class SpirvBuffer:
    """One storage buffer = one Iron buffer parameter, descriptor set 0."""

    param: str  # Iron parameter name
    binding: int  # 0, 1, ... in parameter order
    dtype: ScalarType  # Iron element type (f32, f16, bf16, i32, u32)
    readonly: bool


@dataclass(frozen=True)
class SpirvPush:
    """One push-constant field."""

    name: str  # Iron scalar parameter name, or "iron_n0"/"iron_n1"/"iron_n2" for the exact grid sizes
    offset: int  # bytes
    dtype: ScalarType  # i32, u32 or f32
    #: the grid axis whose exact size the field holds; None for an Iron scalar. Launchers go by this, not the name:
    #: a scalar may be called ``iron_n0`` (the grid fields then take a name no parameter has, ``iron_n0_``)
    axis: int | None = None


@dataclass(frozen=True)
class SpirvKernel:
    words: bytes  # the binary module (little-endian 32-bit words); passes `spirv-val --target-env vulkan1.2`
    entry: str  # OpEntryPoint name (the Iron kernel's name)
    buffers: tuple[SpirvBuffer, ...]
    push: tuple[SpirvPush, ...]  # Iron scalars in parameter order, then iron_n0, iron_n1, iron_n2
    push_size: int
    local_size_spec_ids: tuple[int, int, int]  # specialization constant ids giving the group size x, y, z
    shared_bytes: int
    features: frozenset[str]  # device features the module needs (see FEATURES)
    lanes: int = 1  # elements of axis 0 per invocation: 1, or the width of a lanes module (``lanes_plan``)
    simd_width: int = 0  # the subgroup size the module's code assumes (matrix fragments' fallback); 0: any
    #: shared memory a group needs beyond ``shared_bytes``, per SIMD group (the scratch tiles of cooperative matrices)
    scratch_bytes_per_simd_group: int = 0
    #: how matrix fragments are spelled: "cooperative" (SPV_KHR_cooperative_matrix), "emulated" (the same lowering in
    #: plain SPIR-V, for tests), "scalar" (the fallback, codegen/lower_fragments.py); "" without fragments
    fragments: str = ""
