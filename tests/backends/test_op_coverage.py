"""The one op table (``iron.ir.ops``) against everything derived from it: every float math op has interpreter
semantics and, on every backend, a spelling or an explicit "unsupported"; the builtins the front-end, ``iron.lang``
and docs/dsl.md know are exactly the table's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import iron
from iron import CompileError
from iron.codegen import emit_msl, emit_source
from iron.codegen.cfamily.cuda import CUDA, CudaDialect
from iron.codegen.cfamily.hip import HipDialect
from iron.codegen.cfamily.msl import MslDialect
from iron.codegen.spirv.values import SPIRV_MATH, SPIRV_UNSUPPORTED
from iron.frontend.exprs import PURE_CALLS
from iron.frontend.lower_builtins import ARITY
from iron.interp.semantics import pure_fn
from iron.ir import ops as O
from iron.ir import types as t
from iron.lang import doc_table

DIALECTS = {"cuda": CudaDialect, "hip": HipDialect, "msl": MslDialect}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "dsl.md"


@pytest.mark.parametrize("name", sorted(O.FLOAT_MATH))
def test_every_float_math_op_has_interpreter_semantics(name):
    row = O.OPS[name]
    assert row.ref is not None and row.doc and row.result in ("float", "bool")
    for rt in (t.f32, t.f16, t.bf16):
        out_t = t.bool_ if row.result == "bool" else rt
        fn = pure_fn(name, [rt] * row.n_operands, out_t)
        args = [np.asarray(np.linspace(0.25, 2.0, 5), dtype=rt.np_dtype)] * row.n_operands
        with np.errstate(all="ignore"):
            assert fn(*args).dtype == out_t.np_dtype


@pytest.mark.parametrize("backend", sorted(DIALECTS))
def test_every_dialect_spells_or_refuses_each_float_math_op(backend):
    d = DIALECTS[backend]
    spelled = set(d.math) & O.FLOAT_MATH
    missing = O.FLOAT_MATH - spelled - d.unsupported_ops
    assert not missing, f"{backend} neither spells nor declares unsupported: {sorted(missing)}"
    assert not spelled & d.unsupported_ops, f"{backend} both spells and refuses {sorted(spelled & d.unsupported_ops)}"
    for op in spelled:  # every snippet a spelling needs exists
        assert all(need in d.snippets for need in d.math_needs.get(op, ())), op


def test_spirv_spells_or_refuses_each_float_math_op():
    assert O.FLOAT_MATH - SPIRV_MATH - SPIRV_UNSUPPORTED == set()
    assert not SPIRV_MATH & SPIRV_UNSUPPORTED and SPIRV_MATH <= O.FLOAT_MATH


class _NoAtan2(CudaDialect):
    name = "cuda-without-atan2"
    math = {k: v for k, v in CudaDialect.math.items() if k != "atan2"}
    unsupported_ops = frozenset({"atan2"})


@iron.kernel
def _uses_atan2(x: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):
    i = iron.program_id(0)
    out[i] = iron.atan2(x[i], 2.0)


def test_a_declared_unsupported_op_is_a_located_compile_error():
    kernel = _uses_atan2.variant(iron.f32).kernel
    assert "atan2f" in emit_source(kernel, CUDA).source
    with pytest.raises(CompileError, match=r"unsupported op 'atan2' on backend cuda-without-atan2 \(declared") as e:
        emit_source(kernel, _NoAtan2())
    assert "test_op_coverage.py:" in str(e.value) and "iron.atan2(x[i], 2.0)" in str(e.value)
    assert "atan2" in emit_msl(kernel).source


def test_builtins_are_the_tables():
    names = list(O.BUILTINS)
    assert list(iron.BUILTINS) == names and all(hasattr(iron, n) for n in names)
    assert ARITY == {n: b.arity for n, b in O.BUILTINS.items()}
    assert PURE_CALLS == {n for n, b in O.BUILTINS.items() if b.pure}
    assert O.FLOAT_MATH <= set(names)
    for b in O.BUILTINS.values():
        assert b.op is None or b.op in O.OPS, b.name


def test_docs_builtin_table_is_generated_from_the_op_table():
    text = DOCS.read_text()
    assert doc_table.rewrite(text) == text, "docs/dsl.md is stale: run python -m iron.lang.doc_table docs/dsl.md"
