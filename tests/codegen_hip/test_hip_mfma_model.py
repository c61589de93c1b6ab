"""The MFMA layout of Iron's HIP fragments (``iron.codegen.cfamily.hip_matrix.LAYOUT``, from which the C helpers are
printed) against AMD's own description of the instructions, on the CPU (there is no AMD GPU here):

- the layout equals the register layout AMD's matrix instruction calculator prints for V_MFMA_F32_16X16X16F16 and
  V_MFMA_F32_16X16X16BF16_1K (data/mfma_16x16x16_layout.csv);
- a wavefront model: each lane's registers are filled by ``LAYOUT`` (as the printed loads do), the instruction runs
  as the calculator defines it (``mfma_reference.mfma``), the result is stored by ``LAYOUT``; the matrix that comes
  out equals A @ B + C computed in float64 by NumPy, for one instruction and for MT x NT tiles over several k steps.

tests/codegen_hip/test_hip_mfma_host.py runs the printed C helpers themselves the same way.
"""

from __future__ import annotations

import numpy as np
import pytest

from iron.codegen.cfamily.hip_matrix import HOLDER, LANES, LAYOUT, element, holder

from .mfma_reference import INSTRUCTIONS, calculator_layout, mfma, random_bits, value

MATRIX = {"a": "A", "b": "B", "acc": "D"}


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_layout_is_the_one_amds_calculator_prints(elem):
    calc = calculator_layout(INSTRUCTIONS[elem])
    for role, name in MATRIX.items():
        placed = {element(role, lane, i): (lane, i) for lane in range(LANES) for i in range(4)}
        assert len(placed) == 256  # every element of the tile exactly once
        assert placed == calc[name], f"{role}: Iron's layout differs from AMD's {name} table"


def test_holder_inverts_the_layout_with_an_item_every_reader_agrees_on():
    """Without MFMA, ``mma`` fetches A[r][k] and B[k][c] with shuffles of one register per k: the item holding
    them must depend on k alone."""
    for role in HOLDER:
        for row in range(16):
            for col in range(16):
                assert element(role, *holder(role, row, col)) == (row, col)
    for k in range(16):
        assert len({holder("a", r, k)[1] for r in range(16)}) == 1
        assert len({holder("b", k, c)[1] for c in range(16)}) == 1


def _registers(role: str, tile: np.ndarray, layout=None) -> np.ndarray:
    """A wavefront's registers [64, 4] for one 16 x 16 tile, filled as the printed loads fill them."""
    where = layout or (lambda lane, i: element(role, lane, i))
    regs = np.full((LANES, 4), np.nan)
    for lane in range(LANES):
        for i in range(4):
            regs[lane, i] = tile[where(lane, i)]
    return regs


def _write(out: np.ndarray, regs: np.ndarray, r0: int = 0, c0: int = 0) -> None:
    for lane in range(LANES):
        for i in range(4):
            r, c = element("acc", lane, i)
            out[r0 + r, c0 + c] = regs[lane, i]


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_one_wavefront_computes_a_times_b_plus_c(elem):
    rng = np.random.default_rng()
    a, b = value(random_bits(rng, elem, (16, 16)), elem), value(random_bits(rng, elem, (16, 16)), elem)
    c = rng.uniform(-1, 1, (16, 16)).astype(np.float32).astype(np.float64)
    d = mfma(INSTRUCTIONS[elem], _registers("a", a), _registers("b", b), _registers("acc", c))
    out = np.full((16, 16), np.nan)
    _write(out, d)
    np.testing.assert_allclose(out, a @ b + c, rtol=0, atol=1e-12)


@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_a_wrong_layout_is_caught(elem):
    """The model is sensitive to the layout: A's registers filled transposed give a wrong product."""
    rng = np.random.default_rng()
    a, b = value(random_bits(rng, elem, (16, 16)), elem), value(random_bits(rng, elem, (16, 16)), elem)
    transposed = _registers("a", a, lambda lane, i: element("a", lane, i)[::-1])
    d = mfma(INSTRUCTIONS[elem], transposed, _registers("b", b), np.zeros((LANES, 4)))
    out = np.full((16, 16), np.nan)
    _write(out, d)
    assert not np.allclose(out, a @ b, atol=1e-3)


@pytest.mark.parametrize("elem,mt,nt,ksteps", [("f16", 2, 3, 3), ("bf16", 3, 1, 2)])
def test_fragment_tiles_accumulate_over_k(elem, mt, nt, ksteps):
    """acc = mma(a, b, acc) over k steps on MT x NT tiles, as the printed ``iron_mfma_mma_*`` loops: accumulator
    tile t * NT + n takes A tile t and B tile n."""
    rng = np.random.default_rng()
    kk = 16 * ksteps
    a = value(random_bits(rng, elem, (16 * mt, kk)), elem)
    b = value(random_bits(rng, elem, (kk, 16 * nt)), elem)
    acc = [np.zeros((LANES, 4)) for _ in range(mt * nt)]
    for s in range(ksteps):
        ks = slice(16 * s, 16 * s + 16)
        ra = [_registers("a", a[16 * t:16 * t + 16, ks]) for t in range(mt)]
        rb = [_registers("b", b[ks, 16 * n:16 * n + 16]) for n in range(nt)]
        for t in range(mt):
            for n in range(nt):
                acc[t * nt + n] = mfma(INSTRUCTIONS[elem], ra[t], rb[n], acc[t * nt + n])
    out = np.full((16 * mt, 16 * nt), np.nan)
    for t in range(mt):
        for n in range(nt):
            _write(out, acc[t * nt + n], 16 * t, 16 * n)
    np.testing.assert_allclose(out, a @ b, rtol=0, atol=1e-12)


def test_layout_text_is_what_the_c_helpers_print():
    """The C helpers are printed from ``LAYOUT`` and ``HOLDER`` (so the checks above are checks of the code)."""
    from iron.codegen.cfamily.hip_matrix import mfma_snippets

    snippets = mfma_snippets()
    load_a, load_b = snippets["mfma_load_a_f16"].text, snippets["mfma_load_b_bf16"].text
    assert f"r = 16 * t + ({LAYOUT['a'][0]}), c = {LAYOUT['a'][1]};" in load_a
    assert f"r = {LAYOUT['b'][0]}, c = 16 * t + ({LAYOUT['b'][1]});" in load_b
    store = snippets["mfma_store_f32"].text
    assert f"r = 16 * t + ({LAYOUT['acc'][0]}), c = 16 * n + ({LAYOUT['acc'][1]});" in store
    assert f"const int r = {LAYOUT['acc'][0]}, c = {LAYOUT['acc'][1]};" in snippets["mfma_mma_f16"].text
