"""Memory ops for the interpreter: bounds-checked load/store and thread-ordered atomics.

Only active threads are checked and only active threads write; an inactive thread may hold any index (it often holds
one past the end, e.g. the tail of an exact grid), so gathers clip instead of trusting it.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import CompileError, LaunchError
from ..ir import types as t
from .threads import Fault, Geometry, Mask, first_fault

#: shared memory one group may use on the interpreter, in bytes: CUDA's static limit, which every GPU backend but
#: Metal's (32 KiB) and small Vulkan devices' gives a group; ``IRON_CPU_MAX_SHARED`` (bytes) overrides it
MAX_SHARED = 48 * 1024

# 0xDEADBEEF for ints, NaN for floats: a read of memory nobody wrote is visible in the output or as a wild index
_GARBAGE_INT = 0xDEADBEEF


def shared_limit() -> int:
    """The shared memory a group may use on the interpreter (``IRON_CPU_MAX_SHARED``, else ``MAX_SHARED``)."""
    value = os.environ.get("IRON_CPU_MAX_SHARED", "").strip()
    if not value:
        return MAX_SHARED
    if not value.isdigit() or int(value) < 1:
        raise LaunchError(f"IRON_CPU_MAX_SHARED must be a positive number of bytes, got {value!r}")
    return int(value)


def check_shared(kernel, limit: int) -> None:
    """CompileError at the ``shared()`` that takes the kernel's shared arrays past ``limit`` bytes per group (the
    message gives their total, as the C-family printers do), before the interpreter allocates anything."""
    arrays = [op for op in kernel.body.walk() if op.opcode == "shared" and op.attrs.get("size") is not None]
    total = sum(op.attrs["elem"].itemsize * op.attrs["size"] for op in arrays)
    if total <= limit:
        return
    running = 0
    for op in arrays:
        running += op.attrs["elem"].itemsize * op.attrs["size"]
        if running > limit:
            break
    raise CompileError(
        f"kernel '{kernel.name}' uses {total} bytes of shared memory, over the {limit // 1024} KiB that cpu "
        "allows per group", op.loc or kernel.loc,
        "use fewer or smaller shared() arrays (IRON_CPU_MAX_SHARED raises the interpreter's limit, but GPUs give a "
        "group 32 to 227 KiB)")


def garbage(elem: t.ScalarType, size: int | None = None) -> np.ndarray:
    """Uninitialised storage of ``elem``: a 0-d array when ``size`` is None."""
    shape = () if size is None else (size,)
    if elem.is_float:
        return np.full(shape, np.nan, dtype=elem.np_dtype)
    if elem.is_bool:
        return np.ones(shape, dtype=bool)
    return np.full(shape, _GARBAGE_INT, dtype=np.uint32).astype(elem.np_dtype)


class Target:
    """Where a memory op goes: a global buffer argument, or a shared array with one slice per group."""

    __slots__ = ("data", "size", "base", "desc")

    def __init__(self, data: np.ndarray, size: int, base: np.ndarray | None, desc: str):
        self.data = data  # flat storage, written in place
        self.size = size  # elements one thread may address
        self.base = base  # per-thread offset of its group's slice (shared arrays), else None
        self.desc = desc  # "buffer 'x'" or "shared array 'tile'"; the fault message adds the size

    @classmethod
    def shared(cls, geom: Geometry, elem: t.ScalarType, size: int, name: str | None) -> Target:
        label = f"shared array '{name}'" if name else "shared array"
        return cls(garbage(elem, size * geom.total_groups), size, geom.group_linear * size, label)

    @classmethod
    def local(cls, geom: Geometry, elem: t.ScalarType, size: int, name: str | None) -> Target:
        """A per-thread array: one slice of ``size`` per thread."""
        label = f"local array '{name}'" if name else "local array"
        return cls(garbage(elem, size * geom.n), size, np.arange(geom.n, dtype=np.int64) * size, label)


def _flat_index(target: Target, geom: Geometry, what: str, index: np.ndarray, mask: Mask) -> np.ndarray:
    """Check the active threads' indices and return indices into ``target.data``."""
    # an i32 index viewed as u32 turns negatives into huge values, so one comparison checks both ends
    unsigned = index.view(np.uint32) if index.dtype == np.int32 else (
        index.view(np.uint64) if index.dtype == np.int64 else index)
    if mask is None and unsigned.ndim == 1:
        in_range = unsigned.size == 0 or int(unsigned.max()) < target.size
    else:
        in_range = False
    if not in_range:
        bad = first_fault(unsigned >= target.size, mask, geom.n)
        if bad is not None:
            thread, count = bad
            shown = int(index if index.ndim == 0 else index[thread])
            raise Fault(f"{what} {target.desc} at index {shown} is out of bounds (size {target.size})", thread, count)
    if index.dtype == np.uint64:  # in range now; NumPy would add a u64 to the i64 base in float64
        index = index.astype(np.int64)
    return index if target.base is None else target.base + index


