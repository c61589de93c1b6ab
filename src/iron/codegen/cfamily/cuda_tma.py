"""``tile_load`` on NVIDIA sm_90 as bulk tensor copies (TMA), into warpgroup_mma's operand arrays.

The copy engine writes a box of a global tensor into shared memory in the 128-byte swizzled layout that wgmma reads
(``codegen/warpgroup.py``'s ``phys``), so a tile_load into an operand array is one ``cp.async.bulk.tensor`` per 64
columns (128 bytes of f16/bf16) issued by the group's first thread, with none of the group's threads copying or
computing addresses, and no generic-to-async proxy fence (the engine writes through the async proxy that wgmma
reads). Which loads qualify (``tma_loads``): the destination is an operand array, and either rows of 64 (A, or B
stored transposed) with COLS = DST_LD = 64, or B's panels (DST_LD = the array's row length L, COLS a multiple of 64,
ROWS dividing 64, so the box stays in one 64-row block). The rest are expanded (``codegen/tile_copy.py``).

Synchronisation: 8 mbarriers in shared memory (one per stage), initialised by the first thread with an arrival
count of 1. ``tile_load`` adds its bytes to the stage's expected transaction count (``mbarrier.expect_tx``) and
issues the copies; ``tile_commit`` is the first thread's one arrival, which lets the phase complete when the bytes
have landed; ``tile_wait`` spins on ``mbarrier.try_wait.parity`` with the stage's phase parity, which each thread
keeps as one bit of ``iron_tma_phase``.

The descriptors (CUtensorMap, 128 bytes) are made on the host at launch from the view's values (``KernelSource.
tensor_maps``: ``runtime/cuda_tma.py``) and passed in global memory, one pointer parameter each after the grid
sizes; the first thread acquires each through the tensor-map proxy before use (``fence.proxy.tensormap``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.core import Kernel, Op
from ..warpgroup import Layout
from .dialect import Snippet

_Q = "__device__ __forceinline__"
STAGES = 8

TMA_SNIPPET = Snippet(f"""\
// tile_load as bulk tensor copies (TMA) completing on one mbarrier per stage (cuda_tma.py)
{_Q} unsigned iron_smem_addr(const void* p) {{ return (unsigned)__cvta_generic_to_shared(p); }}
{_Q} void iron_tma_init(unsigned long long* bars, bool leader) {{
    if (leader) {{
        for (int i = 0; i < {STAGES}; ++i)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(iron_smem_addr(bars + i)) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }}
    __syncthreads();
}}
{_Q} void iron_tma_acquire(const void* map) {{  // written by the host through the generic proxy
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" :: "l"(map) : "memory");
    asm volatile("prefetch.tensormap [%0];" :: "l"(map) : "memory");
}}
{_Q} void iron_tma_expect(unsigned long long* bar, unsigned bytes) {{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(iron_smem_addr(bar)), "r"(bytes)
                 : "memory");
}}
{_Q} void iron_tma_2d(void* dst, const void* map, int c0, int c1, unsigned long long* bar) {{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {{%2, %3}}], [%4];"
                 :: "r"(iron_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(iron_smem_addr(bar)) : "memory");
}}
{_Q} void iron_tma_3d(void* dst, const void* map, int c0, int c1, int c2, unsigned long long* bar) {{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {{%2, %3, %4}}], [%5];"
                 :: "r"(iron_smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(iron_smem_addr(bar))
                 : "memory");
}}
{_Q} void iron_tma_arrive(unsigned long long* bar) {{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(iron_smem_addr(bar)) : "memory");
}}
{_Q} void iron_tma_wait(unsigned long long* bars, unsigned& phase, int stage) {{
    const unsigned parity = (phase >> stage) & 1u;
    asm volatile("{{\\n.reg .pred p;\\nIRON_TMA_WAIT:\\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n"
                 "@!p bra IRON_TMA_WAIT;\\n}}\\n" :: "r"(iron_smem_addr(bars + stage)), "r"(parity) : "memory");
    phase ^= 1u << stage;
}}""")


@dataclass(frozen=True)
class TensorMapSpec:
    """One descriptor the host makes at launch: the kernel parameter ``param`` points to it (``runtime/cuda_tma``).

    ``buffer``: the Iron parameter viewed; ``view``: (rows, cols, ld, bstride), each ``("param", name)`` or
    ``("const", value)``; ``box``: (columns, rows) of one copy; ``rank`` 2 (bstride the constant 0) or 3 (the
    batch as the outer dimension); ``swizzle``: bytes of the swizzle pattern (128)."""

    param: str
    buffer: str
    elem: str
    view: tuple[tuple[str, object], ...]
    box: tuple[int, int]
    rank: int
    swizzle: int = 128


def qualifies(op: Op, layouts: dict[int, Layout]) -> bool:
    """Whether this tile_load runs on the copy engine (the module docstring)."""
    dst = op.operands[0]
    layout = layouts.get(dst.uid)
    if layout is None or dst.type.elem.itemsize != 2:
        return False
    rb, cb, dld = op.attrs["rows_box"], op.attrs["cols_box"], op.attrs["dst_ld"]
    if layout.ld is None:
        return cb == 64 and dld == 64
    return dld == layout.ld and cb % 64 == 0 and (64 % rb == 0 or rb % 64 == 0)  # > 64 rows: 64-row boxes


def tma_loads(kernel: Kernel, layouts: dict[int, Layout]) -> frozenset[int]:
    """Positions (walk order among the tile_loads) of the loads that run on the copy engine."""
    loads = [op for op in kernel.walk() if op.opcode == "tile_load"]
    return frozenset(i for i, op in enumerate(loads) if qualifies(op, layouts))


def tensor_maps(kernel: Kernel, buffer_name, layouts: dict[int, Layout] | None = None
                ) -> tuple[list[TensorMapSpec], dict[int, TensorMapSpec]]:
    """The descriptors a kernel's (kept) tile_loads need, one per distinct (buffer, view, box), and each load's
    (by op id). ``buffer_name(value)`` is the Iron parameter name of a buffer value; a load of more than 64 rows into
    a B array (``layouts``) is copied as 64-row boxes (the array's blocks of 64 rows are apart)."""
    specs: dict[tuple, TensorMapSpec] = {}
    of_op: dict[int, TensorMapSpec] = {}
    for op in kernel.walk():
        if op.opcode != "tile_load":
            continue
        src, view = op.operands[2], op.attrs["view"]
        rank = 2 if view[3] == ("const", 0) else 3
        layout = (layouts or {}).get(op.operands[0].uid)
        rows = 64 if layout is not None and layout.ld is not None and op.attrs["rows_box"] > 64 else \
            op.attrs["rows_box"]
        key = (buffer_name(src), view, rows, rank)
        if key not in specs:
            specs[key] = TensorMapSpec(f"iron_tmap{len(specs)}", key[0], src.type.elem.name, view,
                                       (64, rows), rank)
        of_op[id(op)] = specs[key]
    return list(specs.values()), of_op


def load_statement(op: Op, spec: TensorMapSpec, dst: str, j: str, operands: list[str], layout: Layout) -> str:
    """The first thread's statement for a kept tile_load: expect the box's bytes on the stage's barrier, then one
    copy per 64 columns. ``operands``: the C expressions of (batch, row, col, stage, bstride)."""
    batch, row, col, stage, bstride = operands
    rb, cb = op.attrs["rows_box"], op.attrs["cols_box"]
    nbytes = rb * cb * op.operands[0].type.elem.itemsize
    bar = f"&iron_tma_bar[{stage}]"
    lines = ["if (iron_tma_leader) {", f"    iron_tma_expect({bar}, {nbytes}u);"]
    blocks = 1 if layout.ld is None else max(1, rb // 64)  # a B array's 64-row blocks are apart
    for blk in range(blocks):
        r = f"({row}) + {64 * blk}" if blk else row
        for p in range(cb // 64):
            if layout.ld is None:
                at = f"{dst} + ({j})"
            else:
                span = 64 * layout.ld
                at = f"{dst} + (({j}) / {span} + {blk}) * {span} + {p * 4096} + ({j}) / {layout.ld} % 64 * 64"
            c = f"({col}) + {64 * p}" if p else col
            if spec.rank == 2:
                lines.append(f"    iron_tma_2d({at}, {spec.param}, {c}, {r}, {bar});")
            else:  # a batch stride of 0 at run time: every batch is matrix 0 (the descriptor has one)
                lines.append(f"    iron_tma_3d({at}, {spec.param}, {c}, {r}, ({bstride}) == 0 ? 0 : ({batch}), "
                             f"{bar});")
    lines.append("}")
    return "\n".join(lines)
