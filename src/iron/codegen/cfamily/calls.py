"""The C-family printer's calls into the dialect's tables: float math functions, integer min/max/abs/div/rem, SIMD
helpers and atomics (a mixin of ``printer._Printer``, which provides ``d``, ``k``, ``buffers``, ``expr``, ``_need``,
``_ctype`` and the mask of divergent SIMD ops)."""

from __future__ import annotations

from ...errors import CompileError
from ...ir import types as t
from ...ir.core import Op
from . import expr as E
from .expr import Expr


class DialectCalls:
    def _math(self, op: Op) -> str:
        fn = (self.d.math64 if op.result.type == t.f64 else self.d.math).get(op.opcode)
        if fn is None:
            why = "declared unsupported" if op.opcode in self.d.unsupported_ops else "no spelling"
            raise CompileError(f"unsupported op '{op.opcode}' on backend {self.d.name} ({why})", op.loc,
                               hint="run the kernel on a backend that has it (iron.interp runs every op)")
        self._need(self.d.math_needs.get(op.opcode, ()))
        return fn

    def _int_math(self, code: str, rt: t.ScalarType, op: Op, *args: Expr) -> Expr:
        tpl = self.d.int_math.get(f"{code}:{rt.name}") or self.d.int_math.get(code)
        if tpl is None:
            raise CompileError(f"unsupported op '{code}' on {rt} on backend {self.d.name}", op.loc)
        self._need(tpl.needs)
        return tpl(*args)

    def _simd(self, op: Op, vtype: t.ScalarType, *args: Expr) -> Expr:
        fn = self.d.simd.get(op.opcode)
        snippet = f"{fn}:{vtype.name}"
        if fn is None or snippet not in self.d.snippets:
            raise CompileError(f"unsupported op '{op.opcode}' on {vtype} on backend {self.d.name}", op.loc)
        self._need((snippet,))
        self._ctype(vtype)
        if self.d.simd_masks is not None:
            args = (*args, Expr("iron_live" if id(op) in self.convergent else self.d.simd_masks.divergent))
        return E.call(fn, *args)

    def _atomic(self, op: Op) -> Expr:
        buf, idx, val, *new = op.operands  # atomic_cas: val is the expected value, new the one stored
        tpl = self.d.atomics.get((op.opcode, buf.type.elem.name))
        if tpl is None:
            raise CompileError(f"unsupported op '{op.opcode}' on {buf.type.elem} on backend {self.d.name}", op.loc)
        self._need(tpl.needs)
        ptr = f"&{self.buffers[buf.uid]}[{self.expr(idx)}]"
        extra = {"new": self.expr(new[0])} if new else {}
        return tpl(ptr=ptr, val=self.expr(val), space=buf.type.space, **extra)
