"""Launch geometry for the interpreter: thread-index arrays, execution masks and SIMD-group exchanges.

Threads are laid out group by group (linear group id), and within a group by linear local id
``x + y*gx + z*gx*gy``, so a group's threads and a SIMD group's lanes are contiguous. Every per-thread value is a
NumPy array of shape ``(n,)`` over that layout, or a 0-d array when it is the same for every thread.

A *mask* says which threads execute: ``None`` means every thread of the launch, ``EMPTY`` means none, otherwise a
bool array of shape ``(n,)`` with at least one True. Masks are never modified in place.
"""

from __future__ import annotations

from functools import cached_property
from math import prod

import numpy as np

from ..ir import types as t

EMPTY = False  # the mask with no thread; `mask is EMPTY` is the test
Mask = np.ndarray | None | bool


class Fault(Exception):
    """A thread did something illegal; the executor adds the kernel, op and location."""

    def __init__(self, message: str, thread: int | None = None, count: int = 1):
        super().__init__(message)
        self.message = message
        self.thread = thread
        self.count = count


# -- masks --------------------------------------------------------------------------------------------------------


def _normal(m: np.ndarray) -> Mask:
    return m if m.any() else EMPTY


def m_and(mask: Mask, cond: np.ndarray) -> Mask:
    """Threads of ``mask`` where the bool value ``cond`` (0-d or per thread) holds."""
    if mask is EMPTY:
        return EMPTY
    if cond.ndim == 0:
        return mask if cond else EMPTY
    return _normal(cond if mask is None else mask & cond)


def m_and_not(mask: Mask, cond: np.ndarray) -> Mask:
    """Threads of ``mask`` where ``cond`` does not hold."""
    if mask is EMPTY:
        return EMPTY
    if cond.ndim == 0:
        return EMPTY if cond else mask
    return _normal(~cond if mask is None else mask & ~cond)


def m_or(a: Mask, b: Mask) -> Mask:
    if a is EMPTY:
        return b
    if b is EMPTY:
        return a
    if a is None or b is None:
        return None
    return a | b


def m_minus(a: Mask, b: Mask) -> Mask:
    """Threads of mask ``a`` that are not in mask ``b``."""
    if a is EMPTY or b is EMPTY:
        return a
    if b is None:
        return EMPTY
    return _normal(~b if a is None else a & ~b)


def first_fault(bad: np.ndarray, mask: Mask, n: int) -> tuple[int, int] | None:
    """(first thread, count) of the active threads (of ``n``) where ``bad`` (0-d or per thread) holds, or None."""
    if bad.ndim == 0:
        if not bad:
            return None
        if mask is None:
            return 0, n
        return int(np.argmax(mask)), int(np.count_nonzero(mask))
    if mask is not None:
        bad = bad & mask
    if not bad.any():
        return None
    where = np.flatnonzero(bad)
    return int(where[0]), len(where)


# -- geometry -----------------------------------------------------------------------------------------------------


