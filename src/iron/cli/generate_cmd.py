"""``iron generate``: run a Llama-family checkpoint on Iron kernels (iron.model) and print the new tokens and the
prefill and decode speeds; ``--json`` prints one JSON object instead."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click


def parse_ids(text: str) -> list[int]:
    """``"1,2, 3"`` -> [1, 2, 3]; a click error naming the flag for anything else."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise click.BadParameter("give at least one token id, e.g. --prompt-ids 1,2,3", param_hint="--prompt-ids")
    ids = []
    for p in parts:
        try:
            ids.append(int(p))
        except ValueError:
            raise click.BadParameter(f"{p!r} is not a token id; give comma-separated integers, e.g. 1,2,3",
                                     param_hint="--prompt-ids") from None
    return ids


def _tokenizer(model_dir: str):
    """The folder's tokenizer.json through the ``tokenizers`` package, or None where either is missing."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_file(str(path))


def _prompt(model_dir: str, prompt_ids: str | None, prompt_text: str | None, tokenizer) -> list[int]:
    if (prompt_ids is None) == (prompt_text is None):
        raise click.UsageError("give the prompt as --prompt-ids 1,2,3 or as --prompt TEXT (one of them)")
    if prompt_ids is not None:
        return parse_ids(prompt_ids)
    if tokenizer is None:
        why = "no tokenizer.json in " + model_dir if not (Path(model_dir) / "tokenizer.json").is_file() else \
            "the tokenizers package is not installed (pip install tokenizers)"
        raise click.UsageError(f"--prompt needs a tokenizer: {why}; give --prompt-ids instead")
    return list(tokenizer.encode(prompt_text).ids)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


@click.command(short_help="Run a Llama-family checkpoint: prefill a prompt, decode new tokens.")
@click.argument("model_dir", metavar="MODEL_DIR")
@click.option("--prompt-ids", default=None, metavar="ID,ID,...", help="The prompt as comma-separated token ids.")
@click.option("--prompt", "prompt_text", default=None, metavar="TEXT",
              help="The prompt as text (needs tokenizer.json in MODEL_DIR and the tokenizers package).")
@click.option("--max-new-tokens", default=32, show_default=True, type=click.IntRange(min=1),
              help="How many tokens to generate.")
@click.option("--backend", default=None, help="Backend to run on (default: IRON_BACKEND, else the best present).")
@click.option("--dtype", type=click.Choice(["f32", "f16", "bf16"]), default=None,
              help="Run in this dtype, the weights cast at load (default: the checkpoint's).")
@click.option("--quantize", type=click.Choice(["q4", "q8"]), default=None,
              help="Store the layers' projections 4- or 8-bit affine, group-wise (dequantizing kernels).")
@click.option("--group-size", type=click.Choice(["32", "64", "128"]), default="64", show_default=True,
              help="With --quantize: input features per scale and bias.")
@click.option("--temperature", type=float, default=None,
              help="Sample from softmax(logits / T) instead of taking the argmax (greedy without it).")
@click.option("--top-p", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True,
              help="With --temperature: keep the smallest set of top tokens whose probability reaches P.")
@click.option("--top-k", type=click.IntRange(1, 64), default=64, show_default=True,
              help="With --temperature: draw among the K most likely tokens (at most 64).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sampling draws.")
@click.option("--ignore-eos", is_flag=True, help="Do not stop at the model's end-of-sequence tokens.")
@click.option("--warmup", is_flag=True,
              help="Run the prompt once untimed first, so the speeds exclude compiling the kernels.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: tokens, last_prefill_logits, prefill_tokens_per_s, decode_tokens_per_s.")
def generate(model_dir: str, prompt_ids: str | None, prompt_text: str | None, max_new_tokens: int,
             backend: str | None, dtype: str | None, quantize: str | None, group_size: str, temperature: float | None,
             top_p: float, top_k: int, seed: int, ignore_eos: bool, warmup: bool, as_json: bool) -> None:
    """Load the Hugging Face checkpoint in MODEL_DIR (config.json + *.safetensors; Llama 2/3, Mistral, Qwen2), run
    the prompt, then generate up to --max-new-tokens tokens with the KV cache on the device, greedy unless
    --temperature is given. Prints the new tokens (and their text where a tokenizer is available) and the prefill and
    decode speeds in tokens/s.
    """
    from ..model import Llama
    from ..model import generate as run_generate

    tokenizer = _tokenizer(model_dir) if prompt_text is not None or not as_json else None
    prompt = _prompt(model_dir, prompt_ids, prompt_text, tokenizer)
    model = Llama.load(model_dir, dtype=dtype, backend=backend, quantize=quantize, group=int(group_size))
    stops = () if ignore_eos else model.config.eos_token_ids
    kwargs = dict(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed, stop_ids=stops, warmup=warmup)
    if as_json or not _interactive():
        result = run_generate(model, prompt, max_new_tokens, **kwargs)
    else:
        result = _with_progress(model, prompt, max_new_tokens, kwargs, run_generate)
    if as_json:
        click.echo(json.dumps({"tokens": result.tokens,
                               "last_prefill_logits": [float(x) for x in result.last_prefill_logits],
                               "prefill_tokens_per_s": _finite(result.prefill_tokens_per_s),
                               "decode_tokens_per_s": _finite(result.decode_tokens_per_s)}))
        return
    _print_result(result, tokenizer, model)


def _interactive() -> bool:
    """Whether a progress display has a terminal to show on."""
    return sys.stderr.isatty()


def _with_progress(model, prompt, max_new_tokens, kwargs, run_generate):
    """The run with a progress bar on the terminal (stderr), advanced as each token arrives."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True, console=_stderr_console()) as progress:
        task = progress.add_task(f"prefill ({len(prompt)} tokens)", total=max_new_tokens)

        def on_token(step: int, token: int) -> None:
            progress.update(task, completed=step + 1, description="decode")

        return run_generate(model, prompt, max_new_tokens, on_token=on_token, **kwargs)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def _print_result(result, tokenizer, model) -> None:
    click.echo(f"tokens: {' '.join(str(t) for t in result.tokens)}")
    if tokenizer is not None:
        click.echo(f"text: {tokenizer.decode(result.tokens)}")
    click.echo(f"prefill: {result.prompt_len} tokens in {result.prefill_s * 1e3:.1f} ms "
               f"({result.prefill_tokens_per_s:.1f} tokens/s)")
    decode = result.decode_tokens_per_s
    steps = len(result.tokens) - 1
    click.echo(f"decode: {steps} tokens in {result.decode_s * 1e3:.1f} ms ({decode:.1f} tokens/s)" if decode
               else "decode: no decode step (the one new token comes from the prefill)")
    note = ", stopped at an end-of-sequence token" if result.stopped else ""
    click.echo(f"backend {model.backend}, {model.dtype}, {model.config.model_type} with {model.config.num_layers} "
               f"layers{note}")
