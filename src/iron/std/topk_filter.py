"""Top-k by filtering: std/sample/topk's ``"filter"`` path, one launch, written to spend fewer instructions a logit
than the radix path. On the H200 (2026-12-05, 32 x 128256 bf16, k 64) ``topk_radix_partial`` executed 15.3 M warp
instructions (3.7 a logit) at 0.64 issued a scheduler and cycle: bound by its instruction count (its digit scans,
shared-memory histograms and k x k slot ranking), 37.5 us in one launch against a 3.0 us launch floor. This path on
an H100 (2026-12-05): 23.3 us (radix1 38.2, torch.topk 88.2), 6.43 M warp instructions; 80 registers instead of 87
(3 groups an SM) did not change it: the tail is each row's merge after its last chunk. s27 (H100, 32 x 128256 bf16,
64 a thread, "filterv"): the hit masks and the bitonic bound below took 3.61 M warp instructions to 2.33 M and
16.8 us to 15.7-16.0; the loads' latency, the barriers and the merge now dominate (ncu source counters).

The contract is topk.py's: the k <= 64 best of each row, by value descending and equal values by the lower index,
the logits' own values and i32 (or f32) column indices. Keys are topk_radix's (``order_key``): unsigned key order is
value order, padding past a row's end takes key 0 (with ``VALS``: -inf, key order_key(-inf), ranked after a real
-inf by its larger position), after every real element.

Chunk (``select_filter``; one group a chunk, PER * VEC keys a thread in registers, topk_partial's geometry):

1. bound: each SIMD group's r-th largest thread maximum, r = ceil(K / SIMD groups) (a bitonic sort of the SIMD
   group's maxima, s27: 15 exchanges at 32 lanes where a count against every lane took 32 broadcasts), and the least
   of those over the group's SIMD groups. At least K keys of the chunk are >= it (r maxima in each SIMD group).
   1 barrier.
2. candidates: each thread's elements >= the bound (on logits about one in a hundred) set bits of its hit masks;
   a prefix sum of their counts over the group places them, and each thread writes the positions of its set bits
   (a loop over the bits, not the elements), 1 barrier; then one thread a candidate reads its element again from
   memory and makes its key (the registers cannot be indexed by a run-time bit), 1 barrier. s27: the per-element
   form (a branch an element, the key made in it) was if-converted by ptxas into every element's key arithmetic.
3. rank: each candidate counts those ranking before it (a larger key, or an equal key at a lower position); the K
   first are written in rank order to the row's candidate lists, as topk_radix_partial writes them. 1 barrier.
   For bf16 and f16 the keys' low 16 / 13 bits are constant, so the position's complement takes their place
   (where the chunk's positions fit) and one u32 comparison ranks, 4 candidates a 16-byte read.
   More than CAP candidates (many equal keys, or a chunk with few real elements: a bound of key 0, or of -inf with
   ``VALS``) take topk_radix's exact ``select_best`` instead (a branch uniform over the group), on the chunk loaded
   again as keys (``load_chunk``), so no register outlives the hit masks on the common path.

``VALS`` (path ``"filterv"``, s26): the chunk stays in registers as f32 bit patterns, compared as floats (-0.0 equal
to +0.0, as their shared key), so the per-element key arithmetic (``order_key``: 6 operations a logit) is spent
only on each thread's maximum (the bound, found among keys, mapped back to a value) and on each candidate. The
kernels are bounded to 2 groups of 256 an SM (128 registers; ptxas keeps the common path in registers and spills
a few scalars in the select_best fallback: ``iron inspect --backend cuda --resources``).

Row (the last group of the row to finish, ``reductions.last_of_row``): the chunks' ranked lists (at most
``MAX_LISTS``) are read into shared memory and merged pairwise, K kept each time, ceil(log2 chunks) rounds of one
barrier: output element i of a pair finds how many of its first i come from each list by a binary search on the
merge path, and ties go to the list of lower columns, so equal values rank by column. Each value is made from its key
(exact: the key came from the logit widened to f32), x read again only for zeros (s27: 15.5-15.6 us against
15.6-15.9 with every value read back; a one-step merge by binary searches of every list instead of the rounds
measured 18.6-18.9, dropped). The row's count is reset for the next launch.
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    T,
    Tensor,
    barrier,
    bitcast,
    cast,
    constexpr,
    ctz,
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    popcount,
    shared,
    simd_broadcast,
    simd_group,
    simd_lane,
    simd_prefix_exclusive_sum,
    simd_shuffle_xor,
    simd_size,
    static_range,
    u32,
    vload,
    where,
)
from .reductions import last_of_row
from .topk_radix import BLOCK, MAX_K, MIN_SIMD, PASSES, PER, VEC, chunk_keys, load_chunk, order_key, select_best

__all__ = ["BLOCK", "CAP", "MAX_LISTS", "PASSES", "PER", "VALS", "VEC", "merge_lists",
           "select_filter", "topk_filter_one", "topk_filter_one_f32"]

#: candidates a chunk ranks among themselves (at most): more take select_best (one per thread of a 256-group)
CAP = 256
#: the form ``iron build`` compiles (the kernels' VALS constexpr): 1 f32 values (s26, H100: 16.8 us vs 18.3 as keys)
VALS = 1
#: the most chunks a row may have on this path (the merge keeps the row's lists in 8 KiB of shared memory)
MAX_LISTS = 16


@func
def group_bound(m, K, BLOCK, red):
    """A value with at least K of the group's values m (one a thread, keys or floats) >= it: the least over SIMD
    groups of each one's r-th largest value, r = ceil(K / SIMD groups) (<= simd_size() because K <= BLOCK), read
    after a bitonic sort of the SIMD group's values (descending across lanes: log2(width)^2 / 2 exchanges instead of
    a comparison with every lane). One barrier."""
    nsg = BLOCK // simd_size()
    r = (K + nsg - 1) // nsg
    lane = simd_lane()
    v = m
    for e in static_range(1, 7):  # blocks of 2 .. 64 lanes (every SIMD width Iron targets)
        for d in static_range(6):
            if d < e and (1 << e) <= simd_size():
                j = 1 << (e - 1 - d)
                p = simd_shuffle_xor(v, j)
                # the lower lane of a pair keeps the larger in blocks sorted descending ((lane & 2^e) == 0)
                v = where(((lane & j) == 0) == ((lane & (1 << e)) == 0), max(v, p), min(v, p))
    own = simd_broadcast(v, r - 1)
    if lane == 0:
        red[simd_group()] = own
    barrier()
    b = red[0]
    for s in range(1, nsg):
        b = min(b, red[s])
    return b


@func
def composite(key, pos, FREE):
    """key with its FREE low bits (constant for the dtype: 0 for keys >= 2^31, all ones below) replaced by the
    position's complement: one u32 whose order is the rank order (larger key, or equal key at a lower position)."""
    return ((key >> FREE) << FREE) | cast((1 << FREE) - 1 - pos, u32)


