"""``iron``: inspect kernels, run the benchmark, list devices."""

from __future__ import annotations

import sys

import click

from ..errors import IronError


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


@cli.command()
@click.argument("kernel_spec", metavar="MODULE:KERNEL")
@click.option("--dtype", default=None, help="Variant to show for Tensor[T] kernels: f32, f16 or bf16 (default f32).")
@click.option("--ir", "show_ir", is_flag=True, help="Print the optimised IR (the default view).")
@click.option("--passes", "show_passes", is_flag=True, help="Print the IR after the front-end and after each pass.")
@click.option("--backend", default=None, help="Print the generated source for this backend instead of the IR.")
@click.option("-D", "defines", multiple=True, metavar="NAME=VALUE", help="Value of a constexpr parameter.")
def inspect(kernel_spec: str, dtype: str | None, show_ir: bool, show_passes: bool, backend: str | None,
            defines: tuple[str, ...]) -> None:
    """Show a kernel's IR, its IR after each pass, or its generated source.

    MODULE:KERNEL is an importable module and attribute (mypkg.ops:softmax) or a file (path/ops.py:softmax).
    """
    from .loader import load_kernel, parse_constexprs

    k = load_kernel(kernel_spec)
    constexprs = parse_constexprs(defines)
    if show_passes:
        for stage, text in k.passes(dtype=dtype, **constexprs):
            click.echo(f"// ----- after {stage} -----")
            click.echo(text)
    if backend:
        click.echo(k.source(backend, dtype=dtype, **constexprs))
    if show_ir or not (show_passes or backend):
        click.echo(k.ir(dtype=dtype, **constexprs), nl=False)


@cli.command()
@click.option("--filter", "pattern", default=None, help="Only kernels whose name contains this text.")
@click.option("--backend", default=None, help="Backend to run on (default: the best present).")
@click.option("--dtype", "dtypes", multiple=True, help="Only these dtypes (repeatable).")
@click.option("--json", "json_path", default=None, help="Also write the results as JSON to this file.")
def bench(pattern: str | None, backend: str | None, dtypes: tuple[str, ...], json_path: str | None) -> None:
    """Time the standard kernels against their reference and check them against their oracle."""
    from ..bench.runner import run_bench

    ok = run_bench(pattern=pattern, backend=backend, dtypes=dtypes, json_path=json_path)
    sys.exit(0 if ok else 1)


@cli.command()
def device() -> None:
    """List the backends, whether each can run here (and why not), and the devices they see."""
    from rich.console import Console
    from rich.table import Table

    from ..runtime import BACKENDS, PLANNED, get_backend, unavailable_reason

    table = Table(title="iron device")
    for col in ("backend", "status", "device"):
        table.add_column(col)
    for name in [*BACKENDS, *PLANNED]:
        reason = unavailable_reason(name)
        detail = ""
        if reason is None and name == "cuda":
            info = get_backend("cuda").info()
            detail = (f"{info['name']} ({info['arch']}): {info['sms']} SMs, {info['memory_gib']} GiB, "
                      f"{info['sm_clock_mhz']} MHz SM / {info['memory_clock_mhz']} MHz memory, "
                      f"L2 {info['l2_mib']} MiB, "
                      f"shared memory {info['max_shared_per_group_kib']} KiB per group, warp {info['warp_size']}; "
                      f"features: {', '.join(info['features'])}")
        elif reason is None and name == "cpu":
            from ..runtime.cpu import simd_width

            detail = f"NumPy interpreter, SIMD width {simd_width()} (IRON_CPU_SIMD_WIDTH)"
        table.add_row(name, "[green]available" if reason is None else f"[red]unavailable[/]: {reason}", detail)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def main() -> None:
    cli(prog_name="iron")


if __name__ == "__main__":
    main()
