"""Issue 19 on the H200: a Llama-3.2-1B-shaped model (random bf16 weights, built and saved by transformers on the
device machine, never committed) on Iron beside transformers.

    python3 scripts/gpu_model.py OUT.json [--shape 1b|tiny] [--backends cuda,vulkan]

Records, per Iron backend: the prefill logits of a 32-token prompt against transformers' bf16 ``sdpa`` run (max
|diff| over max |ref|, last row and all rows), the 32-token greedy continuation beside transformers' (the first
step where they differ, with transformers' top-2 logit gap there), decode tokens/s (batch 1, greedy, 256 tokens
after a warm-up run), prefill time for 512 and 2048 tokens, and on CUDA the GPU time of a decode step's kernels
(torch.profiler / CUPTI, which sees every kernel of the process) beside the step's wall time. transformers' own
figures (eager decode tokens/s, sdpa prefill ms) are measured in the same run. Every stage is guarded: a failure is
recorded in the JSON and the next stage runs. ``--shape tiny`` is the same script at a toy size, for a CPU check.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from iron.model.hf_peer import to_dtype_keeping_rope  # noqa: E402  (after the path)

ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
SHAPES = {
    "1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072),
    "tiny": dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, max_position_embeddings=131072),
}
PROMPT_LEN, NEW, DECODE_TOKENS = 32, 32, 256
PREFILLS = {"1b": (512, 2048), "tiny": (48, 64)}


def build(shape: str, folder: Path, device: str) -> LlamaForCausalLM:
    config = LlamaConfig(**SHAPES[shape], rms_norm_eps=1e-5, tie_word_embeddings=True, rope_parameters=ROPE,
                         hidden_act="silu", bos_token_id=None, eos_token_id=None, pad_token_id=None,
                         attn_implementation="sdpa")
    torch.manual_seed(0)
    model = to_dtype_keeping_rope(LlamaForCausalLM(config).to(device=device), torch.bfloat16).eval()
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder, safe_serialization=True)
    return model


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def reference(model, prompt: list[int], device: str, rec: dict) -> dict:
    """transformers' logits, greedy tokens and speed (bf16, sdpa, eager)."""
    ids = torch.tensor([prompt], device=device)
    with torch.no_grad():
        logits = model(ids).logits[0].float().cpu().numpy()
        model.float()  # the same weights in f32: the error of each bf16 run against it
        f32 = model(ids).logits[0].double().cpu().numpy()
        to_dtype_keeping_rope(model, torch.bfloat16)
        out = model.generate(ids, max_new_tokens=NEW, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=0)
    rec["transformers_bf16_vs_f32_rel_err"] = rel(logits, f32)
    tokens = out.sequences[0, len(prompt):].tolist()
    scores = torch.stack(out.scores)[:, 0].float()
    top2 = scores.topk(2, dim=-1).values
    rec["transformers"] = {"tokens": tokens, "top2_gap": (top2[:, 0] - top2[:, 1]).tolist()}
    rec["transformers"].update(transformers_speed(model, prompt, device))
    return {"logits": logits, "f32": f32, "tokens": tokens, "gaps": (top2[:, 0] - top2[:, 1]).tolist()}


def transformers_speed(model, prompt: list[int], device: str) -> dict:
    ids = torch.tensor([prompt], device=device)
    res = {}

    def gen(n: int) -> float:
        sync(device)
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)
        sync(device)
        return time.perf_counter() - t

    gen(4)
    steps = 128
    res["decode_tokens_per_s_eager"] = steps / max(gen(steps + 1) - gen(1), 1e-9)
    vocab = model.config.vocab_size
    for t in PREFILLS[SHAPE[0]]:
        x = torch.randint(0, vocab, (1, t), device=device, generator=torch.Generator(device).manual_seed(t))
        times = []
        for _ in range(6):
            sync(device)
            s = time.perf_counter()
            with torch.no_grad():
                model(x, logits_to_keep=1)
            sync(device)
            times.append(time.perf_counter() - s)
        res[f"prefill_{t}_ms"] = 1e3 * float(np.median(times[1:]))
    return res


