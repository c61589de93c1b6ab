"""Printing of the tile-level constructs (register-array vector copies, asynchronous copies, matrix fragments):
a mixin of the C-family printer (``printer._Printer``), which provides ``expr``, ``buffers``, ``d`` (the dialect),
``k`` (the kernel) and ``_need``. Spellings come from the dialect: ``vector_types``/``vector_pointer``,
``async_copy``/``async_sync`` and ``matrix`` (``cuda_matrix.CudaMatrix``)."""

from __future__ import annotations

from ...errors import CompileError
from ...ir import ops as O
from ...ir import types as t
from ...ir.core import Kernel, Op
from ...ir.rewrite import const_value
from ..tile_copy import expand_tile_copies
from ..warpgroup import expand_warpgroup_mma, has_warpgroup, plan_wgmma, swizzle_shared
from .expr import Expr

#: statements of the tile-level constructs (``_tile_stmt``)
TILE_STATEMENTS = frozenset({"vcopy", "async_copy", "async_commit", "async_wait", "frag_store", "wg_wait",
                             "tile_load", "tile_commit", "tile_wait"})
#: ops that write an operand array through the generic proxy (then wgmma needs the proxy fence before barriers)
_GENERIC_WRITES = frozenset({"store", "vcopy", "async_copy", "atomic_add", "atomic_max", "frag_store"})


def lower_tile_constructs(kernel: Kernel, dialect):
    """(kernel, dialect) for printing: warpgroup_mma as wgmma where the dialect has it and the kernel qualifies
    (operand arrays swizzled), else as fragment ops; tile copies on the copy engine where the dialect has one
    (``cuda_tma``), else expanded (``codegen/tile_copy.py``). A wgmma kernel whose operand arrays only the copy
    engine writes gets the dialect without the proxy fence before barriers (``without_fence``)."""
    if not has_warpgroup(kernel):
        return expand_tile_copies(kernel), dialect
    layouts = plan_wgmma(kernel) if getattr(dialect.matrix, "wgmma", False) else None
    if not layouts:
        return expand_warpgroup_mma(expand_tile_copies(kernel)), dialect
    keep = frozenset()
    if getattr(dialect, "tma", False):
        from .cuda_tma import tma_loads

        keep = tma_loads(kernel, layouts)
    kernel = expand_tile_copies(kernel, keep)
    layouts = plan_wgmma(kernel)
    kernel = swizzle_shared(kernel, layouts)
    final = plan_wgmma(kernel) or {}
    generic = any(op.opcode in _GENERIC_WRITES and op.operands[0].uid in final for op in kernel.walk())
    if keep and not generic and hasattr(dialect, "without_fence"):
        dialect = dialect.without_fence()
    elif generic:
        mark_proxy_fences(kernel.body, frozenset(final), False)
    return kernel, dialect


def mark_proxy_fences(block, operands: frozenset[int], dirty: bool) -> bool:
    """Mark each barrier with ``attrs["proxy_fence"]``: whether an ordinary write to a wgmma operand array (uids
    ``operands``) may precede it since the last fenced barrier (the fence makes such writes visible to the tensor
    cores; elsewhere the barrier goes without it). A dataflow over the structured IR: both arms of an ``if``, a loop
    body twice (its end flows to its start); a loop with a jump is treated as written throughout. Returns the
    state at the block's end."""
    for op in block.ops:
        if op.opcode == "barrier":
            op.attrs["proxy_fence"] = op.attrs.get("proxy_fence", False) or dirty
            dirty = False
        elif op.opcode in _GENERIC_WRITES and op.operands[0].uid in operands:
            dirty = True
        elif op.opcode == "if":
            dirty = any([mark_proxy_fences(r, operands, dirty) for r in op.regions])
        elif op.regions:  # for / while: the body may run again after its end, or not at all
            writes = any(x.opcode in _GENERIC_WRITES and x.operands[0].uid in operands for r in op.regions
                         for x in r.walk())
            jumps = any(x.opcode in ("break", "continue", "return") for r in op.regions for x in r.walk())
            start = dirty or (writes and jumps)
            for _ in range(2):
                end = False
                for r in op.regions:
                    end = mark_proxy_fences(r, operands, start) or end
                start = start or end
            dirty = start
    return dirty


