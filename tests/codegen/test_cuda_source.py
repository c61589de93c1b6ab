"""The CUDA source the C-family printer writes: ABI, naming, inlining safety, errors. Its golden files are one row
of tests/backends/test_golden_source.py."""

from __future__ import annotations

import re

import pytest

import iron
from iron import CompileError, Tensor, f32, program_id, shared
from iron.codegen import CUDA, CudaDialect, emit_cuda, nvrtc
from iron.codegen.cfamily import expr as E
from iron.ir import Block, Builder, Kernel, Param, Value
from iron.ir import types as t
from iron.std.softmax import softmax
from iron.std.unary import iron_exp

from . import kernels as K

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

def test_emission_is_reproducible():
    """Same IR, same bytes: across two emissions and across two independent compiles of the variant."""
    first = emit_cuda(softmax.variant(iron.bf16, (128,)).kernel).source
    again = emit_cuda(softmax.variant(iron.bf16, (128,)).kernel).source
    fresh = emit_cuda(softmax._compile(iron.bf16, (128,)).kernel).source
    assert first == again == fresh


def test_seed_kernel_shape():
    src = emit_cuda(iron_exp.variant(iron.f32).kernel)
    assert 'extern "C" __global__ void iron_exp(\n    const float* __restrict__ a,\n    float* __restrict__ out,\n' \
           "    int iron_n0,\n    int iron_n1,\n    int iron_n2) {" in src.source
    assert "out[idx] = expf(a[idx]);" in src.source
    assert "#include" not in src.source


def test_abi_metadata():
    src = emit_cuda(softmax.variant(iron.f16, (256,)).kernel)
    assert src.entry == "softmax" and src.kernel == "softmax" and src.dialect == "cuda"
    got = [(p.name, p.kind, p.ctype, p.readonly, p.source, p.axis) for p in src.params]
    assert got == [
        ("x", "buffer", "iron_f16", True, "x", None),
        ("out", "buffer", "iron_f16", False, "out", None),
        ("ncols", "scalar", "int", False, "ncols", None),
        ("iron_n0", "grid", "int", False, "", 0),
        ("iron_n1", "grid", "int", False, "", 1),
        ("iron_n2", "grid", "int", False, "", 2),
    ]
    assert src.shared_bytes == 256 * 4
    assert "const iron_f16* __restrict__ x" in src.source and "iron_f16* __restrict__ out" in src.source
    assert "f16" in src.snippets


def test_half_storage_structs_only_when_used():
    assert "struct iron_bf16" in emit_cuda(iron_exp.variant(iron.bf16).kernel).source
    f32_src = emit_cuda(iron_exp.variant(iron.f32).kernel).source
    assert "struct" not in f32_src and "asm" not in f32_src


def _kernel(*params: tuple[str, t.Type], name: str = "k") -> tuple[Kernel, Builder, dict[str, Value]]:
    ps, vals = [], {}
    for pname, ptype in params:
        v = Value(ptype, pname)
        ps.append(Param(pname, "buffer" if isinstance(ptype, t.BufferType) else "scalar", v))
        vals[pname] = v
    body = Block()
    return Kernel(name, ps, body), Builder(body), vals


def test_names_are_valid_unique_and_not_reserved():
    hints = ["int", "threadIdx", "m.1", "_and", "2x", "iron_n0", "expf", "a b", "__x", "min", "iron_simd_sum", "main"]
    k, b, p = _kernel(("out", t.BufferType(t.f32)), name="float")
    i = b.thread("program_id", 0)
    values = [b.op("add", [b.const(1.0, t.f32), b.const(float(n), t.f32)], t.f32, name=h).result
              for n, h in enumerate(hints)]
    acc = values[0]
    for v in values[1:]:
        acc = b.op("add", [acc, v], t.f32).result
    b.store(p["out"], i, acc)
    src = emit_cuda(k, vectorize=False)
    assert src.entry == "float_" and IDENT.match(src.entry)
    declared = [n for n in re.findall(r"const float (\w+) = ", src.source) if not re.match(r"t\d+$", n)]
    assert len(declared) == len(hints) == len(set(declared))
    reserved = CUDA.reserved_names()
    assert all(IDENT.match(n) and n not in reserved and not n.startswith("_") for n in declared), declared
    assert {"m_1", "x", "v_2x", "and_", "a_b"} <= set(declared)


