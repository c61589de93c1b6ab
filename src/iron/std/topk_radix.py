"""Top-k by radix select: std/sample/topk's second path (topk.py's ``launch_topk`` picks between the two), with a
handful of barriers per group where the selection rounds take one per k.

The contract is topk.py's: the k <= 64 best of each row, ranked by value descending and equal values by the lower
index (``np.lexsort((index, -value))[:k]``), the logits' own values and i32 (or f32) column indices; NaN unsupported.

Keys. A value, read as f32 (exact for f16/bf16), becomes a u32 key whose unsigned order is the values' order: the
sign bit set for positives, every bit flipped for negatives, -0.0 given +0.0's key (equal values rank by index).
-inf and +inf are keys like any other; 0 is no number's key (it is a NaN's), so slots past a row's end take key 0 and
rank after every real element. Only the bits a dtype varies are searched, 8 at a time (``PASSES`` digits): f32 all 4,
f16 3 (its keys' low 13 bits follow the sign), bf16 2 (the low 16); more passes than needed stay exact.

``select_best``: one group, ``BLOCK`` threads holding ``PER`` vectors of ``VEC`` keys each, in registers; key
(q, j) of thread tid is at position (q * BLOCK + tid) * VEC + j, and equal keys rank by position, which is index
order: in a chunk, position p is column col0 + p; in the merge, a chunk's candidates are ranked (equal keys by
column) and the chunks come in column order. The phases, with the barriers each takes:

1. zero the histograms (one 256-bin i32 histogram per digit, so none is cleared again) and the slot counter: 1.
2. bound: the K-th largest of the threads' own largest keys, to min(2, PASSES) digits. At least K elements (those
   threads' maxima) are >= it, so the search below skips every element under it: on logits, a few in a hundred
   remain, which keeps the shared-memory atomics few (the first digit of all 4096 would crowd a few bins): 1 a digit.
3. threshold: for each digit, each element >= the bound whose higher digits equal the prefix found so far adds 1 to
   its digit's bin (``atomic_add`` on shared memory); a barrier; then every SIMD group scans the 256 bins from the
   top by itself for the digit where the count from the top reaches the number still wanted (rounds of 4 bins a
   lane, read as one 16-byte vector, and a ``simd_prefix_sum``: 256 / (4 * simd_size()) rounds, so SIMD widths 4 to
   64). All SIMD groups read the same counts and agree, so there is no second barrier: 1 a digit. After the last
   digit the K-th key (the threshold) is known, with ``above`` keys ranking before it and ``equal`` keys equal.
4. ties, only when more than K - above keys equal the threshold: the lowest positions among them are taken, ranked by
   a scan in position order (per-vector counts packed two to a u32, ``simd_prefix_exclusive_sum``, one shared slot
   per SIMD group): 1.
5. collect: each taken key claims one of exactly K slots (``atomic_add`` on a shared counter) with its position; a
   barrier; thread t < K counts the slots that rank before slot t (K compares, read as 16-byte vectors): 1.

Barriers per group: 1 + min(2, PASSES) + PASSES + 1 (+ 1 with surplus ties at the threshold): bf16 6 (7), f16 7
(8), f32 8 (9), whatever k is; the rounds path takes k (64), each round also four SIMD reductions.

Kernels: ``topk_radix_partial`` (topk_partial's chunks, one group each) writes each chunk's K best, ranked, as
(key, column) i32 pairs; ``topk_radix_merge`` (one group per row) selects over the row's chunks * k keys, read as
16-byte vectors, then reads the k winners' columns and their values from x (the logits' own bits, -0.0 kept), and
writes them (``topk_radix_merge_f32``: the indices as f32). ``topk_radix_one`` (``_f32``) is both in one launch:
after its chunk, the last group of each row to finish (``reductions.last_of_row``: a fence, an atomic count, a
fence) selects over the row's candidates with the same group and resets the row's count. The launcher times the
paths on a GPU and keeps the fastest.
"""

from __future__ import annotations