def kernel_times(prof) -> dict[str, tuple[float, int]]:
    """GPU µs and launches per kernel name from a torch.profiler run (CUPTI sees every kernel of the process)."""
    kernels: dict[str, tuple[float, int]] = {}
    for ev in prof.key_averages():
        dt = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
        if dt:
            kernels[ev.key] = (kernels.get(ev.key, (0, 0))[0] + dt, ev.count)
    return kernels


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b).max() / np.abs(b).max())


def iron_run(folder: Path, backend: str, prompt: list[int], ref: dict | None, rec: dict, out: Path) -> None:
    from iron.model import Llama, generate
    from iron.runtime.device_array import synchronize

    r = rec.setdefault(backend, {})
    stages = []

    def stage(name):
        def wrap(fn):
            stages.append((name, fn))
            return fn
        return wrap

    state = {}

    @stage("load")
    def _load():
        t = time.perf_counter()
        state["m"] = Llama.load(folder, backend=backend)
        r["load_s"] = time.perf_counter() - t

    @stage("logits")
    def _logits():
        m = state["m"]
        m.reset(PROMPT_LEN + 8)
        got = m.prefill(prompt, all_logits=True).numpy().astype(np.float32)
        if ref is not None:
            r["prefill_logits_rel_err_all"] = rel(got, ref["logits"])
            r["prefill_logits_rel_err_last"] = rel(got[-1], ref["logits"][-1])
            r["argmax_equal_rows"] = int((got.argmax(-1) == ref["logits"].argmax(-1)).sum())
            r["prefill_logits_vs_f32_rel_err_all"] = rel(got, ref["f32"])
            r["argmax_equal_rows_vs_f32"] = int((got.argmax(-1) == ref["f32"].argmax(-1)).sum())
            r["transformers_bf16_argmax_equal_rows_vs_f32"] = int((ref["logits"].argmax(-1) ==
                                                                   ref["f32"].argmax(-1)).sum())

    @stage("greedy")
    def _greedy():
        res = generate(state["m"], prompt, NEW, warmup=True)
        r["tokens"] = res.tokens
        if ref is not None:
            diff = [i for i, (a, b) in enumerate(zip(res.tokens, ref["tokens"])) if a != b]
            r["first_divergence"] = diff[0] if diff else None
            r["top2_gap_at_divergence"] = ref["gaps"][diff[0]] if diff else None
            r["tokens_equal"] = len(res.tokens) - len(diff)

    @stage("decode_speed")
    def _decode():
        res = generate(state["m"], prompt, DECODE_TOKENS, warmup=True)  # the warm-up records, the timed run replays
        r["decode_graph"] = res.extra.get("graph")
        r["decode_graph_reused"] = res.extra.get("graph_reused")
        r["decode_tokens_per_s"] = res.decode_tokens_per_s
        r["decode_ms_per_token"] = 1e3 / res.decode_tokens_per_s

    @stage("prefill_speed")
    def _prefill():
        rng = np.random.default_rng(1)
        for t in PREFILLS[SHAPE[0]]:
            ids = rng.integers(0, state["m"].config.vocab_size, t).tolist()
            best = []
            for _ in range(3):
                best.append(generate(state["m"], ids, 1).prefill_s)
            r[f"prefill_{t}_ms"] = 1e3 * min(best[1:])
            r[f"prefill_{t}_ms_first"] = 1e3 * best[0]

    @stage("profile")
    def _profile():
        if backend not in ("cuda", "vulkan"):
            return
        from iron.model.decode_graph import DecodeGraph
        from iron.model.llama import slot_array
        from iron.runtime import get_backend
        from iron.runtime.device_array import asarray

        m = state["m"]
        steps = 20
        m.reset(PROMPT_LEN + 2 * steps + 4)
        if backend == "vulkan":  # the recording writes a timestamp after every dispatch (vulkan_record.py)
            get_backend("vulkan").profile_recordings = True
        try:
            run = DecodeGraph(m, asarray(slot_array(np.zeros(2 * steps + 4, np.int64)), backend=backend), PROMPT_LEN)
            run.first(m.prefill(prompt))
            run.step()
            run.step()  # the first eager, the second recorded: the rest replay the graph
        finally:
            if backend == "vulkan":
                get_backend("vulkan").profile_recordings = False
        synchronize(backend)
        if backend == "vulkan":
            kernels: dict[str, list[float]] = {}
            for _ in range(steps):  # one replay at a time: the timestamps are those of the last one that finished
                run.step()
                synchronize(backend)
                for name, ms in run.graph.timings() or []:
                    kernels.setdefault(name, [0.0, 0])
                    kernels[name][0] += 1e3 * ms
                    kernels[name][1] += 1
            t = time.perf_counter()
            for _ in range(steps):
                run.step()
            synchronize(backend)
            wall = time.perf_counter() - t
            r["profile_what"] = ("decode steps replayed as one Vulkan command buffer (model/decode_graph.py); GPU time "
                                 "per dispatch by timestamps, each from the previous dispatch's end (barrier included)")
        else:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                t = time.perf_counter()
                for _ in range(steps):
                    run.step()
                synchronize(backend)
                wall = time.perf_counter() - t
            kernels = kernel_times(prof)
            r["profile_what"] = "decode steps replayed as a CUDA graph (model/decode_graph.py)"
        total = sum(v[0] for v in kernels.values())
        r["profile_wall_ms_per_step"] = 1e3 * wall / steps
        r["profile_gpu_ms_per_step"] = total / 1e3 / steps
        r["profile_launches_per_step"] = sum(v[1] for v in kernels.values()) / steps
        top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:20]
        r["profile_top"] = [{"kernel": k[:90], "us_per_step": v[0] / steps, "calls_per_step": v[1] / steps}
                            for k, v in top]

    @stage("prefill_profile")
    def _prefill_profile():
        """The kernels of one 2048-token prefill (CUPTI): GPU time by kernel name beside the wall time."""
        if backend != "cuda":
            return
        m = state["m"]
        t = max(PREFILLS[SHAPE[0]])
        ids = np.random.default_rng(2).integers(0, m.config.vocab_size, t).tolist()
        m.reset(t + 1)
        m.prefill(ids)
        synchronize(backend)
        m.reset(t + 1)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            m.prefill(ids)
            synchronize(backend)
            wall = time.perf_counter() - start
        kernels = kernel_times(prof)
        r["prefill_profile_wall_ms"] = 1e3 * wall
        r["prefill_profile_gpu_ms"] = sum(v[0] for v in kernels.values()) / 1e3
        r["prefill_profile_top"] = [{"kernel": k[:90], "us": v[0], "calls": v[1]}
                                    for k, v in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:15]]

    @stage("gemv_shapes")
    def _gemv_shapes():
        """Each decode GEMV shape timed alone (CUPTI kernel time), cycling through the 16 layers' matrices (no L2 reuse
        between calls, as in a decode step): µs per call and GB/s of weights read."""
        if backend != "cuda":
            return
        from iron.runtime.device_array import empty
        from iron.std.gemv import launch_gemv

        m = state["m"]
        w = m.weights
        shapes = {"qkv": [lw.qkv for lw in w.layers], "o": [lw.o for lw in w.layers],
                  "gate_up": [lw.gate_up for lw in w.layers], "down": [lw.down for lw in w.layers],
                  "lm_head": [w.lm_head]}
        out = {}
        for name, mats in shapes.items():
            rows, cols = mats[0].shape
            x = empty((cols,), m.dtype, backend=backend)
            y = empty((rows,), m.dtype, backend=backend)
            launch_gemv(mats[0], x, y, backend)
            synchronize(backend)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for a in mats * 2:
                    launch_gemv(a, x, y, backend)
                synchronize(backend)
            total = sum(getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0)
                        for ev in prof.key_averages() if ev.key.startswith("gemv"))
            us = total / (2 * len(mats))
            out[name] = {"shape": [rows, cols], "us": us, "gb_s": rows * cols * mats[0].itemsize / us / 1e3}
        r["gemv_shapes"] = out

    @stage("host_profile")
    def _host_profile():
        """cProfile of 10 decode steps: where the host's time per step goes (top functions by own time)."""
        import cProfile
        import io
        import pstats

        m = state["m"]
        m.reset(PROMPT_LEN + 32)
        m.prefill(prompt)
        from iron.runtime.device_array import empty
        from iron.std.reductions import launch_argmax
        tok = empty((1,), "i32", backend=backend)
        launch_argmax(m.step_logits, tok, backend)
        launch_argmax(m.decode(tok), tok, backend)
        synchronize(backend)
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(10):
            launch_argmax(m.decode(tok), tok, backend)
        synchronize(backend)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        pstats.Stats(prof, stream=text).sort_stats("cumtime").print_stats(30)
        r["host_profile"] = text.getvalue()[-12000:]
        # the timed prefill path (generate's: reset, prefill, first choice, logits read back) at 512 tokens, after
        # two untimed runs of the same prompt: where its host time goes
        ids = np.random.default_rng(3).integers(0, m.config.vocab_size, 512).tolist()
        for _ in range(2):
            generate(m, ids, 1)
        prof = cProfile.Profile()
        prof.enable()
        res = generate(m, ids, 1)
        prof.disable()
        r["prefill_host_profile_prefill_ms"] = 1e3 * res.prefill_s
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(35)
        pstats.Stats(prof, stream=text).sort_stats("cumtime").print_stats(35)
        r["prefill_host_profile"] = text.getvalue()[-14000:]

    for name, fn in stages:
        t = time.perf_counter()
        try:
            fn()
        except Exception as exc:  # recorded; the next stage runs
            r[f"{name}_error"] = f"{type(exc).__name__}: {exc}"[:2000]
            traceback.print_exc()
            if name == "load":
                break
        r[f"{name}_s"] = time.perf_counter() - t
        print(backend, name, json.dumps({k: v for k, v in r.items() if not isinstance(v, list)}, default=str)[:600],
              flush=True)
        out.write_text(json.dumps(rec, indent=1, default=str))


