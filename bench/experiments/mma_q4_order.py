"""Emulates iron_mma_q4_<elem> lane by lane (registers, byte_perm, the magic-number fma, mma.sync's PTX layouts)."""
import numpy as np, ml_dtypes

def bits16(vals, dt):  # array of dt -> uint16 bits
    return np.asarray(vals, dt).view(np.uint16).astype(np.uint32)

def from_bits(b, dt):
    return np.array([b & 0xFFFF], np.uint16).view(dt)[0]

def byte_perm(x, y, sel):
    bs = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(bs[(sel >> (4 * i)) & 0xF] << (8 * i) for i in range(4))

def halves(r, dt):
    return float(from_bits(r, dt)), float(from_bits(r >> 16, dt))

def pack(lo, hi, dt):
    return int(bits16([lo], dt)[0]) | (int(bits16([hi], dt)[0]) << 16)

def fma2(u, ss, cc, dt):  # fma.rn.<dt>x2: exact a*b+c rounded once
    (a0, a1), (b0, b1), (c0, c1) = halves(u, dt), halves(ss, dt), halves(cc, dt)
    return pack(dt(a0 * b0 + c0), dt(a1 * b1 + c1), dt)

def mul2(u, ss, dt):
    (a0, a1), (b0, b1) = halves(u, dt), halves(ss, dt)
    return pack(dt(a0 * b0), dt(a1 * b1), dt)

def row_pairs(a, e, dt):
    v = [int(bits16([a[e + 2 * i]], dt)[0]) | (int(bits16([a[e + 2 * i + 1]], dt)[0]) << 16) for i in range(16)]
    x = [0] * 16
    for j in range(4):
        x[4 * j] = byte_perm(v[4 * j], v[4 * j + 2], 0x5410)
        x[4 * j + 1] = byte_perm(v[4 * j], v[4 * j + 2], 0x7632)
        x[4 * j + 2] = byte_perm(v[4 * j + 1], v[4 * j + 3], 0x5410)
        x[4 * j + 3] = byte_perm(v[4 * j + 1], v[4 * j + 3], 0x7632)
    return x

def mma_sync(areg, breg, dreg, dt):
    """areg[lane][4], breg[lane][2], dreg[lane][4] -> new dreg (PTX m16n8k16 layouts)."""
    A = np.zeros((16, 16)); B = np.zeros((16, 8)); D = np.zeros((16, 8))
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        for i in range(4):
            r, c = g + (i & 1) * 8, 2 * q + (i >> 1) * 8
            A[r, c], A[r, c + 1] = halves(areg[lane][i], dt)
        for i in range(2):
            k = 2 * q + i * 8
            B[k, g], B[k + 1, g] = halves(breg[lane][i], dt)
        for i in range(4):
            D[g + (i >> 1) * 8, 2 * q + (i & 1)] = dreg[lane][i]
    D = D + A @ B
    return [[D[(lane >> 2) + (i >> 1) * 8, 2 * (lane & 3) + (i & 1)] for i in range(4)] for lane in range(32)]

def emulate(a, ai, lda, w, wi, ldw, s, si, lds, NT, group, dt):
    f16 = dt == np.float16
    M = 0x64006400 if f16 else 0x43004300
    c = [[0.0] * (8 * NT) for _ in range(32)]
    lanes = {}
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        x0 = row_pairs(a, ai + g * lda + 32 * q, dt)
        x1 = x0 if lda == 0 else row_pairs(a, ai + (g + 8) * lda + 32 * q, dt)
        lanes[lane] = (x0, x1)
    for h in range(2 * NT):
        bregs = {}
        for lane in range(32):
            g, q = lane >> 2, lane & 3
            n = 8 * h + g
            e = wi + n * ldw + 4 * q
            wd = [int(w[e + j]) for j in range(4)]
            sv = s[si + n * lds + (32 * q) // group]
            ss = int(bits16([sv], dt)[0]) * 0x10001
            per = []
            for j in range(4):
                b = [0] * 4
                if f16:
                    wj = wd[j]; hi = wj >> 8
                    u = [(wj & 0x000F000F) | M, (wj & 0x00F000F0) | M, (hi & 0x000F000F) | M, (hi & 0x00F000F0) | M]
                    for m in range(4):
                        v = fma2(u[m], 0x2C002C00 if m & 1 else 0x3C003C00, 0xD400D400 if m & 1 else 0xE400E400, dt)
                        b[m] = mul2(v, ss, dt)
                else:
                    cc = int(bits16([dt(-128.0 * float(sv))], dt)[0]) * 0x10001
                    for m in range(4):
                        u = ((wd[j] >> (4 * m)) & 0x000F000F) | M
                        b[m] = fma2(u, ss, cc, dt)
                per.append(b)
            bregs[lane] = per
        for j in range(4):
            for (i, m) in ((4 * j, 0), (4 * j + 2, 2)):
                areg = [[lanes[l][0][i], lanes[l][1][i], lanes[l][0][i + 1], lanes[l][1][i + 1]] for l in range(32)]
                breg = [[bregs[l][j][m], bregs[l][j][m + 1]] for l in range(32)]
                dreg = [c[l][4 * h:4 * h + 4] for l in range(32)]
                new = mma_sync(areg, breg, dreg, dt)
                for l in range(32):
                    c[l][4 * h:4 * h + 4] = new[l]
    out = np.zeros((16, 16 * NT))
    for lane in range(32):
        g, q = lane >> 2, lane & 3
        for h in range(2 * NT):
            for i in range(4):
                out[g + (i >> 1) * 8, 8 * h + 2 * q + (i & 1)] = c[lane][4 * h + i]
    return out

rng = np.random.default_rng(1)
for dt in (ml_dtypes.bfloat16, np.float16):
    for NT, G, lda in ((1, 32, 0), (2, 64, 128), (1, 128, 0)):
        K = 128; N = 16 * NT
        a = rng.standard_normal(16 * K if lda else K).astype(dt)
        w = rng.integers(0, 2**32, (N, K // 8), dtype=np.uint64).astype(np.uint32)
        s = (rng.random((N, max(1, K // G))) * 0.1).astype(dt)
        got = emulate(a, 0, lda, w.ravel(), 0, K // 8, s.ravel(), 0, s.shape[1], NT, G, dt)
        k = np.arange(K)
        codes = (w[:, k // 8] >> (4 * (k % 8)).astype(np.uint32)) & 15
        deq = (codes * s.astype(np.float64)[:, k // G]).astype(dt).astype(np.float64)
        X = a.astype(np.float64).reshape(-1, K) if lda else np.tile(a.astype(np.float64), (16, 1))
        ref = X @ deq.T
        print(dt.__name__ if hasattr(dt, "__name__") else dt, NT, G, lda, np.abs(got - ref).max(), np.abs(ref).max())
