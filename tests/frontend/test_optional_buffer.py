"""Issue 15, item 6: optional buffers. A parameter annotated ``Tensor[...] | None`` (or ``Optional[Tensor[...]]``,
optionally ``= None``) may be passed None: that selects the variant without it, in which ``x is None`` is a
compile-time constant and any unguarded use is a located CompileError. Kernels in optional_kernels.py, run on every
backend of the ``backend`` fixture against float64 NumPy oracles on fresh random inputs, outputs poisoned first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import iron
from iron import CompileError, LaunchError
from iron.cli.main import cli

from ..backends.capabilities import caps
from . import optional_kernels as K
from .sources import HEADER, module_from_source

N = 1000  # not a multiple of the group: the tail threads are guarded
NP = {"f32": np.float32, "f16": np.float16}
TOL = {"f32": 1e-6, "f16": 2e-3}
SPEC = "tests/frontend/optional_kernels.py"
REPO = Path(__file__).resolve().parents[2]


def _inputs(rng, dtype: str, k: int) -> list[np.ndarray]:
    return [rng.standard_normal(N).astype(NP[dtype]) for _ in range(k)]


def _poisoned(dtype: str) -> np.ndarray:
    return np.full(N, np.nan, NP[dtype])


def _check(out: np.ndarray, want: np.ndarray, dtype: str) -> None:
    got = out.astype(np.float64)
    assert not np.isnan(got).any(), "a thread left its output unwritten"
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_add_bias_both_variants(backend, dtype, rng):
    if dtype not in caps(backend).dtypes:
        pytest.skip(f"{backend} does not run {dtype}")
    x, b = _inputs(rng, dtype, 2)
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    out = _poisoned(dtype)
    K.add_bias[N](x, None, out, N, backend=backend)
    _check(out, x64, dtype)
    out = _poisoned(dtype)
    K.add_bias[N](x, b, out, N, backend=backend)
    _check(out, x64 + b64, dtype)
    out = _poisoned(dtype)  # and back: the launch cache holds both variants
    K.add_bias[N](x, bias=None, out=out, n=N, backend=backend)
    _check(out, x64, dtype)


@pytest.mark.parametrize("with_scale", [False, True])
@pytest.mark.parametrize("with_shift", [False, True])
def test_two_optional_buffers_all_combinations(backend, rng, with_scale, with_shift):
    x, scale, shift = _inputs(rng, "f32", 3)
    want = x.astype(np.float64)
    if with_scale:
        want = want * scale.astype(np.float64)  # through a helper that tests `s is None`
    if with_shift:
        want = want + shift.astype(np.float64)
    out = _poisoned("f32")
    K.affine[N](x, scale if with_scale else None, shift if with_shift else None, out, N, backend=backend)
    _check(out, want, "f32")


def test_optional_buffer_omitted_by_default(backend, rng):
    x, res = _inputs(rng, "f32", 2)
    x64, r64 = x.astype(np.float64), res.astype(np.float64)
    out = _poisoned("f32")
    K.residual[N](x, out, N, backend=backend)  # left out: its default, None
    _check(out, 2 * x64, "f32")
    out = _poisoned("f32")
    K.residual[N](x, out, N, res=res, backend=backend)
    _check(out, 2 * x64 + r64, "f32")
    out = _poisoned("f32")
    K.residual[N](x, out, N, res, backend=backend)
    _check(out, 2 * x64 + r64, "f32")
    out = _poisoned("f32")
    K.residual[N](x, out, N, None, backend=backend)
    _check(out, 2 * x64, "f32")


def test_early_return_when_absent(backend, rng):
    x, gate = _inputs(rng, "f32", 2)
    out = _poisoned("f32")
    K.early_return[N](x, None, out, N, backend=backend)  # the code after `if gate is None: ... return` is not compiled
    _check(out, x.astype(np.float64), "f32")
    out = _poisoned("f32")
    K.early_return[N](x, gate, out, N, backend=backend)
    _check(out, x.astype(np.float64) * gate.astype(np.float64), "f32")


def test_t_resolves_from_the_other_buffers(rng):
    x = rng.standard_normal(N).astype(np.float16)
    out = _poisoned("f16")
    K.add_bias[N](x, None, out, N, backend="cpu")
    _check(out, x.astype(np.float64), "f16")
    assert (np.float16, (), ("bias",)) in {(dt.np_dtype.type, c, a) for dt, c, a in
                                           (k[:3] for k in K.add_bias._variants)}


# -- the variants are distinct compiled kernels ----------------------------------------------------------------------


def test_absent_variant_has_no_such_parameter():
    absent, present = K.add_bias.ir(bias=None), K.add_bias.ir()
    head_absent, head_present = absent.splitlines()[0], present.splitlines()[0]
    assert head_absent.startswith("kernel @add_bias[T=f32, bias=None](") and "%bias" not in absent
    assert "%bias: buffer<f32> readonly" in head_present and "load %bias" in present
    assert K.add_bias.variant(iron.f32, (), None, ("bias",)) is not K.add_bias.variant(iron.f32)
    both = K.affine.ir(dtype="f16", scale=None, shift=None)
    assert "%scale" not in both and "%shift" not in both and "[T=f16, scale=None, shift=None]" in both
    assert "%shift" in K.affine.ir(scale=None) and "%scale" not in K.affine.ir(scale=None)
    stages = K.add_bias.passes(bias=None)
    assert stages and all("%bias" not in text for _, text in stages)


@pytest.mark.parametrize("backend", ["cuda", "hip", "metal", "vulkan"])
def test_absent_variant_sources(backend):
    from iron.runtime import unavailable_reason

    try:
        absent, present = K.add_bias.source(backend, bias=None), K.add_bias.source(backend)
    except iron.IronError as e:
        pytest.skip(f"{backend}: {e} ({unavailable_reason(backend)})")
    assert absent != present
    if backend != "vulkan":  # C-family: the parameter is gone from the signature
        assert "bias" in present.split("{")[0] and "bias=None" in absent
        assert not re.search(r"\bbias\b(?!=None)", absent)


def test_ir_keyword_must_be_none():
    with pytest.raises(iron.IronError, match="bias= names an optional buffer"):
        K.add_bias.ir(bias=1)


def test_cli_inspect_and_build(monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(cli, ["inspect", f"{SPEC}:add_bias", "--ir"])
    assert result.exit_code == 0, result.output
    assert result.output == K.add_bias.ir()  # the CLI shows the variant with every optional buffer present
    result = CliRunner().invoke(cli, ["inspect", f"{SPEC}:add_bias", "--ir", "-D", "bias=None"])
    assert result.exit_code == 0, result.output
    assert result.output == K.add_bias.ir(bias=None) and "%bias" not in result.output
    out = tmp_path / "build"
    result = CliRunner().invoke(cli, ["build", f"{SPEC}:add_bias", "--backend", "cuda,vulkan", "--dtype", "f32",
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert {a["backend"] for a in manifest["artifacts"]} == {"cuda", "vulkan"}
    assert "bias" in (out / "add_bias_f32.cu").read_text()


# -- errors -----------------------------------------------------------------------------------------------------------

UNGUARDED = {
    "index": ("    out[i] = x[i] + bias[i]\n", "bias[i]"),
    "store": ("    bias[i] = x[i]\n", "bias[i] = x[i]"),
    "len": ("    out[i] = x[i] + len(bias)\n", "len(bias)"),
    "shape": ("    out[i] = x[i] + bias.shape[0]\n", "bias.shape[0]"),
    "atomic": ("    iron.atomic_add(bias, 0, x[i])\n", "bias"),
    "vload": ("    out[i] = iron.vload(bias, i, 4)[0]\n", "bias"),
    "alias": ("    b = bias\n    out[i] = b[i]\n", "b = bias"),
    "wrong_guard": ("    if bias is None:\n        out[i] = bias[i]\n", "out[i] = bias[i]"),
}


@pytest.mark.parametrize("case", sorted(UNGUARDED))
def test_unguarded_use_of_an_absent_buffer_is_located(tmp_path, case):
    body, line_text = UNGUARDED[case]
    mod = module_from_source(tmp_path, f"unguarded_{case}", HEADER + (
        "def k(x: iron.Tensor[iron.f32], bias: iron.Tensor[iron.f32] | None, out: iron.Tensor[iron.f32]):\n"
        "    i = iron.program_id(0)\n" + body))
    x, out = np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(CompileError) as info:
        mod.k[8](x, None, out, backend="cpu")
    text = str(info.value)
    assert re.search(rf"unguarded_{case}\.py:\d+:\d+: error: 'bias' is None in this variant of k", text), text
    assert line_text in text and "^" in text and "guard it with `if bias is not None:`" in text
    assert "Traceback" not in text and "iron/frontend" not in text


def test_absent_buffer_used_in_a_helper_is_located_there(tmp_path):
    mod = module_from_source(tmp_path, "helper_use", (
        "import iron\n\n\n@iron.func\ndef plus(v, b, i):\n    return v + b[i]\n\n\n@iron.kernel\n"
        "def k(x: iron.Tensor[iron.f32], bias: iron.Tensor[iron.f32] | None, out: iron.Tensor[iron.f32]):\n"
        "    i = iron.program_id(0)\n    out[i] = plus(x[i], bias, i)\n"))
    with pytest.raises(CompileError) as info:
        mod.k[8](np.zeros(8, np.float32), None, np.zeros(8, np.float32), backend="cpu")
    text = str(info.value)
    assert "helper_use.py:6:16: error: 'b' is None here (k was launched with bias=None)" in text, text
    assert "guard it with `if b is not None:`" in text


def test_none_to_a_non_optional_buffer_is_a_launch_error():
    x, out = np.zeros(8, np.float32), np.zeros(8, np.float32)
    with pytest.raises(LaunchError) as info:
        K.add_bias[8](None, None, out, 8, backend="cpu")
    text = str(info.value)
    assert "argument 'x' of add_bias is None, but 'x' is not an optional buffer" in text
    assert "test_optional_buffer.py" in text and "`x: Tensor[...] | None`" in text
    with pytest.raises(LaunchError, match="argument 'out' of add_bias is None"):
        K.add_bias[8](x, x, None, 8, backend="cpu")


def test_nothing_fixes_t(tmp_path):
    mod = module_from_source(tmp_path, "only_t", HEADER + (
        "def k(a: iron.Tensor[iron.T] | None, out: iron.Tensor[iron.f32]):\n"
        "    if a is not None:\n        out[iron.program_id(0)] = a[iron.program_id(0)]\n"))
    with pytest.raises(LaunchError, match=r"nothing fixes T: every Tensor\[T\] argument of k \(a\) is None"):
        mod.k[8](None, np.zeros(8, np.float32), backend="cpu")


def test_is_none_on_a_non_optional_buffer_is_refused(tmp_path):
    mod = module_from_source(tmp_path, "not_optional", HEADER + (
        "def k(x: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):\n"
        "    if x is not None:\n        out[iron.program_id(0)] = 1.0\n"))
    with pytest.raises(CompileError) as info:
        mod.k[8](np.zeros(8, np.float32), np.zeros(8, np.float32), backend="cpu")
    text = str(info.value)
    assert "not_optional.py:6:8: error: 'x' is not an optional buffer: it is never None" in text, text
    assert "annotate it `x: Tensor[...] | None`" in text


@pytest.mark.parametrize("test, message", [
    ("n is None", "`is None` tests an optional buffer parameter, not a value of type i32"),
    ("x is out", "`is` / `is not` only compare an optional buffer with None"),
    ("x is None is None", "`is` and `is not` only test an optional buffer against None"),
])
def test_other_is_comparisons_are_refused(tmp_path, test, message):
    mod = module_from_source(tmp_path, "other_is", HEADER + (
        "def k(x: iron.Tensor[iron.f32] | None, out: iron.Tensor[iron.f32], n: int):\n"
        f"    if {test}:\n        out[iron.program_id(0)] = 1.0\n"))
    with pytest.raises(CompileError, match=re.escape(message)):
        mod.k[8](None, np.zeros(8, np.float32), 8, backend="cpu")


@pytest.mark.parametrize("signature, message", [
    ("n: int | None", "only a buffer can be optional"),
    ("x: iron.Tensor[iron.f32] = None", "buffer parameter 'x' defaults to None but is not optional"),
    ("x: iron.Tensor[iron.f32] | None = 0", "kernel parameters cannot have default values"),
    ("n: int = 3", "kernel parameters cannot have default values"),
])
def test_annotation_errors(tmp_path, signature, message):
    with pytest.raises(CompileError, match=re.escape(message)):
        # a docstring of its own per case: the front-end caches a kernel's source per code object, and code objects
        # of the same text in two files compare equal (source.function_source)
        module_from_source(tmp_path, "bad_sig", HEADER + f"def k({signature}):\n    {signature!r}\n")


def test_postponed_and_optional_spellings(tmp_path):
    mod = module_from_source(tmp_path, "spellings", (
        "from __future__ import annotations\n\nfrom typing import Optional, Union\n\nimport iron\n"
        "from iron import T, Tensor\n\n\n@iron.kernel\n"
        "def k(a: Optional[Tensor[T]], b: None | Tensor[T], c: Union[Tensor[T], None], out: Tensor[T]):\n"
        "    i = iron.program_id(0)\n    v = 1.0\n"
        "    if a is not None:\n        v = v + a[i]\n"
        "    if b is not None:\n        v = v + b[i]\n"
        "    if c is not None:\n        v = v + c[i]\n"
        "    out[i] = v\n"))
    assert [p.optional for p in mod.k.params] == [True, True, True, False]
    a = np.arange(8, dtype=np.float32)
    out = np.full(8, np.nan, np.float32)
    mod.k[8](a, None, a, out, backend="cpu")
    np.testing.assert_array_equal(out, 1 + 2 * a)


# -- every compile-only target (NVRTC, hipRTC, spirv-val, clang against the Metal model) takes every variant ---------


def _optional_variants() -> list:
    """(case id, kernel, dtype, absent) for every combination of present and absent optional buffers."""
    cases = []
    for k in (K.add_bias, K.affine, K.residual, K.early_return):
        for mask in range(2 ** len(k.optional_names)):
            absent = tuple(n for j, n in enumerate(k.optional_names) if mask >> j & 1)
            for dt in k.dtypes or (None,):
                cases.append((f"{k.__name__}-{dt}-absent={'+'.join(absent) or 'none'}", k, dt, absent))
    return cases


@pytest.mark.parametrize("row_name", ["nvrtc-sm_90", "hiprtc-gfx90a", "hiprtc-gfx1030", "spirv-val",
                                      "spirv-val-lanes", "clang-metal-model"])
def test_every_variant_through_the_compile_targets(row_name):
    from ..backends.compile_targets import COMPILE_ROWS

    row = COMPILE_ROWS[row_name]
    reason = row.unavailable_reason()
    if reason:
        pytest.skip(reason)
    cases = _optional_variants()
    variants = {case: k.variant(dt, (), None, absent) for case, k, dt, absent in cases}
    assert len({id(v) for v in variants.values()}) == len(cases)  # each combination its own compiled kernel
    emitted = {case: row.emit(v) for case, v in variants.items()}
    results = row.build_all(emitted)
    for case, v in variants.items():
        if isinstance(results[case], Exception):
            raise results[case]
        row.check(case, v, emitted[case], results[case])