from ..frontend import func, kernel
from ..lang import (
    T,
    Tensor,
    atomic_add,
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
    simd_group,
    simd_lane,
    simd_max,
    simd_prefix_exclusive_sum,
    simd_prefix_sum,
    simd_size,
    simd_sum,
    static_range,
    u32,
    vload,
    where,
)
from .reductions import last_of_row
from .softmax import chunk_span

__all__ = ["BLOCK", "KEY_PASSES", "MAX_K", "MPER", "MVEC", "PASSES", "PER", "VEC", "chunk_keys", "load_chunk",
           "order_key", "select_best", "topk_radix_merge", "topk_radix_merge_f32", "topk_radix_one",
           "topk_radix_one_f32", "topk_radix_partial"]

#: the largest k (the collect phase's slots)
MAX_K = 64
#: bins of a digit (8 key bits)
BINS = 256
#: digits of the bound (phase 2): 16 key bits (sign, exponent, 7 mantissa bits) bound the threshold well enough
BOUND_PASSES = 2
#: digits that vary per dtype (the constexpr PASSES)
KEY_PASSES = {"f32": 4, "f16": 3, "bf16": 2}
#: defaults of the constexprs (``iron build``), valid for every dtype (4 digits are exact for all)
BLOCK = 256
VEC = 4
PER = 4
PASSES = 4
MVEC = 4
MPER = 2
#: the narrowest SIMD group sized for (the interpreter's narrowest; the digit scan needs at most 64 lanes), so that
#: no array size depends on simd_size() and every kernel compiles once for all widths (``iron build``)
MIN_SIMD = 4


@func
def order_key(v):
    """The u32 key of f32 v: unsigned key order is value order, -0.0 shares +0.0's key, and no number's key is 0."""
    u = bitcast(v, u32)
    key = where(u >= 0x80000000, ~u, u | 0x80000000)
    return where(v == 0.0, u32(0x80000000), key)


