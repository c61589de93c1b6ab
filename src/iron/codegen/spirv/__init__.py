"""SPIR-V code generation: IR kernel -> binary SPIR-V compute module for Vulkan (``emit_spirv``).

The module is built directly with ``SpirvModuleBuilder`` (no text, no shader compiler); opcodes and enumerants come
from the Khronos grammar JSON (``grammar.py``). ``SpirvKernel`` carries what the Vulkan runtime needs to bind and
launch it: descriptor bindings, the push-constant layout, the specialization ids of the group size and the device
features the module relies on.
"""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

from ...ir.core import Kernel
from ..cfamily.vectorize import plan_lanes
from ..lower_fragments import lower_fragments
from ..tile_copy import expand_tile_copies
from ..warpgroup import expand_warpgroup_mma
from .builder import SpirvModuleBuilder
from .coopmat import uses_cooperative_matrices
from .emit import SpirvEmitter
from .module import FEATURES, SpirvBuffer, SpirvKernel, SpirvPush

__all__ = ["FEATURES", "SpirvBuffer", "SpirvKernel", "SpirvModuleBuilder", "SpirvPush", "disassemble", "emit_spirv",
           "lanes_plan", "validate"]

def lanes_plan(kernel: Kernel):
    """How ``kernel`` runs several consecutive elements per invocation (a ``LanePlan``), or None when it cannot:
    the elementwise kernels of the CUDA vector entry (``codegen/cfamily/vectorize.py``) that have no ``return``."""
    if any(op.opcode == "return" for op in kernel.walk()):
        return None
    if any(p.kind == "buffer" and (p.value.type.elem.is_wide or p.value.type.elem.is_narrow) for p in kernel.params):
        return None  # the lanes module's word views (words.py) move 16- and 32-bit elements only
    return plan_lanes(kernel)


def emit_spirv(kernel: Kernel, *, atomic_float_add: bool = True, uniform_control_flow: bool = False,
               float64: bool = False, denorm_preserve: bool = False, lanes=None, ieee_specials: bool = True,
               rounding_rte: bool = False, simd_width: int = 32, coopmat: frozenset[str] = frozenset(),
               vulkan_memory_model: bool = False, coopmat_emulation: bool = False) -> SpirvKernel:
    """The SPIR-V module of ``kernel`` (an optimised IR kernel, e.g. ``variant.kernel``).

    ``atomic_float_add=False``: f32 ``atomic_add`` becomes a compare-and-swap loop instead of ``OpAtomicFAddEXT``
    (for devices without ``shaderBufferFloat32AtomicAdd``). ``uniform_control_flow=True``: a kernel with SIMD ops
    declares ``SubgroupUniformControlFlowKHR`` (devices with ``shaderSubgroupUniformControlFlow``), so that lanes
    reconverge after branches and loops the whole subgroup entered. ``float64=True`` (devices with
    ``shaderFloat64``): sin, cos and float ``%`` are computed in double and rounded once (``precise.py``).
    ``denorm_preserve=True`` (devices with ``shaderDenormPreserveFloat32``): f32 subnormals are kept.
    ``ieee_specials`` declares SignedZeroInfNanPreserve (the portable default; the runtime drops it on a device
    without ``shaderSignedZeroInfNanPreserveFloat32/16``); ``rounding_rte=True`` declares RoundingModeRTE for every
    float width the module uses (devices with ``shaderRoundingModeRTEFloat16/32/64``). ``simd_width``: the subgroup
    size the module will run at, for the scalar fallback of matrix fragments (``codegen/lower_fragments.py``); a
    module that uses fragments records it (``SpirvKernel.simd_width``) and runs only on a device of that size.
    ``coopmat``: the fragment input dtypes ("f16", "bf16") the device multiplies as cooperative matrices
    (``VK_KHR_cooperative_matrix``, 16 x 16 x 16 at subgroup scope, f32 accumulators): a kernel whose fragments all
    have such inputs gets them (coopmat.py: SPIR-V 1.6, the Vulkan memory model), any other the fallback.
    ``vulkan_memory_model=True``: SPIR-V 1.6 under the Vulkan memory model without cooperative matrices (what a
    cooperative-matrix module relies on, testable on devices without them). ``coopmat_emulation=True``: the
    cooperative-matrix lowering with the matrices emulated in plain SPIR-V (coopmat_emulation.py; tests on devices
    without them). ``SpirvKernel.fragments`` says which spelling a module's fragments got.
    ``lanes`` (a ``lanes_plan``): the *lanes module* instead, in which invocation t runs the kernel for the
    ``lanes.width`` elements ``width * t ...`` of axis 0 (launch ceil(n0 / width) invocations with the same push
    constants): the lane buffers' elements are all loaded before the first element's body and stored after the last,
    so that each invocation has ``width`` independent loads in flight (one 4-byte load per invocation cannot fill a
    big GPU's memory pipeline). Raises ``CompileError`` for ops the backend lacks.
    """
    kernel = expand_warpgroup_mma(expand_tile_copies(kernel))  # fragment ops and copy loops (codegen/warpgroup.py,
    # codegen/tile_copy.py)
    cooperative = lanes is None and uses_cooperative_matrices(kernel, coopmat)
    lowered = kernel if cooperative else lower_fragments(kernel, simd_width)
    spk = SpirvEmitter(lowered, atomic_float_add, uniform_control_flow, float64, denorm_preserve, lanes,
                       ieee_specials=ieee_specials, rounding_rte=rounding_rte, coopmat=cooperative,
                       simd_width=simd_width, vulkan_memory_model=vulkan_memory_model,
                       coopmat_emulation=coopmat_emulation).run()
    if cooperative:
        return dataclasses.replace(spk, simd_width=simd_width,
                                   fragments="emulated" if coopmat_emulation else "cooperative")
    if lowered is not kernel:
        return dataclasses.replace(spk, simd_width=simd_width, fragments="scalar")
    # a kernel whose simd_size() folded to a width (issue 15) runs only on a device of that subgroup size
    folded = kernel.attrs.get("simd_width")
    return dataclasses.replace(spk, simd_width=folded) if folded is not None else spk


