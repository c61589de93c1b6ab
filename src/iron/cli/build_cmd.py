"""``iron build``: ahead-of-time artifacts (``.cu``, ``.spv``, ``.hip``, ``.hsaco``) and their manifest, for hosts
that are not Python."""

from __future__ import annotations

import click

from .discover import discover, module_option


def _split(values: tuple[str, ...]) -> list[str]:
    """``--dtype f32,f16 --dtype bf16`` -> ["f32", "f16", "bf16"]."""
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


@click.command(short_help="Write .cu/.spv/.hip/.metal artifacts and a manifest for C hosts.")
@click.argument("kernel_specs", nargs=-1, metavar="[MODULE:KERNEL]...")
@click.option("--backend", "backends", multiple=True, metavar="B[,B...]",
              help="Backends to write artifacts for: cuda (.cu), vulkan (.spv), hip (_wave64.hip, _wave32.hip), metal "
                   "(.metal); "
                   "comma-separated or repeated (default: all of them).")
@click.option("--target", "compile_targets", multiple=True, metavar="T[,T...]",
              help="AMD processors to compile HIP code objects for, one _<T>.hsaco each (needs hipRTC, no GPU), e.g. "
                   "gfx90a,gfx1030; the HIP sources are then those of these targets' wavefront sizes.")
@click.option("--metallib", is_flag=True,
              help="Also compile each .metal into a .metallib with Apple's toolchain (xcrun metal; macOS only).")
@click.option("--dtype", "dtypes", multiple=True, metavar="D[,D...]",
              help="Only these variants of Tensor[T] kernels: f32, f16, bf16 (default: every dtype).")
@click.option("-D", "defines", multiple=True, metavar="NAME=VALUE",
              help="Value of a constexpr parameter (repeatable); defaults to the kernel module's global NAME.")
@click.option("--out", "out_dir", default="iron-build", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the artifacts and manifest.json / manifest.txt.")
@module_option
def build(kernel_specs: tuple[str, ...], backends: tuple[str, ...], dtypes: tuple[str, ...],
          defines: tuple[str, ...], out_dir: str, modules: tuple[str, ...] = (),
          compile_targets: tuple[str, ...] = (), metallib: bool = False) -> None:
    """Write ahead-of-time artifacts for kernels: <kernel>_<dtype>.cu, .spv, _wave64.hip, _wave32.hip and .metal
    per variant (and _<target>.hsaco per --target, .metallib with --metallib), plus manifest.json (entry points,
    argument bindings, push-constant layout, C parameters, threadgroup lengths, wavefront sizes, shared memory,
    constexprs, hashes) and manifest.txt (the same facts, one `key value` per line, for C hosts).

    With no MODULE:KERNEL, builds every kernel of the standard library (iron.std) and of the modules named by
    --module / IRON_KERNEL_PATH.
    """
    from ..build import WRITERS, std_targets, target_for
    from ..build import build as run_build
    from ..errors import IronError
    from .loader import load_kernel, parse_constexprs

    constexprs = parse_constexprs(defines)
    if kernel_specs:
        kernels = [load_kernel(spec) for spec in kernel_specs]
        unused = [n for n in constexprs if not any(n in k.constexpr_names for k in kernels)]
        if unused:
            raise IronError(f"-D {', '.join(unused)}: no kernel being built has such a constexpr parameter")
        targets = [target_for(k, constexprs) for k in kernels]
    else:
        if constexprs:
            raise IronError("-D applies to the kernels named on the command line; the std build uses each module's "
                            "own constexpr values")
        from ..build.targets import kernels_of

        targets = std_targets()
        # user modules from --module / IRON_KERNEL_PATH build beside the standard library
        targets += [target_for(k) for m in discover(modules) for k in kernels_of(m)]
    manifest = run_build(targets, out_dir, backends=_split(backends) or list(WRITERS), dtypes=_split(dtypes) or None,
                         compile_targets=_split(compile_targets), metallib=metallib)
    for a in manifest["artifacts"]:
        click.echo(f"{a['file']:<36} {a['backend']:<7} {a['bytes']:>8} bytes  entry {a['entry']}")
    click.echo(f"{len(manifest['artifacts'])} artifacts and manifest.json, manifest.txt in {out_dir}")
