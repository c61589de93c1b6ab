"""16-byte vector accesses in SPIR-V (issue 14 point 2, codegen/spirv/words.py): a vload/vstore/async_copy of 16
bytes of a storage buffer is one ``uvec4`` load or store through the buffer's view, a shared array moved by such
copies is an array of ``uvec4`` words, narrower copies go element by element; every module passes spirv-val. (The
results on lavapipe: tests/runtime_vulkan/test_vector_words.py and tests/frontend/test_tile.py.)"""

from __future__ import annotations

import re
import shutil

import pytest

import iron
from iron.codegen.spirv import disassemble, emit_spirv, validate

from ..frontend import kernels as FK
from . import vector_kernels as VK

needs_spirv_val = pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-val is not on PATH")
HALVES = (iron.f16, iron.bf16)


def _text(kernel, dtype, constexprs=()) -> str:
    module = emit_spirv(kernel.variant(dtype, tuple(constexprs)).kernel)
    if shutil.which("spirv-val"):
        assert validate(module) is None, validate(module)
    return disassemble(module)


def _count(text: str, pattern: str) -> int:
    return len(re.findall(pattern, text))


def _word_accesses(text: str, storage: str) -> tuple[int, int]:
    """(loads, stores) of whole ``uvec4`` words through pointers of ``storage`` class."""
    pointers = set(re.findall(rf"(%\S+) = OpAccessChain %_ptr_{storage}_v4uint ", text))
    loads = sum(1 for p in pointers if re.search(rf"= OpLoad %v4uint {re.escape(p)}\b", text))
    stores = sum(1 for p in pointers if re.search(rf"OpStore {re.escape(p)} ", text))
    return loads, stores


@needs_spirv_val
@pytest.mark.parametrize("dtype", [iron.f32, *HALVES])
def test_sixteen_bytes_of_a_buffer_are_one_word(dtype):
    vec = 4 if dtype == iron.f32 else 8
    text = _text(FK.vector_scale, dtype, (vec,))
    assert "%v4uint = OpTypeVector %uint 4" in text
    assert _word_accesses(text, "StorageBuffer") == (1, 1), "one 16-byte load of x and one store of out"
    # the views share the buffers' bindings; neither buffer is reached through both of its variables (x is only
    # read, out only through its view), so nothing is declared Aliased (which would let every Aliased buffer alias)
    assert _count(text, r"OpDecorate %x_x16 Binding 0") == 1 and _count(text, r"OpDecorate %out_x16 Binding 1") == 1
    assert "Aliased" not in text


@needs_spirv_val
@pytest.mark.parametrize("dtype", [iron.f32, *HALVES])
def test_aliased_only_where_a_written_buffer_meets_both_views(dtype):
    """vstore_then_read writes out through its view and reads it element by element: out's two variables are
    Aliased; x (read through its view only) and back (elements only) are not."""
    vec = 4 if dtype == iron.f32 else 8
    text = _text(VK.vstore_then_read, dtype, (vec,))
    assert {m for m in re.findall(r"OpDecorate %(\S+) Aliased", text)} == {"out", "out_x16"}


@needs_spirv_val
@pytest.mark.parametrize("dtype, vec", [(iron.f32, 2), (iron.f16, 4), (iron.bf16, 2)])
def test_narrower_copies_go_element_by_element(dtype, vec):
    text = _text(FK.vector_scale, dtype, (vec,))
    assert _word_accesses(text, "StorageBuffer") == (0, 0)
    assert "Aliased" not in text and "_x16" not in text


@needs_spirv_val
@pytest.mark.parametrize("dtype", [iron.f32, *HALVES])
def test_shared_arrays_moved_by_vectors_are_words(dtype):
    """vector_via_shared: global -> registers -> shared -> registers -> global, VEC = 4 (16 bytes of f32; halves are
    held as f32 in shared memory, so 4 halves fill one shared word while the buffer side is 8 bytes)."""
    text = _text(FK.vector_via_shared, dtype, (4, 64))
    assert re.search(r"%_arr_v4uint_uint_64 = OpTypeArray %v4uint %uint_64", text)
    assert _word_accesses(text, "Workgroup") == (1, 1)
    assert _word_accesses(text, "StorageBuffer") == ((1, 1) if dtype == iron.f32 else (0, 0))


@needs_spirv_val
@pytest.mark.parametrize("dtype", [iron.f32, *HALVES])
def test_async_copy_into_a_packed_shared_array(dtype):
    """16 bytes from the buffer (4 f32 or 8 halves) into shared words (one, or two for halves held as f32), and the
    element accesses of the same array through components of its words."""
    vec = 4 if dtype == iron.f32 else 8
    text = _text(VK.shared_words, dtype, (vec, 32))
    words = -(-(32 * vec + 3) // 4)
    assert f"%_arr_v4uint_uint_{words} = OpTypeArray %v4uint %uint_{words}" in text
    assert _word_accesses(text, "StorageBuffer") == (1, 0)
    assert _word_accesses(text, "Workgroup") == (0, 1 if dtype == iron.f32 else 2)
    assert "OpAccessChain %_ptr_Workgroup_uint %tile" in text  # element accesses: one component of a word


@needs_spirv_val
def test_integer_words_need_no_bitcasts():
    text = _text(VK.u32_words, None)
    assert _word_accesses(text, "StorageBuffer") == (1, 1)
    assert "OpBitcast %uint" not in text


@needs_spirv_val
def test_shared_arrays_with_atomics_stay_scalar():
    """A shared array an atomic updates keeps its own element type (atomics need a scalar of it); its buffer side
    still moves words."""
    text = _text(VK.shared_counters, None)
    assert "%_arr_int_uint_64 = OpTypeArray %int %uint_64" in text and "_ptr_Workgroup_v4uint" not in text
    assert _word_accesses(text, "StorageBuffer") == (1, 1)