def load(target: Target, geom: Geometry, index: np.ndarray, mask: Mask) -> np.ndarray:
    flat = _flat_index(target, geom, "load from", index, mask)
    if flat.ndim == 0:
        return np.array(target.data[int(flat)])
    if mask is None:
        return target.data[flat]
    return target.data.take(flat, mode="clip")


def store(target: Target, geom: Geometry, index: np.ndarray, value: np.ndarray, mask: Mask) -> None:
    flat = _flat_index(target, geom, "store to", index, mask)
    if mask is not None:
        active = np.flatnonzero(mask)
        flat = flat if flat.ndim == 0 else flat[active]
        value = value if value.ndim == 0 else value[active]
    if flat.ndim == 0 and value.ndim == 1:
        value = value[-1]  # several threads store to one address: the last in thread order wins
    target.data[flat] = value


# -- atomics ------------------------------------------------------------------------------------------------------


def _segmented_scan(x: np.ndarray, segment: np.ndarray, op: np.ufunc) -> np.ndarray:
    """Inclusive scan of ``x`` within runs of equal ``segment`` ids, by log-step doubling (Hillis-Steele)."""
    x = x.copy()
    step = 1
    while step < len(x):
        same = segment[step:] == segment[:-step]
        if not same.any():
            break  # runs are contiguous: no longer distance can stay inside one either
        x[step:] = np.where(same, op(x[:-step], x[step:]), x[step:])
        step *= 2
    return x


