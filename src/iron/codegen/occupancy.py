"""Groups a multiprocessor holds at once, from ptxas's resource report and the group size: the CUDA occupancy
calculator's arithmetic, for ``iron inspect --resources --group N`` without a GPU.

Hand-written: cuda.core asks the driver (``kernel.occupancy``), which needs a device; this answers from the limits
NVIDIA's CUDA C++ Programming Guide tabulates per compute capability ("Technical Specifications"): 64 K registers an
SM in four sub-partitions, allocated 256 at a time a warp; the warps and groups an SM may hold; shared memory an SM
(1 KiB of it reserved per group from sm_80 on), allocated 256 bytes at a time on 7.x and 128 from 8.0; the rules of
the toolkit's cuda_occupancy.h. Measured on the H100 (2026-12-06): layer_norm_rows at 512
threads and 67 registers is 1 group an SM by this arithmetic and took 358.8 us at 16384 x 8192; at 58 registers,
2 groups, 232.9 us.
"""

from __future__ import annotations

from dataclasses import dataclass

#: compute capability (major * 10 + minor) -> (warps an SM, groups an SM, shared bytes an SM)
LIMITS = {
    70: (64, 32, 96 << 10), 75: (32, 16, 64 << 10), 80: (64, 32, 164 << 10), 86: (48, 16, 100 << 10),
    87: (48, 16, 164 << 10), 89: (48, 24, 100 << 10), 90: (64, 32, 228 << 10), 100: (64, 32, 228 << 10),
}
REGISTERS = 65536  # an SM's 32-bit registers, every listed capability, in 4 sub-partitions of a quarter each
SUB_PARTITIONS = 4  # a warp's registers come from one sub-partition's quarter of the file
REGISTER_UNIT = 256  # registers are given to a warp in multiples of this
RESERVED = 1024  # shared memory the system keeps per group, sm_80 on


def shared_unit(cc: int) -> int:
    """Shared memory is given to a group in multiples of this: 256 bytes on 7.x, 128 from 8.0 (cuda_occupancy.h)."""
    return 256 if cc < 80 else 128


@dataclass(frozen=True)
class Occupancy:
    groups: int  # groups resident on one SM at once
    limiter: str  # "registers", "shared memory", "warps" or "groups": what stops one more
    warps: int  # warps resident an SM
    max_warps: int

    @property
    def percent(self) -> float:
        return 100.0 * self.warps / self.max_warps


def capability(arch: str) -> int:
    """90 for "sm_90" or "sm_90a"; a ValueError for a target the table lacks."""
    digits = arch.removeprefix("sm_").removeprefix("compute_").rstrip("af")
    if not digits.isdigit() or int(digits) not in LIMITS:
        raise ValueError(f"no occupancy limits for {arch!r} (known: {', '.join(f'sm_{c}' for c in LIMITS)})")
    return int(digits)


def occupancy(arch: str, threads: int, registers: int, shared_bytes: int = 0) -> Occupancy:
    """Groups of ``threads`` threads an SM of ``arch`` holds, each thread with ``registers`` registers and the group
    with ``shared_bytes`` of shared memory (static and dynamic together)."""
    if threads <= 0 or threads > 1024:
        raise ValueError(f"a group of {threads} threads: CUDA allows 1 to 1024")
    cc = capability(arch)
    max_warps, max_groups, shared_sm = LIMITS[cc]
    warps = -(-threads // 32)
    limits = {"warps": max_warps // warps, "groups": max_groups}
    per_warp = -(-max(registers, 1) * 32 // REGISTER_UNIT) * REGISTER_UNIT
    # warps fit per sub-partition, and a group's warps spread over all four: one that needs more than the file
    # (its warps rounded up to a multiple of four) cannot launch at all
    fits = per_warp * (-(-warps // SUB_PARTITIONS) * SUB_PARTITIONS) <= REGISTERS
    limits["registers"] = ((REGISTERS // SUB_PARTITIONS) // per_warp) * SUB_PARTITIONS // warps if fits else 0
    if shared_bytes:
        unit = shared_unit(cc)
        per_group = -(-shared_bytes // unit) * unit + (RESERVED if cc >= 80 else 0)
        limits["shared memory"] = shared_sm // per_group
    limiter = min(limits, key=lambda k: (limits[k], k == "registers"))  # a tie: the limit registers cannot lift
    groups = limits[limiter]
    return Occupancy(groups, limiter, groups * warps, max_warps)
