"""Build tiny Llama-family checkpoints and record transformers' outputs for them, as reference data for tests.

Run where torch and transformers are installed: the H200 machine, or a CPU venv apart from the project's own
(the project's .venv and CI have no torch, and need none to *use* the data), e.g.

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0 'transformers==5.17.*' safetensors numpy   # what made the data
    /tmp/refvenv/bin/python scripts/make_model_refs.py            # writes tests/models/<variant>/

For each variant (llama2, llama3, mistral, qwen2, and llama3_bf16: the llama3 weights rounded to bfloat16) it builds
a tiny model from a config (hidden 64, 2 layers, 4 heads, head_dim 16, vocab 256), fills it with seeded random
weights, saves it with `save_pretrained(safe_serialization=True)` and writes beside it:

  config.json, generation_config.json, model.safetensors    transformers' own files (each folder well under 1 MB)
  ref.npz    logits recorded from transformers, for a fixed 12-token prompt and the 16-token greedy continuation:
             prefill_logits (12, vocab)   float64 run: model.double(), with transformers' float32 islands lifted
                                          to float64 (see below); the reference to compare against
             step_logits (16, vocab)      same run, a manual greedy decode loop through the KV cache: row i holds
                                          the logits from which greedy token i was taken (row 0 is the last prompt
                                          position)
             *_f64_stock                  model.double() exactly as transformers ships it
             *_f32 (or *_bf16)            the checkpoint run in its saved dtype, as transformers ships it
  ref.json   variant, versions, seed, init std, prompt, greedy tokens (from generate() in every run and from the
             manual loop), the top-2 logit gap at every greedy step, the gaps between the runs, the command line

Every number in ref.npz comes from transformers' modelling code, never from Iron: Iron's model runner is checked
against it, and tests/models/test_refs_data.py checks it against an independent NumPy forward pass.

transformers' "float64" run is not all float64: RMSNorm casts its input to float32, eager attention takes its
softmax in float32, and the rotary embedding builds inv_freq and its cos/sin tables in float32 whatever the model's
dtype. Those islands put ~1e-7 relative noise on the logits. The reference run lifts them (RMSNorm and softmax keep
float64, and the RoPE tables are built in float64 from the same formulas, checked against transformers' float32
inv_freq); the stock run is recorded too, so the size of that noise is on file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import platform
import re
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import safetensors
import torch
import transformers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

PROMPT = [1, 17, 42, 99, 123, 200, 7, 64, 255, 3, 128, 77]
NEW_TOKENS = 16
MIN_TOP2_GAP = 1e-3  # greedy steps closer than this could flip under float32 rounding: pick another seed

TINY = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    head_dim=16,
    max_position_embeddings=256,
    hidden_act="silu",
    bos_token_id=None,
    eos_token_id=None,  # generate() must never stop early on a random model's "eos"
    pad_token_id=None,
)

# variant -> (model class, config class, config overrides, seed, init std); the seeds were picked (std 0.2, seeds
# 0-29 tried) for a greedy path of 14-16 distinct tokens whose top-2 logit gaps all exceed 0.07
VARIANTS = {
    "llama2": (LlamaForCausalLM, LlamaConfig, dict(
        num_key_value_heads=4, rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}), 19, 0.2),
    "llama3": (LlamaForCausalLM, LlamaConfig, dict(
        num_key_value_heads=2, rms_norm_eps=1e-5, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}), 2, 0.2),
    "mistral": (MistralForCausalLM, MistralConfig, dict(
        num_key_value_heads=2, rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 17, 0.2),
    "qwen2": (Qwen2ForCausalLM, Qwen2Config, dict(
        num_key_value_heads=2, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}), 28, 0.2),
}


def build_model(variant: str) -> torch.nn.Module:
    """The variant's tiny model in float32, with seeded random weights larger than transformers' default init."""
    model_cls, config_cls, overrides, seed, std = VARIANTS[variant]
    config = config_cls(**TINY, **overrides, attn_implementation="eager")
    torch.manual_seed(seed)
    model = model_cls(config).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():  # a tied lm_head is the embedding: listed once
            noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
            if "norm" in name:
                param.copy_(1.0 + 0.2 * noise)  # not all ones, so a forward pass that skips them fails
            elif name.endswith("bias"):
                param.copy_(0.5 * noise)
            else:
                param.copy_(std * noise)
    return model


def rope_inv_freq64(config) -> torch.Tensor:
    """transformers' inv_freq formulas (default, llama3) evaluated in float64."""
    rope = config.rope_parameters
    dim = config.head_dim
    inv = 1.0 / rope["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    if rope["rope_type"] == "default":
        return inv
    if rope["rope_type"] != "llama3":
        raise ValueError(f"no float64 RoPE for rope_type {rope['rope_type']!r}")
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_len = rope["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old_len / low, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
    return torch.where(medium, smoothed, scaled)


def _rmsnorm64(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def _rotary64(inv_freq: torch.Tensor, scaling: float):
    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].to(torch.float64) * inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * scaling).to(x.dtype), (emb.sin() * scaling).to(x.dtype)

    return forward


@contextlib.contextmanager
def float64_islands_lifted(model):
    """Run a .double() model with RMSNorm, softmax and the RoPE tables in float64 too (transformers forces float32)."""
    rotary = model.model.rotary_emb
    inv64 = rope_inv_freq64(model.config)
    stock = rotary.inv_freq.double()
    if not torch.allclose(inv64, stock, rtol=1e-6, atol=0):
        raise AssertionError(f"float64 inv_freq {inv64.tolist()} disagrees with transformers' {stock.tolist()}")
    patched = [(m, m.forward) for m in model.modules() if type(m).__name__.endswith("RMSNorm")]
    for module, _ in patched:
        module.forward = types.MethodType(_rmsnorm64, module)
    patched.append((rotary, rotary.forward))
    rotary.forward = types.MethodType(_rotary64(inv64, rotary.attention_scaling), rotary)
    softmax = torch.nn.functional.softmax

    def softmax_keep_f64(x, dim=None, *args, dtype=None, **kwargs):
        return softmax(x, dim, *args, dtype=None if x.dtype == torch.float64 else dtype, **kwargs)

    torch.nn.functional.softmax = softmax_keep_f64
    try:
        yield model
    finally:
        torch.nn.functional.softmax = softmax
        for module, forward in patched:
            module.forward = forward


@torch.no_grad()
def record_run(model) -> dict:
    """Prefill logits, manual greedy loop (logits per step, through the KV cache) and generate()'s tokens."""
    ids = torch.tensor([PROMPT])
    out = model(input_ids=ids, use_cache=True)
    prefill = out.logits[0].double().numpy()
    logits, past = out.logits[0, -1], out.past_key_values
    steps, tokens = [], []
    for _ in range(NEW_TOKENS):
        token = int(torch.argmax(logits))
        steps.append(logits.double().numpy())
        tokens.append(token)
        out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
        logits, past = out.logits[0, -1], out.past_key_values
    generated = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                               min_new_tokens=NEW_TOKENS, eos_token_id=None, pad_token_id=0)
    return dict(prefill=prefill, steps=np.stack(steps), tokens=tokens,
                generate=[int(t) for t in generated[0, len(PROMPT):]])