def _atomic_int(
    opcode: str, values: np.ndarray, base: np.ndarray, segment: np.ndarray, starts: np.ndarray, first: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(old value per update, final value per address) for i32/u32, exactly, in int64."""
    v = values.astype(np.int64)
    b = base.astype(np.int64)
    if opcode == "atomic_add":
        inclusive = np.cumsum(v)
        exclusive = inclusive - v
        old = b[segment] + (exclusive - exclusive[starts][segment])
        return old, b + np.add.reduceat(v, starts)
    # A key that orders by segment first makes one global running max stay inside each segment.
    key = (segment.astype(np.int64) << 33) | (v + 2**31)
    running = np.maximum.accumulate(key)
    before = np.empty_like(running)
    before[1:] = running[:-1]
    earlier = (before & (2**33 - 1)) - 2**31
    old = np.where(first, b[segment], np.maximum(b[segment], earlier))
    return old, np.maximum(b, np.maximum.reduceat(v, starts))


def _atomic_float(
    opcode: str, values: np.ndarray, base: np.ndarray, segment: np.ndarray, starts: np.ndarray, first: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """f32: sums run in float64 and round once per returned value; max is fmax (NaN loses), which is exact."""
    last = np.append(starts[1:] - 1, len(values) - 1)
    if opcode == "atomic_add":
        v, b, op, ident = values.astype(np.float64), base.astype(np.float64), np.add, 0.0
    else:
        # NaNs made quiet: NumPy's scalar fmax (glibc's fmaxf) returns NaN for a signalling one, which must lose too
        v, b = (np.where(np.isnan(x), np.float32(np.nan), x) for x in (values, base))
        op, ident = np.fmax, np.nan
    inclusive = _segmented_scan(v, segment, op)
    before = np.empty_like(inclusive)
    before[1:] = inclusive[:-1]
    before[first] = ident
    return op(b[segment], before), op(b, inclusive[last])


#: the associative integer atomics: (ufunc that combines the old value with the operand)
_INT_COMBINE = {"atomic_min": np.minimum, "atomic_and": np.bitwise_and, "atomic_or": np.bitwise_or,
                "atomic_xor": np.bitwise_xor}


def _atomic_int_more(
    opcode: str, values: np.ndarray, base: np.ndarray, segment: np.ndarray, starts: np.ndarray, first: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(old per update, final per address) for atomic_min/and/or/xor/exchange: an exclusive segmented scan."""
    last = np.append(starts[1:] - 1, len(values) - 1)
    before = np.empty_like(values)
    if opcode == "atomic_exchange":  # each update sees the value the previous one in its run wrote
        before[1:] = values[:-1]
        return np.where(first, base[segment], before), values[last]
    op = _INT_COMBINE[opcode]
    inclusive = _segmented_scan(values, segment, op)
    before[1:] = inclusive[:-1]
    return np.where(first, base[segment], op(base[segment], before)), op(base, inclusive[last])


def _atomic_cas(values: np.ndarray, new: np.ndarray, base: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """atomic_cas, one update at a time (a swap depends on what the previous one left, so there is no scan)."""
    old = np.empty_like(values)
    final = base.copy()
    ends = [*starts[1:].tolist(), len(values)]
    for run, (start, end) in enumerate(zip(starts.tolist(), ends)):
        current = final[run]
        for k in range(start, end):
            old[k] = current
            if current == values[k]:
                current = new[k]
        final[run] = current
    return old, final


def atomic(opcode: str, target: Target, geom: Geometry, index: np.ndarray, value: np.ndarray, mask: Mask,
           new: np.ndarray | None = None) -> np.ndarray:
    """An atomic update (``new``: atomic_cas's new value, ``value`` its expected one): each active thread gets the
    old value as if the threads ran one at a time.

    The order is launch order (group by group, then linear local id), which for a 1-D launch is program_id order.
    Sorting by address (stably) turns each address's updates into one contiguous run, scanned without a Python loop.
    """
    flat = np.broadcast_to(_flat_index(target, geom, opcode + " on", index, mask), (geom.n,))
    value = np.broadcast_to(value, (geom.n,))
    active = geom.thread_index if mask is None else np.flatnonzero(mask)
    addr, vals = flat[active], value[active]
    order = np.argsort(addr, kind="stable")  # stable: equal addresses keep thread order
    addr, vals = addr[order], vals[order]
    first = np.ones(len(addr), dtype=bool)
    first[1:] = addr[1:] != addr[:-1]
    starts = np.flatnonzero(first)
    segment = np.cumsum(first) - 1
    uniq = addr[starts]
    dtype = target.data.dtype
    base = target.data[uniq]
    if opcode == "atomic_cas":
        new = np.broadcast_to(np.asarray(new, dtype=dtype), (geom.n,))[active][order]
        old, final = _atomic_cas(vals.astype(dtype), new, base, starts)
    elif opcode in _INT_COMBINE or opcode == "atomic_exchange":
        old, final = _atomic_int_more(opcode, vals.astype(dtype), base, segment, starts, first)
    else:
        combine = _atomic_float if dtype.kind == "f" else _atomic_int
        old, final = combine(opcode, vals, base, segment, starts, first)
    target.data[uniq] = final.astype(dtype)
    out = np.zeros(geom.n, dtype=dtype)
    out[active[order]] = old.astype(dtype)
    return out


def vcopy(dst: Target, dst_index: np.ndarray, src: Target, src_index: np.ndarray, n: int, geom: Geometry,
          mask: Mask) -> None:
    """``n`` consecutive elements from ``src`` to ``dst`` (one vector access on a GPU): both indices must be
    multiples of ``n``, so that the n * size bytes are naturally aligned, as 16-byte loads and stores require."""
    values = vector_read(dst, dst_index, src, src_index, n, geom, mask)
    for k, value in enumerate(values):
        store(dst, geom, dst_index + k, value, mask)


def vector_read(dst: Target, dst_index: np.ndarray, src: Target, src_index: np.ndarray, n: int, geom: Geometry,
                mask: Mask) -> list[np.ndarray]:
    """The n elements a vector copy reads, after checking both sides' alignment."""
    for what, target, index in (("vector load from", src, src_index), ("vector store to", dst, dst_index)):
        bad = first_fault(index % n != 0, mask, geom.n)
        if bad is not None:
            thread, count = bad
            shown = int(index if index.ndim == 0 else index[thread])
            raise Fault(f"{what} {target.desc} at index {shown} is misaligned: a vector of {n} elements needs an "
                        f"index that is a multiple of {n}", thread, count)
    return [load(src, geom, src_index + k, mask) for k in range(n)]  # all read before any is written


class AsyncCopies:
    """``async_copy`` groups in flight: a copy reads its source when issued and lands in shared memory only at the
    ``async_wait`` that completes its group, so a kernel that reads a stage before waiting for it sees the old
    contents (and fails its oracle check), as it could on a GPU. Copies never committed are never waited for."""

    def __init__(self):
        self.current: list[tuple] = []
        self.committed: list[list[tuple]] = []

    def issue(self, dst: Target, dst_index: np.ndarray, src: Target, src_index: np.ndarray, n: int, geom: Geometry,
              mask: Mask) -> None:
        values = vector_read(dst, dst_index, src, src_index, n, geom, mask)
        for k in range(n):  # the destination's bounds are checked now, where the fault names the right line
            _flat_index(dst, geom, "async copy to", np.asarray(dst_index + k), mask)
        self.current.append((dst, np.array(dst_index, copy=True), values, mask))

    def commit(self) -> None:
        self.committed.append(self.current)
        self.current = []

    def wait(self, pending: int, geom: Geometry) -> None:
        while len(self.committed) > pending:
            for dst, dst_index, values, mask in self.committed.pop(0):
                for k, value in enumerate(values):
                    store(dst, geom, dst_index + k, value, mask)

