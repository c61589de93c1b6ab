"""The capability tables stay whole: every runtime backend has a row, and every expected refusal names a variant."""

from __future__ import annotations

from iron.runtime import BACKENDS

from .capabilities import RUN_ROWS
from .compile_targets import COMPILE_ROWS
from .variants import variants


def test_every_backend_has_a_capability_row():
    assert set(RUN_ROWS) == set(BACKENDS), "a backend added to iron.runtime.BACKENDS needs its row in capabilities.py"


def test_every_expected_refusal_names_a_variant():
    ids = {case.id for case in variants()}
    for row in COMPILE_ROWS.values():
        assert set(row.refuses) <= ids, f"{row.name} expects refusals of variants that do not exist"