class Geometry:
    """Thread ids of one launch; ``grid`` counts threads per axis (exact), ``group`` is the group shape."""

    def __init__(self, grid: tuple[int, int, int], group: tuple[int, int, int], simd_width: int):
        self.grid = grid
        self.group = group
        self.simd_width = simd_width
        self.num_groups = tuple(-(-n // g) for n, g in zip(grid, group))
        self.group_threads = prod(group)
        self.total_groups = prod(self.num_groups)
        self.n = self.group_threads * self.total_groups
        self.exact = all(n % g == 0 for n, g in zip(grid, group))
        self._thread_values: dict[tuple[str, int | None], np.ndarray] = {}

    def _local_small(self, axis: int) -> np.ndarray:
        gx, gy, _ = self.group
        ll = np.arange(self.group_threads, dtype=np.int32)
        return (ll % gx, (ll // gx) % gy, ll // (gx * gy))[axis]

    def _group_small(self, axis: int) -> np.ndarray:
        nx, ny, _ = self.num_groups
        gl = np.arange(self.total_groups, dtype=np.int32)
        return (gl % nx, (gl // nx) % ny, gl // (nx * ny))[axis]

    def local_id(self, axis: int) -> np.ndarray:
        if self.group[axis] == 1:
            return np.array(0, dtype=np.int32)
        return np.tile(self._local_small(axis), self.total_groups)

    def group_id(self, axis: int) -> np.ndarray:
        if self.num_groups[axis] == 1:
            return np.array(0, dtype=np.int32)
        return np.repeat(self._group_small(axis), self.group_threads)

    def program_id(self, axis: int) -> np.ndarray:
        if self.group[axis] == 1:
            return self.group_id(axis)
        if self.num_groups[axis] == 1:
            return self.local_id(axis)
        return (self.group_id(axis) * np.int32(self.group[axis]) + self.local_id(axis)).astype(np.int32)

    def thread_value(self, opcode: str, axis: int | None) -> np.ndarray:
        """The value of a thread-index op; every op asking for the same id shares one array."""
        key = (opcode, axis)
        value = self._thread_values.get(key)
        if value is None:
            value = self._thread_values[key] = self._thread_value(opcode, axis)
        return value

    def _thread_value(self, opcode: str, axis: int | None) -> np.ndarray:
        if opcode in ("program_id", "local_id", "group_id"):
            return getattr(self, opcode)(axis)
        if opcode == "group_size":
            return np.array(self.group[axis], dtype=np.int32)
        if opcode == "num_groups":
            return np.array(self.num_groups[axis], dtype=np.int32)
        if opcode == "num_threads":
            return np.array(self.grid[axis], dtype=np.int32)
        if opcode == "simd_size":
            return np.array(self.simd_width, dtype=np.int32)
        if opcode == "simd_lane":
            return self.lane
        if opcode == "simd_group":
            if self.group_threads <= self.simd_width:
                return np.array(0, dtype=np.int32)
            return np.tile(np.arange(self.group_threads, dtype=np.int32) // self.simd_width, self.total_groups)
        raise NotImplementedError(f"interpreter has no thread op {opcode!r}")

    @cached_property
    def in_grid(self) -> Mask:
        """Threads inside the exact grid (the rest never execute)."""
        if self.exact:
            return None
        ok = np.ones(self.n, dtype=bool)
        for axis in range(3):
            if self.grid[axis] % self.group[axis]:
                ok &= np.broadcast_to(self.program_id(axis), (self.n,)) < self.grid[axis]
        return ok

    @cached_property
    def group_linear(self) -> np.ndarray:
        return np.repeat(np.arange(self.total_groups, dtype=np.int64), self.group_threads)

    def describe(self, thread: int) -> str:
        """``program_id 7`` for a 1-D launch, else ``program_id (x, y, z)``."""
        g, ll = divmod(thread, self.group_threads)
        nx, ny, _ = self.num_groups
        gx, gy, _ = self.group
        gid = (g % nx, (g // nx) % ny, g // (nx * ny))
        lid = (ll % gx, (ll // gx) % gy, ll // (gx * gy))
        pid = tuple(gid[a] * self.group[a] + lid[a] for a in range(3))
        if self.grid[1] == self.grid[2] == 1:
            return f"program_id {pid[0]}"
        return f"program_id {pid}"

    # -- SIMD groups: each group is cut into SIMD groups of simd_width lanes; the last one may be partial ----------

    @cached_property
    def lane(self) -> np.ndarray:
        return np.tile(np.arange(self.group_threads, dtype=np.int32) % self.simd_width, self.total_groups)

    @property
    def simd_divides(self) -> bool:
        return self.group_threads % self.simd_width == 0

    @cached_property
    def thread_index(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64)

    @cached_property
    def simd_base(self) -> np.ndarray:
        """The thread index of lane 0 of each thread's SIMD group."""
        return self.thread_index - self.lane

    @cached_property
    def simd_count(self) -> np.ndarray:
        """How many lanes each thread's SIMD group has (less than simd_width only for a partial last one)."""
        first = np.arange(self.group_threads) // self.simd_width * self.simd_width
        return np.tile(np.minimum(self.simd_width, self.group_threads - first), self.total_groups)

    @cached_property
    def simd_starts(self) -> np.ndarray:
        return np.flatnonzero(self.lane == 0)

    @cached_property
    def simd_segment(self) -> np.ndarray:
        return np.cumsum(self.lane == 0) - 1


_REDUCE = {"simd_sum": np.add, "simd_max": np.fmax, "simd_min": np.fmin}


def _identity(opcode: str, dtype: np.dtype) -> object:
    if opcode == "simd_sum":
        return 0
    if dtype.kind == "f":
        # fmax/fmin skip NaN, so NaN is their identity: a SIMD group whose active lanes are all NaN gives NaN (with
        # +-inf for the inactive lanes it gave inf; found by tests/fuzz)
        return np.nan
    info = np.iinfo(dtype)
    return info.min if opcode == "simd_max" else info.max


def simd_reduce(geom: Geometry, opcode: str, value: np.ndarray, mask: Mask, rtype: t.ScalarType) -> np.ndarray:
    """Sum/max/min over the active lanes of each SIMD group, given to every lane (halves reduce in f32)."""
    ufunc = _REDUCE[opcode]
    dtype = np.dtype(np.float32) if rtype.is_half else rtype.np_dtype
    x = np.broadcast_to(value.astype(dtype, copy=False), (geom.n,))
    if mask is not None:
        x = np.where(mask, x, np.array(_identity(opcode, dtype), dtype=dtype))
    if dtype.kind == "f" and opcode != "simd_sum":
        # every NaN lane made the quiet NaN that fmin/fmax skip: a reduction runs through NumPy's scalar loop, which
        # calls glibc's fminf, and that returns NaN for a signalling one (from a bitcast or a load; fuzz seed 706003266)
        x = np.where(np.isnan(x), np.array(np.nan, dtype=dtype), x)
    if geom.simd_divides:
        red = ufunc.reduce(x.reshape(-1, geom.simd_width), axis=1, dtype=dtype)
        out = np.repeat(red, geom.simd_width)
    else:
        out = ufunc.reduceat(x, geom.simd_starts, dtype=dtype)[geom.simd_segment]
    return out.astype(rtype.np_dtype, copy=False)


def simd_exchange(geom: Geometry, opcode: str, value: np.ndarray, lane: np.ndarray, mask: Mask) -> np.ndarray:
    """simd_shuffle / simd_broadcast (read lane ``lane``), simd_shuffle_xor (lane ``own ^ lane``), simd_shuffle_up
    and simd_shuffle_down (lane ``own - delta`` / ``own + delta``).

    A source lane outside the SIMD group (negative, past the width, or past the end of a partial SIMD group) gives
    the reader's own value, on every backend (Metal's rule for shuffle up/down). Reading a lane that is inactive
    gives whatever that lane computed (on a GPU it is undefined).
    """
    width = geom.simd_width
    own = geom.lane
    src_lane = {"simd_shuffle_xor": lambda: own ^ lane, "simd_shuffle_up": lambda: own - lane,
                "simd_shuffle_down": lambda: own + lane}.get(opcode, lambda: lane)()
    src_lane = np.broadcast_to(src_lane, (geom.n,)).astype(np.int64)
    if value.ndim == 0:
        return value
    inside = (src_lane >= 0) & (src_lane < width)
    if not geom.simd_divides:
        inside &= src_lane < geom.simd_count
    src = np.where(inside, geom.simd_base + np.clip(src_lane, 0, width - 1), geom.thread_index)
    return value[src]


def _per_simd_group(geom: Geometry, x: np.ndarray) -> np.ndarray:
    """x (shape (n,)) as a (SIMD groups, width) table, lanes past a partial group's end zero."""
    table = np.zeros((int(geom.simd_segment[-1]) + 1, geom.simd_width), dtype=x.dtype)
    table[geom.simd_segment, geom.lane] = x
    return table


def simd_vote(geom: Geometry, opcode: str, cond: np.ndarray, mask: Mask) -> np.ndarray:
    """simd_ballot (u32: lanes 0..31 of the active lanes with cond), simd_any, simd_all over the active lanes."""
    c = np.broadcast_to(cond, (geom.n,)).astype(bool)
    active = np.ones(geom.n, dtype=bool) if mask is None or mask is EMPTY else mask
    if opcode == "simd_ballot":
        bits = np.where(active & c & (geom.lane < 32), np.left_shift(np.uint64(1), geom.lane.astype(np.uint64)), 0)
        table = _per_simd_group(geom, bits.astype(np.uint64))
        return table.sum(axis=1, dtype=np.uint64).astype(np.uint32)[geom.simd_segment]
    hits = active & (c if opcode == "simd_any" else ~c)
    count = _per_simd_group(geom, hits.astype(np.int64)).sum(axis=1)[geom.simd_segment]
    return count > 0 if opcode == "simd_any" else count == 0


def simd_scan(geom: Geometry, opcode: str, value: np.ndarray, mask: Mask, rtype: t.ScalarType) -> np.ndarray:
    """Inclusive / exclusive prefix sums over the active lanes, in lane order (ints wrap; f32 adds in f32)."""
    dtype = rtype.np_dtype
    x = np.broadcast_to(value.astype(dtype, copy=False), (geom.n,))
    if mask is not None and mask is not EMPTY:
        x = np.where(mask, x, np.zeros((), dtype=dtype))
    with np.errstate(over="ignore"):
        sums = np.cumsum(_per_simd_group(geom, x), axis=1, dtype=dtype)
    if opcode == "simd_prefix_exclusive_sum":
        sums = np.concatenate([np.zeros((sums.shape[0], 1), dtype=dtype), sums[:, :-1]], axis=1)
    return sums[geom.simd_segment, geom.lane]
