"""Golden snapshots of the source each C-family backend writes, so a refactor that changes output shows it.

One row per dialect (CUDA, HIP at wavefront 64 and 32, MSL), each with a few kernels; the files live in
tests/backends/golden/<row>/. After an intended change to the output, regenerate them with

    IRON_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/backends/test_golden_source.py -q

and read the diff.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import iron
from iron.codegen import emit_cuda, emit_hip, emit_msl

from ..codegen import kernels as K

GOLDEN = Path(__file__).parent / "golden"


@dataclass(frozen=True)
class SourceRow:
    """A dialect: how it writes a variant's kernel, and the golden file of each kernel it snapshots."""

    name: str
    #: folder under tests/backends/golden (the two HIP rows share one: the wavefront is in the file name)
    folder: str
    emit: Callable[[object], str]
    #: (golden file, kernel, dtype, constexpr values in parameter order)
    cases: tuple[tuple[str, iron.KernelFunction, object, tuple], ...]


SOURCE_ROWS = (
    SourceRow("cuda", "cuda", lambda k: emit_cuda(k).source, (
        ("unary_exp_f32.cu", K.unary_exp, iron.f32, ()),
        ("unary_exp_bf16.cu", K.unary_exp, iron.bf16, ()),
        ("row_softmax_f32.cu", K.row_softmax, iron.f32, (256,)),
        ("control_flow_f32.cu", K.control_flow, iron.f32, ()),
        ("warp_tile_f16.cu", K.warp_tile, iron.f16, (256,)),
    )),
    # AMD's wavefront decides the source (64 on CDNA, 32 on RDNA): a row each
    SourceRow("hip-wave64", "hip", lambda k: emit_hip(k, 64).source, (
        ("unary_exp_f16_wave64.hip", K.unary_exp, iron.f16, ()),
        ("row_softmax_bf16_wave64.hip", K.row_softmax, iron.bf16, (256,)),
        ("control_flow_f32_wave64.hip", K.control_flow, iron.f32, ()),
    )),
    SourceRow("hip-wave32", "hip", lambda k: emit_hip(k, 32).source, (
        ("warp_tile_f32_wave32.hip", K.warp_tile, iron.f32, (256,)),
    )),
    SourceRow("msl", "msl", lambda k: emit_msl(k).source, (
        ("unary_exp_f32.metal", K.unary_exp, iron.f32, ()),
        ("unary_exp_bf16.metal", K.unary_exp, iron.bf16, ()),
        ("warp_tile_f16.metal", K.warp_tile, iron.f16, (256,)),
        ("control_flow_f32.metal", K.control_flow, iron.f32, ()),
    )),
)

CASES = [pytest.param(row, *case, id=f"{row.name}-{case[0]}") for row in SOURCE_ROWS for case in row.cases]


@pytest.mark.parametrize("row,filename,kernel,dtype,constexprs", CASES)
def test_golden_source(row, filename, kernel, dtype, constexprs):
    text = row.emit(kernel.variant(dtype, constexprs).kernel)
    path = GOLDEN / row.folder / filename
    if os.environ.get("IRON_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with IRON_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{path.name} changed; if intended, regenerate with IRON_UPDATE_GOLDEN=1"
