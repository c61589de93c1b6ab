"""Top-k by filtering: std/sample/topk's ``"filter"`` path, one launch, written to spend fewer instructions a logit
than the radix path. On the H200 (2026-12-05, 32 x 128256 bf16, k 64) ``topk_radix_partial`` executed 15.3 M warp
instructions (3.7 a logit) at 0.64 issued a scheduler and cycle: bound by its instruction count (its digit scans,
shared-memory histograms and k x k slot ranking), 37.5 us in one launch against a 3.0 us launch floor. This path on
an H100 (2026-12-05): 23.3 us (radix1 38.2, torch.topk 88.2), 6.43 M warp instructions; 80 registers instead of 87
(3 groups an SM) did not change it: the tail is each row's merge after its last chunk.

The contract is topk.py's: the k <= 64 best of each row, by value descending and equal values by the lower index,
the logits' own values and i32 (or f32) column indices. Keys are topk_radix's (``order_key``): unsigned key order is
value order, padding past a row's end takes key 0, after every real element.

Chunk (``select_filter``; one group a chunk, PER * VEC keys a thread in registers, topk_partial's geometry):

1. bound: each SIMD group's r-th largest thread maximum, r = ceil(K / SIMD groups) (each lane counts the lanes whose
   maximum ranks before its own: simd_size() broadcasts), and the least of those over the group's SIMD groups. At
   least K keys of the chunk are >= it (r maxima in each SIMD group). 1 barrier.
2. candidates: the keys >= the bound (on logits a few in a hundred) are packed with their positions into shared
   memory by a prefix sum over the group. 1 barrier.
3. rank: each candidate counts those ranking before it (a larger key, or an equal key at a lower position); the K
   first are written in rank order to the row's candidate lists, as topk_radix_partial writes them. 1 barrier.
   For bf16 and f16 the keys' low 16 / 13 bits are constant, so the position's complement takes their place
   (where the chunk's positions fit) and one u32 comparison ranks, 4 candidates a 16-byte read.
   More than CAP candidates (many equal keys, or a chunk with few real elements: a bound of key 0) take topk_radix's
   exact ``select_best`` instead (a branch uniform over the group).

``VALS`` (path ``"filterv"``, s26): the chunk stays in registers as f32 bit patterns, compared as floats (-0.0 equal
to +0.0, as their shared key), so the per-element key arithmetic (``order_key``: 6 operations a logit) is spent
only on each thread's maximum (the bound, found among keys, mapped back to a value) and on each candidate; past
CAP candidates the registers become keys in place for select_best. The kernels are bounded to 2 groups of 256 an
SM (128 registers): without the bound that in-place conversion took ptxas to 159 (one group an SM).

Row (the last group of the row to finish, ``reductions.last_of_row``): the chunks' ranked lists (at most
``MAX_LISTS``) are read into shared memory and merged pairwise, K kept each time, ceil(log2 chunks) rounds of one
barrier: output element i of a pair finds how many of its first i come from each list by a binary search on the
merge path, and ties go to the list of lower columns, so equal values rank by column. The row's count is reset for
the next launch.
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
    f32,
    group_id,
    i32,
    local_array,
    local_id,
    shared,
    simd_broadcast,
    simd_group,
    simd_lane,
    simd_max,
    simd_prefix_exclusive_sum,
    simd_size,
    static_range,
    u32,
    vload,
    where,
)
from .reductions import last_of_row
from .topk_radix import BLOCK, MAX_K, MIN_SIMD, PASSES, PER, VEC, chunk_keys, order_key, select_best

__all__ = ["BLOCK", "CAP", "MAX_LISTS", "PASSES", "PER", "VALS", "VEC", "merge_lists",
           "select_filter", "topk_filter_one", "topk_filter_one_f32"]

#: candidates a chunk ranks among themselves (at most): more take select_best (one per thread of a 256-group)
CAP = 256
#: the form ``iron build`` compiles (the kernels' VALS constexpr): 1 f32 values (s26, H100: 16.8 us vs 18.3 as keys)
VALS = 1
#: the most chunks a row may have on this path (the merge keeps the row's lists in 8 KiB of shared memory)
MAX_LISTS = 16


@func
def group_bound(m, K, BLOCK, red, low):
    """A value with at least K of the group's values m (one a thread, keys or floats) >= it: the least over SIMD
    groups of each one's r-th largest value, r = ceil(K / SIMD groups) (<= simd_size() because K <= BLOCK); ``low``
    ranks at or below every value. One barrier."""
    nsg = BLOCK // simd_size()
    r = (K + nsg - 1) // nsg
    lane = simd_lane()
    before = 0
    for i in range(simd_size()):
        v = simd_broadcast(m, i)
        if v > m or (v == m and i < lane):
            before += 1
    own = simd_max(where(before == r - 1, m, low))
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
def pack_candidates(keys, b, PER, VEC, BLOCK, CAP, FREE, tot, ck, cp, VALS):
    """The number n of the group's keys >= b; when n <= CAP, they are at ck/cp[0 : n] (key, or with FREE > 0 its
    composite, and position) and ck[n : n + 4] holds 0 (below every key >= b > 0 and every composite). One
    barrier. ``VALS``: ``keys`` and b are f32 values, each candidate's key made here (``order_key``)."""
    tid = local_id(0)
    c = 0
    for i in static_range(PER * VEC):
        if VALS:
            c += where(bitcast(keys[i], f32) >= b, 1, 0)
        else:
            c += where(keys[i] >= b, 1, 0)
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
        for q in static_range(PER):
            for j in static_range(VEC):
                if VALS:
                    hit = bitcast(keys[q * VEC + j], f32) >= b
                else:
                    hit = keys[q * VEC + j] >= b
                if hit:
                    pos = (q * BLOCK + tid) * VEC + j
                    if VALS:
                        key = order_key(bitcast(keys[q * VEC + j], f32))
                    else:
                        key = keys[q * VEC + j]
                    if FREE > 0:
                        ck[off] = composite(key, pos, FREE)
                    else:
                        ck[off] = key
                    cp[off] = pos
                    off += 1
        if tid < 4:
            ck[n + tid] = u32(0)
    return n


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
def value_keys(bits, nvec, BLOCK, VEC, PER):
    """bits (f32 bit patterns) <- their order keys in place, key 0 past the chunk's nvec vectors: chunk_keys' keys."""
    for q in static_range(PER):
        valid = q * BLOCK + local_id(0) < nvec
        for j in static_range(VEC):
            bits[q * VEC + j] = where(valid, order_key(bitcast(bits[q * VEC + j], f32)), u32(0))


