import math

import iron
from iron import *  # noqa: F403


@iron.func
def helper0(p0):
    if ((p0 ^ p0) != p0):
        return iron.u32(program_id(0))
    if (not isnan(float(program_id(0)))):
        return where(bool(iron.bf16(float(program_id(0)))), clz(iron.u32(program_id(0))), (255 ^ iron.u32(program_id(0))))
    v1 = (where((p0 > 0), iron.u32(iron.u32(program_id(0))), iron.u32(program_id(0))) if isnan(copysign(float(program_id(0)), where(isnan(float(program_id(0))) or float(program_id(0)) == 0.0, 1.0, float(program_id(0))))) else (umulhi(iron.u32(program_id(0)), iron.u32(program_id(0))) + (1 * iron.u32(program_id(0)))))
    if isnan(where(bool(iron.f16(v1)), (float(program_id(0)) * float(program_id(0))), (float(program_id(0)) * float(program_id(0))))):
        v1 = where((((p0 > 0) and (p0 > 3)) or bool(((p0 > 0) if (p0 > (-5)) else (p0 > (-5))))), (v1 if (p0 > 0) else (v1 ^ v1)), 3)
        v2 = ((v1 // ((v1 << 10) | 1)) >> (p0 - p0))
    return (v1 * 1)


@iron.func
def helper1(p0):
    if ((iron.u32(program_id(0)) + iron.u32(program_id(0))) > cast(program_id(0), iron.u32) != iron.u32(program_id(0))):
        return float(program_id(0))
    if isnan(float(program_id(0))):
        return (where(p0, (-3.25), float(float('inf'))) if p0 else (float(program_id(0)) if (program_id(0) > (-5)) else float(program_id(0))))
    v1 = (ceil((float(program_id(0)) - float(program_id(0)))) if p0 else float(program_id(0)))
    return floor(where((program_id(0) >= 7), (v1 + v1), where((program_id(0) > 0), v1, v1)))


@iron.kernel
def k(xi: Tensor[iron.i32], xu: Tensor[iron.u32], xf: Tensor[iron.f32], xh: Tensor[iron.f16], xb: Tensor[iron.bf16], oi: Tensor[iron.i32], ou: Tensor[iron.u32], of: Tensor[iron.f32], oh: Tensor[iron.f16], ob: Tensor[iron.bf16], oa: Tensor[iron.f32], ai: Tensor[iron.i32], au: Tensor[iron.u32], ap: Tensor[iron.i32], si: int, su: iron.u32, sf: float, C: iron.constexpr):
    gid = program_id(0)
    v1 = ((xu[(simd_lane()) & 63] % (bitcast(where(isnan(xf[gid]) or xf[gid] == 0.0, 1.0, xf[gid]), iron.u32) | 1)) % 3)
    if bool(ceil(xf[gid])):
        ou[gid * 24 + 0] = v1
        of[gid * 24 + 0] = (ceil(xh[((xi[gid] // (gid if gid != 0 else 7))) & 63]) + (xh[(gid) & 63] - xh[gid]))
        if (32 == (xi[gid] | gid) <= ((-1) if (gid > (-5)) else gid)):
            return
    else:
        v2 = ((-(xb[(where((gid > (-5)), 3, iron.i32((-1)))) & 63] + xb[((gid + gid)) & 63])) + (xb[gid] + where((gid > 0), xh[(gid) & 63], xh[((xi[gid] - gid)) & 63])))
        if (((gid > 0) and (gid > 3)) or (gid > 3)):
            return
    for j3 in static_range(3):
        v4: iron.f32 = rint((math.fabs(sf) * (xb[gid] + xf[((xi[(j3) & 63] << (xi[gid] & 31))) & 63])))
        v1 += ((clz(su) ** 2) | 255)
        v5: iron.u32 = ((min(v1, v1) | v1) >> (xi[gid] | (xi[((gid - simd_size())) & 63] // (-1))))
    if isinf(ceil((xf[gid] + (-65520.0)))):
        if (not (xi[gid] > 0)):
            return
        if (cast((3 ^ gid), iron.u32) < where(((xi[gid] > 3) or (xi[(umulhi(gid, (-2147483648))) & 63] > 0)), (v1 & v1), (v1 << gid))):
            atomic_or(au, 3, 31)
            v1 += v1
        else:
            if (xi[((32 & gid)) & 63] > 3):
                v6 = (helper0(simd_size()) & (bitcast(where(isnan(sf) or sf == 0.0, 1.0, sf), iron.u32) ^ cast(xf[(gid) & 63], iron.u32)))
            else:
                atomic_xor(ai, (clz(gid)) & 7, where((gid > 0), (xi[gid] * simd_size()), (gid * 2)))
            oi[gid * 24 + 0] = gid
    v7 = abs(floor(rint(sf)))
    for j8 in range(((local_id(0) + gid)) & 3, (where((xi[gid] > 3), gid, gid)) & 7, 3):
        oa[gid * 24 + 0] = (min(max(((v7 * sf) + cast(iron.bf16(j8), iron.f16)), -30.0), 30.0) / (min(max(xb[((65535 - gid)) & 63], -30.0), 30.0) + 31.0))
    if ((v7 * v7) == (v7 - v7)):
        return
