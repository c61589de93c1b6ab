"""Issue 15, bug B2: an ``@iron.func`` helper compiles the source it had when it was decorated, even if its file
changes before the first kernel that calls it is compiled (before: whatever then sat at the helper's old lines)."""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import iron

from .sources import HEADER, module_from_source

BEFORE = '''import iron


@iron.func
def helper(x):
    return x + 1.0


@iron.kernel
def k(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):
    i = iron.program_id(0)
    out[i] = helper(a[i])
'''

AFTER = '''import iron


@iron.func
def other(x):
    return x * 100.0


@iron.kernel
def k(a: iron.Tensor[iron.f32], out: iron.Tensor[iron.f32]):
    i = iron.program_id(0)
    out[i] = other(a[i])
'''


def test_a_helper_compiles_the_source_it_was_decorated_with(tmp_path, rng):
    mod = module_from_source(tmp_path, "helper_edit", BEFORE)
    (tmp_path / "helper_edit.py").write_text(AFTER)  # an editor saves the file before the first launch
    linecache.checkcache()
    a = rng.standard_normal(64).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    mod.k[64](a, out, backend="cpu")
    np.testing.assert_array_equal(out, a + np.float32(1.0))


def test_the_same_kernel_text_in_two_files_keeps_each_files_locations(tmp_path):
    """Code objects of the same text at the same line compare equal across files: the parsed source is cached per
    file as well, so an error in the second file names the second file (not the first one parsed)."""
    text = HEADER + "def k(out: iron.Tensor[iron.f32]):\n    out[0] = undefined_name\n"
    errors = []
    for name in ("first_copy", "second_copy"):
        folder = tmp_path / name
        folder.mkdir()
        mod = module_from_source(folder, f"same_text_{name}", text)
        with pytest.raises(iron.CompileError) as e:
            mod.k.ir()
        errors.append(str(e.value))
    assert "first_copy" in errors[0] and "second_copy" in errors[1], errors
