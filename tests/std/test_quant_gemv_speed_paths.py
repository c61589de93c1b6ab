"""std/quant_gemv's two kernels against a float64 NumPy oracle (its own dequantization, not quant.unpack's) on every
backend: gemv_q (a group per rows, shared combine) and gemv_q_warp (a SIMD group per R rows; direct loads, NS = 0, or
NS-stage async copies) for bits 4/8, groups 32/64/128, f32/f16/bf16, at shapes where the rows are not a multiple of
the rows per group, K is one group, K spans steps with a partial last one, and K / GROUP is odd (2-byte scales: the
async pieces would not be aligned, so the direct loads run); outputs poisoned with NaN, fresh random inputs per
case. Then the configuration choice of launch_gemv_q (both kernels timed where a tuning table applies, gemv_q_warp's
default elsewhere; ``path`` and ``config`` force one), and the sm_90 resources (NVRTC) of every configuration
autotuning may time: no spills, no stack frame."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron.codegen.nvrtc import resource_report, unavailable_reason
from iron.std import quant as Q
from iron.std import quant_gemv as QV
from iron.std import quant_gemv_mma as QV_MMA
from iron.std import quant_gemv_mv as QV_MV
from iron.std import quant_gemv_xs as QV_XS
from iron.std.quant_gemv_mma import mma_ok

from ..frontend.test_kernels import as_dtype

CASES = [(bits, group) for bits in (4, 8) for group in (32, 64, 128)]
IDS = [f"q{b}g{g}" for b, g in CASES]
#: |y - oracle| <= TOL (1 + |oracle|): f32 sums of K terms; f16/bf16 the output's rounding (|y| ~ |x|)
TOL = {"f32": 2e-5, "f16": 4e-3, "bf16": 3e-2}
#: forced gemv_q_warp configurations (R, KV, WARPS, NS): each within 32 KiB of shared memory (every backend's limit)
WARP_CASES = [(4, 1, 1, 2), (8, 1, 2, 0), (16, 1, 1, 2), (3, 2, 1, 2), (8, 1, 1, 3), (1, 1, 2, 2), (8, 1, 1, 1),
              (3, 2, 2, 1), (4, 2, 2, 0)]
#: forced gemv_q4_xs_staged configurations (R, MOST, X8, NS): within 32 KiB of shared memory at the test shapes
STAGED = [(4, 16, 1, 3), (2, 16, 0, 2), (2, 16, 2, 4), (4, 1, 1, 3), (1, 2, 0, 5), (2, 16, 1, 4)]


def _oracle(p, s, b, x, bits, group):
    """y = W x in float64, W = s * q + b with q read from the packed words by index arithmetic."""
    k = p.shape[1] * 32 // bits
    cols = np.arange(k)
    words = p.astype(np.int64)[:, cols // (32 // bits)]
    q = (words >> (bits * (cols % (32 // bits)))) & ((1 << bits) - 1)
    deq = s.astype(np.float64)[:, cols // group] * q + b.astype(np.float64)[:, cols // group]
    return deq @ x.astype(np.float64)


def _case(rng, n, k, bits, group, dtype):
    w = rng.standard_normal((n, k)) / np.sqrt(k)
    p, s, b = Q.quantize(w, bits, group, as_dtype(np.zeros(1), dtype).dtype)
    x = as_dtype(rng.standard_normal(k), dtype)
    return p, s, b, x


def _run(backend, p, s, b, x, bits, group, dtype, **how):
    y = as_dtype(np.full(p.shape[0], np.nan), dtype)
    cfg = QV.launch_gemv_q(p, s, b, x, y, bits, group, backend, **how)
    want = _oracle(p, s, b, x, bits, group)
    err = np.abs(y.astype(np.float64) - want)
    assert np.all(err <= TOL[dtype] * (1 + np.abs(want))), f"{cfg}: max err {np.nanmax(err)}, NaN {np.isnan(err).sum()}"
    return cfg


@pytest.mark.parametrize("bits,group", CASES, ids=IDS)
def test_both_paths(backend, dtype, bits, group, rng):
    """37 rows (not a multiple of R or ROWS); K = 1408: 44 / 88 vectors, so one or two whole steps of a 32-wide SIMD
    group and a partial one; K / 128 = 11 is odd (f16/bf16: gemv_q_warp falls back to direct loads)."""
    p, s, b, x = _case(rng, 37, 1408, bits, group, dtype)
    for path in QV.PATHS:
        if path == "xs" and not QV_XS.xs_ok(bits, dtype):
            with pytest.raises(ValueError, match="the xs path needs"):
                _run(backend, p, s, b, x, bits, group, dtype, path=path)
            continue
        if path in ("mma", "mv") and not mma_ok(37, 1408, bits, dtype):
            with pytest.raises(ValueError, match=f"the {path} path needs"):
                _run(backend, p, s, b, x, bits, group, dtype, path=path)
            continue
        cfg = _run(backend, p, s, b, x, bits, group, dtype, path=path)
        assert cfg["PATH"] == path


@pytest.mark.parametrize("bits,group", [(4, 32), (8, 128)], ids=["q4g32", "q8g128"])
def test_one_group_per_row(backend, bits, group, rng):
    """K = GROUP (less than one step: most lanes clamp and skip), one row and five."""
    for n in (1, 5):
        p, s, b, x = _case(rng, n, group, bits, group, "f16")
        for path in ("group", "warp"):  # K < 128: not the mma path's
            _run(backend, p, s, b, x, bits, group, "f16", path=path)


@pytest.mark.parametrize("bits,group,dtype", [(4, 64, "bf16"), (8, 32, "f32")], ids=["q4g64-bf16", "q8g32-f32"])
def test_warp_configurations(backend, bits, group, dtype, rng):
    """Every forced shape of gemv_q_warp: R = 1, 3 (with KV = 2), 4, 8, 16 (37 rows: never a multiple), direct loads
    and 2- and 3-stage pipelines, one and two SIMD groups per group, over whole and partial steps."""
    p, s, b, x = _case(rng, 37, 2176 if bits == 4 else 1120, bits, group, dtype)  # 68 / 70 vectors a row
    for r, kv, warps, ns in WARP_CASES:
        cfg = {"PATH": "warp", "R": r, "KV": kv, "WARPS": warps, "NS": ns}
        assert _run(backend, p, s, b, x, bits, group, dtype, config=cfg) == cfg


@pytest.mark.parametrize("nvec", [96, 100])
def test_warp_register_prefetch_step_counts(backend, nvec, rng):
    """NS = 1 alternates two register buffers over pairs of steps: an odd number of whole steps (3 at 32 lanes) with
    and without a partial last one, and even ones (12 at lavapipe's 8 lanes), R 4 and 8."""
    p, s, b, x = _case(rng, 13, nvec * 32, 4, 64, "bf16")
    for r in (4, 8):
        cfg = {"PATH": "warp", "R": r, "KV": 1, "WARPS": 2, "NS": 1}
        assert _run(backend, p, s, b, x, 4, 64, "bf16", config=cfg) == cfg


@pytest.mark.parametrize("group,dtype", [(32, "bf16"), (64, "f16"), (128, "bf16")])
def test_mma_configurations(backend, group, dtype, rng):
    """Every gemv_q4_mma configuration CUDA may time, forced: K = 1408 (11 slabs: WARPS SIMD groups of 3 or 2 slabs,
    some idle at 8, steps of U and a tail), 37 rows (the last block shifted back: 21..36 or 5..36), 16 (one block)
    and 70 (64-row blocks: 6..69), direct loads and 2- to 4-stage async copies (groups 32 and 64), on every backend
    (mma_q4's scalar fallback off NVIDIA)."""
    for n in (37, 16, 70):
        p, s, b, x = _case(rng, n, 1408, 4, group, dtype)
        for nt, warps, u, ns in QV_MMA.TUNING["cuda"]:
            if 16 * nt > n or (ns and group > 64):
                continue
            cfg = {"PATH": "mma", "NT": nt, "WARPS": warps, "U": u, "NS": ns}
            assert _run(backend, p, s, b, x, 4, group, dtype, config=cfg) == cfg


@pytest.mark.parametrize("group,dtype", [(32, "bf16"), (64, "f16"), (128, "bf16")])
def test_mv_configurations(backend, group, dtype, rng):
    """Every gemv_q4_mv configuration of its table, forced: K = 1408 (11 slabs split over 4 or 8 SIMD groups, steps
    of U and a tail), 37 rows (the last block shifted back), 16 (one block) and 70, direct loads and 2- to 4-stage
    async copies (groups 32 and 64), on every backend (mv_q4's scalar fallback off NVIDIA)."""
    for n in (37, 16, 70):
        p, s, b, x = _case(rng, n, 1408, 4, group, dtype)
        for mt, warps, u, ns in QV_MV.TUNING["cuda"]:
            if 16 * mt > n or (ns and group > 64):
                continue
            cfg = {"PATH": "mv", "MT": mt, "WARPS": warps, "U": u, "NS": ns}
            assert _run(backend, p, s, b, x, 4, group, dtype, config=cfg) == cfg
    p, s, b, x = _case(rng, 40, 1408, 8, group, dtype)
    with pytest.raises(ValueError, match="needs 4 bits"):
        QV.launch_gemv_q(p, s, b, x, np.zeros(40, x.dtype), 8, group, "cpu", config={"PATH": "mv", "MT": 1,
                                                                                      "WARPS": 4, "U": 2, "NS": 0})


@pytest.mark.parametrize("group,dtype", [(32, "bf16"), (64, "f16"), (128, "bf16")])
def test_xs_configurations(backend, group, dtype, rng):
    """Every gemv_q4_xs configuration of its table, four more (fewer SIMD groups, more vectors a lane) and the
    staged kernel's (async copies NS - 1 blocks ahead), forced, each at one of the three groups: K = 1408 (44 vectors:
    SIMD groups with idle lanes at 32 lanes), 2176 (68) and 256 (one SIMD group, most lanes idle), rows that fill
    no super-block, part of one and several (37: strided over the groups, the last one partial)."""
    every = QV_XS.TUNING["cuda"] + [(4, 1, 0), (2, 2, 0), (4, 1, 1), (1, 2, 1)]
    mine = every[[32, 64, 128].index(group)::3]  # each configuration at one of the three groups (CI's time)
    mine += STAGED[group // 64::2] if group < 128 else []  # K / 128 is odd at two of the shapes: refused
    for n, k in ((37, 1408), (5, 2176), (70, 256), (16, 2176)):
        p, s, b, x = _case(rng, n, k, 4, group, dtype)
        for row in mine:
            cfg = dict(zip(("R", "MOST", "X8", "NS"), row), PATH="xs")
            assert _run(backend, p, s, b, x, 4, group, dtype, config=cfg) == cfg
    p, s, b, x = _case(rng, 8, 256, 8, group, dtype)
    with pytest.raises(ValueError, match="the xs path needs 4 bits"):
        QV.launch_gemv_q(p, s, b, x, np.zeros(8, x.dtype), 8, group, "cpu", config={"PATH": "xs", "R": 4, "MOST": 16})


def test_xs_staged_needs_even_groups_a_row(rng):
    """The staged xs path copies 4-byte pieces of two scales: K / GROUP odd is refused by name, before any launch."""
    p, s, b, x = _case(rng, 8, 11 * 64, 4, 64, "f16")
    with pytest.raises(ValueError, match="even number of groups"):
        QV.launch_gemv_q(p, s, b, x, np.zeros(8, np.float16), 4, 64, "cpu",
                         config={"PATH": "xs", "R": 4, "MOST": 16, "X8": 1, "NS": 3})


def _one_f16_step(backend, p, s, b, x, r):
    """gemv_q4_xs with X8 = 2 at R = r: every f16 output within one f16 step of the float64 oracle."""
    y = np.full(p.shape[0], np.nan, np.float16)
    QV.launch_gemv_q(p, s, b, x, y, 4, 64, backend, config={"PATH": "xs", "R": r, "MOST": 16, "X8": 2})
    want = _oracle(p, s, b, x, 4, 64)
    step = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    err = np.abs(y.astype(np.float64) - want)
    assert np.all(err <= step + 1e-6), f"max err {err.max()} at a step of {step[err.argmax()]}"


def test_xs_22_bit_x_keeps_one_f16_step(backend, rng):
    """X8 = 2 (three bytes of x) against the float64 oracle within one f16 step, as tests/std/test_quant.py asks of
    the tuned paths (X8 = 1's 15 bits miss it near zero; module docstring)."""
    _one_f16_step(backend, *_case(rng, 16, 8192, 4, 64, "f16"), 4)


def test_xs_22_bit_x_keeps_one_f16_step_with_outliers(backend, rng):
    """X8 = 2 rounds x relative to each 32-value vector's max |x| (and CUDA's tuning times it): with an outlier of
    10^4 times the typical |x| in every third vector (activations with massive channels), every output still within
    one f16 step of the float64 oracle. X8 = 1 misses this (up to ~20 steps on the interpreter)."""
    k = 8192
    p, s, b, x = _case(rng, 16, k, 4, 64, "f16")
    x = x.astype(np.float64)
    where = np.arange(0, k, 96) + rng.integers(0, 32, len(range(0, k, 96)))
    x[where] *= 1e4 * rng.choice([-1.0, 1.0], len(where))
    _one_f16_step(backend, p, s, b, np.clip(x, -65000, 65000).astype(np.float16), 8)


def test_xs_nonfinite_x_is_not_hidden(backend, rng):
    """X8 turns x into fixed point with a scale from max |x| (which ignores a NaN): a NaN or an inf in x must still
    make every row non-finite, as the float form's sums do."""
    for bad in (np.nan, np.inf):
        p, s, b, x = _case(rng, 9, 1024, 4, 64, "f16")
        x[37] = bad
        for x8 in (0, 1, 2):
            y = np.zeros(9, np.float16)
            QV.launch_gemv_q(p, s, b, x, y, 4, 64, backend, config={"PATH": "xs", "R": 4, "MOST": 16, "X8": x8})
            assert not np.isfinite(y).any(), (bad, x8, y)


def test_xs_shape_keeps_a_lane_to_few_vectors():
    """The SIMD groups a group and vectors a lane: one vector a lane up to 16 SIMD groups (512 threads), then more."""
    assert QV_XS.xs_shape(16384, 32, 16) == (16, 1)
    assert QV_XS.xs_shape(4096, 32, 16) == (4, 1)
    assert QV_XS.xs_shape(14336, 32, 16) == (14, 1)
    assert QV_XS.xs_shape(16384, 32, 8) == (8, 2)
    assert QV_XS.xs_shape(16384, 64, 16) == (8, 1)  # 512 threads
    assert QV_XS.xs_shape(65536, 32, 16) == (16, 4)
    assert QV_XS.xs_shape(256, 8, 16) == (1, 1)


def test_mma_configuration_outside_its_shapes_is_refused(rng):
    """A forced gemv_q4_mma configuration checks what it needs: 4 bits, f16/bf16, K a multiple of 128, 16 NT rows."""
    for n, k, bits, dtype, nt, group, ns in ((40, 1408, 8, "f16", 1, 64, 0), (40, 1408, 4, "f32", 1, 64, 0),
                                             (40, 1344, 4, "f16", 1, 64, 0), (40, 1408, 4, "bf16", 4, 64, 0),
                                             (40, 1408, 4, "bf16", 1, 128, 2)):
        p, s, b, x = _case(rng, n, k, bits, group, dtype)
        with pytest.raises(ValueError, match="needs 4 bits"):
            QV.launch_gemv_q(p, s, b, x, np.zeros(n, x.dtype), bits, group, "cpu",
                             config={"PATH": "mma", "NT": nt, "WARPS": 4, "U": 2, "NS": ns})


@pytest.mark.parametrize("width", [8, 64])
def test_warp_kernel_at_other_simd_widths(width, monkeypatch, rng):
    """The interpreter at lavapipe's and AMD's widths: steps of 8 and 64 lanes, the rows' stores by lane r % S."""
    monkeypatch.setenv("IRON_CPU_SIMD_WIDTH", str(width))
    p, s, b, x = _case(rng, 21, 1408, 4, 64, "f32")
    for r, kv, warps, ns in [(4, 1, 1, 2), (8, 1, 1, 2), (8, 1, 2, 0)]:
        _run("cpu", p, s, b, x, 4, 64, "f32", config={"PATH": "warp", "R": r, "KV": kv, "WARPS": warps, "NS": ns})
    p, s, b, x = _case(rng, 21, 1408 if width == 8 else 4096, 4, 64, "bf16")  # 64 lanes: 2 SIMD groups
    for r, most, x8 in ((8, 16, 0), (4, 2, 0), (1, 16, 0), (8, 16, 1), (4, 2, 1)):
        _run("cpu", p, s, b, x, 4, 64, "bf16", config={"PATH": "xs", "R": r, "MOST": most, "X8": x8})


def test_choice_on_each_kind_of_backend():
    """CPU devices: gemv_q_warp's default alone (deterministic, and what CI runs); CUDA: gemv_q's configurations,
    plan's first (what runs untimed), then gemv_q_warp's; ``path`` keeps one kernel's."""
    cpu = QV.gemv_q_configs("cpu", 4096, 4096, 4, 64, 2)
    r, kv, warps, ns = QV.WARP_DEFAULT
    assert cpu == [{"PATH": "warp", "R": r, "KV": kv, "WARPS": warps, "NS": ns}]
    cuda = QV.gemv_q_configs("cuda", 16384, 16384, 4, 64, 2)
    block, rows, unroll = QV.plan(16384, 16384, 4)
    assert cuda[0] == {"PATH": "group", "BLOCK": block, "ROWS": rows, "UNROLL": unroll}
    warp = [c for c in cuda if c["PATH"] == "warp"]
    assert [(c["R"], c["KV"], c["WARPS"], c["NS"]) for c in warp] == QV.WARP_TUNING["cuda"]
    assert len(cuda) == len({tuple(c.items()) for c in cuda}) > len(warp)
    assert QV.gemv_q_configs("cuda", 16384, 16384, 4, 64, 2, path="warp") == warp
    assert all(c["PATH"] == "group" for c in QV.gemv_q_configs("cuda", 16384, 16384, 4, 64, 2, path="group"))
    assert QV.gemv_q_configs("cpu", 64, 256, 4, 64, 2, path="group")[0]["PATH"] == "group"
    typed = QV.gemv_q_configs("cuda", 16384, 16384, 4, 64, 2, dtype="bf16")[len(cuda):]
    mma = [c for c in typed if c["PATH"] == "mma"]
    assert [(c["NT"], c["WARPS"], c["U"], c["NS"]) for c in mma] == QV_MMA.TUNING["cuda"] and typed[0]["PATH"] == "mma"
    # tuned xs: X8 = 2 only, last, where a lane holds one vector of x (K <= 16384 at 32 lanes)
    assert [(c["R"], c["MOST"], c["X8"]) for c in typed[len(mma):]] == QV_XS.TUNED["cuda"]
    assert all(c["X8"] == 2 for c in typed[len(mma):])
    assert not [c for c in QV.gemv_q_configs("cuda", 4096, 32768, 4, 64, 2, dtype="bf16") if c["PATH"] == "xs"]
    assert not [c for c in QV.gemv_q_configs("cuda", 4096, 4096, 8, 64, 2, dtype="bf16") if c["PATH"] == "xs"]
    assert not [c for c in QV.gemv_q_configs("vulkan", 4096, 4096, 4, 64, 2, dtype="bf16") if c["PATH"] == "xs"]
    xs = QV.gemv_q_configs("cuda", 16384, 16384, 4, 64, 2, path="xs", dtype="bf16")  # forced: the whole table
    assert [(c["R"], c["MOST"], c["X8"]) for c in xs] == QV_XS.TUNING["cuda"]
    assert len(QV.gemv_q_configs("vulkan", 4096, 4096, 4, 64, 2, path="xs", dtype="f16")) == 1
    staged = [c for c in QV.gemv_q_configs("cuda", 16384, 16384, 4, 128, 2, dtype="bf16") if c["PATH"] == "mma"]
    assert staged and all(c["NS"] == 0 for c in staged)  # a group of 128: a slab's scale is 2 bytes, no async copy
    assert not [c for c in QV.gemv_q_configs("vulkan", 16384, 16384, 4, 64, 2, dtype="bf16") if c["PATH"] == "mma"]
    assert not [c for c in QV.gemv_q_configs("cuda", 16384, 16384, 8, 64, 2, dtype="bf16") if c["PATH"] == "mma"]
    assert len(QV.gemv_q_configs("cpu", 64, 256, 4, 64, 2, path="mma", dtype="f16")) == 1
    with pytest.raises(ValueError):
        QV.gemv_q_configs("cpu", 64, 256, 4, 64, 2, path="fast")


def test_async_copies_need_aligned_scale_pieces(monkeypatch):
    """K / GROUP odd: 2-byte scales' 4-byte pieces straddle rows, so gemv_q_warp loads directly (and a forced
    pipeline is refused by name); 4-byte scales do not care."""
    for itemsize, ns in ((2, 0), (4, QV.WARP_DEFAULT[3])):
        assert {c["NS"] for c in QV.gemv_q_configs("cpu", 8, 11 * 64, 4, 64, itemsize)} == {ns}
    # no async copies (NS >= 2) there; NS = 1's register prefetch needs no aligned pieces
    assert {c["NS"] for c in QV.gemv_q_configs("cuda", 8, 11 * 64, 4, 64, 2, path="warp")} == {0, 1}
    p, s, b, x = _case(np.random.default_rng(0), 8, 11 * 64, 4, 64, "f16")
    with pytest.raises(ValueError, match="NS = 0"):
        QV.launch_gemv_q(p, s, b, x, np.zeros(8, np.float16), 4, 64, "cpu",
                         config={"PATH": "warp", "R": 4, "KV": 1, "WARPS": 1, "NS": 2})


def test_bench_entry_runs_the_default(rng):
    """The registered bench/test entry goes through launch_gemv_q: on the interpreter, gemv_q_warp."""
    p, s, b, x = _case(rng, 64, 512, 4, 64, "f32")
    assert _run("cpu", p, s, b, x, 4, 64, "f32")["PATH"] == "warp"


# --- sm_90 resources ----------------------------------------------------------------------------------------------

needs_nvrtc = pytest.mark.skipif(unavailable_reason() is not None, reason=f"NVRTC unavailable: {unavailable_reason()}")


def _source(cfg, bits, group, dtype, ncols):
    itemsize = 4 if dtype == "f32" else 2
    dt = getattr(iron, dtype)
    if cfg["PATH"] == "mma":
        return "gemv_q4_mma", QV_MMA.gemv_q4_mma.source("cuda", dtype=dt, GROUP=group, NT=cfg["NT"],
                                                        WARPS=cfg["WARPS"], U=cfg["U"], NG=256, XV=8,
                                                        NS=cfg["NS"])
    if cfg["PATH"] == "xs":
        warps, kx = QV_XS.xs_shape(ncols, 32, cfg["MOST"])
        return "gemv_q4_xs", QV_XS.gemv_q4_xs.source("cuda", dtype=dt, GROUP=group, R=cfg["R"], KX=kx, WARPS=warps,
                                                     LR=cfg["R"].bit_length() - 1, LS=5, X8=cfg["X8"])
    if cfg["PATH"] == "group":
        return "gemv_q", QV.gemv_q.source("cuda", dtype=dt, BITS=bits, GROUP=group, BLOCK=cfg["BLOCK"],
                                          ROWS=cfg["ROWS"], UNROLL=cfg["UNROLL"], XV=16 // itemsize)
    return "gemv_q_warp", QV.gemv_q_warp.source("cuda", dtype=dt, BITS=bits, GROUP=group, R=cfg["R"], KV=cfg["KV"],
                                                WARPS=cfg["WARPS"], NS=cfg["NS"], XV=16 // itemsize,
                                                SP=max(4 // itemsize, 1), LANES=32)


@needs_nvrtc
@pytest.mark.parametrize("bits,group,dtype", [(4, 64, "bf16"), (8, 32, "f32")], ids=["q4g64-bf16", "q8g32-f32"])
def test_cuda_configurations_keep_their_registers(bits, group, dtype, monkeypatch):
    """Every configuration autotuning times at the bench's shapes keeps its words, x and sums in registers (sm_90):
    no stack frame, no spills, no local memory; gemv_q_warp has no barrier."""
    monkeypatch.setenv("IRON_GEMV_Q_WARP", "1")
    seen = set()
    for shape in [(16384, 16384), (4096, 4096), (14336, 4096)]:
        forced = QV.gemv_q_configs("cuda", *shape, bits, group, 2, path="xs", dtype=dtype) \
            if QV_XS.xs_ok(bits, dtype) else []
        for cfg in QV.gemv_q_configs("cuda", *shape, bits, group, 4 if dtype == "f32" else 2, dtype=dtype) + forced:
            key = (tuple(cfg.items()), shape[1] if cfg["PATH"] == "xs" else 0)  # xs: its shape follows K
            if key in seen:
                continue
            seen.add(key)
            name, src = _source(cfg, bits, group, dtype, shape[1])
            res = resource_report(src, "sm_90")[name]
            assert 0 < res["registers"] <= 255, (cfg, res)
            assert res["stack_frame_bytes"] == res["spill_store_bytes"] == res["spill_load_bytes"] == 0, (cfg, res)
            assert not res["local_memory"], (cfg, res)
            if name == "gemv_q_warp":
                assert res["barriers"] == 0, (cfg, res)
