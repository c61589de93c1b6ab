"""Integer bit ops of the SPIR-V emitter (issue 15 point 3), called from ``values.py``'s ``pure``.

``umulhi`` is the high member of OpSMulExtended/OpUMulExtended; ``dp4a`` four OpBitFieldSExtract pairs, OpIMul and
OpIAdd (portable to every Vulkan 1.1 device; SPV_KHR_integer_dot_product's OpSDot would be one instruction where
the device has it); ``popcount`` OpBitCount; ``clz`` is 31 - FindUMsb
(FindUMsb(0) is -1, so clz(0) = 32 in wrapping arithmetic); ``ctz`` is FindILsb with its -1 for 0 replaced by 32;
``bitcast`` OpBitcast (the same width, as SPIR-V requires).
"""

from __future__ import annotations

from ...ir import types as t


def emit_bits(em, code: str, st: t.ScalarType, rt: t.ScalarType, xs: list[int]) -> int:
    """The value of bit op ``code`` on operand ids ``xs`` (of type ``st``), of type ``rt``."""
    ty = em.reg_type(rt)
    if code == "bitcast":
        return em.inst("OpBitcast", ty, xs[0])
    if code == "umulhi":
        pair = em.b.type_struct([ty, ty], key="mul_extended")
        wide = em.inst("OpSMulExtended" if rt.is_signed else "OpUMulExtended", pair, xs[0], xs[1])
        return em.inst("OpCompositeExtract", ty, wide, 1)
    if code == "dp4a":
        total = xs[2]
        for k in range(4):
            off, width = em.const(8 * k, t.i32), em.const(8, t.i32)
            a = em.inst("OpBitFieldSExtract", ty, xs[0], off, width)
            b = em.inst("OpBitFieldSExtract", ty, xs[1], off, width)
            total = em.inst("OpIAdd", ty, total, em.inst("OpIMul", ty, a, b))
        return total
    if code == "popcount":
        return em.inst("OpBitCount", ty, xs[0])
    if code == "clz":
        return em.inst("OpISub", ty, em.const(31, rt), em.glsl("FindUMsb", ty, xs[0]))
    zero = em.inst("OpIEqual", em.b.type_bool(), xs[0], em.const(0, rt))
    return em.inst("OpSelect", ty, zero, em.const(32, rt), em.glsl("FindILsb", ty, xs[0]))
