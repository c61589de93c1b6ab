"""``iron``: inspect kernels, run the benchmark and the oracle tests, save and compare baselines, list devices."""

from __future__ import annotations

import sys

import click

from ..errors import IronError
from .discover import discover, module_option


class _IronGroup(click.Group):
    """Turns IronErrors into a located message and exit code 1 instead of a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except IronError as e:
            click.echo(str(e), err=True)
            sys.exit(1)


@click.group(cls=_IronGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="wh-iron", prog_name="iron")
def cli() -> None:
    """Iron: GPU kernels written once in Python, run on every backend."""


@cli.command(short_help="Show a kernel's IR, its passes, or its generated source.")
@click.argument("kernel_spec", metavar="MODULE:KERNEL")
@click.option("--dtype", default=None, help="Variant to show for Tensor[T] kernels: f32, f16 or bf16 (default f32).")
@click.option("--ir", "show_ir", is_flag=True, help="Print the optimised IR (the default view).")
@click.option("--passes", "show_passes", is_flag=True, help="Print the IR after the front-end and after each pass.")
@click.option("--backend", default=None, help="Print the generated source for this backend instead of the IR.")
@click.option("-D", "defines", multiple=True, metavar="NAME=VALUE", help="Value of a constexpr parameter.")
@click.option("--resources", "show_resources", is_flag=True,
              help="With --backend cuda: registers, shared memory, stack frame, spills and local memory per variant "
                   "(NVRTC's ptxas report) instead of the source; with --backend vulkan: the driver's pipeline "
                   "statistics (VK_KHR_pipeline_executable_properties; NVIDIA's: registers, shared memory, ...).")
@click.option("--sass", "show_sass", is_flag=True,
              help="With --backend cuda: the SASS ptxas made (nvdisasm of NVRTC's cubin; no GPU needed), each "
                   "function's instruction count and commonest opcodes first, instead of the source.")
@click.option("--arch", default=None, metavar="sm_XX",
              help="Target of --resources and --sass (default: $IRON_CUDA_ARCH, else sm_90).")
@click.option("--group", "group", default=None, type=click.IntRange(1, 1024), metavar="THREADS",
              help="With --resources: the groups of THREADS threads an SM of the target holds at once (the "
                   "occupancy calculator's arithmetic), and what limits them; on Vulkan the group size the "
                   "pipeline is built for (default 256).")
def inspect(kernel_spec: str, dtype: str | None, show_ir: bool, show_passes: bool, backend: str | None,
            defines: tuple[str, ...], show_resources: bool = False, show_sass: bool = False,
            arch: str | None = None, group: int | None = None) -> None:
    """Show a kernel's IR, its IR after each pass, its generated source, or (CUDA) its resource usage.

    MODULE:KERNEL is an importable module and attribute (mypkg.ops:softmax) or a file (path/ops.py:softmax).
    """
    from .loader import load_kernel, parse_constexprs

    if show_resources and backend not in ("cuda", "vulkan"):
        raise click.UsageError("--resources reports what ptxas made of the CUDA source or the Vulkan driver of the "
                               "pipeline: add --backend cuda or --backend vulkan")
    if show_resources and backend == "vulkan" and (arch is not None or show_sass):
        raise click.UsageError("--arch and --sass are CUDA's: --backend vulkan --resources asks the device itself")
    if show_sass and backend != "cuda":
        raise click.UsageError("--sass shows what ptxas made of the CUDA source: add --backend cuda")
    if arch is not None and not (show_resources or show_sass):
        raise click.UsageError("--arch is the target of --resources and --sass: add --resources or --sass")
    if group is not None and not show_resources:
        raise click.UsageError("--group sizes the occupancy column of --resources (CUDA) or its pipeline (Vulkan): "
                               "add --resources")
    k = load_kernel(kernel_spec)
    constexprs = parse_constexprs(defines)
    dtypes = [dtype] if dtype or not k.generic else [str(d) for d in k.dtypes]  # --resources / --sass: every variant
    if show_resources and backend == "vulkan":
        from ..errors import IronError
        from . import vulkan_resources

        try:
            click.echo(vulkan_resources.render(k, dtypes, constexprs, group))
        except IronError as e:
            raise click.ClickException(str(e).splitlines()[0]) from None
        if show_passes or show_ir:
            click.echo()
        show_resources, backend = False, None  # the report takes the place of the source
        shown_vulkan = True
    else:
        shown_vulkan = False
    if show_resources:
        from . import resources

        target = arch or resources.default_arch()
        if group is not None:
            from ..codegen.occupancy import capability

            try:
                capability(target)
            except ValueError as e:  # a target without occupancy limits: said before anything compiles
                raise click.UsageError(str(e)) from None
        click.echo(resources.render(k, resources.variant_reports(k, dtypes, constexprs, target), target, group))
        if show_passes or show_ir or show_sass:
            click.echo()
        backend = None  # the report takes the place of the source
    if show_sass:
        from . import resources

        try:
            click.echo(resources.render_sass(k, dtypes, constexprs, arch or resources.default_arch()))
        except RuntimeError as e:
            raise click.ClickException(str(e)) from None
        if show_passes or show_ir:
            click.echo()
        backend = None  # the listing takes the place of the source
    if show_passes:
        for stage, text in k.passes(dtype=dtype, **constexprs):
            click.echo(f"// ----- after {stage} -----")
            click.echo(text)
    if backend:
        click.echo(k.source(backend, dtype=dtype, **constexprs))
    if show_ir or not (show_passes or backend or show_resources or show_sass or shown_vulkan):
        click.echo(k.ir(dtype=dtype, **constexprs), nl=False)


_FILTER_HELP = "Only kernels whose name contains this text, or matches it as a glob (std/*/exp)."


@cli.command(short_help="Time kernels vs their reference; check each against its oracle.")
@click.option("--filter", "pattern", default=None, help=_FILTER_HELP)
@click.option("--backend", default=None, help="Backend to run on (default: the best present).")
@click.option("--dtype", "dtypes", multiple=True, help="Only these dtypes (repeatable).")
@click.option("--json", "json_path", default=None, help="Also write the results as JSON to this file.")
@click.option("-v", "--verbose", is_flag=True,
              help="Add %BW of the measured copy ceiling, arithmetic intensity (FLOP/B) and a verdict per row.")
@click.option("--plot", "plot_path", default=None, metavar="F.png",
              help="Also draw a roofline chart (arithmetic intensity vs GFLOP/s) to this file; needs matplotlib.")
@module_option
def bench(pattern: str | None, backend: str | None, dtypes: tuple[str, ...], json_path: str | None,
          verbose: bool, modules: tuple[str, ...], plot_path: str | None = None) -> None:
    """Time the registered kernels against their reference and check them against their oracle.

    Every run is also saved as the last run (for `iron snap` and `iron diff`).
    """
    from ..harness.runner import run_bench

    discover(modules)
    ok = run_bench(pattern=pattern, backend=backend, dtypes=dtypes, json_path=json_path, verbose=verbose,
                   plot_path=plot_path)
    sys.exit(0 if ok else 1)


@cli.command("test", short_help="Check every registered kernel against its float64 oracle.")
@click.option("--filter", "pattern", default=None, help=_FILTER_HELP)
@click.option("--backend", default=None, help="Backend to run on (default: the best present).")
@click.option("--dtype", "dtypes", multiple=True, help="Only these dtypes (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of the random inputs (default: fresh; printed).")
@module_option
def test_cmd(pattern: str | None, backend: str | None, dtypes: tuple[str, ...], seed: int | None,
             modules: tuple[str, ...]) -> None:
    """Check every registered kernel against its NumPy float64 oracle: every dtype, every host shape.

    Exits 1 if any row is outside its tolerance (or fails to run), printing its max abs/rel error and worst index.
    """
    import numpy as np

    from ..harness.conformance import print_tests, run_tests
    from ..runtime import best_backend

    discover(modules)
    backend = backend or best_backend()
    seed = seed if seed is not None else int(np.random.SeedSequence().entropy % (1 << 63))
    rows = run_tests(pattern=pattern, backend=backend, dtypes=dtypes, rng=np.random.default_rng(seed))
    if not rows:
        click.echo(f"no registered kernel matches {pattern!r}", err=True)
        sys.exit(1)
    print_tests(rows, backend)
    click.echo(f"seed: {seed} (replay with --seed {seed})")
    sys.exit(0 if all(r.ok for r in rows) else 1)


@cli.command(short_help="List the backends, whether each runs here, and their devices.")
def device() -> None:
    """List the backends, whether each can run here (and why not), and the devices they see."""
    from rich.console import Console
    from rich.table import Table

    from ..runtime import BACKENDS, PLANNED, backend_class, get_backend, unavailable_reason

    table = Table(title="iron device")
    for col in ("backend", "status", "device"):
        table.add_column(col)
    for name in [*BACKENDS, *PLANNED]:
        reason = unavailable_reason(name)
        detail = get_backend(name).describe() if reason is None else ""
        note = backend_class(name).unverified if name in BACKENDS else None
        if note and "verified" not in detail:
            detail = (detail + "; " if detail else "") + note
        table.add_row(name, "[green]available" if reason is None else f"[red]unavailable[/]: {reason}", detail)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


from .baseline_cmd import diff, snap  # noqa: E402 - the baseline commands check each JSON file they read
from .build_cmd import build  # noqa: E402 - the command lives in its own module
from .generate_cmd import generate  # noqa: E402
from .update import update  # noqa: E402

build.short_help = build.short_help or "Write .cu/.spv artifacts and a manifest for non-Python hosts."
cli.add_command(build)
cli.add_command(snap)
cli.add_command(diff)
cli.add_command(generate)
cli.add_command(update)


def main() -> None:
    cli(prog_name="iron")


if __name__ == "__main__":
    main()