@func
def pick_digit(hist, base, need):
    """(digit, count above it, its count) for the bin of hist[base : base + BINS] where the count from the top bin
    down reaches need. Each SIMD group scans by itself, so the answer needs no barrier after the histogram's: in
    rounds from the top down, lane L reads 4 bins (one 16-byte vector) below those of lane L - 1."""
    digit = -1
    before = -1
    count = -1
    counted = 0  # in the rounds before this one
    for rnd in range(BINS // (4 * simd_size())):
        first = BINS - 4 * (rnd * simd_size() + simd_lane() + 1)
        part = vload(hist, base + first, 4)
        s = part[0] + part[1] + part[2] + part[3]
        c = counted + simd_prefix_sum(s) - s
        for j in static_range(3, -1, -1):  # from the lane's top bin down
            n = part[j]
            if c < need and need <= c + n:
                digit = first + j
                before = c
                count = n
            c += n
        counted += simd_sum(s)
    return simd_max(digit), simd_max(before), simd_max(count)


@func
def radix_threshold(keys, N, K, low, hist, base, NPASS):
    """The K-th largest of the group's keys that are >= low (N per thread), to NPASS digits from the top:
    (prefix, mask, above, equal): keys with key & mask > prefix rank before it (``above`` of them), ``equal`` keys
    have key & mask == prefix. Uses hist[base : base + NPASS * BINS], zeroed; one barrier a digit."""
    prefix = u32(0)
    mask = u32(0)
    above = 0
    equal = 0
    for p in static_range(NPASS):
        shift = 24 - 8 * p
        for r in static_range(N):
            key = keys[r]
            if key >= low and (key & mask) == prefix:
                atomic_add(hist, base + p * BINS + cast((key >> shift) & 255, i32), 1)
        barrier()
        digit, before, equal = pick_digit(hist, base + p * BINS, K - above)
        above += before
        prefix = prefix | (cast(digit, u32) << shift)
        mask = mask | (u32(255) << shift)
    return prefix, mask, above, equal


@func
def claim(slots, slot_key, slot_pos, key, pos):
    """One of the K slots for (key, position)."""
    s = atomic_add(slots, 0, 1)
    slot_key[s] = key
    slot_pos[s] = pos


@func
def claim_ties(keys, prefix, mask, need, PER, VEC, BLOCK, totals, slots, slot_key, slot_pos):
    """Claims the ``need`` keys tied with the threshold (key & mask == prefix) at the lowest positions: ranks among
    them by a group scan in position order (counts per vector packed two to a u32, each at most BLOCK * VEC < 2^16);
    one barrier. ``totals``: a shared u32 array of ((PER + 1) // 2) * (BLOCK // simd_size()) at least."""
    words = local_array(u32, (PER + 1) // 2)
    for w in static_range((PER + 1) // 2):
        words[w] = u32(0)
    for q in static_range(PER):
        c = 0
        for j in static_range(VEC):
            c += where((keys[q * VEC + j] & mask) == prefix, 1, 0)
        words[q // 2] = words[q // 2] | (cast(c, u32) << (16 * (q % 2)))
    for w in static_range((PER + 1) // 2):
        word = words[w]
        ex = simd_prefix_exclusive_sum(word)
        if simd_lane() == simd_size() - 1:
            totals[w * (BLOCK // simd_size()) + simd_group()] = ex + word
        words[w] = ex
    barrier()
    sums = local_array(u32, (PER + 1) // 2)
    for w in static_range((PER + 1) // 2):
        before = u32(0)
        total = u32(0)
        for s in range(BLOCK // simd_size()):
            t = totals[w * (BLOCK // simd_size()) + s]
            total += t
            if s < simd_group():
                before += t
        words[w] = words[w] + before
        sums[w] = total
    run = 0
    for q in static_range(PER):
        r = run + cast((words[q // 2] >> (16 * (q % 2))) & 0xFFFF, i32)
        for j in static_range(VEC):
            if (keys[q * VEC + j] & mask) == prefix:
                if r < need:
                    claim(slots, slot_key, slot_pos, keys[q * VEC + j], (q * BLOCK + local_id(0)) * VEC + j)
                r += 1
        run += cast((sums[q // 2] >> (16 * (q % 2))) & 0xFFFF, i32)


@func
def rank_of_slot(slot_key, slot_pos, K):
    """Thread t < K: (rank, key, position) of slot t among the K claimed slots; (-1, 0, 0) for the other threads."""
    tid = local_id(0)
    rank = -1
    key = u32(0)
    pos = 0
    if tid < K:
        key = slot_key[tid]
        pos = slot_pos[tid]
        rank = 0
        for s4 in static_range(MAX_K // 4):
            kv = vload(slot_key, s4 * 4, 4)
            pv = vload(slot_pos, s4 * 4, 4)
            for j in static_range(4):
                if s4 * 4 + j < K and (kv[j] > key or (kv[j] == key and pv[j] < pos)):
                    rank += 1
    return rank, key, pos


@func
def select_best(keys, PER, VEC, K, BLOCK, NPASS):
    """The K best of the group's keys (PER * VEC per thread; key q * VEC + j at position (q * BLOCK + tid) * VEC + j;
    equal keys rank by position, which the callers make index order), in the module docstring's phases: thread
    t < K returns (rank, key, position) of one of them, the other threads rank -1."""
    tid = local_id(0)
    # the arrays read as 16-byte vectors first, each a multiple of 16 bytes long
    hist = shared(i32, (BOUND_PASSES + NPASS) * BINS)
    slot_key = shared(u32, MAX_K)
    slot_pos = shared(i32, MAX_K)
    totals = shared(u32, ((PER + 1) // 2) * (BLOCK // MIN_SIMD))
    slots = shared(i32, 1)  # slots claimed
    for i in range(tid, (BOUND_PASSES + NPASS) * BINS, BLOCK):
        hist[i] = 0
    if tid < MAX_K:  # unclaimed slots are read (and ignored) as whole vectors: give them a value
        slot_key[tid] = u32(0)
        slot_pos[tid] = 0
    if tid == 0:
        slots[0] = 0
    barrier()
    best = local_array(u32, 1)
    best[0] = keys[0]
    for r in static_range(1, PER * VEC):
        best[0] = max(best[0], keys[r])
    low, _mask, _above, _equal = radix_threshold(best, 1, K, u32(0), hist, 0, min(BOUND_PASSES, NPASS))
    prefix, mask, above, equal = radix_threshold(keys, PER * VEC, K, low, hist, BOUND_PASSES * BINS, NPASS)
    need = K - above
    for q in static_range(PER):
        for j in static_range(VEC):
            m = keys[q * VEC + j] & mask
            if m > prefix or (m == prefix and equal == need):  # no surplus of ties: every tied key is taken
                claim(slots, slot_key, slot_pos, keys[q * VEC + j], (q * BLOCK + tid) * VEC + j)
    if equal > need:  # uniform: every thread read the same counts
        claim_ties(keys, prefix, mask, need, PER, VEC, BLOCK, totals, slots, slot_key, slot_pos)
    barrier()
    return rank_of_slot(slot_key, slot_pos, K)


@func
def put_vector(keys, q, vec, VEC, BITS):
    """keys[q * VEC ...] <- the VEC elements of vec as order keys (``BITS``: as f32 bit patterns)."""
    for j in static_range(VEC):
        if BITS:
            keys[q * VEC + j] = bitcast(cast(vec[j], f32), u32)
        else:
            keys[q * VEC + j] = order_key(cast(vec[j], f32))


@func
def load_chunk(x, keys, start, nvec, BLOCK, VEC, PER, BITS):
    """keys <- the nvec vectors of VEC elements at x[start ...] (chunk_keys' layout and padding): one unchecked
    load a vector when the chunk is full (every chunk of a row but, maybe, its last: a branch uniform over the
    group), else a check a vector."""
    if nvec >= PER * BLOCK:
        for q in static_range(PER):
            put_vector(keys, q, vload(x, start + (q * BLOCK + local_id(0)) * VEC, VEC), VEC, BITS)
    else:
        for q in static_range(PER):
            v = q * BLOCK + local_id(0)
            if v < nvec:
                put_vector(keys, q, vload(x, start + v * VEC, VEC), VEC, BITS)
            else:
                for j in static_range(VEC):
                    # past the row: after every real element (its column is larger too)
                    keys[q * VEC + j] = u32(0xFF800000) if BITS else u32(0)


@func
def chunk_keys(x, keys, ncols, nchunks, BLOCK, VEC, PER, BITS):
    """keys <- this group's chunk (chunk g % nchunks of row g // nchunks, as topk_partial) as order keys, key
    q * VEC + j at chunk position (q * BLOCK + tid) * VEC + j (key 0 past the row); returns (row, first column,
    the chunk's vectors). ``BITS``: each element's f32 bit pattern instead (-inf's past the row)."""
    start, nvec = chunk_span(ncols, nchunks, BLOCK, VEC, PER)
    row = start // ncols
    load_chunk(x, keys, start, nvec, BLOCK, VEC, PER, BITS)
    return row, start - row * ncols, nvec


@func
def chunk_best(x, cand_k, cand_i, ncols, nchunks, k, BLOCK, VEC, PER, PASSES):
    """Group g's chunk (chunk g % nchunks of row g // nchunks, as topk_partial) -> its k best, ranked, at
    cand_k/cand_i[g * k ...] (keys as i32 bits, columns; past the row: key 0); returns the row."""
    keys = local_array(u32, PER * VEC)
    row, col0, nvec = chunk_keys(x, keys, ncols, nchunks, BLOCK, VEC, PER, False)
    rank, key, pos = select_best(keys, PER, VEC, k, BLOCK, PASSES)
    if rank >= 0:  # position p of the chunk is column col0 + p
        cand_k[group_id(0) * k + rank] = bitcast(key, i32)
        cand_i[group_id(0) * k + rank] = col0 + pos
    return row


@kernel
def topk_radix_partial(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], ncols: int, nchunks: int, k: int,
                       BLOCK: constexpr, VEC: constexpr, PER: constexpr, PASSES: constexpr):
    """Each group's chunk -> its k best, ranked (``chunk_best``). Launch rows * nchunks * BLOCK."""
    chunk_best(x, cand_k, cand_i, ncols, nchunks, k, BLOCK, VEC, PER, PASSES)


@func
def merge_best(cand_k, cand_i, row, ncand, k, BLOCK, VEC, PER, PASSES):
    """Select over row's ncand candidate keys (VEC divides ncand; only the k winners' columns are read):
    (rank, column) as select_best."""
    tid = local_id(0)
    keys = local_array(u32, PER * VEC)
    for q in static_range(PER):
        p = (q * BLOCK + tid) * VEC
        if p < ncand:
            kv = vload(cand_k, row * ncand + p, VEC)
            for j in static_range(VEC):
                keys[q * VEC + j] = bitcast(kv[j], u32)
        else:
            for j in static_range(VEC):
                keys[q * VEC + j] = u32(0)  # past the candidates: never among the k (the row has k real ones)
    rank, key, pos = select_best(keys, PER, VEC, k, BLOCK, PASSES)
    col = 0
    if rank >= 0:
        col = cand_i[row * ncand + pos]
    return rank, col


@kernel
def topk_radix_merge(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T],
                     indices: Tensor[i32], ncols: int, ncand: int, k: int, BLOCK: constexpr, VEC: constexpr,
                     PER: constexpr, PASSES: constexpr):
    """Row r (one group each) -> the k best of its ncand candidates: values/indices[r * k ...], the values read
    from x at the winning columns. Launch rows * BLOCK threads; ncand <= BLOCK * PER * VEC."""
    row = group_id(0)
    rank, col = merge_best(cand_k, cand_i, row, ncand, k, BLOCK, VEC, PER, PASSES)
    if rank >= 0:
        values[row * k + rank] = x[row * ncols + col]
        indices[row * k + rank] = col


@kernel
def topk_radix_merge_f32(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T],
                         indices: Tensor[f32], ncols: int, ncand: int, k: int, BLOCK: constexpr, VEC: constexpr,
                         PER: constexpr, PASSES: constexpr):
    """``topk_radix_merge`` with the indices written as f32 (exact below 2^24)."""
    row = group_id(0)
    rank, col = merge_best(cand_k, cand_i, row, ncand, k, BLOCK, VEC, PER, PASSES)
    if rank >= 0:
        values[row * k + rank] = x[row * ncols + col]
        indices[row * k + rank] = col


@func
def one_launch(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, MVEC, MPER):
    """chunk_best, then the last group of each row to finish (``last_of_row``) merges the row's candidates and
    writes the row's k best, and resets count[row] for the next launch."""
    row = chunk_best(x, cand_k, cand_i, ncols, nchunks, k, BLOCK, VEC, PER, PASSES)
    flag = shared(i32, 1)
    if last_of_row(count, flag, row, nchunks):
        rank, col = merge_best(cand_k, cand_i, row, nchunks * k, k, BLOCK, MVEC, MPER, PASSES)
        if rank >= 0:
            values[row * k + rank] = x[row * ncols + col]
            indices[row * k + rank] = col
        if local_id(0) == 0:
            count[row] = 0


@kernel
def topk_radix_one(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T], indices: Tensor[i32],
                   count: Tensor[i32], ncols: int, nchunks: int, k: int, BLOCK: constexpr, VEC: constexpr,
                   PER: constexpr, PASSES: constexpr, MVEC: constexpr, MPER: constexpr):
    """The radix path in one launch (``one_launch``): launch rows * nchunks * BLOCK threads; count (rows,) zero
    before the first launch (each launch leaves it zero); nchunks * k <= BLOCK * MPER * MVEC."""
    one_launch(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, MVEC, MPER)


@kernel
def topk_radix_one_f32(x: Tensor[T], cand_k: Tensor[i32], cand_i: Tensor[i32], values: Tensor[T],
                       indices: Tensor[f32], count: Tensor[i32], ncols: int, nchunks: int, k: int, BLOCK: constexpr,
                       VEC: constexpr, PER: constexpr, PASSES: constexpr, MVEC: constexpr, MPER: constexpr):
    """``topk_radix_one`` with the indices written as f32 (exact below 2^24)."""
    one_launch(x, cand_k, cand_i, values, indices, count, ncols, nchunks, k, BLOCK, VEC, PER, PASSES, MVEC, MPER)
