"""f32 -> f16/bf16 rounding by the device's conversion instruction (``emit_spirv(..., hw_convert=...)``).

Without it a half value is rounded in integer arithmetic on the f32's bits (values.py ``round_to``/``round_f16``:
about 10 instructions for bf16, 25 for f16, then 3 more a pair to pack two halves into a word). On NVIDIA's Vulkan
driver that integer work made even a bf16 relu run at 88 % of CUDA's time, and a quarter of exp's (H200,
2026-12-04, bench/results/2026-12-04-h200-s15-vdiag-vectors). With it:

- rounding is ``OpFConvert`` f32 -> half -> f32 (bf16 as ``OpTypeFloat 16 BFloat16KHR``, SPV_KHR_bfloat16, on
  devices with ``shaderBFloat16Type``) under ``RoundingModeRTE`` for width 16, which the module then declares: the
  conversion rounds to nearest even, as the integer code does;
- two halves are packed into a word by one conversion of a 2-vector and a bitcast (one F2FP on NVIDIA).

The runtime turns it on only where the device declares both (``shaderRoundingModeRTEFloat16``, the bfloat16 type);
tests/runtime_vulkan/test_hw_convert.py checks every rounding bit-exactly against ml_dtypes on the device at hand.
"""

from __future__ import annotations

from ...ir import types as t


class HardwareConvert:
    """The conversion-instruction forms of rounding and packing halves (a mixin of ``SpirvEmitter``)."""

    def hw_converts(self, st: t.ScalarType) -> bool:
        """Whether halves of type ``st`` are rounded and packed by conversion instructions in this module."""
        return self.rounding_rte and st.name in self.hw_convert

    def _half_type(self, st: t.ScalarType) -> int:
        b = self.b
        if st == t.bf16:
            self.capability("BFloat16TypeKHR")
            b.extension("SPV_KHR_bfloat16")
            self.features.add("bfloat16")
            return b.type_float(16, "BFloat16KHR")
        self.capability("Float16")
        self.features.add("float16")
        return b.type_float(16)

    def hw_round(self, x: int, st: t.ScalarType) -> int:
        """The f32 register ``x`` rounded to ``st`` (nearest even), kept as f32."""
        f32 = self.b.type_float(32)
        return self.inst("OpFConvert", f32, self.inst("OpFConvert", self._half_type(st), x))

    def hw_pack(self, st: t.ScalarType, pair: list[int]) -> int:
        """Two f32 registers holding ``st`` values as one u32 word, the first in the low half."""
        b = self.b
        f32x2 = b.type_vector(b.type_float(32), 2)
        halves = self.inst("OpFConvert", b.type_vector(self._half_type(st), 2),
                           self.inst("OpCompositeConstruct", f32x2, *pair))
        return self.inst("OpBitcast", b.type_int(32, False), halves)

    def hw_bits16(self, st: t.ScalarType, v: int, rtype: int) -> int:
        """The 16 bits of the f32 register ``v`` holding an ``st`` value, as ``rtype`` (a 16-bit integer type)."""
        return self.inst("OpBitcast", rtype, self.inst("OpFConvert", self._half_type(st), v))