def test_sibling_scopes_reuse_names_without_shadowing():
    text = emit_cuda(softmax.variant(iron.f32, (256,)).kernel).source
    assert text.count("for (int c = tid;") == 3  # three sibling loops, each with the author's `c`


def test_load_is_not_moved_past_a_store_or_barrier():
    k, b, p = _kernel(("x", t.BufferType(t.f32)), ("out", t.BufferType(t.f32)))
    i = b.thread("program_id", 0)
    old = b.load(p["x"], i)
    b.store(p["x"], i, b.const(1.0, t.f32))
    b.store(p["out"], i, b.op("mul", [old, b.const(2.0, t.f32)], t.f32).result)
    text = emit_cuda(k, line_comments=False).source
    assert text.index("const float t0 = x[") < text.index("] = 1.0f;") < text.index("] = t0 * 2.0f;"), text


def test_get_is_not_moved_past_a_set():
    k, b, p = _kernel(("out", t.BufferType(t.i32)))
    i = b.thread("program_id", 0)
    v = b.var(t.i32, "acc")
    b.set(v, b.const(5, t.i32))
    before = b.get(v, "acc")
    b.set(v, b.const(7, t.i32))
    b.store(p["out"], i, before)
    text = emit_cuda(k, line_comments=False).source
    assert re.search(r"const int acc_1 = acc;\n\s*acc = 7;\n\s*out\[.*\] = acc_1;", text), text


def test_for_bounds_are_evaluated_once():
    k, b, p = _kernel(("out", t.BufferType(t.i32)), ("n", t.i32))
    hi = b.op("mul", [p["n"], b.const(2, t.i32)], t.i32).result
    _, body = b.for_(b.const(0, t.i32), hi, b.const(1, t.i32), "j")
    with b.at(body):
        b.store(p["out"], body.args[0], body.args[0])
    text = emit_cuda(k, line_comments=False).source
    assert "const int t0 = (int)((unsigned)n * 2u);" in text and "for (int j = 0; j < t0; ++j)" in text


def test_i32_arithmetic_wraps_through_unsigned():
    text = emit_cuda(K.control_flow.variant(iron.f32).kernel).source
    assert "k = (int)(3u * (unsigned)k + 1u);" in text


def test_shared_memory_over_the_static_limit_moves_to_the_dynamic_buffer():
    """Over 48 KiB of shared() arrays: CUDA needs them in dynamic shared memory (the runtime passes the size and
    opts the kernel in); each array becomes an aligned view into one extern buffer, and NVRTC accepts it."""

    @iron.kernel
    def big_tiles(out: Tensor[f32]):
        small = shared(iron.i32, 3)
        big = shared(f32, 16384)
        small[0] = 1
        big[16383] = 2.0
        out[program_id(0)] = big[16383] + small[0]

    src = emit_cuda(big_tiles.variant(None).kernel)
    assert src.dynamic_shared_bytes == 16 + 16384 * 4  # the f32 array starts at the next 16-byte boundary
    assert "extern __shared__ __align__(16) unsigned char iron_dynamic_shared[];" in src.source
    assert "reinterpret_cast<float*>(iron_dynamic_shared + 16)" in src.source
    assert "__shared__ int" not in src.source
    if nvrtc.unavailable_reason() is None:
        assert nvrtc.compile_cuda(src, arch="sm_90")


def test_shared_memory_over_the_device_limit_is_a_located_error():
    @iron.kernel
    def too_big(out: Tensor[f32]):
        big = shared(f32, 60000)
        big[0] = 1.0
        out[program_id(0)] = big[0]

    with pytest.raises(CompileError, match="240000 bytes of shared memory, over the 227 KiB") as e:
        emit_cuda(too_big.variant(None).kernel)
    assert e.value.loc is not None and "big = shared(f32, 60000)" in str(e.value)


def test_a_dialect_without_an_op_says_unsupported():
    class NoAtomics(CudaDialect):
        name = "noatomics"
        atomics = {}

    from iron.codegen import emit_source

    with pytest.raises(CompileError, match="unsupported op 'atomic_add' on i32 on backend noatomics"):
        emit_source(K.control_flow.variant(iron.f32).kernel, NoAtomics())


