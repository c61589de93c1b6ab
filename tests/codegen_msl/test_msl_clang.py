"""The project's model of Metal (``iron/codegen/msl_model``) has teeth: clang against it errs on lossy implicit
conversions, unused values and functions Metal lacks (issue 6, point 5). That every kernel variant's MSL passes it is
the clang-metal-model row of tests/backends/test_compile_targets.py. Skipped with the reason when no clang is installed
(CI installs Debian's clang-16).
"""

from __future__ import annotations

import pytest

from iron.codegen.msl_model import find_clang, syntax_check

CLANG = find_clang()
pytestmark = pytest.mark.skipif(CLANG is None, reason="clang not installed (apt-get install clang-16)")

_PRELUDE = "#include <metal_stdlib>\nusing namespace metal;\n"


def test_the_model_rejects_a_lossy_implicit_conversion():
    """The check has teeth: a float stored to a half without a conversion, and an unused value, are errors."""
    ok, log = syntax_check(_PRELUDE + "kernel void k(device half *o [[buffer(0)]], "
                           "const device float *a [[buffer(1)]], uint tid [[thread_position_in_grid]]) {\n"
                           "    const float f = a[tid];\n    o[tid] = f;\n}\n")
    assert not ok and "implicit conversion" in log
    ok, log = syntax_check(_PRELUDE + "kernel void k(device int *o [[buffer(0)]]) {\n    o[0] + 1;\n}\n")
    assert not ok and "unused" in log


def test_the_model_rejects_an_undeclared_metal_function():
    ok, log = syntax_check(_PRELUDE + "kernel void k(device float *o [[buffer(0)]]) {\n    o[0] = erf(o[0]);\n}\n")
    assert not ok and "erf" in log  # Metal has no erf: the model must not invent one