def disassemble(words: bytes | SpirvKernel) -> str:
    """Text form of a module: ``spirv-dis`` when it is on PATH, else a plain opcode listing."""
    if isinstance(words, SpirvKernel):
        words = words.words
    tool = shutil.which("spirv-dis")
    if tool is not None:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "module.spv"
            path.write_bytes(words)
            r = subprocess.run([tool, "--no-color", str(path)], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout
    return _plain_listing(words)


def _plain_listing(data: bytes) -> str:
    from .grammar import grammar

    g = grammar()
    words = struct.unpack(f"<{len(data) // 4}I", data)
    major, minor = (words[1] >> 16) & 0xFF, (words[1] >> 8) & 0xFF
    lines = [f"; SPIR-V {major}.{minor}, bound {words[3]} (spirv-dis not found: plain listing)"]
    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        operands = words[i + 1:i + max(count, 1)]
        lines.append(f"{g.opnames.get(opcode, f'Op{opcode}')} " + " ".join(str(w) for w in operands))
        i += max(count, 1)
    return "\n".join(lines) + "\n"


def validate(words: bytes | SpirvKernel, target_env: str = "vulkan1.2", tool: str | None = None) -> str | None:
    """``spirv-val``'s complaint about a module, or None when it accepts it (``tool``: that spirv-val, else the one on
    PATH). Raises FileNotFoundError without one."""
    if isinstance(words, SpirvKernel):
        words = words.words
    tool = tool or shutil.which("spirv-val")
    if tool is None:
        raise FileNotFoundError("spirv-val is not on PATH (Debian: apt install spirv-tools)")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "module.spv"
        path.write_bytes(words)
        r = subprocess.run([tool, "--target-env", target_env, str(path)], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stdout + r.stderr).strip()


__all__ = ["FEATURES", "SpirvBuffer", "SpirvKernel", "SpirvModuleBuilder", "SpirvPush", "disassemble", "emit_spirv",
           "lanes_plan", "validate"]