@func
def key_of(c, FREE):
    """The key of a composite (its low bits back to the dtype's constant)."""
    return ((c >> FREE) << FREE) | where(c >= u32(0x80000000), u32(0), u32((1 << FREE) - 1))


@func
def hit_masks(keys, b, PER, VEC, VALS, masks):
    """masks[w] bit i <- whether element w * 32 + i of the thread's chunk is >= b (as floats with VALS, else as
    keys); returns how many are."""
    for w in static_range((PER * VEC + 31) // 32):
        masks[w] = u32(0)
    for i in static_range(PER * VEC):
        if VALS:
            hit = bitcast(keys[i], f32) >= b
        else:
            hit = keys[i] >= b
        masks[i // 32] = masks[i // 32] | where(hit, u32(1 << (i % 32)), u32(0))
    c = 0
    for w in static_range((PER * VEC + 31) // 32):
        c += cast(popcount(masks[w]), i32)
    return c


@func
def pack_candidates(keys, b, PER, VEC, BLOCK, CAP, tot, cp, VALS):
    """The number n of the group's elements >= b; when n <= CAP, their chunk positions are at cp[0 : n]. Each
    thread walks the set bits of its hit masks (a few a thread: logits' candidates are a few in a hundred), not
    its elements. One barrier. ``VALS``: ``keys`` and b are f32 values."""
    tid = local_id(0)
    masks = local_array(u32, (PER * VEC + 31) // 32)
    c = hit_masks(keys, b, PER, VEC, VALS, masks)
    ex = simd_prefix_exclusive_sum(c)
    if simd_lane() == simd_size() - 1:
        tot[simd_group()] = ex + c
    barrier()
    off = ex
    n = 0
    for s in range(BLOCK // simd_size()):
        t = tot[s]
        n += t
        if s < simd_group():
            off += t
    if n <= CAP:
        for w in static_range((PER * VEC + 31) // 32):
            m = masks[w]
            while m != u32(0):
                i = w * 32 + cast(ctz(m), i32)
                m = m & (m - u32(1))
                cp[off] = ((i // VEC) * BLOCK + tid) * VEC + i % VEC
                off += 1
    return n


@func
def candidate_keys(x, start, nvalid, ck, cp, n, BLOCK, FREE, VALS):
    """ck[i] <- the rank key of the candidate at chunk position cp[i] (read again from x at start + position: the
    registers cannot be indexed by a run-time bit), one thread a candidate: its order key, or with FREE > 0 its
    composite; past the row (position >= nvalid) the padding's key (-inf's with VALS, else 0). ck[n : n + 4]
    <- 0 (below every candidate's key, never 0 when n <= CAP, and every composite)."""
    tid = local_id(0)
    for i in range(tid, n, BLOCK):
        pos = cp[i]
        key = u32(0x007FFFFF) if VALS else u32(0)  # order_key(-inf), or the keys' padding
        if pos < nvalid:
            key = order_key(cast(x[start + pos], f32))
        if FREE > 0:
            ck[i] = composite(key, pos, FREE)
        else:
            ck[i] = key
    if tid < 4:
        ck[n + tid] = u32(0)


@func
def rank_candidates(ck, cp, n, K, BLOCK, FREE, slot_key, slot_pos):
    """slot_key/slot_pos[r] = the candidate of rank r < K among ck/cp[0 : n] (keys descending, equal keys by
    position): with composites (FREE > 0) one comparison a candidate, 4 read at a time."""
    for i in range(local_id(0), n, BLOCK):
        key = ck[i]
        pos = cp[i]
        rank = 0
        if FREE > 0:
            for j4 in range(0, n, 4):
                c4 = vload(ck, j4, 4)
                for e in static_range(4):
                    rank += where(c4[e] > key, 1, 0)
            key = key_of(key, FREE)
        else:
            for j in range(n):
                kj = ck[j]
                if kj > key or (kj == key and cp[j] < pos):
                    rank += 1
        if rank < K:
            slot_key[rank] = key
            slot_pos[rank] = pos


@func
def key_value(key):
    """The f32 whose ``order_key`` is ``key`` (+0.0 for the zeros' shared key)."""
    return bitcast(where(key >= u32(0x80000000), key & u32(0x7FFFFFFF), ~key), f32)


@func
def select_filter(keys, PER, VEC, K, BLOCK, NPASS, CAP, VALS, nvec, x, start):
    """select_best's contract (thread t < K returns (rank, key, position) of one of the K best; the others rank
    -1), by the module docstring's bound, filter and rank; select_best itself past CAP candidates. ``VALS``: keys
    holds f32 bit patterns (-inf past the chunk's nvec vectors), compared as floats, a key made only for the
    thread's maximum and for each candidate (and in place for select_best)."""
    ck = shared(u32, CAP + 4)
    cp = shared(i32, CAP + 4)
    slot_key = shared(u32, MAX_K)
    slot_pos = shared(i32, MAX_K)
    red = shared(u32, BLOCK // MIN_SIMD)
    tot = shared(i32, BLOCK // MIN_SIMD)
    tid = local_id(0)
    if VALS:
        mv = bitcast(keys[0], f32)
        for r in static_range(1, PER * VEC):
            mv = max(mv, bitcast(keys[r], f32))
        b = key_value(group_bound(order_key(mv), K, BLOCK, red))
    else:
        m = keys[0]
        for r in static_range(1, PER * VEC):
            m = max(m, keys[r])
        b = group_bound(m, K, BLOCK, red)
    # composites where the dtype leaves the keys' low bits constant (bf16 16, f16 13) and positions fit in them
    # (one expression of constexprs, so every target folds it)
    FREE = (16 if NPASS == 2 else 13) if NPASS < 4 and BLOCK * PER * VEC <= (1 << (16 if NPASS == 2 else 13)) else 0
    n = pack_candidates(keys, b, PER, VEC, BLOCK, CAP, tot, cp, VALS)
    rank = -1
    key = u32(0)
    pos = 0
    if n <= CAP:  # uniform: every thread summed the same totals
        barrier()
        candidate_keys(x, start, nvec * VEC, ck, cp, n, BLOCK, FREE, VALS)
        barrier()
        rank_candidates(ck, cp, n, K, BLOCK, FREE, slot_key, slot_pos)
        barrier()
        if tid < K:
            rank = tid
            key = slot_key[tid]
            pos = slot_pos[tid]
    else:
        # the chunk again, as keys: the registers are dead past the hit masks on the common path
        load_chunk(x, keys, start, nvec, BLOCK, VEC, PER, False)
        rank, key, pos = select_best(keys, PER, VEC, K, BLOCK, NPASS)
    return rank, key, pos


@func
def merged_at(sk, si, a0, b0, K, i):
    """(key, column) of element i of the merge of the ranked lists sk/si[a0 : a0 + K] (A, lower columns) and
    [b0 : b0 + K] (B), A first among equal keys: a = how many of the first i come from A, by a binary search for
    the first a where A[a] no longer ranks before B[i - a - 1]."""
    lo = max(0, i - K)
    hi = min(i, K)
    while lo < hi:
        mid = (lo + hi) // 2
        if sk[a0 + mid] >= sk[b0 + i - mid - 1]:
            lo = mid + 1
        else:
            hi = mid
    a = lo
    bi = i - a
    ka = sk[a0 + min(a, K - 1)]
    kb = sk[b0 + min(bi, K - 1)]
    take_a = a < K and (bi >= K or ka >= kb)
    at = where(take_a, a0 + a, b0 + bi)
    return sk[at], si[at]


@func
def merge_round(sk, si, dk, di, nl, K, BLOCK):
    """nl ranked lists of K at sk/si -> ceil(nl / 2) at dk/di: pairs merged keeping K, an odd last list copied."""
    for o in range(local_id(0), ((nl + 1) // 2) * K, BLOCK):
        p = o // K
        i = o - p * K
        a0 = 2 * p * K
        if 2 * p + 1 < nl:
            key, col = merged_at(sk, si, a0, a0 + K, K, i)
            dk[o] = key
            di[o] = col
        else:
            dk[o] = sk[a0 + i]
            di[o] = si[a0 + i]


@func
def merge_lists(cand_k, cand_i, row, nchunks, K, BLOCK, x, values, indices, ncols):
    """The row's K best from its nchunks ranked lists (cand_k/cand_i[(row * nchunks + c) * K ...]), written to
    values/indices[row * K ...]: each value made from its key (s27: no read of x after the merge, a global memory
    round trip on the row's tail), but for zeros, read from x at their columns (-0.0 and +0.0 share a key)."""
    fk = shared(u32, MAX_LISTS * MAX_K)
    fi = shared(i32, MAX_LISTS * MAX_K)
    hk = shared(u32, (MAX_LISTS // 2) * MAX_K)
    hi = shared(i32, (MAX_LISTS // 2) * MAX_K)
    tid = local_id(0)
    base = row * nchunks * K
    for e in range(tid, nchunks * K, BLOCK):
        fk[e] = bitcast(cand_k[base + e], u32)
        fi[e] = cand_i[base + e]
    barrier()
    nl = nchunks
    in_full = True
    while nl > 1:  # uniform
        if in_full:
            merge_round(fk, fi, hk, hi, nl, K, BLOCK)
        else:
            merge_round(hk, hi, fk, fi, nl, K, BLOCK)
        barrier()
        nl = (nl + 1) // 2
        in_full = not in_full
    if tid < K:
        col = where(in_full, fi[tid], hi[tid])
        key = where(in_full, fk[tid], hk[tid])
        if key == u32(0x80000000):  # the zeros' shared key: the logit's own sign, read back
            values[row * K + tid] = x[row * ncols + col]
        else:  # exact: the key was made from the logit widened to f32
            values[row * K + tid] = cast(key_value(key), T)
        indices[row * K + tid] = col


@func
def filter_one(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, VALS):
    """Each group's chunk -> its k best, ranked (``select_filter``; ``VALS``: on f32 values in registers); the
    last group of the row merges the row's lists (``merge_lists``) and resets count[row]."""
    keys = local_array(u32, PER * VEC)
    row, col0, nvec = chunk_keys(x, keys, ncols, nchunks, BLOCK, VEC, PER, VALS)
    rank, key, pos = select_filter(keys, PER, VEC, k, BLOCK, PASSES, CAP, VALS, nvec, x, row * ncols + col0)
    if rank >= 0:
        cand_k[group_id(0) * k + rank] = bitcast(key, i32)
        cand_i[group_id(0) * k + rank] = col0 + pos
    flag = shared(i32, 1)
    if last_of_row(count, flag, row, nchunks):
        merge_lists(cand_k, cand_i, row, nchunks, k, BLOCK, x, values, indices, ncols)
        if local_id(0) == 0:
            count[row] = 0


@kernel(launch_bounds=(256, 2))
def topk_filter_one(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T], indices: Tensor[i32],
                    count: Tensor[i32], ncols: int, nchunks: int, k: int, BLOCK: constexpr, VEC: constexpr,
                    PER: constexpr, PASSES: constexpr, VALS: constexpr):
    """The filter path (module docstring): launch rows * nchunks * BLOCK threads, nchunks <= MAX_LISTS; count
    (rows,) zero before the first launch (each launch leaves it zero). VALS 1: the chunk in registers as f32 values
    (compared as floats: fewer instructions a logit than as keys), 0: as order keys."""
    filter_one(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, VALS)


@kernel(launch_bounds=(256, 2))
def topk_filter_one_f32(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T],
                        indices: Tensor[f32], count: Tensor[i32], ncols: int, nchunks: int, k: int,
                        BLOCK: constexpr, VEC: constexpr, PER: constexpr, PASSES: constexpr, VALS: constexpr):
    """``topk_filter_one`` with the indices written as f32 (exact below 2^24)."""
    filter_one(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, VALS)
