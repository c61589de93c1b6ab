"""The arithmetic of quant_gemv's ``gemv_q_warp``: a lane's dequantized dot products with x for its R rows, one
16-byte vector of packed weights a row (see quant_gemv's docstring for the magic-number forms). Split from
quant_gemv.py, which holds the kernels, their loads and their launch."""

from __future__ import annotations

from ..frontend import func
from ..lang import bitcast, f32, fma, simd_lane, simd_size, static_range

__all__ = ["MAGIC_EVEN", "MAGIC_ODD", "TWO23", "dot_rows", "dot_rows_hi"]

TWO23 = 8388608.0
MAGIC_EVEN = 0x43800000  # the bits of f32 256.0 (dot_rows_hi: even elements at mantissa bit 15)
MAGIC_ODD = 0x41800000  # of 16.0 (odd elements at bit 19)


@func
def dot_rows_hi(wv, xs, sv, bv, acc, magic, k, R):
    """dot_rows for 4 bits and 16-bit x (``HI``): each pair of elements shifted together high into f32 mantissas,
    the even one to bit 15 of 256.0 (magic[0]), the odd one to bit 19 of 16.0 (magic[1]): four shifts a word, and
    the bases are not subtracted per element but once a vector, as each chain's first value (-256 and -16 times the
    x sums of its elements, shared by the rows): one logic op and one FMA an element. A chain carries 256 |x| at
    most beside q x, so its rounding is ~2^-17 of the row's sum, below f16's and bf16's (f32 x keeps the exact form;
    at K 16384 f16 outputs were correctly rounded but for one of 64, bf16 all). 8 bits keep the exact form: their
    only pair placement inside a mantissa (bits 7 and 15, bases 65536 and 256: two shifts a word) took 10 % of the
    SASS instructions off but left 8 of 64 f16 outputs a step off at K 16384 (s29). Timed on an H200 (s30,
    16384^2 bf16, each configuration alone): 3-4 % faster than the exact form (57.3 against 59.5 us at R 4)."""
    e0 = k * 32
    xe = 0.0
    xo = 0.0
    for j in static_range(16):
        xe += xs[e0 + 2 * j]
        xo += xs[e0 + 2 * j + 1]
    xsum = xe + xo
    ce = -256.0 * xe
    co = -16.0 * xo
    for r in static_range(R):
        de = ce
        do = co
        for i in static_range(4):
            word = wv[(k * R + r) * 4 + i]
            e = e0 + i * 8
            for p in static_range(4):  # elements 2p, 2p + 1 at bits 15 and 19
                sh = (word << (15 - 8 * p)) if p < 2 else (word >> (8 * p - 15))
                de = fma(bitcast((sh & 0x78000) | magic[0], f32), xs[e + 2 * p], de)
                do = fma(bitcast((sh & 0x780000) | magic[1], f32), xs[e + 2 * p + 1], do)
        acc[r] = fma(sv[k * R + r], de + do, acc[r])
        acc[r] = fma(bv[k * R + r], xsum, acc[r])


@func
def dot_rows(wv, xs, sv, bv, acc, magic, c0, nvec, R, KV, BITS, EXACT, HI):
    """acc[r] += s (sum_j q_j x_j) + b (sum_j x_j) over the lane's vectors (EXACT = 0: those below nvec), each q_j
    made exactly by one logic op and one subtraction (magic[p]: the f32 2^(23 - BITS p), whose mantissa bit BITS p
    is worth 1), two FMA chains per row."""
    S = simd_size()
    PER = 32 // BITS
    EPV = 4 * PER
    POS = 16 // BITS
    MASK = (1 << BITS) - 1
    for k in static_range(KV):
        if HI:
            if EXACT or c0 + simd_lane() + k * S < nvec:
                dot_rows_hi(wv, xs, sv, bv, acc, magic, k, R)
        elif EXACT or c0 + simd_lane() + k * S < nvec:
            xlo = 0.0
            xhi = 0.0
            for j in static_range(EPV // 2):
                xlo += xs[k * EPV + j]
                xhi += xs[k * EPV + EPV // 2 + j]
            xsum = xlo + xhi
            for r in static_range(R):
                d0 = 0.0
                d1 = 0.0
                for i in static_range(4):
                    word = wv[(k * R + r) * 4 + i]
                    hi = word >> 16
                    for p in static_range(POS):
                        m = MASK << (BITS * p)
                        base = TWO23 / (1 << (BITS * p))
                        q_lo = bitcast((word & m) | magic[p], f32) - base  # element p of the word
                        q_hi = bitcast((hi & m) | magic[p], f32) - base  # element POS + p
                        d0 = fma(q_lo, xs[k * EPV + i * PER + p], d0)
                        d1 = fma(q_hi, xs[k * EPV + i * PER + POS + p], d1)
                acc[r] = fma(sv[k * R + r], d0 + d1, acc[r])
                acc[r] = fma(bv[k * R + r], xsum, acc[r])
