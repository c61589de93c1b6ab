from __future__ import annotations

import pytest

from iron.ir import VerifyError, print_kernel
from iron.ir import types as t
from iron.passes import DCE, Fixpoint, PassManager, default_pipeline, run_pipeline

from .passes_helpers import F32_BUF, body_text, new_kernel, static_for


def _sample_kernel():
    k, b, p = new_kernel(("x", F32_BUF), ("out", F32_BUF))
    gid = b.thread("program_id", 0)
    v = b.load(p["x"], gid, name="v")
    acc = b.var(t.f32, "acc")
    b.set(acc, b.const(0.0, t.f32))
    _, body, i = static_for(b, 0, 3)
    with b.at(body):
        w = b.binary("mul", b.op("cast", [i], t.f32).result, b.const(1.0, t.f32))
        b.set(acc, b.binary("add", b.get(acc), b.binary("mul", v, w)))
    b.store(p["out"], gid, b.get(acc))
    return k


def test_default_pipeline_names():
    names = []
    for p in default_pipeline():
        names += [q.name for q in p.passes] if isinstance(p, Fixpoint) else [p.name]
    assert names == ["unroll", "fold", "simplify", "cse", "dce"]


def test_snapshots_record_frontend_then_every_pass():
    k = _sample_kernel()
    frontend = print_kernel(k)
    k2, snaps = run_pipeline(k, record=True)
    assert k2 is k
    names = [n for n, _ in snaps]
    assert names[0] == "frontend" and snaps[0][1] == frontend
    assert names[1:5] == ["unroll", "fold", "simplify", "cse"]
    assert names[-1] == "dce"
    assert snaps[-1][1] == print_kernel(k)
    assert "static_range" in snaps[0][1] and "static_range" not in snaps[1][1]


def test_pipeline_result():
    k = _sample_kernel()
    run_pipeline(k)
    text = body_text(k)
    assert "for" not in text and "cast" not in text
    assert text.count("const 2.0 : f32") == 1  # the unrolled copies share one constant after cse


def test_run_pipeline_without_record_returns_no_snapshots():
    _, snaps = run_pipeline(_sample_kernel())
    assert snaps == []


def test_pipeline_is_deterministic():
    texts = {print_kernel(run_pipeline(_sample_kernel())[0]) for _ in range(3)}
    assert len(texts) == 1


class _Breaker:
    name = "breaker"

    def run(self, kernel):
        kernel.body.ops.reverse()  # uses before definitions
        return True


def test_verify_error_names_the_pass():
    with pytest.raises(VerifyError, match=r"^after pass breaker: kernel k: "):
        PassManager([DCE(), _Breaker()]).run(_sample_kernel())


def test_verify_off_lets_a_broken_pass_through():
    PassManager([_Breaker()], verify=False).run(_sample_kernel())


def test_invalid_input_is_reported_before_any_pass():
    k = _sample_kernel()
    k.body.ops.reverse()
    with pytest.raises(VerifyError, match="before any pass"):
        PassManager([DCE()]).run(k)


class _Counter:
    """Changes something on its first ``n`` runs."""

    def __init__(self, name, n):
        self.name, self.n, self.runs = name, n, 0

    def run(self, kernel):
        self.runs += 1
        return self.runs <= self.n


def test_fixpoint_reruns_until_quiet_and_respects_its_cap():
    a, b_ = _Counter("a", 2), _Counter("b", 0)
    pm = PassManager([Fixpoint([a, b_], cap=8)], record=True)
    pm.run(_sample_kernel())
    assert a.runs == 3 and b_.runs == 3
    # round one records both; later rounds only the pass that changed something
    assert [n for n, _ in pm.snapshots] == ["frontend", "a", "b", "a"]
    capped = _Counter("c", 100)
    PassManager([Fixpoint([capped], cap=4)]).run(_sample_kernel())
    assert capped.runs == 4