@pytest.mark.parametrize("value,type,text", [
    (0.1, t.f32, "0.1f"), (1e20, t.f32, "1e+20f"), (-0.0, t.f32, "-0.0f"), (256.0, t.f32, "256.0f"),
    (float("inf"), t.f32, "__int_as_float(0x7f800000)"), (float("-inf"), t.f32, "__int_as_float(0xff800000)"),
    (-(2**31), t.i32, "(-2147483647 - 1)"), (-5, t.i32, "-5"), (2**32 - 1, t.u32, "4294967295u"),
    (True, t.bool_, "true"), (1.0, t.bf16, "iron_bf16{0x3f80}"), (-2.0, t.f16, "iron_f16{0xc000}"),
])
def test_literals(value, type, text):
    k, b, p = _kernel(("out", t.BufferType(type if type != t.bool_ else t.i32)))
    c = b.const(value, type)
    if type == t.bool_:
        c = b.op("cast", [c], t.i32).result
    b.store(p["out"], b.thread("program_id", 0), c)
    assert f"] = {text if type != t.bool_ else '(int)' + text};" in emit_cuda(k).source


def test_expression_parentheses():
    a, b, c = E.Expr("a"), E.Expr("b"), E.Expr("c")
    assert E.binary("*", E.binary("+", a, b), c).text == "(a + b) * c"
    assert E.binary("-", a, E.binary("-", b, c)).text == "a - (b - c)"
    assert E.binary("-", E.binary("-", a, b), c).text == "a - b - c"
    assert E.binary("<<", E.binary("+", a, b), c).text == "(a + b) << c"
    assert E.binary("==", E.binary("<", a, b), c).text == "(a < b) == c"
    assert E.unary("-", E.Expr("-1", E.UNARY)).text == "-(-1)"
    assert E.ternary(E.binary("<", a, b), a, b).text == "(a < b) ? a : b"


def test_prelude_snippets_come_after_what_they_need():
    order = list(CUDA.snippets)
    for name, snippet in CUDA.snippets.items():
        for need in snippet.needs:
            assert order.index(need) < order.index(name), f"{name} needs {need}, defined after it"


def test_vector_entry_for_elementwise_kernels_only():
    from iron.codegen import VectorEntry

    assert emit_cuda(iron_exp.variant(iron.f32).kernel).vector == VectorEntry("iron_exp_x4", 4, ("a", "out"))
    assert emit_cuda(iron_exp.variant(iron.bf16).kernel).vector == VectorEntry("iron_exp_x8", 8, ("a", "out"))
    assert emit_cuda(softmax.variant(iron.f32, (256,)).kernel).vector is None  # groups, barriers, shared memory
    assert emit_cuda(K.warp_tile.variant(iron.f32, (256,)).kernel).vector is None
    assert emit_cuda(iron_exp.variant(iron.f32).kernel, vectorize=False).vector is None
    # control_flow stores out[i] only after `if i >= n: return`: out may be shorter than the grid, so no vectors
    assert emit_cuda(K.control_flow.variant(iron.f16).kernel).vector is None


def test_vector_entry_keeps_unstored_elements():
    @iron.kernel
    def clamp_negatives(x: Tensor[f32], out: Tensor[f32]):
        i = program_id(0)
        v = x[i]
        if v < 0.0:
            out[i] = 0.0

    src = emit_cuda(clamp_negatives.variant(None).kernel)
    assert src.vector is not None and src.vector.buffers == ("x",)  # out is only stored behind a condition

    @iron.kernel
    def bump(x: Tensor[f32], out: Tensor[f32]):
        i = program_id(0)
        out[i] = x[i]
        if x[i] < 0.0:
            out[i] = 0.0

    src = emit_cuda(bump.variant(None).kernel)
    assert src.vector.buffers == ("x", "out")
    assert "reinterpret_cast<uint4*>(out_vec)[0] =" not in src.source  # stored on every path: not read first
    assert "reinterpret_cast<uint4*>(out + iron_first)[0] = reinterpret_cast<const uint4*>(out_vec)[0];" in src.source


def test_vector_entry_moves_wider_buffers_in_several_chunks():
    @iron.kernel
    def widen(x: Tensor[iron.f16], out: Tensor[f32]):
        i = program_id(0)
        out[i] = x[i]

    src = emit_cuda(widen.variant(None).kernel).source
    assert "reinterpret_cast<uint4*>(x_vec)[0] = reinterpret_cast<const uint4*>(x + iron_first)[0];" in src
    assert "reinterpret_cast<uint4*>(out + iron_first)[1] = reinterpret_cast<const uint4*>(out_vec)[1];" in src
    assert "widen_x8(" in src
