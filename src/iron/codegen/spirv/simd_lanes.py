"""SIMD-group ops of issue 15 in SPIR-V: shuffles with Iron's out-of-range rule, ballot/any/all and prefix sums
(a mixin of ``SpirvEmitter`` through ``simd.ThreadOps``).

Every shuffle (by index, xor, up, down) reads a lane only when it exists and is active: a source lane outside the
subgroup, past the end of a partial one, or inactive gives the caller's own value, as on the other backends (a read
of such a lane is undefined in SPIR-V; lavapipe dropped the store that used it). Votes are ballots
(``GroupNonUniformBallot``: any/all count the ballot's bits, so no Vote capability is needed); a ballot is a u32 of
lanes 0..31. Prefix sums are ``OpGroupNonUniform{I,F}Add`` with ``InclusiveScan``/``ExclusiveScan``, which count only
the active invocations.
"""

from __future__ import annotations

from ...ir import ops as O
from ...ir.core import Op

_SUBGROUP_SCOPE = 3


class SimdLaneOps:
    def _ballot(self, cond: int) -> int:
        b = self.b
        self.capability("GroupNonUniformBallot")
        self.features.add("subgroup_ballot")
        return self.inst("OpGroupNonUniformBallot", b.type_vector(b.type_int(32, False), 4),
                         b.const_uint(_SUBGROUP_SCOPE), cond)

    def _source_lane(self, op: Op) -> int:
        """The lane a shuffle reads, as u32: its source lane where that lane exists and is active, else its own."""
        b = self.b
        u32, bool_t = b.type_int(32, False), b.type_bool()
        own = self.inst("OpBitcast", u32, self.thread("simd_lane", None))
        arg = self.inst("OpBitcast", u32, self.value(op.operands[1]))
        code = op.opcode
        if code == "simd_shuffle_xor":
            src = self.inst("OpBitwiseXor", u32, own, arg)
        elif code == "simd_shuffle_up":
            src = self.inst("OpISub", u32, own, arg)
        elif code == "simd_shuffle_down":
            src = self.inst("OpIAdd", u32, own, arg)
        else:
            src = arg
        size = self.inst("OpBitcast", u32, self.thread("simd_size", None))
        inside = self.inst("OpULessThan", bool_t, src, size)  # also catches a negative lane (a huge u32)
        probe = self.inst("OpSelect", u32, inside, src, own)
        active = self.inst("OpGroupNonUniformBallotBitExtract", bool_t, b.const_uint(_SUBGROUP_SCOPE),
                           self._ballot(b.const_bool(True)), probe)
        return self.inst("OpSelect", u32, self.inst("OpLogicalAnd", bool_t, inside, active), src, own)

    def _simd_lanes(self, op: Op) -> int:
        """simd_ballot/any/all and the prefix sums."""
        b = self.b
        u32, bool_t = b.type_int(32, False), b.type_bool()
        scope = b.const_uint(_SUBGROUP_SCOPE)
        code, x = op.opcode, self.value(op.operands[0])
        if code == "simd_ballot":
            return self.inst("OpCompositeExtract", u32, self._ballot(x), 0)
        if code in O.SIMD_VOTE:
            if code == "simd_all":
                x = self.inst("OpLogicalNot", bool_t, x)
            reduce = b.enum("GroupOperation", "Reduce")
            count = self.inst("OpGroupNonUniformBallotBitCount", u32, scope, reduce, self._ballot(x))
            return self.inst("OpINotEqual" if code == "simd_any" else "OpIEqual", bool_t, count, b.const_uint(0))
        self.capability("GroupNonUniformArithmetic")
        self.features.add("subgroup_arithmetic")
        rt = op.result.type
        scan = b.enum("GroupOperation", "InclusiveScan" if code == "simd_prefix_sum" else "ExclusiveScan")
        name = "OpGroupNonUniformFAdd" if rt.is_float else "OpGroupNonUniformIAdd"
        return self.inst(name, self.reg_type(rt), scope, scan, x)
