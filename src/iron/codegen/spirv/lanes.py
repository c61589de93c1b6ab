"""The lanes module of the SPIR-V emitter (see ``emit_spirv``): invocation t runs the kernel for ``width``
consecutive elements of axis 0, moving the lane buffers' elements as 16-byte words (a mixin of ``SpirvEmitter``,
emit.py).
"""

from __future__ import annotations


class LanesOps:
    """The lanes module's body and the 16-byte views of its lane buffers."""

    def _lanes_body(self) -> None:
        """The lanes module's body (see ``emit_spirv``): invocation t runs the kernel for elements first = width * t
        ... first + width - 1 of axis 0. When all of them are inside the grid, the lane buffers' elements are
        loaded first (independent loads, all in flight), each element's body works on registers, and the stores
        follow; at the grid's tail each element below n0 runs the plain body."""
        b, plan = self.b, self.lanes
        i32, bool_t, w = b.type_int(32, True), b.type_bool(), plan.width
        pid = self.thread("program_id", 0)
        first = self.inst("OpIMul", i32, pid, b.const_int(w))
        self._guard(first)
        index = [first] + [self.inst("OpIAdd", i32, first, b.const_int(k)) for k in range(1, w)]
        full = self.inst("OpSLessThanEqual", bool_t, self.inst("OpIAdd", i32, first, b.const_int(w)), self.grid[0])
        whole, tail, end = b.new_id(), b.new_id(), b.new_id()
        self.stmt("OpSelectionMerge", end, 0)
        self.stmt("OpBranchConditional", full, whole, tail)
        self.label(whole)
        regs: dict[int, list[int]] = {}
        for i in plan.lanes:
            p = self.k.params[i]
            ptr = b.type_pointer("Function", self.reg_type(p.type.elem))
            regs[p.value.uid] = vids = [b.new_id() for _ in range(w)]
            for vid in vids:
                self.fvars.append(b.instruction("OpVariable", ptr, vid, b.enum("StorageClass", "Function")))
        for i in sorted(plan.preload):
            uid = self.k.params[i].value.uid
            for k, value in enumerate(self._load_words(uid, pid, w)):
                self.stmt("OpStore", regs[uid][k], value)
        for k in range(w):
            self.pid0, self.lane_regs = index[k], {uid: vids[k] for uid, vids in regs.items()}
            self.region(self.k.body)
        self.lane_regs = None
        for i in sorted(plan.writeback):
            p = self.k.params[i]
            values = [self.inst("OpLoad", self.reg_type(p.type.elem), regs[p.value.uid][k]) for k in range(w)]
            self._store_words(p.value.uid, pid, values)
        self.branch(end)
        self.label(tail)
        for k in range(w):
            inside, after = b.new_id(), b.new_id()
            below = self.inst("OpSLessThan", bool_t, index[k], self.grid[0])
            self.stmt("OpSelectionMerge", after, 0)
            self.stmt("OpBranchConditional", below, inside, after)
            self.label(inside)
            self.pid0 = index[k]
            self.region(self.k.body)
            self.branch(after)
            self.label(after)
        self.pid0 = None
        self.branch(end)
        self.label(end)

    def _vector_view(self, binding: int, readonly: bool, name: str) -> int:
        """A second variable on a lane buffer's binding, typed as 16-byte words (``uvec4[]``): the lanes module moves
        each invocation's elements with whole-word loads and stores through it (the driver need not merge scalar
        accesses). The body never touches a lane buffer through both views, so they need not be declared Aliased."""
        b = self.b
        u32 = b.type_int(32, False)
        block = self._buffer_block(b.type_vector(u32, 4), 16, readonly)
        var = b.global_variable("StorageBuffer", block)
        b.decorate(var, "DescriptorSet", 0)
        b.decorate(var, "Binding", binding)
        b.name(var, f"{name}_x16")
        return var

    def _view_pointer(self, uid: int, pid: int, chunk: int, chunks: int) -> int:
        """Pointer to 16-byte word ``pid * chunks + chunk`` of a lane buffer's view."""
        b = self.b
        i32, u32 = b.type_int(32, True), b.type_int(32, False)
        at = self.inst("OpIAdd", i32, self.inst("OpIMul", i32, pid, b.const_int(chunks)), b.const_int(chunk))
        ptr_t = b.type_pointer("StorageBuffer", b.type_vector(u32, 4))
        return self.inst("OpAccessChain", ptr_t, self.views[uid], b.const_int(0), at)

    def _load_words(self, uid: int, pid: int, w: int) -> list[int]:
        """The ``w`` register values of an invocation's elements of a lane buffer, loaded as 16-byte words."""
        b, m = self.b, self.mem[uid]
        chunks = w * self._storage_size(m) // 16
        uvec4 = b.type_vector(b.type_int(32, False), 4)
        values = []
        for c in range(chunks):
            word4 = self.inst("OpLoad", uvec4, self._view_pointer(uid, pid, c, chunks))
            values += self._decode_words(m, word4)
        return values

    def _store_words(self, uid: int, pid: int, values: list[int]) -> None:
        """Store an invocation's register values of a lane buffer as 16-byte words."""
        m = self.mem[uid]
        chunks = len(values) * self._storage_size(m) // 16
        per = len(values) // chunks
        for c in range(chunks):
            word4 = self._encode_words(m, values[c * per:(c + 1) * per])
            self.stmt("OpStore", self._view_pointer(uid, pid, c, chunks), word4)
