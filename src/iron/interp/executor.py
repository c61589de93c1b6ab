"""Run a kernel's IR on NumPy, every thread of the launch at once, in lock-step under execution masks.

Each SSA value is one array over all threads (or 0-d when uniform). Pure ops compute on every thread, active or
not, because masking them would cost more than it saves; only side effects (stores, atomics, ``set``) and faults
(bounds, division by zero, SIMD lanes) look at the mask. Control flow narrows the mask: ``if`` runs each region on
its threads, loops run while any thread is still iterating, and ``break``/``continue``/``return`` drop threads.

The kernel is first compiled into nested tuples of closures (one per op, dispatch resolved once), so the per-op
cost at run time is a Python call plus the NumPy work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ExecutionError, LaunchError
from ..ir import ops as O
from ..ir import types as t
from ..ir.core import Block, Kernel, Op, Value
from . import memory, shared_sizes, warpgroup
from .frag_elementwise import elementwise_step
from .semantics import const_array, pure_fn
from .threads import (
    EMPTY,
    Fault,
    Geometry,
    Mask,
    first_fault,
    m_and,
    m_and_not,
    m_minus,
    m_or,
    simd_exchange,
    simd_reduce,
    simd_scan,
    simd_vote,
)
from .tile_steps import async_step, matrix_step, tile_step, vcopy_step

Step = Callable[[Mask], Mask]
Steps = tuple[tuple[Step, Op], ...]

_PURE = O.BINARY_ARITH | O.BITWISE | O.COMPARE | O.FLOAT_MATH | O.INT_BITS | {"neg", "not", "abs", "fma", "select",
                                                                             "cast", "bitcast"}
_THREAD = O.THREAD_AXIS | {"simd_lane", "simd_group", "simd_size"}


def run_kernel(
    kernel: Kernel,
    args: dict[str, object],
    grid: tuple[int, int, int],
    group: tuple[int, int, int],
    simd_width: int = 32,
    max_shared: int | None = None,
) -> None:
    """Execute ``kernel`` over an exact ``grid`` of threads in groups of ``group``; buffers in ``args`` are updated.

    ``args`` maps each parameter name to a 1-D NumPy array of the element dtype (buffers) or a NumPy scalar
    (scalars). Raises ``ExecutionError`` (located at the op) when an active thread faults, and ``CompileError`` (at
    the ``shared()``) when the kernel's shared arrays exceed ``max_shared`` bytes per group (default
    ``memory.shared_limit()``: 48 KiB, as a GPU gives a group), before anything is allocated.
    """
    limit = memory.shared_limit() if max_shared is None else max_shared
    memory.check_shared(kernel, limit)
    if shared_sizes.runtime_arrays(kernel):  # run-time lengths: checked with the static arrays before allocating
        shared_sizes.lengths(kernel, {p.name: args.get(p.name, 1) for p in kernel.params if p.kind == "scalar"},
                             limit, "cpu")
    grid3, group3 = _dims(grid, "grid", 0), _dims(group, "group", 1)
    if not isinstance(simd_width, int | np.integer) or simd_width < 1:
        raise LaunchError(f"simd_width must be a positive int, got {simd_width!r}")
    folded = kernel.attrs.get("simd_width")
    if folded is not None and folded != simd_width:
        raise LaunchError(f"{kernel.name} was compiled for SIMD width {folded} (simd_size() folded to it), but runs "
                          f"at {simd_width}")
    geom = Geometry(grid3, group3, int(simd_width))
    with np.errstate(all="ignore"):  # overflow, NaN and inf are defined results here, not warnings
        executor = _Executor(kernel, args, geom)  # binds and checks the arguments even for an empty launch
        if geom.n:
            executor.run()


def _dims(value: Any, what: str, least: int) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int | np.integer) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int | np.integer) and d >= least for d in dims):
        raise LaunchError(f"{what} must be 1 to 3 ints >= {least}, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


class _Loop:
    """Per-loop state: the threads that executed ``continue`` in the current iteration."""

    __slots__ = ("cont",)

    def __init__(self) -> None:
        self.cont: Mask = EMPTY


def _jumps_in(blocks: list[Block], opcodes: set[str]) -> bool:
    return any(op.opcode in opcodes for b in blocks for op in b.walk())


class _Executor:
    def __init__(self, kernel: Kernel, args: dict[str, object], geom: Geometry):
        self.kernel = kernel
        self.geom = geom
        self.env: list[Any] = []
        self.slots: dict[int, int] = {}
        self.targets: dict[int, memory.Target] = {}
        self.returned: Mask = EMPTY  # threads that executed `return`
        self.loops: list[_Loop] = []
        self.cond: np.ndarray | None = None  # the last `condition` value, read by `while`
        self.copies = memory.AsyncCopies()  # async_copy groups in flight
        self.wg = warpgroup.WarpgroupState()  # warpgroup_mma calls in flight
        self._bind(args)
        self.body = self._block(kernel.body)

    def run(self) -> None:
        self._run(self.body, self.geom.in_grid)

    # -- arguments ------------------------------------------------------------------------------------------------

    def _bind(self, args: dict[str, object]) -> None:
        name = self.kernel.name
        for p in self.kernel.params:
            if p.name not in args:
                raise LaunchError(f"kernel '{name}': missing argument '{p.name}'")
            value = args[p.name]
            if p.kind == "buffer":
                elem = p.type.elem
                if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype != elem.np_dtype:
                    got = (
                        f"{value.dtype} array of shape {value.shape}"
                        if isinstance(value, np.ndarray)
                        else type(value).__name__
                    )
                    raise LaunchError(
                        f"kernel '{name}': argument '{p.name}' must be a 1-D {elem.np_dtype} array, got {got}"
                    )
                self.targets[p.value.uid] = memory.Target(value, len(value), None, f"buffer '{p.name}'")
            else:
                self.env[self._slot(p.value)] = self._scalar_arg(p.name, p.type, value)

    def _scalar_arg(self, pname: str, ptype: t.ScalarType, value: object) -> np.ndarray:
        if type(value) in (bool, int, float):  # plain Python numbers; np.float64 (a float subclass) must match
            return const_array(value, ptype)
        arr = np.asarray(value)
        if arr.ndim != 0 or arr.dtype != ptype.np_dtype:
            raise LaunchError(
                f"kernel '{self.kernel.name}': argument '{pname}' must be a {ptype} scalar "
                f"({ptype.np_dtype}), got {arr.dtype} of shape {arr.shape}"
            )
        return arr

    # -- compilation ----------------------------------------------------------------------------------------------

    def _slot(self, value: Value) -> int:
        slot = self.slots.get(value.uid)
        if slot is None:
            slot = self.slots[value.uid] = len(self.env)
            self.env.append(None)
        return slot

    def _block(self, block: Block) -> Steps:
        steps = []
        for op in block.ops:
            step = self._op(op)
            if step is not None:
                steps.append((step, op))
        return tuple(steps)

    def _op(self, op: Op) -> Step | None:
        code = op.opcode
        if code == "const":
            self.env[self._slot(op.result)] = const_array(op.attrs["value"], op.result.type)
            return None
        if code in _THREAD:
            self.env[self._slot(op.result)] = self.geom.thread_value(code, op.attrs.get("axis"))
            return None
        if code in ("shared", "local"):  # allocated once per launch, like a static array, even inside a loop
            make = memory.Target.shared if code == "shared" else memory.Target.local
            size = op.attrs["size"]
            if size is None:  # shared(dtype, n) with n a kernel parameter: its value at this launch
                size = int(self.env[self._slot(self.kernel.param(op.attrs["length"]).value)])
            self.targets[op.result.uid] = make(self.geom, op.attrs["elem"], size, op.result.name)
            return None
        if code in _PURE:
            return self._pure(op)
        compile_op = _COMPILERS.get(code)
        if compile_op is None:
            raise NotImplementedError(f"the interpreter has no semantics for op {code!r}")
        return compile_op(self, op)

    def _pure(self, op: Op) -> Step:
        env = self.env
        fn = pure_fn(op.opcode, [v.type for v in op.operands], op.result.type, op.attrs)
        ins = [self._slot(v) for v in op.operands]
        out = self._slot(op.result)
        if op.opcode in ("div", "rem") and op.result.type.is_int:
            a, b = ins
            n = self.geom.n

            def int_divide(mask: Mask) -> Mask:
                divisor = env[b]
                if not divisor.all():
                    bad = first_fault(divisor == 0, mask, n)
                    if bad is not None:
                        raise Fault(
                            "integer division by zero" if op.opcode == "div" else "integer remainder by zero", *bad
                        )
                env[out] = fn(env[a], divisor)
                return mask

            return int_divide
        if len(ins) == 1:
            (a,) = ins

            def unary(mask: Mask) -> Mask:
                env[out] = fn(env[a])
                return mask

            return unary
        if len(ins) == 2:
            a, b = ins

            def binary(mask: Mask) -> Mask:
                env[out] = fn(env[a], env[b])
                return mask

            return binary
        a, b, c = ins

        def ternary(mask: Mask) -> Mask:
            env[out] = fn(env[a], env[b], env[c])
            return mask

        return ternary

    # -- execution ------------------------------------------------------------------------------------------------

    def _run(self, steps: Steps, mask: Mask) -> Mask:
        """Run a block on the threads of ``mask``; return the threads that reach its end."""
        if mask is EMPTY:
            return EMPTY
        try:
            for step, op in steps:  # noqa: B007 - `op` locates a fault
                mask = step(mask)
                if mask is EMPTY:
                    return EMPTY
        except Fault as fault:
            raise self._error(op, fault) from None
        return mask

    def _error(self, op: Op, fault: Fault) -> ExecutionError:
        msg = f"{fault.message} in kernel '{self.kernel.name}'"
        if fault.thread is not None:
            msg += f", thread {self.geom.describe(fault.thread)}"
            if fault.count > 1:
                msg += f" (and {fault.count - 1} more thread{'s' if fault.count > 2 else ''})"
        return ExecutionError(msg, loc=op.loc)


# -- op compilers that need more than a pure function: each returns the op's step ------------------------------------


def _memory(ex: _Executor, op: Op) -> Step:
    env, geom, code = ex.env, ex.geom, op.opcode
    target = ex.targets[op.operands[0].uid]
    idx = ex._slot(op.operands[1])
    if code == "load":
        out = ex._slot(op.result)

        def load(mask: Mask) -> Mask:
            env[out] = memory.load(target, geom, env[idx], mask)
            return mask

        return load
    val = ex._slot(op.operands[2])
    if code == "store":

        def store(mask: Mask) -> Mask:
            memory.store(target, geom, env[idx], env[val], mask)
            return mask

        return store
    out = ex._slot(op.result)
    if code == "atomic_cas":
        new = ex._slot(op.operands[3])

        def cas(mask: Mask) -> Mask:
            env[out] = memory.atomic(code, target, geom, env[idx], env[val], mask, new=env[new])
            return mask

        return cas

    def atomic(mask: Mask) -> Mask:
        env[out] = memory.atomic(code, target, geom, env[idx], env[val], mask)
        return mask

    return atomic


def blend(mask: Mask, new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """``new`` for the active threads, ``old`` elsewhere, for values with extra (fragment) dimensions too."""
    if mask is None:
        return new
    m = mask.reshape(mask.shape + (1,) * (max(np.ndim(new), np.ndim(old)) - 1))
    return np.where(m, new, old)


def _simd(ex: _Executor, op: Op) -> Step:
    env, geom, code, rtype = ex.env, ex.geom, op.opcode, op.result.type
    ins = [ex._slot(v) for v in op.operands]
    out = ex._slot(op.result)
    if code in O.SIMD_REDUCE:
        (x,) = ins

        def reduce(mask: Mask) -> Mask:
            env[out] = simd_reduce(geom, code, env[x], mask, rtype)
            return mask

        return reduce
    if code in O.SIMD_VOTE or code in O.SIMD_SCAN:
        (x,) = ins

        def lanes(mask: Mask) -> Mask:
            if code in O.SIMD_VOTE:
                env[out] = simd_vote(geom, code, env[x], mask)
            else:
                env[out] = simd_scan(geom, code, env[x], mask, rtype)
            return mask

        return lanes
    x, lane = ins

    def exchange(mask: Mask) -> Mask:
        env[out] = simd_exchange(geom, code, env[x], env[lane], mask)
        return mask

    return exchange


def _fence(ex: _Executor, op: Op) -> Step:
    """fence(): every thread runs in lock-step over the whole launch, so each write is visible to every later op
    already; nothing to do (a missing fence is a race the interpreter cannot show)."""
    return lambda mask: mask


def _barrier(ex: _Executor, op: Op) -> Step:
    geom = ex.geom
    shape = (geom.total_groups, geom.group_threads)

    def barrier(mask: Mask) -> Mask:
        # Lock-step execution makes every barrier a fence already; what is left is to catch a barrier that only
        # some threads of a group reach, which hangs or corrupts shared memory on a GPU.
        if mask is None or (mask is geom.in_grid and ex.returned is EMPTY):
            return mask
        live = m_minus(geom.in_grid, ex.returned)
        missing = ~mask if live is None else live & ~mask
        arrived = mask.reshape(shape)
        partial = arrived.any(axis=1) & missing.reshape(shape).any(axis=1)
        if partial.any():
            g = int(np.argmax(partial))
            n_live = geom.group_threads if live is None else int(live.reshape(shape)[g].sum())
            raise Fault(
                f"barrier() reached by only part of group {g} (divergent control flow): "
                f"{int(arrived[g].sum())} of its {n_live} live threads arrived"
            )
        return mask

    return barrier


def _var(ex: _Executor, op: Op) -> Step:
    env = ex.env
    code = op.opcode
    if code == "var":
        elem = op.result.type.elem
        if isinstance(elem, t.FragType):
            init = np.full((elem.rows, elem.cols), np.nan, np.float32 if elem.role == "acc" else elem.elem.np_dtype)
        else:
            init = memory.garbage(elem)
        out = ex._slot(op.result)

        def var(mask: Mask) -> Mask:
            env[out] = init
            return mask

        return var
    slot = ex._slot(op.operands[0])
    if code == "get":
        out = ex._slot(op.result)

        def get(mask: Mask) -> Mask:
            env[out] = env[slot]
            ex.wg.tag(out, ex.wg.slot_calls.get(slot, ()))
            return mask

        return get
    val = ex._slot(op.operands[1])

    def set_(mask: Mask) -> Mask:
        env[slot] = blend(mask, env[val], env[slot])
        ex.wg.tag(slot, ex.wg.slot_calls.get(val, ()) + (ex.wg.slot_calls.get(slot, ()) if mask is not None else ()))
        return mask

    return set_


def _if(ex: _Executor, op: Op) -> Step:
    env, run = ex.env, ex._run
    cond = ex._slot(op.operands[0])
    then, else_ = ex._block(op.regions[0]), ex._block(op.regions[1])
    exits = _jumps_in(op.regions, O.JUMPS)

    def if_(mask: Mask) -> Mask:
        c = env[cond]
        if c.ndim == 0:
            return run(then if c else else_, mask)
        if not exits:  # every thread reaches the end of its region: the mask is unchanged
            if then:
                run(then, m_and(mask, c))
            if else_:
                run(else_, m_and_not(mask, c))
            return mask
        return m_or(run(then, m_and(mask, c)), run(else_, m_and_not(mask, c)))

    return if_


def _for(ex: _Executor, op: Op) -> Step:
    env, run, loops = ex.env, ex._run, ex.loops
    lo, hi, step_ = (ex._slot(v) for v in op.operands)
    body_block = op.regions[0]
    iv_slot = ex._slot(body_block.args[0])
    body = ex._block(body_block)
    exits = _jumps_in([body_block], O.JUMPS)
    returns = _jumps_in([body_block], {"return"})
    n = ex.geom.n

    def for_(mask: Mask) -> Mask:
        start, stop, step = env[lo], env[hi], env[step_]
        bad = first_fault(step == 0, mask, n)
        if bad is not None:
            raise Fault("range() step is 0", *bad)
        up = step > 0
        iv = start.astype(np.int64)  # no i32 wrap-around past `stop`; the body sees i32 values in range
        cur, state = mask, _Loop()
        loops.append(state)
        try:
            while True:
                in_range = (iv < stop if up else iv > stop) if step.ndim == 0 else np.where(up, iv < stop, iv > stop)
                active = m_and(cur, in_range)
                if active is EMPTY:
                    break
                env[iv_slot] = iv.astype(np.int32)
                out = run(body, active)
                if exits:
                    out, state.cont = m_or(out, state.cont), EMPTY
                cur = out
                if cur is EMPTY:
                    break
                iv = iv + step
        finally:
            loops.pop()
        return m_minus(mask, ex.returned) if returns else mask

    return for_


def _while(ex: _Executor, op: Op) -> Step:
    run, loops = ex._run, ex.loops
    cond_steps, body = ex._block(op.regions[0]), ex._block(op.regions[1])
    exits = _jumps_in([op.regions[1]], O.JUMPS)
    returns = _jumps_in(op.regions, {"return"})

    def while_(mask: Mask) -> Mask:
        cur, state = mask, _Loop()
        loops.append(state)
        try:
            while True:
                reached = run(cond_steps, cur)
                active = m_and(reached, ex.cond) if reached is not EMPTY else EMPTY
                if active is EMPTY:
                    break
                out = run(body, active)
                if exits:
                    out, state.cont = m_or(out, state.cont), EMPTY
                cur = out
                if cur is EMPTY:
                    break
        finally:
            loops.pop()
        return m_minus(mask, ex.returned) if returns else mask

    return while_


def _condition(ex: _Executor, op: Op) -> Step:
    env, slot = ex.env, ex._slot(op.operands[0])

    def condition(mask: Mask) -> Mask:
        ex.cond = env[slot]
        return mask

    return condition


def _jump(ex: _Executor, op: Op) -> Step:
    code = op.opcode

    def jump(mask: Mask) -> Mask:
        if code == "return":
            ex.returned = m_or(ex.returned, mask)
        elif code == "continue":
            state = ex.loops[-1]
            state.cont = m_or(state.cont, mask)
        return EMPTY  # `break`: the loop simply stops seeing these threads

    return jump


_COMPILERS: dict[str, Callable[[_Executor, Op], Step]] = {
    "load": _memory,
    "store": _memory,
    "atomic_add": _memory,
    "atomic_max": _memory,
    **{code: _memory for code in ("atomic_min", "atomic_and", "atomic_or", "atomic_xor", "atomic_exchange",
                                  "atomic_cas")},
    "vcopy": vcopy_step,
    "async_copy": async_step,
    "async_commit": async_step,
    "async_wait": async_step,
    "tile_load": tile_step,
    "tile_commit": tile_step,
    "tile_wait": tile_step,
    **{code: matrix_step for code in O.MATRIX},
    **{code: elementwise_step for code in O.FRAG_LAYOUT},
    **{code: _simd for code in O.SIMD_REDUCE | O.SIMD_EXCHANGE | O.SIMD_VOTE | O.SIMD_SCAN},
    "barrier": _barrier,
    "fence": _fence,
    "var": _var,
    "get": _var,
    "set": _var,
    "if": _if,
    "for": _for,
    "while": _while,
    "condition": _condition,
    "break": _jump,
    "continue": _jump,
    "return": _jump,
}