SHAPE = ["1b"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--shape", default="1b", choices=sorted(SHAPES))
    ap.add_argument("--backends", default="cuda")
    ap.add_argument("--folder", default="/tmp/iron-llama")
    args = ap.parse_args()
    out = Path(args.out)
    SHAPE[0] = args.shape
    device = "cuda" if torch.cuda.is_available() else "cpu"
    folder = Path(args.folder) / args.shape
    rec = {"shape": args.shape, "config": SHAPES[args.shape], "rope": ROPE, "torch": torch.__version__,
           "transformers": transformers.__version__, "device": torch.cuda.get_device_name() if device == "cuda"
           else "cpu", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "iron_cuda_pdl": os.environ.get("IRON_CUDA_PDL", "default (on where cuda.core can)")}  # runtime/cuda.py
    prompt = np.random.default_rng(0).integers(0, SHAPES[args.shape]["vocab_size"], PROMPT_LEN).tolist()
    rec["prompt"] = prompt
    ref = None
    try:
        model = build(args.shape, folder, device)
        ref = reference(model, prompt, device, rec)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    except Exception as exc:
        rec["transformers_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        traceback.print_exc()
    out.write_text(json.dumps(rec, indent=1, default=str))
    print("transformers", json.dumps(rec.get("transformers", {}), default=str)[:800], flush=True)
    if not (folder / "config.json").exists():
        return
    for backend in args.backends.split(","):
        iron_run(folder, backend, prompt, ref, rec, out)


if __name__ == "__main__":
    main()
