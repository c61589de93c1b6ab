"""Ahead-of-time builds: write each variant's artifacts and the manifest that tells a host how to launch them.

Files are ``<kernel>_<dtype><suffix>``: ``.cu`` (CUDA source), ``.spv`` (SPIR-V), ``_wave64.hip`` / ``_wave32.hip``
(HIP source per wavefront size), ``_<gfx target>.hsaco`` (AMD code objects, one per ``--target``), ``.metal`` (MSL)
and, with ``--metallib``, ``.metallib`` (macOS).

``manifest.json`` is the full description (sorted keys, so two builds of the same sources are byte-identical);
``manifest.txt`` carries the same facts in a line format a C host reads with ``sscanf`` (see
examples/vulkan_host/README.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CompileError, IronError
from ..ir import ops as O
from ..ir import types as t
from ..ir.variant import Variant
from ..runtime import get_backend
from ..version import __version__
from .targets import BuildTarget
from .writers import MANIFEST_LINES, PLANNED, TARGETED, WRITERS, Emitted, emit_artifacts

MANIFEST_FORMAT = 1


def iron_version() -> str:
    return __version__


def source_hash(target: BuildTarget) -> str:
    """sha256 of the kernel's Python source text (what a host compares to know its artifacts are current)."""
    src = target.kernel._src
    text = "\n".join(src.lines[n] for n in sorted(src.lines))
    return hashlib.sha256(text.encode()).hexdigest()


def buffer_access(variant: Variant) -> dict[str, str]:
    """Iron buffer name -> "read", "write", "readwrite" (or "none"), from the optimised IR's loads/stores/atomics."""
    reads: set[int] = set()
    writes: set[int] = set()
    for op in variant.kernel.walk():  # the op table says which buffer operands each op reads and writes
        reads.update(v.uid for v in O.buffers_read(op))
        writes.update(v.uid for v in O.buffers_written(op))
    names = {(True, True): "readwrite", (True, False): "read", (False, True): "write", (False, False): "none"}
    return {p.name: names[(p.value.uid in reads, p.value.uid in writes)]
            for p in variant.kernel.params if p.kind == "buffer"}


def _args(variant: Variant, emitted: Emitted) -> list[dict[str, Any]]:
    access = buffer_access(variant)
    out = []
    for p in variant.kernel.params:  # constexprs are folded away: only runtime arguments remain, in order
        if p.kind == "buffer":
            rec = {"name": p.name, "kind": "buffer", "dtype": str(p.type.elem), "access": access[p.name]}
        else:
            rec = {"name": p.name, "kind": "scalar", "dtype": str(p.type), "access": "read"}
        rec.update(emitted.arg_details.get(p.name, {}))
        out.append(rec)
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file and ``os.replace``, so a reader never sees half an artifact."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check_backends(backends: Iterable[str]) -> list[str]:
    """The requested backends in a fixed order; unknown or not-yet-written ones are an error with a sentence."""
    wanted = list(dict.fromkeys(backends))
    for b in wanted:
        if b in PLANNED:
            raise IronError(f"iron build cannot write {PLANNED[b]} for backend {b} yet: its emitter lands with its "
                            f"own issue; available: {', '.join(WRITERS)}")
        if b not in WRITERS:
            raise IronError(f"unknown backend {b!r} for iron build; available: {', '.join(WRITERS)}")
    return [b for b in WRITERS if b in wanted]


def check_targets(backends: Sequence[str], targets: Iterable[str]) -> list[str]:
    """The ``--target`` list, deduplicated, each checked by the backends that take targets (AMD processors for hip);
    a target that cannot be built is an error naming the flag, raised before anything is written."""
    wanted = list(dict.fromkeys(targets))
    if not wanted:
        return []
    users = [b for b in backends if b in TARGETED]
    names = "; ".join(f"--target names {what} for --backend {b}" for b, what in TARGETED.items())
    if not users:
        raise IronError(f"--target {','.join(wanted)}: none of the backends being built ({', '.join(backends)}) takes "
                        f"targets; {names}")
    for target in wanted:
        for b in users:
            try:
                get_backend(b).check_build_target(target)
            except CompileError as e:
                raise IronError(f"--target {target}: {e.message}", hint=e.hint) from None
        if ":" in target:
            raise IronError(f"--target {target}: iron build compiles for a processor without feature settings "
                            f"(--target {target.split(':')[0]}): such a code object loads whatever the GPU's xnack and "
                            "sramecc modes are")
    return wanted