@func
def select_filter(keys, PER, VEC, K, BLOCK, NPASS, CAP, VALS, nvec):
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
        b = key_value(group_bound(order_key(mv), K, BLOCK, red, u32(0)))
    else:
        m = keys[0]
        for r in static_range(1, PER * VEC):
            m = max(m, keys[r])
        b = group_bound(m, K, BLOCK, red, u32(0))
    # composites where the dtype leaves the keys' low bits constant (bf16 16, f16 13) and positions fit in them
    # (one expression of constexprs, so every target folds it)
    FREE = (16 if NPASS == 2 else 13) if NPASS < 4 and BLOCK * PER * VEC <= (1 << (16 if NPASS == 2 else 13)) else 0
    n = pack_candidates(keys, b, PER, VEC, BLOCK, CAP, FREE, tot, ck, cp, VALS)
    rank = -1
    key = u32(0)
    pos = 0
    if n <= CAP:  # uniform: every thread summed the same totals
        barrier()
        rank_candidates(ck, cp, n, K, BLOCK, FREE, slot_key, slot_pos)
        barrier()
        if tid < K:
            rank = tid
            key = slot_key[tid]
            pos = slot_pos[tid]
    else:
        if VALS:
            value_keys(keys, nvec, BLOCK, VEC, PER)
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
    values/indices[row * K ...] (values read from x at the winning columns)."""
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
        values[row * K + tid] = x[row * ncols + col]
        indices[row * K + tid] = col


@func
def filter_one(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, VALS):
    """Each group's chunk -> its k best, ranked (``select_filter``; ``VALS``: on f32 values in registers); the
    last group of the row merges the row's lists (``merge_lists``) and resets count[row]."""
    keys = local_array(u32, PER * VEC)
    row, col0, nvec = chunk_keys(x, keys, ncols, nchunks, BLOCK, VEC, PER, VALS)
    rank, key, pos = select_filter(keys, PER, VEC, k, BLOCK, PASSES, CAP, VALS, nvec)
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
