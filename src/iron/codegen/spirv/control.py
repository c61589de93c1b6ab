"""Structured control flow of the SPIR-V emitter: ``if``, ``for`` and ``while`` as selection and loop constructs
with their merge blocks (a mixin of ``SpirvEmitter``, emit.py).
"""

from __future__ import annotations

from ...ir.core import Op


class ControlFlow:
    """``if``/``for``/``while``; ``self.loops`` holds the (merge, continue) labels that ``break``/``continue`` take."""

    def _if(self, op: Op) -> None:
        b = self.b
        cond = self.value(op.operands[0])
        then_block, else_block = op.regions
        then_l, merge = b.new_id(), b.new_id()
        else_l = b.new_id() if else_block.ops else merge
        self.stmt("OpSelectionMerge", merge, 0)
        self.stmt("OpBranchConditional", cond, then_l, else_l)
        self.label(then_l)
        self.region(then_block)
        self.branch(merge)
        if else_block.ops:
            self.label(else_l)
            self.region(else_block)
            self.branch(merge)
        self.label(merge)

    def _loop(self, check, body_fn) -> None:
        """header (OpLoopMerge) -> check block (``check()`` returns the condition) -> body -> continue -> header."""
        b = self.b
        header, check_l, body_l, cont, merge = (b.new_id() for _ in range(5))
        self.branch(header)
        self.label(header)
        self.stmt("OpLoopMerge", merge, cont, 0)
        self.stmt("OpBranch", check_l)
        self.label(check_l)
        cond = check()
        self.stmt("OpBranchConditional", cond, body_l, merge)
        self.label(body_l)
        self.loops.append((merge, cont))
        step = body_fn()
        self.loops.pop()
        self.branch(cont)
        self.label(cont)
        if step is not None:
            step()
        self.branch(header)
        self.label(merge)

    def _for(self, op: Op) -> None:
        b = self.b
        i32 = b.type_int(32, True)
        bool_t = b.type_bool()
        lo, hi, step = (self.value(v) for v in op.operands)
        iv_var = b.new_id()
        self.fvars.append(b.instruction("OpVariable", b.type_pointer("Function", i32), iv_var,
                                        b.enum("StorageClass", "Function")))
        self.stmt("OpStore", iv_var, lo)
        step_owner = op.operands[2].owner
        step_const = step_owner.attrs["value"] if isinstance(step_owner, Op) and step_owner.opcode == "const" else None

        def check() -> int:
            iv = self.inst("OpLoad", i32, iv_var)
            up = self.inst("OpSLessThan", bool_t, iv, hi)
            down = self.inst("OpSGreaterThan", bool_t, iv, hi)
            if step_const is not None:  # Python range: the step's sign picks the direction
                return up if step_const > 0 else down
            positive = self.inst("OpSGreaterThan", bool_t, step, b.const_int(0))
            return self.inst("OpSelect", bool_t, positive, up, down)

        def body():
            body_block = op.regions[0]
            self.vals[body_block.args[0].uid] = self.inst("OpLoad", i32, iv_var)
            self.region(body_block)
            return lambda: self.stmt("OpStore", iv_var,
                                     self.inst("OpIAdd", i32, self.inst("OpLoad", i32, iv_var), step))

        self._loop(check, body)

    def _while(self, op: Op) -> None:
        cond_block, body_block = op.regions

        def check() -> int:
            for inner in cond_block.ops[:-1]:
                self.op(inner)
            return self.value(cond_block.ops[-1].operands[0])

        def body():
            self.region(body_block)

        self._loop(check, body)