def top2_gaps(step_logits: np.ndarray) -> list[float]:
    top = np.sort(step_logits, axis=-1)
    return [float(g) for g in top[:, -1] - top[:, -2]]


def gap(a: np.ndarray, b: np.ndarray) -> dict:
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return dict(max_abs=float(diff.max()), max_abs_over_max_logit=float(diff.max() / np.abs(b).max()))


def load(folder: Path, dtype: torch.dtype, model_cls) -> torch.nn.Module:
    return model_cls.from_pretrained(folder, dtype=dtype, attn_implementation="eager").eval()


def record_variant(name: str, folder: Path, model_cls, saved_dtype: torch.dtype, seed: int, std: float) -> dict:
    """Run the saved checkpoint three ways (float64 lifted, float64 stock, saved dtype) and write ref.npz/ref.json."""
    with float64_islands_lifted(load(folder, torch.float64, model_cls)) as model:
        ref = record_run(model)
    stock = record_run(load(folder, torch.float64, model_cls))
    low = record_run(load(folder, saved_dtype, model_cls))
    low_name = {torch.float32: "f32", torch.bfloat16: "bf16"}[saved_dtype]
    if ref["tokens"] != ref["generate"] or ref["tokens"] != stock["generate"]:
        raise AssertionError(f"{name}: greedy tokens disagree between runs: {ref['tokens']} {stock['generate']}")
    gaps = top2_gaps(ref["steps"])
    if min(gaps) < MIN_TOP2_GAP or len(set(ref["tokens"])) < 8:
        raise AssertionError(f"{name}: greedy path too fragile or too dull (gaps {gaps}, tokens {ref['tokens']})")
    low_dtype = np.float32
    np.savez_compressed(
        folder / "ref.npz", prompt=np.array(PROMPT, dtype=np.int64), greedy_tokens=np.array(ref["tokens"]),
        prefill_logits=ref["prefill"], step_logits=ref["steps"],
        prefill_logits_f64_stock=stock["prefill"], step_logits_f64_stock=stock["steps"],
        **{f"prefill_logits_{low_name}": low["prefill"].astype(low_dtype),
           f"step_logits_{low_name}": low["steps"].astype(low_dtype)})
    info = dict(
        variant=name, model_class=model_cls.__name__, weights_dtype=str(saved_dtype).removeprefix("torch."),
        seed=seed, init=dict(std=std, norm_weights="1 + 0.2 * N(0,1)", biases="0.5 * N(0,1)"),
        versions=dict(transformers=transformers.__version__, torch=torch.__version__, numpy=np.__version__,
                      safetensors=safetensors.__version__, python=platform.python_version()),
        command=" ".join([Path(sys.executable).name, *sys.argv]),
        prompt_ids=PROMPT, greedy_tokens=ref["tokens"],
        greedy_tokens_generate=dict(f64=ref["generate"], f64_stock=stock["generate"], **{low_name: low["generate"]}),
        greedy_tokens_manual_loop=dict(f64=ref["tokens"], f64_stock=stock["tokens"], **{low_name: low["tokens"]}),
        top2_gaps=gaps, min_top2_gap=min(gaps),
        logits_gaps={
            "f64_stock_vs_f64": dict(prefill=gap(stock["prefill"], ref["prefill"]),
                                     steps=gap(stock["steps"], ref["steps"])),
            f"{low_name}_vs_f64": dict(prefill=gap(low["prefill"], ref["prefill"]),
                                       steps=gap(low["steps"], ref["steps"])),
        },
        precision=("prefill_logits/step_logits: model.double() with RMSNorm, softmax and RoPE tables also in float64 "
                   "(transformers computes those in float32 even for float64 models); *_f64_stock: model.double() "
                   f"unmodified; *_{low_name}: the checkpoint's own dtype, stored as float32"),
        step_logits="row i: the logits greedy token i was taken from (row 0 = last prompt position)",
    )
    text = json.dumps(info, indent=1)  # lists of numbers on one line each
    text = re.sub(r"\[\s+([-+.,\deE\s]+?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    (folder / "ref.json").write_text(text + "\n")
    return info


def make_variant(name: str, out: Path, bf16_of: str | None = None) -> dict:
    model_cls, _, _, seed, std = VARIANTS[bf16_of or name]
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    model = build_model(bf16_of or name)
    dtype = torch.bfloat16 if bf16_of else torch.float32
    model.to(dtype).save_pretrained(folder, safe_serialization=True)
    return record_variant(name, folder, model_cls, dtype, seed, std)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "tests" / "models")
    parser.add_argument("--only", nargs="*", help="variants to (re)build (default: all)")
    args = parser.parse_args()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(1)  # one thread: the float32 runs' reduction order does not depend on the machine
    jobs = [(name, None) for name in VARIANTS] + [("llama3_bf16", "llama3")]
    for name, bf16_of in jobs:
        if args.only and name not in args.only:
            continue
        info = make_variant(name, args.out, bf16_of)
        size = sum(f.stat().st_size for f in (args.out / name).iterdir())
        low = next(k for k in info["logits_gaps"] if not k.startswith("f64_stock"))
        print(f"{name:12s} {size / 1024:6.0f} KiB  seed {info['seed']}  min top-2 gap {info['min_top2_gap']:.4f}  "
              f"stock-f64 gap {info['logits_gaps']['f64_stock_vs_f64']['prefill']['max_abs']:.2e}  "
              f"{low} gap {info['logits_gaps'][low]['prefill']['max_abs']:.2e}  tokens {info['greedy_tokens']}")


if __name__ == "__main__":
    main()
