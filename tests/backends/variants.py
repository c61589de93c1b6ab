"""Every kernel Iron ships or tests, in every dtype and constexpr variant: the cases each compile target checks.

Kernels come from ``iron.std`` and the test suites' kernel modules (tests/codegen/kernels.py,
tests/frontend/kernels.py). A kernel with constexpr parameters takes its values from ``CONSTEXPRS`` (each entry its own
variant), else from the module globals of the same names (std kernels define e.g. ``BLOCK`` next to the kernel);
failing both, a guess, and a test that meets a guess the front-end refuses fails, naming the kernel.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import iron
import iron.std

from ..codegen import kernels as codegen_kernels
from ..frontend import atomic_kernels, int_kernels, simd_kernels, wide_kernels
from ..frontend import kernels as frontend_kernels

# constexpr values per kernel name, as lists of alternatives (each is its own variant)
CONSTEXPRS: dict[str, list[dict[str, object]]] = {
    "unary_math": [{"OP": op} for op in range(13)],
    "new_unary_math": [{"OP": op} for op in range(4)],
    "binary_math": [{"OP": op} for op in range(3)],
    "vector_scale": [{"VEC": 4}, {"VEC": 2}],
    "last_group_sums": [{"BLOCK": 32}],
    "vector_via_shared": [{"VEC": 4, "BLOCK": 64}],
    "local_dynamic_index": [{"N": 8}],
    "misaligned_vload": [{"OFFSET": 0}],
    "frag_gemm": [{"MT": 1, "NT": 1, "TRANS_A": False, "TRANS_B": False}, {"MT": 2, "NT": 2, "TRANS_A": True,
                                                                             "TRANS_B": True}],
    "async_pipeline": [{"BLOCK": 32, "VEC": 4, "EARLY": False}],
    "gemm": [{"BM": 32, "BN": 32, "BK": 16, "WM": 2, "WN": 1, "STAGES": 2, "TRANS_B": False},
             {"BM": 128, "BN": 128, "BK": 32, "WM": 2, "WN": 4, "STAGES": 3, "TRANS_B": True}],
    # the GPU default, and both pipeline switches on the small tile (A @ B^T, so A and B both go through registers)
    "gemm_f32": [{"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "UNROLL2": False, "PREFETCH": False,
                  "TRANS_B": False, "VEC": 4},
                 {"BM": 32, "BN": 32, "BK": 8, "TM": 4, "TN": 4, "UNROLL2": True, "PREFETCH": True, "TRANS_B": True,
                  "VEC": 4}],
    "block_sum": [{"BLOCK": 64}],
    "simd_exchange": [{"SHIFT": 1, "MASK": 1}, {"SHIFT": 5, "MASK": 16}],
    "static_dot": [{"K": 3}],
    "static_alternating": [{"K": 2}],
    "constexpr_affine": [{"SCALE": 2, "SQUARE": True}, {"SCALE": 0.5, "SQUARE": False}],
    "ieee_affine": [{"SCALE": 1.0, "BIAS": 0.0}, {"SCALE": 2.0, "BIAS": -0.0}],
    "divide_by_constant": [{"D": 0.0}, {"D": -0.0}],
    "softmax": [{"BLOCK": 256}, {"BLOCK": 32}],
    "warp_tile": [{"BLOCK": 256}],
    "reverse_tiles": [{"BLOCK": 256, "TILE": 16384}, {"BLOCK": 64, "TILE": 1024}],
    # head dim 64 and 16-token blocks: every path of the kernel, at a fraction of D = 128's unrolled size (hipRTC took
    # 352 s for gfx1030 at D = 128; tests/std compiles the launched tiles on the backends present)
    "attn_prefill": [{"D": 64, "BN": 16, "WARPS": 1, "CAUSAL": True, "SW": 32}],
    # one 64-token chunk, one warpgroup, one stage (24 KiB of shared memory: every target's limit)
    "attn_prefill_wg": [{"D": 64, "NC": 1, "WG": 1, "STAGES": 1, "CAUSAL": True, "PIPE": 0}],
    # head dim 64, paged, 16-position tiles in 2 stages (12 KiB of shared memory, 23 KiB as SPIR-V's 4-byte words:
    # every target's limit)
    "attn_decode_split_mma": [{"D": 64, "G": 4, "CHUNK": 64, "BLOCK": 32, "VEC": 8, "PAGED": True, "SW": 32, "BN": 16,
                               "STAGES": 2}],
    # the filter path on order keys and on f32 values (topk_radix's defaults otherwise)
    "topk_filter_one": [{"BLOCK": 256, "VEC": 4, "PER": 4, "PASSES": 4, "VALS": v} for v in (0, 1)],
    "topk_filter_one_f32": [{"BLOCK": 256, "VEC": 4, "PER": 4, "PASSES": 4, "VALS": v} for v in (0, 1)],
}

#: the value given to a constexpr found neither in CONSTEXPRS nor in the kernel's module
GUESS = 2


def _kernels_of(module: ModuleType) -> list[tuple[str, iron.KernelFunction, ModuleType]]:
    """The kernels defined in ``module`` (one imported from a sibling is that sibling's, with its constexprs)."""
    return [(f"{module.__name__.rsplit('.', 1)[-1]}.{name}", k, module) for name, k in vars(module).items()
            if isinstance(k, iron.KernelFunction) and getattr(k.fn, "__module__", module.__name__) == module.__name__]


def all_kernels() -> list[tuple[str, iron.KernelFunction, ModuleType]]:
    """(label, kernel, its module) for every kernel of iron.std and the suites' kernel modules."""
    found = []
    for info in pkgutil.iter_modules(iron.std.__path__):
        found += _kernels_of(importlib.import_module(f"iron.std.{info.name}"))
    suites = (codegen_kernels, frontend_kernels, atomic_kernels, simd_kernels, int_kernels, wide_kernels)
    return found + [entry for module in suites for entry in _kernels_of(module)]


def variants() -> list:
    """One ``pytest.param(kernel, dtype, constexprs)`` per variant, with an id naming all three."""
    cases = []
    for label, k, module in all_kernels():
        alternatives: list[dict[str, object]] = [{}]
        if k.constexpr_names:
            alternatives = CONSTEXPRS.get(k.__name__)
            if alternatives is None and all(hasattr(module, c) for c in k.constexpr_names):
                alternatives = [{c: getattr(module, c) for c in k.constexpr_names}]
            if alternatives is None:  # a guess; the test fails (naming the kernel) if the front-end refuses it
                alternatives = [{c: GUESS for c in k.constexpr_names}]
        for values in alternatives:
            for dt in k.dtypes or (None,):
                suffix = "".join(f"-{c}={v}" for c, v in values.items())
                cases.append(pytest.param(k, dt, values, id=f"{label}-{dt or 'none'}{suffix}"))
    return cases


def make_variant(kernel: iron.KernelFunction, dtype, constexprs: dict[str, object]):
    """The compiled variant; a guessed constexpr the front-end refuses fails the test with what to add."""
    values = tuple(constexprs[c] for c in kernel.constexpr_names)
    try:
        return kernel.variant(dtype, values)
    except iron.IronError as e:
        if GUESS not in values:
            raise
        pytest.fail(f"{kernel.__name__} needs constexpr values in CONSTEXPRS (tests/backends/variants.py): {e.message}")