def shared_layout(kernel: Kernel, dialect) -> tuple[dict[int, int], int]:
    """Every shared array's byte offset, in program order, aligned to the dialect's ``shared_align`` (16; 1024 for
    wgmma's swizzled tiles), and the dynamic buffer's size: the arrays live at these offsets in one dynamic buffer
    when they exceed the dialect's static limit (0: static arrays)."""
    offsets: dict[int, int] = {}
    total = 0
    align = getattr(dialect, "shared_align", 16)
    for op in kernel.walk():
        if op.opcode == "shared" and op.attrs.get("size") is not None:  # run-time sized ones go after (_shared)
            total = -(-total // align) * align
            offsets[op.result.uid] = total
            total += op.attrs["elem"].itemsize * op.attrs["size"]
    dynamic = total + getattr(dialect, "dynamic_shared_pad", 0) if total > dialect.max_static_shared else 0
    return offsets, dynamic


class TilePrinting:
    def _matrix(self, op: Op | None):
        if self.d.matrix is None:
            raise CompileError(f"unsupported op '{op.opcode if op else 'mma'}' on backend {self.d.name} (matrix "
                               "fragments have no spelling there yet)", op.loc if op else self.k.loc)
        return self.d.matrix

    def _matrix_value(self, op: Op) -> Expr:
        m, code, xs = self._matrix(op), op.opcode, op.operands
        if code in O.FRAG_LAYOUT:
            e, needs = m.elementwise_op(op, [self.expr(x) for x in xs], self.d.math)
            needs = (*needs, *self.d.math_needs.get(op.attrs.get("fn"), ()))  # the math's own helper (fast_exp2)
        elif code == "frag_zero":
            e, needs = m.zero(op.result.type)
        elif code == "wg_mma":
            a, ai, b, bi, ldb, acc = xs
            in_regs = not hasattr(a.type, "space")  # A from the SIMD groups' accumulator fragments
            e, needs = m.wg_mma(b.type.elem, self.expr(a) if in_regs else self.buffers[a.uid], self.expr(ai),
                                self.buffers[b.uid], self.expr(bi), const_value(ldb), op.attrs.get("trans_b", False),
                                self.expr(acc), acc.type.cols // 16, in_regs=in_regs)
        elif code == "mma_q4":
            args = [self.buffers[x.uid] if isinstance(x.type, t.BufferType) else self.expr(x) for x in xs]
            e, needs = m.mma_q4(xs[0].type.elem, args, op.result.type.cols, op.attrs["group"])
        elif code == "mv_q4":
            args = [self.buffers[x.uid] if isinstance(x.type, t.BufferType) else self.expr(x) for x in xs]
            e, needs = m.mv_q4(xs[6].type.elem, args, op.result.type.rows, op.attrs["group"])
        elif code == "frag_load":
            e, needs = m.load(op.result.type, self.buffers[xs[0].uid], xs[0].type.space, self.expr(xs[1]),
                              self.expr(xs[2]), op.attrs.get("trans", False))
        else:
            e, needs = m.mma(xs[0].type.elem, *(self.expr(x) for x in xs))
        self._need(needs)
        return e

    def _tile_stmt(self, op: Op, out: list[str], pad: str) -> None:
        """vcopy, async_copy/commit/wait and frag_store: statements of the tile-level constructs."""
        code = op.opcode
        spelled: tuple[str, tuple[str, ...]] | None = None
        if code == "frag_store":
            buf, idx, ld, acc, rows, cols = op.operands
            swizzle = {"swizzle": True} if op.attrs.get("swizzle") else {}  # a wgmma A array (warpgroup.py)
            spelled = self._matrix(op).store(buf.type.elem, self.buffers[buf.uid], self.expr(idx), self.expr(ld),
                                             self.expr(acc), self.expr(rows), self.expr(cols), **swizzle)
        elif code == "async_copy":
            dst, di, src, si = op.operands
            nbytes = op.attrs["n"] * dst.type.elem.itemsize
            spelled = self.d.async_copy(f"{self.buffers[dst.uid]}[{self.expr(di)}]",
                                        f"{self.buffers[src.uid]}[{self.expr(si)}]", nbytes)
        elif code == "wg_wait":
            spelled = self._matrix(op).wg_wait(op.attrs["pending"])
        elif code in ("tile_load", "tile_commit", "tile_wait"):
            out.extend(pad + line for line in self._tma_stmt(op).split("\n"))
            return
        elif code in ("async_commit", "async_wait"):
            spelled = self.d.async_sync(code, op.attrs.get("pending"))
            if spelled is None:
                return
        if spelled is None:  # vcopy, or an async_copy the target does synchronously
            out.append(pad + self._vcopy(op))
            return
        self._need(spelled[1])
        out.append(pad + spelled[0])

    def _tma_init(self) -> None:
        """The kernel's descriptors and each tile_load's (``cuda_tma``), where the dialect runs them on the copy
        engine: every tile_load still in the kernel then qualifies (``lower_tile_constructs`` expanded the rest)."""
        self.tmaps, self.tmap_of = [], {}
        if getattr(self.d, "tma", False) and any(op.opcode == "tile_load" for op in self.k.walk()):
            from .cuda_tma import tensor_maps

            names = {p.value.uid: p.name for p in self.k.params}
            self.tile_layouts = plan_wgmma(self.k)
            self.tmaps, self.tmap_of = tensor_maps(self.k, lambda v: names[v.uid], self.tile_layouts)

    def _tma_prologue(self, out: list[str], pad: str) -> None:
        if not self.tmaps:
            return
        self._need(("tma",))
        out.append(pad + "// tile copies: one mbarrier per stage, the first thread issues the copies (cuda_tma.py)")
        out.append(pad + "__shared__ __align__(8) unsigned long long iron_tma_bar[8];")
        out.append(pad + "const bool iron_tma_leader = (threadIdx.x | threadIdx.y | threadIdx.z) == 0u;")
        out.append(pad + "unsigned iron_tma_phase = 0u;")
        out.append(pad + "if (iron_tma_leader) {")
        out.extend(pad + f"    iron_tma_acquire({spec.param});" for spec in self.tmaps)
        out.append(pad + "}")
        out.append(pad + "iron_tma_init(iron_tma_bar, iron_tma_leader);")

    def _tma_stmt(self, op: Op) -> str:
        if not self.tmaps:
            raise CompileError(f"{op.opcode} has no spelling on {self.d.name} here (tile copies are expanded before "
                               "printing)", op.loc or self.k.loc)
        from .cuda_tma import load_statement

        if op.opcode == "tile_commit":
            return f"if (iron_tma_leader) iron_tma_arrive(&iron_tma_bar[{self.expr(op.operands[0])}]);"
        if op.opcode == "tile_wait":
            return f"iron_tma_wait(iron_tma_bar, iron_tma_phase, {self.expr(op.operands[0])});"
        dst, j, _, _, _, _, bstride, batch, row, col, stage = op.operands
        return load_statement(op, self.tmap_of[id(op)], self.buffers[dst.uid], str(self.expr(j)),
                              [str(self.expr(x)) for x in (batch, row, col, stage, bstride)],
                              self.tile_layouts[dst.uid])

    def _vcopy(self, op: Op) -> str:
        """n elements in one access: the bytes move as one vector type (uint4 for 16), both sides naturally aligned
        (global/shared by the index rule, local arrays by their 16-byte alignment)."""
        dst, di, src, si = op.operands
        d = f"{self.buffers[dst.uid]}[{self.expr(di)}]"
        s = f"{self.buffers[src.uid]}[{self.expr(si)}]"
        n = op.attrs["n"]
        if n == 1:
            return f"{d} = {s};"
        vtype = self.d.vector_types[n * dst.type.elem.itemsize]
        to = self.d.vector_pointer(vtype, dst.type.space, False)
        frm = self.d.vector_pointer(vtype, src.type.space, True)
        return f"*{to}(&{d}) = *{frm}(&{s});"

    def _shared(self, op: Op, out: list[str], pad: str) -> None:
        elem, size = op.attrs["elem"], op.attrs["size"]
        name = self.names.bind(op.result.uid, op.result.name or "shared")
        self.buffers[op.result.uid] = name
        if size is None:
            self._runtime_shared(op, name, out, pad)
            return
        self.shared_bytes += elem.itemsize * size
        if self.d.shared_as_params and not self.dynamic_shared:
            self.features.shared_params.append((self._ctype(elem), name, elem.itemsize * size))
            return
        if not self.dynamic_shared:
            out.append(pad + self.d.shared_decl(self._ctype(elem), name, size))
            return
        limit = self.d.max_dynamic_shared
        if self.dynamic_shared > limit:
            raise CompileError(
                f"kernel '{self.k.name}' uses {self.dynamic_shared} bytes of shared memory, over the "
                f"{limit // 1024} KiB that {self.d.name} allows per group", op.loc or self.k.loc,
                "use fewer or smaller shared() arrays")
        if op.result.uid == next(iter(self.shared_offsets)):
            out.append(pad + self.d.dynamic_shared_decl())
        out.append(pad + self.d.dynamic_shared_view(self._ctype(elem), name, self.shared_offsets[op.result.uid]))

    def _runtime_shared(self, op: Op, name: str, out: list[str], pad: str) -> None:
        """``shared(dtype, n)`` with ``n`` a kernel parameter: a threadgroup parameter the host sizes (Metal), else a
        view of the dynamic buffer after every compile-time array, 16-byte aligned; the launcher adds the lengths'
        bytes to the dynamic size (``KernelSource.runtime_shared``)."""
        elem, param = op.attrs["elem"], op.attrs["length"]
        ctype = self._ctype(elem)
        self.runtime_shared.append((name, param, elem.itemsize))
        if self.d.shared_as_params:
            self.features.shared_params.append((ctype, name, 0))
            return
        if self.d.max_dynamic_shared == 0:
            raise CompileError(f"shared arrays sized at launch are not supported on {self.d.name}", op.loc)
        if not self.dynamic_shared and len(self.runtime_shared) == 1:  # no compile-time array declared it
            out.append(pad + self.d.dynamic_shared_decl())
        length = self.expr(self.k.param(param).value)
        offset = self.runtime_offset or str(self.static_end if self.dynamic_shared else 0)
        out.append(pad + self.d.dynamic_shared_view(ctype, name, offset))
        self.runtime_offset = f"{offset} + (((unsigned)({length}) * {elem.itemsize}u + 15u) & ~15u)"
