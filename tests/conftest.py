"""Fixtures shared by every test directory.

``rng``: a NumPy generator on fresh entropy for each test, so each run checks new data. The seed is printed (pytest
shows it with a failure's captured output) and ``IRON_TEST_SEED=<seed>`` replays a failing run exactly.
"""

from __future__ import annotations

import os

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    seed = int(os.environ.get("IRON_TEST_SEED") or np.random.SeedSequence().entropy)
    print(f"rng seed: IRON_TEST_SEED={seed}")
    return np.random.default_rng(seed)