def build(targets: Sequence[BuildTarget], out_dir: str | os.PathLike, backends: Iterable[str] = tuple(WRITERS),
          dtypes: Iterable[str] | None = None, compile_targets: Iterable[str] = (), metallib: bool = False
          ) -> dict[str, Any]:
    """Compile every target's variants for ``backends`` into ``out_dir``; write manifest.json and manifest.txt.

    ``dtypes`` narrows the variants of ``Tensor[T]`` kernels (default: all). ``compile_targets`` (``--target``):
    AMD processors to compile HIP code objects for. Returns the manifest (as written).
    """
    backends = check_backends(backends)
    compile_targets = check_targets(backends, compile_targets)
    if metallib and "metal" not in backends:
        raise IronError(f"--metallib compiles the Metal sources, but the backends being built are "
                        f"{', '.join(backends)}; add --backend metal")
    if dtypes is not None:
        dtypes = list(dtypes)
        unknown = [d for d in dtypes if d not in t.SCALAR_TYPES]
        if unknown:
            raise IronError(f"unknown dtype {', '.join(unknown)}; use f32, f16, bf16")
    seen: dict[str, str] = {}
    for target in targets:
        where = f"{target.kernel.fn.__module__}.{target.kernel.fn.__qualname__}"
        if seen.setdefault(target.name, where) != where:
            raise IronError(f"two kernels named {target.name} ({seen[target.name]} and {where}) would write the same "
                            "files; build them into separate --out folders")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    artifacts = []
    for target in targets:
        constexprs = dict(target.constexprs)
        shash = source_hash(target)
        for dt in target.dtypes(dtypes):
            variant = target.kernel.variant(dt, tuple(v for _, v in target.constexprs))
            stem = target.name if dt is None else f"{target.name}_{dt}"
            for backend in backends:
                for emitted in emit_artifacts(backend, variant, compile_targets if backend in TARGETED else (),
                                              metallib):
                    path = out / f"{stem}{emitted.suffix}"
                    _write_atomic(path, emitted.data)
                    artifacts.append({
                        "kernel": target.name, "module": target.kernel.fn.__module__, "backend": backend,
                        "file": path.name, "sha256": hashlib.sha256(emitted.data).hexdigest(),
                        "bytes": len(emitted.data), "dtype": None if dt is None else str(dt),
                        "constexprs": constexprs, "entry": emitted.entry, "args": _args(variant, emitted),
                        "collectives": variant.collectives,
                        "shared_bytes": {"static": emitted.shared_static, "dynamic": emitted.shared_dynamic},
                        "source_hash": shash, **emitted.details,
                    })
    artifacts.sort(key=lambda a: a["file"])
    manifest = {"format": MANIFEST_FORMAT, "iron_version": iron_version(), "artifacts": artifacts}
    _write_atomic(out / "manifest.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    _write_atomic(out / "manifest.txt", manifest_text(manifest).encode())
    return manifest


def manifest_text(manifest: dict[str, Any]) -> str:
    """The line format: ``key value...`` per line, one ``artifact FILE`` ... ``end`` block per artifact.

    Every name in it is an identifier and every value a single token, so a C host splits on spaces.
    """
    lines = ["# iron build manifest (line format; manifest.json has the same facts)",
             f"format {manifest['format']}", f"iron_version {manifest['iron_version']}"]
    for a in manifest["artifacts"]:
        lines += [f"artifact {a['file']}", f"kernel {a['kernel']}", f"backend {a['backend']}", f"entry {a['entry']}",
                  f"dtype {a['dtype'] or '-'}", f"sha256 {a['sha256']}", f"source_hash {a['source_hash']}",
                  f"collectives {int(a['collectives'])}", f"shared_static {a['shared_bytes']['static']}",
                  f"shared_dynamic {a['shared_bytes']['dynamic']}"]
        lines += [f"constexpr {k} {_token(v)}" for k, v in sorted(a["constexprs"].items())]
        for arg in a["args"]:  # arg NAME KIND DTYPE ACCESS [binding N | offset N]
            extra = ""
            if "binding" in arg:
                extra = f" binding {arg['binding']}"
            elif "offset" in arg:
                extra = f" offset {arg['offset']}"
            lines.append(f"arg {arg['name']} {arg['kind']} {arg['dtype']} {arg['access']}{extra}")
        for key, writer_lines in MANIFEST_LINES.items():  # the writer's own facts (one key per record)
            if key in a:
                lines += writer_lines(a[key])
        lines.append("end")
    return "\n".join(lines) + "\n"


def _token(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
