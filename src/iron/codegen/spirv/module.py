"""What the SPIR-V emitter hands the Vulkan runtime: the module's words and how to bind and launch it."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.types import ScalarType

#: device feature names ``SpirvKernel.features`` may hold
FEATURES = frozenset({"float16", "storage16", "subgroup_basic", "subgroup_arithmetic", "subgroup_shuffle",
                      "subgroup_ballot",
                      "atomic_float_add", "subgroup_uniform_control_flow", "float64",
                      "denorm_preserve", "rounding_rte", "int16", "cooperative_matrix", "cooperative_matrix_bf16",
                      "cooperative_matrix2",
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
class SpirvSharedLength:
    """A shared array sized at launch (``shared(dtype, n)`` with ``n: int`` a kernel parameter): its length is the
    value of scalar parameter ``param``, which the module reads as the u32 specialization constant ``spec_id``
    (the arrays ``param`` sizes share one). It takes ``item_bytes`` per element, its length rounded up to a multiple
    of ``multiple`` (arrays declared as words of several elements: words.py, pairs.py)."""

    param: str
    spec_id: int
    item_bytes: int
    multiple: int = 1
    array: str = ""  # the array's name in the kernel (messages)

    def nbytes(self, n: int) -> int:
        """Bytes of the array at length ``n``."""
        return self.item_bytes * -(-n // self.multiple) * self.multiple


@dataclass(frozen=True)
class SpirvKernel:
    words: bytes  # the binary module (little-endian 32-bit words); passes `spirv-val --target-env vulkan1.2`
    entry: str  # OpEntryPoint name (the Iron kernel's name)
    buffers: tuple[SpirvBuffer, ...]
    push: tuple[SpirvPush, ...]  # Iron scalars in parameter order, then iron_n0, iron_n1, iron_n2
    push_size: int
    local_size_spec_ids: tuple[int, int, int]  # specialization constant ids giving the group size x, y, z
    shared_bytes: int  # compile-time sized shared arrays (``shared_lengths`` adds those sized at launch)
    features: frozenset[str]  # device features the module needs (see FEATURES)
    lanes: int = 1  # elements of axis 0 per invocation: 1, or the width of a lanes module (``lanes_plan``)
    simd_width: int = 0  # the subgroup size the module's code assumes (matrix fragments' fallback); 0: any
    #: shared memory a group needs beyond ``shared_bytes``, per SIMD group (the scratch tiles of cooperative matrices)
    scratch_bytes_per_simd_group: int = 0
    #: how matrix fragments are spelled: "cooperative" (SPV_KHR_cooperative_matrix), "emulated" (the same lowering in
    #: plain SPIR-V, for tests), "scalar" (the fallback, codegen/lower_fragments.py); "" without fragments
    fragments: str = ""
    #: the shared arrays sized at launch, in program order; their spec ids follow the group size's (3, 4, ...)
    shared_lengths: tuple[SpirvSharedLength, ...] = ()

    @property
    def length_spec_ids(self) -> dict[str, int]:
        """Run-time length parameter -> its specialization constant id, in spec id order."""
        return dict(sorted(((s.param, s.spec_id) for s in self.shared_lengths), key=lambda kv: kv[1]))
