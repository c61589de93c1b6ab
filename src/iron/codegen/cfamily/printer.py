"""The one C-family printer: walks a kernel's IR and writes C-like source in the spelling of a ``CDialect``.

Shape of the output: a header comment, the prelude snippets the kernel uses, then the kernel. Its parameters are the
kernel's own (buffers as pointers, scalars by value) followed by the exact grid sizes; its body starts with the
exact-grid guard, then one statement per IR value that is not inlined (``plan.py`` decides), with structured control
flow mapped one to one (``if``/``for``/``while``/``break``/``continue``/``return``). Comments name the Python
source line each group of statements comes from. Elementwise kernels also get an element function and a vectorised
entry point after the kernel (``vectorize.py``; ``KernelSource.vector`` says how to launch it).

Semantics follow the interpreter (``iron.interp.semantics``), which is the definition:

- f16/bf16 values are storage: every op on them converts its operands to f32, computes in f32, and rounds the result
  back (once) when its type is half -- what the interpreter does for ``native_half`` kernels.
- i32 ``add``/``sub``/``mul``/``neg``/``shl`` wrap on overflow, so they are computed in ``unsigned`` and converted
  back: signed overflow is undefined in C and the compiler would otherwise assume it never happens.
- Shift amounts are masked to 0..31 (0..63 on 64-bit ints); float ``min``/``max`` ignore a NaN operand (``fminf``).
- i64 wraps as i32 does (computed in ``unsigned long long``); 8-bit values are loaded and stored as their C types
  and converted to and from i32 by plain casts (the front-end widens every load); f64 uses ``double``.

Output is a pure function of the IR: names are handed out in program order and nothing iterates over a set.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Block, Kernel, Op, Value
from ...ir.rewrite import const_value
from ..lower_fragments import lower_fragments, needs_fallback
from . import expr as E
from .calls import DialectCalls
from .convergence import always_exits, convergent_simd_ops
from .dialect import CDialect, CParam, Features, LaneBuffer, VectorParts
from .expr import Expr
from .names import NameTable, entry_hint, sanitize
from .plan import plan_kernel
from .source import KernelSource, VectorEntry  # noqa: F401 - re-exported: the printer's result types
from .tiles import TILE_STATEMENTS, TilePrinting, lower_tile_constructs, shared_layout
from .vectorize import LanePlan, plan_lanes
from .wide import wide_literal, wrapping64

INDENT = "    "
_ARITH_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_BIT_OPS = {"and": "&", "or": "|", "xor": "^"}
_COMPARE_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_COLLECTIVES = {"barrier"} | O.SIMD_OPS


def emit_source(kernel: Kernel, dialect: CDialect, line_comments: bool = True, vectorize: bool = True,
                prologue: tuple[str, ...] = ()) -> KernelSource:
    """Print ``kernel`` in ``dialect``; raises ``CompileError`` for what the dialect cannot express.

    ``vectorize``: also emit the vectorised entry point when the kernel qualifies and the dialect has one. Matrix
    fragments go through the scalar fallback (``codegen/lower_fragments.py``) where the dialect has no spelling.
    ``prologue``: statements put first in every entry point, before the exact-grid guard (CUDA's programmatic
    dependent launch, ``emit_cuda(pdl=True)``).
    """
    folded, spelled = kernel.attrs.get("simd_width"), dialect.thread.get("simd_size")
    if folded is not None and spelled is not None and spelled.text.isdigit() and int(spelled.text) != folded:
        raise CompileError(f"{kernel.name} was compiled for SIMD width {folded} (simd_size() folded to it); "
                           f"backend {dialect.name} runs {spelled.text} lanes", kernel.loc)
    kernel, dialect = lower_tile_constructs(kernel, dialect)  # wgmma / copy engine, else fragment ops / loops
    if dialect.simd_width and needs_fallback(kernel, dialect.matrix):
        kernel = lower_fragments(kernel, dialect.simd_width)
    return _Printer(kernel, dialect, line_comments).run(vectorize, prologue)


#: names the vector entry and the element function use besides the kernel's own
_VECTOR_NAMES = {"iron_pid", "iron_first", "iron_k"}


class _Printer(TilePrinting, DialectCalls):
    def __init__(self, kernel: Kernel, dialect: CDialect, line_comments: bool, lanes: LanePlan | None = None):
        self.k = kernel
        self.d = dialect
        self.line_comments = line_comments
        lane_uids = frozenset(kernel.params[i].value.uid for i in lanes.lanes) if lanes is not None else frozenset()
        self.plan = plan_kernel(kernel, lane_uids)
        self.names = NameTable(dialect.reserved_names() | _VECTOR_NAMES)
        self.features = Features()
        self.element_of = lanes  # printing the element function of this vectorisation
        self.lane_refs: dict[int, str] = {}  # lane buffer uid -> the element function's reference parameter
        self.vars: dict[int, str] = {}  # var slot uid -> identifier
        self.buffers: dict[int, str] = {}  # buffer value uid -> identifier (parameters and shared arrays)
        self.last_line: int | None = None
        self.shared_bytes = 0
        self.shared_offsets, self.dynamic_shared = shared_layout(kernel, dialect)
        # arrays sized at launch: (name, length parameter, element bytes), carved after the compile-time ones
        self.runtime_shared: list[tuple[str, str, int]] = []
        self.static_end = -(-max((off + op.attrs["elem"].itemsize * op.attrs["size"] for op in kernel.walk()
                                  for off in [self.shared_offsets.get(op.result.uid if op.result else -1)]
                                  if off is not None), default=0) // 16) * 16
        self.runtime_offset = ""
        # SIMD ops that every live lane reaches together get the entry ballot as their lane mask
        self.convergent = convergent_simd_ops(kernel) if dialect.simd_masks is not None else set()
        self._tma_init()

    # -- the whole kernel -----------------------------------------------------------------------------------------

    def run(self, vectorize: bool = True, prologue: tuple[str, ...] = ()) -> KernelSource:
        entry = self.names.claim(entry_hint(self.k.name))
        params = self._params()
        body: list[str] = [INDENT + line for line in prologue]
        self._guard(body)
        self._tma_prologue(body, INDENT)
        self._block(self.k.body, body, 1)
        for p in params:  # a parameter's type may need a snippet (the 16-bit structs)
            self._ctype(p.dtype)
        signature = self.d.signature(entry, params, self.features)
        if self.k.attrs.get("launch_bounds"):  # @kernel(launch_bounds=(T, G)): the dialect's spelling, if any
            signature = self.d.bounded(signature, *self.k.attrs["launch_bounds"])
        kernel_text = signature + " {\n" + "\n".join(body) + "\n}\n"
        lanes = plan_lanes(self.k) if vectorize else None
        vector, vector_text = self._vectorised(entry, params, lanes, prologue) if lanes is not None else (None, "")
        spec = []
        if self.k.attrs.get("dtype") is not None:
            spec.append(f"T={self.k.attrs['dtype']}")
        spec += [f"{k}={v!r}" for k, v in sorted(self.k.attrs.get("constexprs", {}).items())]
        title = f"Generated by Iron from kernel {self.k.name}" + (f" [{', '.join(spec)}]" if spec else "")
        header = self.d.header(f"{title} for {self.d.name}; do not edit.")
        prelude = self.d.prelude(self.features.snippets)
        text = header + "\n" + prelude + kernel_text + vector_text
        return KernelSource(self.d.name, self.k.name, entry, text, tuple(params), self.shared_bytes,
                            tuple(sorted(self.features.snippets)), vector, self.dynamic_shared,
                            tuple((name, size) for _, name, size in self.features.shared_params),
                            tuple(self.d.attribute_params(self.features)),
                            runtime_shared=tuple(self.runtime_shared), tensor_maps=tuple(self.tmaps))

    def _vectorised(self, entry: str, params: list[CParam], lanes: LanePlan, prologue: tuple[str, ...] = ()
                    ) -> tuple[VectorEntry | None, str]:
        """The element function and the vector entry (``vectorize.py``), or (None, "") if the dialect has none."""
        element = _Printer(self.k, self.d, self.line_comments, lanes)
        element.features = self.features  # one prelude serves all three functions
        element_name, element_text = element.element_function(entry)
        lane_params = [params[i] for i in lanes.lanes]
        taken = NameTable(self.d.reserved_names() | {p.name for p in params} | {entry, element_name})
        parts = VectorParts(
            entry=taken.claim(f"{entry}_x{lanes.width}"), element=element_name, width=lanes.width,
            params=tuple(params),
            args=tuple(p.name for i, p in enumerate(params) if p.kind == "scalar" or p.kind == "buffer"
                       and i not in lanes.lanes),
            lanes=tuple(LaneBuffer(p, taken.claim(f"{p.name}_vec"), i in lanes.preload, i in lanes.writeback)
                        for i, p in zip(lanes.lanes, lane_params)),
            first="iron_first", k="iron_k", prologue=prologue)
        text = self.d.vector_entry(parts)
        if text is None:
            return None, ""
        vector = VectorEntry(parts.entry, lanes.width, tuple(p.source for p in lane_params))
        return vector, "\n" + element_text + "\n" + text

    def element_function(self, entry: str) -> tuple[str, str]:
        """(name, source) of the kernel body for one element: ``program_id(0)`` is the parameter ``iron_pid`` and
        each lane buffer's element is a reference parameter."""
        self.names.claim(entry)
        params = self._params()
        name = self.names.claim(f"{entry}_element")
        decls = [self.d.param_decl(p, i) for i, p in enumerate(params)
                 if p.kind == "scalar" or p.kind == "buffer" and i not in self.element_of.lanes]
        decls.append(f"{self._ctype(t.i32)} iron_pid")
        for i in self.element_of.lanes:
            p = self.k.params[i]
            ref = self.lane_refs[p.value.uid] = self.names.claim(f"{params[i].name}_elem")
            decls.append(self.d.lane_ref_decl(params[i].ctype, ref, params[i].readonly))
        body: list[str] = []
        self._block(self.k.body, body, 1)
        head = f"{self.d.device_function} {name}(" + ", ".join(decls) + ")"
        if len(head) > 120:
            head = f"{self.d.device_function} {name}(\n" + ",\n".join("    " + d for d in decls) + ")"
        comment = (f"// {self.k.name} for the one element iron_pid (= program_id(0)), for the vectorised entry below; "
                   "elements of\n// the buffers indexed by program_id(0) are passed by reference\n")
        return name, comment + head + " {\n" + "\n".join(body) + "\n}\n"

    def _params(self) -> list[CParam]:
        params = []
        for p in self.k.params:
            name = self.names.bind(p.value.uid, p.name)
            if p.kind == "buffer":
                elem = p.type.elem
                self.buffers[p.value.uid] = name
                params.append(CParam(name, "buffer", self._ctype(elem), elem, p.readonly, p.name))
            else:
                params.append(CParam(name, "scalar", self._ctype(p.type), p.type, False, p.name))
        for axis, name in enumerate(self.d.grid_params):
            params.append(CParam(name, "grid", self._ctype(t.i32), t.i32, False, "", axis))
        for spec in self.tmaps:  # the copy engine's descriptors, in global memory (cuda_tma.py)
            self.names.claim(spec.param)
            params.append(CParam(spec.param, "tmap", "const void*", t.u64, True, spec.buffer))
        return params

    def _guard(self, out: list[str]) -> None:
        pad = INDENT
        masks = self.d.simd_masks
        if masks is not None and any(op.opcode in O.SIMD_OPS for op in self.k.walk()):
            out.append(pad + "// the lanes of this SIMD group that pass the guard below (all are here at entry): the "
                       "lane mask of\n" + pad + "// the SIMD ops that every one of them reaches together")
            self._need(masks.live_needs)
            tests = [f"{self._thread('program_id', axis)} < {self.d.grid_params[axis]}" for axis in range(3)]
            cont = "\n" + pad + 2 * INDENT
            out.append(pad + masks.live.format(in_grid=cont + (" &&" + cont).join(tests)))
        if any(op.opcode in _COLLECTIVES for op in self.k.walk()):
            # the launcher runs such kernels on whole groups only, so no thread leaves before a barrier here
            out.append(pad + "// exact grid (whole groups for kernels with collectives): threads past it do nothing")
        else:
            out.append(pad + "// exact grid: threads of the last group that fall past the grid do nothing")
        tests = [f"{self._thread('program_id', axis)} >= {self.d.grid_params[axis]}" for axis in range(3)]
        out.append(pad + "if (" + (" ||\n" + pad + INDENT).join(tests) + ") {")
        out.append(pad + INDENT + "return;")
        out.append(pad + "}")

    # -- statements -----------------------------------------------------------------------------------------------

    def _block(self, block: Block, out: list[str], depth: int, scoped: bool = True) -> None:
        if scoped:
            self.names.enter()
        for op in block.ops:
            self._stmt(op, out, depth)
            if always_exits(op):
                break  # the rest of the block is unreachable (compilers warn about it; nothing there can run)
        if scoped:
            self.names.leave()

    def _prints(self, op: Op) -> bool:
        r = op.result
        if op.opcode == "set":
            return self.plan.used(op.operands[0].uid)  # a variable nobody reads is not even declared
        if op.opcode == "if":
            return any(self._prints(o) for region in op.regions for o in region.ops)
        if r is None:
            return op.opcode != "condition"
        if op.opcode == "const" or r.uid in self.plan.inline:
            return False
        return self.plan.used(r.uid) or op.opcode in O.ATOMICS

    def _comment(self, op: Op, out: list[str], depth: int) -> None:
        if not self.line_comments or op.loc is None or op.loc.line == self.last_line:
            return
        self.last_line = op.loc.line
        text = op.loc.text.strip().encode("ascii", "replace").decode().rstrip("\\").strip()
        if len(text) > 100:
            text = text[:97] + "..."
        out.append(f"{INDENT * depth}// line {op.loc.line}" + (f": {text}" if text else ""))

    def _stmt(self, op: Op, out: list[str], depth: int) -> None:
        if not self._prints(op):
            return
        pad = INDENT * depth
        code = op.opcode
        if code == "if":
            self._if(op, out, depth)
            return
        if code != "var":  # declarations hoisted to the top would repeat their line's comment
            self._comment(op, out, depth)
        if code == "for":
            self._for(op, out, depth)
        elif code == "while":
            self._while(op, out, depth)
        elif code in O.JUMPS:
            out.append(f"{pad}{code};")
        elif code == "barrier":  # a wgmma kernel's barrier after no ordinary operand write: no proxy fence (tiles.py)
            plain = op.attrs.get("proxy_fence", True) is False and getattr(self.d, "plain_barrier", None)
            out.append(pad + (plain or self.d.barrier))
        elif code == "fence":
            out.append(pad + self.d.fence)
        elif code == "store":
            buf, idx, val = op.operands
            ref = self.lane_refs.get(buf.uid)
            target = ref if ref is not None else f"{self.buffers[buf.uid]}[{self.expr(idx)}]"
            out.append(f"{pad}{target} = {self.expr(val)};")
        elif code == "set":
            var, val = op.operands
            out.append(f"{pad}{self.vars[var.uid]} = {self.expr(val)};")
        elif code == "var":
            elem = op.result.type.elem
            name = self.names.bind(op.result.uid, op.result.name)
            self.vars[op.result.uid] = name
            init = getattr(self.d.matrix, "var_init", "{}") if isinstance(elem, t.FragType) else \
                f" = {self._literal(0, elem)}"
            out.append(f"{pad}{self._ctype(elem)} {name}{init};")
        elif code == "shared":
            self._shared(op, out, pad)
        elif code == "local":
            name = self.names.bind(op.result.uid, op.result.name or "regs")
            self.buffers[op.result.uid] = name
            out.append(pad + self.d.local_decl(self._ctype(op.attrs["elem"]), name, op.attrs["size"]))
        elif code in TILE_STATEMENTS:
            self._tile_stmt(op, out, pad)
        elif not self.plan.used(op.result.uid):  # an atomic whose old value nobody reads
            out.append(f"{pad}{self._value(op)};")
        else:
            value = self._value(op)
            name = self.names.bind(op.result.uid, op.result.name)
            out.append(f"{pad}const {self._ctype(op.result.type)} {name} = {value};")

    def _if(self, op: Op, out: list[str], depth: int, chained: bool = False) -> None:
        pad = INDENT * depth
        if not chained:
            self._comment(op, out, depth)
        cond = self.expr(op.operands[0])
        then_lines: list[str] = []
        self._block(op.regions[0], then_lines, depth + 1)
        else_block = op.regions[1]
        if not then_lines:
            else_lines: list[str] = []
            self._block(else_block, else_lines, depth + 1)
            if else_lines:
                out.append(f"{pad}if ({E.unary('!', cond)}) {{")
                out.extend(else_lines)
                out.append(pad + "}")
            return
        out.append(f"{pad}if ({cond}) {{")
        out.extend(then_lines)
        printed = [o for o in else_block.ops if self._prints(o)]
        if len(printed) == 1 and printed[0].opcode == "if":
            # `else if`: the else branch is a single `if` (constants and inlined values print nothing)
            nested: list[str] = []
            self.names.enter()
            self._if(printed[0], nested, depth, chained=True)
            self.names.leave()
            out.append(f"{pad}}} else {nested[0].lstrip()}")
            out.extend(nested[1:])
            return
        else_lines = []
        self._block(else_block, else_lines, depth + 1)
        if else_lines:
            out.append(pad + "} else {")
            out.extend(else_lines)
        out.append(pad + "}")

    def _for(self, op: Op, out: list[str], depth: int) -> None:
        pad = INDENT * depth
        lo, hi, step = op.operands
        body = op.regions[0]
        iv = body.args[0]
        start, stop = self.expr(lo), self.expr(hi)
        self.names.enter()  # the index belongs to the loop's scope
        name = self.names.bind(iv.uid, iv.name or "i")
        iv_e = Expr(name)
        step_const = const_value(step)
        if step_const is not None:
            cond = E.binary("<" if step_const > 0 else ">", iv_e, stop)
            if step_const in (1, -1):
                advance = ("++" if step_const > 0 else "--") + name
            else:
                advance = f"{name} {'+' if step_const > 0 else '-'}= {abs(step_const)}"
        else:
            s = self.expr(step)
            # the direction is the step's sign, as in Python's range (the IR evaluates it once; so does this)
            cond = E.ternary(E.binary(">", s, Expr("0")), E.binary("<", iv_e, stop), E.binary(">", iv_e, stop))
            advance = f"{name} += {s}"
        if op.attrs.get("unroll"):
            out.append(pad + self.d.unroll_pragma)
        out.append(f"{pad}for ({self._ctype(t.i32)} {name} = {start}; {cond}; {advance}) {{")
        self._block(body, out, depth + 1, scoped=False)
        self.names.leave()
        out.append(pad + "}")

    def _while(self, op: Op, out: list[str], depth: int) -> None:
        pad = INDENT * depth
        cond_block, body = op.regions
        cond_lines: list[str] = []
        self.names.enter()  # the condition's statements share the loop body's scope
        self._block(cond_block, cond_lines, depth + 1, scoped=False)
        cond = self.expr(cond_block.ops[-1].operands[0])
        if cond_lines:
            # the condition needs statements: evaluate them at the top of every iteration (`continue` lands there)
            out.append(pad + "while (true) {")
            out.extend(cond_lines)
            out.append(f"{pad}{INDENT}if ({E.unary('!', cond)}) {{")
            out.append(f"{pad}{INDENT * 2}break;")
            out.append(f"{pad}{INDENT}}}")
        else:
            out.append(f"{pad}while ({cond}) {{")
        self._block(body, out, depth + 1, scoped=False)
        self.names.leave()
        out.append(pad + "}")

    # -- expressions ----------------------------------------------------------------------------------------------

    def expr(self, v: Value) -> Expr:
        owner = v.owner
        if isinstance(owner, Op) and owner.opcode == "const":
            return self._literal(owner.attrs["value"], v.type)
        name = self.names.get(v.uid)
        if name is not None:
            return Expr(name)
        if isinstance(owner, Op) and v.uid in self.plan.inline:
            return self._value(owner)
        raise CompileError(f"internal error in the {self.d.name} emitter: {v!r} used before it is defined",
                           owner.loc if isinstance(owner, Op) else self.k.loc)

    def _ctype(self, st: t.ScalarType | t.FragType) -> str:
        if isinstance(st, t.FragType):
            name, needs = self._matrix(None).ctype(st)
            self._need(needs)
            return name
        self.features.snippets.update(self.d.type_needs.get(st.name, ()))
        return self.d.types[st.name]

    def _need(self, needs: tuple[str, ...]) -> None:
        self.features.snippets.update(needs)

    def _thread(self, code: str, axis: int | None) -> Expr:
        if self.element_of is not None and code == "program_id":
            return Expr("iron_pid")
        if code == "num_threads":  # the exact grid, a kernel parameter on every C-family target
            return Expr(self.d.grid_params[axis])
        tpl = self.d.thread.get(code)
        if tpl is None:
            raise CompileError(f"unsupported op '{code}' on backend {self.d.name}", self.k.loc)
        self._need(tpl.needs)
        self.features.thread_ops.add(code)
        return tpl(axis=self.d.axes[axis] if axis is not None else "")

    def _literal(self, value: bool | int | float, st: t.ScalarType) -> Expr:
        if st.is_bool:
            return Expr("true" if value else "false")
        if st == t.u32:
            return Expr(f"{int(value) & 0xFFFFFFFF}u")
        wide = wide_literal(self.d, value, st)
        if wide is not None:
            return wide
        if st.is_int:
            v = (int(value) + 2**31) % 2**32 - 2**31
            if v == -(2**31):
                return Expr("(-2147483647 - 1)")
            return Expr(str(v), E.UNARY if v < 0 else E.PRIMARY)
        value = float(value)
        if st.is_half:
            self._ctype(st)
            bits = int(np.array(value, dtype=st.np_dtype).view(np.uint16))
            return self.d.half_literal(st, bits, value)
        if not np.isfinite(value):
            return self.d.literal_float_special(value)
        text = str(np.float32(value))
        if not any(c in text for c in ".e"):
            text += ".0"
        return Expr(text + "f", E.UNARY if text.startswith("-") else E.PRIMARY)

    def _f32(self, v: Value) -> Expr:
        """``v`` as an f32 expression (halves are converted; everything else is returned as is)."""
        e = self.expr(v)
        return self._convert(e, v.type, t.f32) if v.type.is_half else e

    def _rounded(self, e: Expr, st: t.ScalarType) -> Expr:
        """An f32 result ``e`` in the op's result type ``st`` (rounded once when it is a half type)."""
        return self._convert(e, t.f32, st) if st.is_half else e

    def _unsigned(self, e: Expr, st: t.ScalarType) -> Expr:
        """An i32 expression reinterpreted as unsigned (for wrapping arithmetic)."""
        if e.unsigned is not None:
            return e.unsigned
        if e.prec == E.PRIMARY and e.text.isdigit():
            return Expr(e.text + "u")
        return E.cast(self._ctype(t.u32), e)

    def _wrapping(self, op: str, a: Expr, b: Expr | None, st: t.ScalarType = t.i32) -> Expr:
        """i32 (or i64) arithmetic that wraps: computed on unsigned values, converted back to the signed type."""
        if st == t.i64:
            return wrapping64(self.d, self._ctype(t.i64), self._ctype(t.u64), op, a, b)
        u32 = t.u32
        if b is None:
            inner = E.binary("-", Expr("0u"), self._unsigned(a, u32))
        else:
            inner = E.binary(op, self._unsigned(a, u32), self._unsigned(b, u32) if op != "<<" else b)
        out = E.cast(self._ctype(t.i32), inner)
        return Expr(out.text, out.prec, inner)

    def _convert(self, e: Expr, src: t.ScalarType, dst: t.ScalarType) -> Expr:
        """Iron's ``cast`` semantics: see ``iron.interp.semantics``."""
        if src == dst:
            return e
        if dst.is_bool:
            if src.is_half:
                e, src = self._convert(e, src, t.f32), t.f32
            return E.binary("!=", e, self._literal(0, src))
        tpl = self.d.conversions.get((src.name, dst.name))
        if tpl is not None:
            self._need(tpl.needs)
            return tpl(e)
        if src.is_half or (dst.is_half and (src.is_bool or src.is_wide)):
            # i64/u64/f64 -> f16/bf16 round through f32 (Iron's definition: see iron.interp.semantics)
            # halves convert exactly to f32; bool -> f32 is exact: one rounding at most, at the end
            mid = self._convert(e, src, t.f32)
            return self._convert(mid, t.f32, dst)
        if dst.is_half or (src.is_float and dst.is_int):
            raise CompileError(f"unsupported cast {src} -> {dst} on backend {self.d.name}", self.k.loc)
        if src == t.i32 and dst == t.u32 and e.unsigned is not None:
            return e.unsigned
        return E.cast(self._ctype(dst), e)

    def _value(self, op: Op) -> Expr:  # noqa: C901 - one dispatch over the op table reads best flat
        code = op.opcode
        rt = op.result.type
        xs = op.operands
        if code in O.BINARY_ARITH:
            if rt.is_float:
                a, b = self._f32(xs[0]), self._f32(xs[1])
                c = const_value(xs[1])
                if code == "div" and c is not None and float(c) == 0.0:
                    # x / ±0 is exactly x * ±inf in IEEE (NaN for 0 and NaN, signed inf otherwise); C compilers
                    # warn on a literal division by zero, so the product is what gets printed
                    inf = self._literal(math.copysign(math.inf, float(c)), t.f32)
                    return self._rounded(E.binary("*", a, inf), rt)
                e = E.binary(_ARITH_OPS[code], a, b) if code in _ARITH_OPS else E.call(self._math(op), a, b)
                return self._rounded(e, rt)
            a, b = self.expr(xs[0]), self.expr(xs[1])
            if code in ("add", "sub", "mul") and rt in (t.i32, t.i64):
                return self._wrapping(_ARITH_OPS[code], a, b, rt)
            if code in ("min", "max") or (code in ("div", "rem") and rt in (t.i32, t.i64)
                                          and const_value(xs[1]) in (None, -1)):
                return self._int_math(code, rt, op, a, b)  # i32 / and % wrap at INT_MIN / -1
            return E.binary(_ARITH_OPS.get(code, "%"), a, b)
        if code in _BIT_OPS:
            return E.binary(_BIT_OPS[code], self.expr(xs[0]), self.expr(xs[1]))
        if code in ("shl", "shr"):
            a, c = self.expr(xs[0]), const_value(xs[1])  # the amount masked to 0 .. bits - 1
            amount = self._literal(c & (rt.bits - 1), xs[1].type) if c is not None else \
                E.binary("&", self.expr(xs[1]), self._literal(rt.bits - 1, xs[1].type))
            if code == "shl" and rt in (t.i32, t.i64):
                return self._wrapping("<<", a, amount, rt)
            return E.binary("<<" if code == "shl" else ">>", a, amount)
        if code in _COMPARE_OPS:
            return E.binary(_COMPARE_OPS[code], self._f32(xs[0]), self._f32(xs[1]))
        if code == "neg":
            if rt.is_float:
                return self._rounded(E.unary("-", self._f32(xs[0])), rt)
            a = self.expr(xs[0])
            if rt in (t.i32, t.i64):
                return self._wrapping("-", a, None, rt)
            return E.binary("-", self.d.literal_int64(0, False) if rt == t.u64 else Expr("0u"), a)
        if code == "not":
            return E.unary("!" if rt.is_bool else "~", self.expr(xs[0]))
        if code in O.FLOAT_MATH or code == "fma" or (code == "abs" and rt.is_float):
            return self._rounded(E.call(self._math(op), *(self._f32(x) for x in xs)), rt)
        if code == "abs":
            return self._int_math("abs", rt, op, self.expr(xs[0]))
        if code in O.INT_BITS:  # issue 15 point 3: the dialect's int_math table spells them per type
            return self._int_math(code, rt, op, *(self.expr(x) for x in xs))
        if code == "bitcast":
            return self._int_math(f"bitcast:{xs[0].type.name}", rt, op, self.expr(xs[0]))
        if code == "select":
            return E.ternary(self.expr(xs[0]), self.expr(xs[1]), self.expr(xs[2]))
        if code == "cast":
            return self._convert(self.expr(xs[0]), xs[0].type, rt)
        if code in O.THREAD_AXIS or code in ("simd_lane", "simd_group", "simd_size"):
            return self._thread(code, op.attrs.get("axis"))
        if code == "load":
            ref = self.lane_refs.get(xs[0].uid)
            return Expr(ref) if ref is not None else E.index(self.buffers[xs[0].uid], self.expr(xs[1]))
        if code == "get":
            return Expr(self.vars[xs[0].uid])
        if code in O.SIMD_REDUCE:
            value = self._f32(xs[0]) if rt.is_half else self.expr(xs[0])
            vtype = t.f32 if rt.is_half else rt
            return self._rounded(self._simd(op, vtype, value), rt)
        if code in O.SIMD_EXCHANGE:
            return self._simd(op, rt, self.expr(xs[0]), self.expr(xs[1]))
        if code in O.SIMD_VOTE or code in O.SIMD_SCAN:
            return self._simd(op, xs[0].type, self.expr(xs[0]))
        if code in O.ATOMICS:
            return self._atomic(op)
        if code in O.MATRIX:
            return self._matrix_value(op)
        raise CompileError(f"unsupported op '{code}' on backend {self.d.name}", op.loc)


__all__ = ["KernelSource", "emit_source", "sanitize"]
