"""What ``iron build`` writes per backend: a compiled variant -> the artifacts' bytes plus that backend's launch facts.

Each backend's ``artifacts`` method calls its writer here. A writer returns a list of ``Emitted``: HIP writes a source
per wavefront size and a code object per AMD target; Metal its source and, with ``--metallib``, the compiled library.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir.variant import Variant


@dataclass(frozen=True)
class Emitted:
    """What a writer produces for one variant.

    ``details`` is merged into the artifact's manifest record; ``arg_details`` (Iron parameter name -> fields) into
    that argument's record (e.g. its descriptor binding).
    """

    suffix: str
    data: bytes
    entry: str
    shared_static: int
    shared_dynamic: int
    details: dict[str, Any] = field(default_factory=dict)
    arg_details: dict[str, dict[str, Any]] = field(default_factory=dict)


def _c_params(src) -> list[dict[str, Any]]:
    """The emitted kernel's parameters in order (a C-family ``KernelSource``): what a host passes, and as what."""
    return [{"name": p.name, "kind": p.kind, "ctype": p.ctype, "dtype": str(p.dtype), "source": p.source,
             **({"axis": p.axis} if p.kind == "grid" else {})} for p in src.params]


def _vector(src) -> dict[str, Any] | None:
    return None if src.vector is None else {"entry": src.vector.entry, "width": src.vector.width,
                                            "buffers": list(src.vector.buffers)}


def _static_shared(src) -> int:
    # shared_bytes counts the dynamic buffer too when the arrays were moved there
    return max(src.shared_bytes - src.dynamic_shared_bytes, 0)


def write_cuda(variant: Variant) -> Emitted:
    from ..codegen import emit_cuda

    src = emit_cuda(variant.kernel)
    return Emitted(".cu", src.source.encode(), src.entry, _static_shared(src), src.dynamic_shared_bytes,
                   {"cuda": {"params": _c_params(src), "vector": _vector(src)}})


def write_hip(variant: Variant, targets: Sequence[str], compile_for: Any) -> list[Emitted]:
    """``_wave64.hip`` / ``_wave32.hip``: the HIP source for each wavefront size the ``targets`` need (both when
    there are none: the source depends on the wavefront only), and ``_<target>.hsaco``: the code object hipRTC
    compiles for each AMD target through ``compile_for(variant, target)`` (the runtime's compile and disk cache)."""
    from ..codegen.cfamily.hip import emit_hip, wavefront_of

    wave_of = {t: wavefront_of(t) for t in targets}
    out = []
    for wave in sorted(set(wave_of.values())) if targets else (32, 64):
        src = emit_hip(variant.kernel, wave)
        facts = {"wavefront": wave, "targets": [t for t in targets if wave_of[t] == wave], "params": _c_params(src),
                 "vector": _vector(src)}
        out.append(Emitted(f"_wave{wave}.hip", src.source.encode(), src.entry, _static_shared(src),
                           src.dynamic_shared_bytes, {"hip": facts}))
    for target in targets:
        src = emit_hip(variant.kernel, wave_of[target])
        code = compile_for(variant, target)
        facts = {"wavefront": wave_of[target], "target": target, "params": _c_params(src), "vector": _vector(src)}
        out.append(Emitted(f"_{target}.hsaco", code, src.entry, _static_shared(src), src.dynamic_shared_bytes,
                           {"hip": facts}))
    return out


def write_metal(variant: Variant, metallib: bool = False) -> list[Emitted]:
    """``.metal``: the MSL -- the bytes the Metal runtime loads and the msl-cpu model compiles -- with its binding
    facts; with ``metallib``, also ``.metallib`` compiled by Apple's toolchain (``xcrun metal`` + ``metallib``,
    macOS only)."""
    from ..codegen import emit_msl
    from ..codegen.cfamily.msl import msl_version

    version = msl_version()
    src = emit_msl(variant.kernel, version=version)
    facts = {"params": _c_params(src),
             "threadgroup": [{"index": j, "name": name, "bytes": size, "length": -(-size // 16) * 16}
                             for j, (name, size) in enumerate(src.threadgroup)],
             "attributes": [{"name": name, "ctype": ctype, "attribute": attr} for ctype, name, attr in src.attributes],
             "dispatch": "dispatchThreadgroups", "language_version": version, "math_mode": "safe"}
    # threadgroup arrays are parameters: their bytes are set by the host, so none are static in the function
    out = [Emitted(".metal", src.source.encode(), src.entry, 0, src.shared_bytes, {"metal": facts})]
    if metallib:
        out.append(Emitted(".metallib", compile_metallib(src.source, src.kernel, version), src.entry, 0,
                           src.shared_bytes,
                           {"metal": facts}))
    return out


def compile_metallib(source: str, name: str, version: str = "3.1") -> bytes:
    """MSL -> .metallib with Apple's command-line tools (``xcrun -sdk macosx metal`` then ``metallib``), with
    fast math off and the MSL version the source was written for, as the runtime compiles it; an IronError off macOS
    or without the tools."""
    import platform
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    from ..errors import IronError

    xcrun = shutil.which("xcrun")
    if xcrun is None:
        where = "macOS with Xcode's command-line tools" if platform.system() == "Darwin" else \
            f"macOS (this is {platform.system() or 'an unknown system'})"
        raise IronError(f"--metallib needs Apple's Metal compiler (xcrun metal), which needs {where}; the .metal "
                        "sources are written without it")
    with tempfile.TemporaryDirectory(prefix="iron-metallib-") as tmp:
        metal, air, lib = (Path(tmp) / f"{name}{ext}" for ext in (".metal", ".air", ".metallib"))
        metal.write_text(source)
        steps = ([xcrun, "-sdk", "macosx", "metal", f"-std=metal{version}", "-fno-fast-math", "-c", str(metal), "-o",
                  str(air)],
                 [xcrun, "-sdk", "macosx", "metallib", str(air), "-o", str(lib)])
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise IronError(f"{' '.join(cmd[1:4])} failed on kernel {name}:\n{proc.stderr.strip()}")
        return lib.read_bytes()


def write_spirv(variant: Variant) -> Emitted:
    from ..codegen.spirv import emit_spirv

    spk = emit_spirv(variant.kernel)
    push = [{"name": p.name, "offset": p.offset, "dtype": str(p.dtype)} for p in spk.push]
    arg_details: dict[str, dict[str, Any]] = {b.param: {"binding": b.binding} for b in spk.buffers}
    arg_details.update({p.name: {"offset": p.offset} for p in spk.push})
    details = {"vulkan": {"descriptor_set": 0, "push": push, "push_size": spk.push_size,
                          "group_size_spec_ids": list(spk.local_size_spec_ids),
                          # shared arrays sized at launch: length parameter -> its spec id (u32 elements)
                          "shared_length_spec_ids": dict(spk.length_spec_ids),
                          "features": sorted(spk.features)}}
    return Emitted(".spv", spk.words, spk.entry, spk.shared_bytes, 0, details, arg_details)


