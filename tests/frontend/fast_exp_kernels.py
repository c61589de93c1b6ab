"""The kernel of tests/frontend/test_fast_exp.py (a ``*_kernels.py`` file: test_kernels checks that the kernels here use
every builtin)."""

from __future__ import annotations

import iron
from iron import Tensor, kernel, program_id


@kernel
def fast_pair(x: Tensor[iron.T], e: Tensor[iron.T], e2: Tensor[iron.T]):
    i = program_id(0)
    e[i] = iron.fast_exp(x[i])
    e2[i] = iron.fast_exp2(x[i])


@kernel
def precise_pair(x: Tensor[iron.T], e: Tensor[iron.T], e2: Tensor[iron.T]):
    """fast_pair with exp / exp2 (the contrast of tests/cli/test_inspect_sass.py)."""
    i = program_id(0)
    e[i] = iron.exp(x[i])
    e2[i] = iron.exp2(x[i])
