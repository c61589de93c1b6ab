"""A Hugging Face ``config.json`` of the Llama family, read into :class:`LlamaConfig`; what Iron cannot run is refused
here, before any weight is read, with a sentence saying what and why.

Supported: ``model_type`` ``llama`` (Llama 2 and 3), ``mistral`` and ``qwen2``; SiLU-gated MLPs; grouped-query
attention (``num_key_value_heads`` dividing ``num_attention_heads``); RoPE of type ``default`` or ``llama3``; tied or
untied embeddings. Both spellings of RoPE are read: transformers 5 keeps ``rope_theta`` and the scaling in
``rope_parameters``; older files have ``rope_theta`` and ``rope_scaling`` (whose type key may be ``type``).

Refused: sliding-window attention that is in effect (Mistral v0.1's ``sliding_window: 4096``; Qwen2 with
``use_sliding_window: true``), other RoPE types (``linear``, ``dynamic``, ``yarn``, ...), partial rotary embeddings,
other activations, quantized checkpoints (``quantization_config``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import IronError

__all__ = ["LlamaConfig", "ModelError", "load_config"]

MODEL_TYPES = ("llama", "mistral", "qwen2")
ROPE_TYPES = ("default", "llama3")


class ModelError(IronError):
    """A checkpoint Iron cannot load or run (a missing file, an unsupported feature, inconsistent weights)."""


@dataclass(frozen=True)
class LlamaConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    tie_word_embeddings: bool
    max_position_embeddings: int
    dtype: str | None = None  # the checkpoint's declared dtype ("bfloat16", ...), informational
    rope: dict = field(default_factory=dict)  # rope_type, rope_theta and the llama3 scaling parameters
    eos_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, cfg: dict, source: str = "config.json") -> LlamaConfig:
        """Read a parsed config.json; raise :class:`ModelError` for what Iron does not run."""
        _check_supported(cfg, source)
        try:
            heads = int(cfg["num_attention_heads"])
            kv_heads = int(cfg.get("num_key_value_heads") or heads)
            hidden = int(cfg["hidden_size"])
            config = cls(
                model_type=cfg["model_type"], vocab_size=int(cfg["vocab_size"]), hidden_size=hidden,
                intermediate_size=int(cfg["intermediate_size"]), num_layers=int(cfg["num_hidden_layers"]),
                num_heads=heads, num_kv_heads=kv_heads, head_dim=int(cfg.get("head_dim") or hidden // heads),
                rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
                tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                max_position_embeddings=int(cfg.get("max_position_embeddings") or 4096),
                dtype=cfg.get("dtype") or cfg.get("torch_dtype"), rope=_rope_parameters(cfg, source),
                eos_token_ids=_ids(cfg.get("eos_token_id")))
        except KeyError as e:
            raise ModelError(f"{source}: no {e.args[0]!r}, which a Llama-family config must have") from None
        if heads % kv_heads:
            raise ModelError(f"{source}: {heads} attention heads are not a multiple of {kv_heads} key/value heads")
        if config.head_dim % 2:
            raise ModelError(f"{source}: head_dim {config.head_dim} is odd; RoPE rotates pairs")
        return config

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def rope_inv_freq(self) -> np.ndarray:
        """The head_dim / 2 inverse frequencies in float64, with Llama 3's scaling where the config asks for it
        (each frequency kept, divided by ``factor`` or blended, by its wavelength against the original context)."""
        rope, dim = self.rope, self.head_dim
        inv = 1.0 / float(rope["rope_theta"]) ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
        if rope["rope_type"] != "llama3":
            return inv
        factor, low, high = (float(rope[k]) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        old_len = float(rope["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        smooth = (old_len / wavelen - low) / (high - low)
        blended = (1 - smooth) * inv / factor + smooth * inv
        return np.where(wavelen < old_len / high, inv, np.where(wavelen > old_len / low, inv / factor, blended))

    def rope_tables(self, max_pos: int) -> tuple[np.ndarray, np.ndarray]:
        """(cos, sin) as f32 (max_pos, head_dim / 2) tables, the angles computed in float64 (std/rope's layout)."""
        angles = np.arange(max_pos, dtype=np.float64)[:, None] * self.rope_inv_freq()[None, :]
        return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _ids(value) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else (int(value),)


def _check_supported(cfg: dict, source: str) -> None:
    kind = cfg.get("model_type")
    if kind not in MODEL_TYPES:
        raise ModelError(f"{source}: model_type {kind!r} is not supported; Iron runs {', '.join(MODEL_TYPES)}")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ModelError(f"{source}: hidden_act {act!r} is not supported; the MLP must be SwiGLU (silu)")
    if cfg.get("quantization_config"):
        raise ModelError(f"{source}: quantized checkpoints are not supported yet; use bf16, f16 or f32 weights")
    window = cfg.get("sliding_window")
    if kind == "qwen2":
        uses_window = bool(cfg.get("use_sliding_window", False)) and window is not None
    else:
        uses_window = window is not None
    sliding_layers = [t for t in cfg.get("layer_types") or [] if t != "full_attention"]
    if uses_window or sliding_layers:
        raise ModelError(f"{source}: sliding-window attention (sliding_window {window}) is not supported; Iron "
                         "attends over the whole context")


def _rope_parameters(cfg: dict, source: str) -> dict:
    rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    rope.setdefault("rope_type", rope.pop("type", "default"))
    rope.setdefault("rope_theta", cfg.get("rope_theta", 10000.0))
    if float(rope.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ModelError(f"{source}: partial rotary embeddings (partial_rotary_factor "
                         f"{rope['partial_rotary_factor']}) are not supported")
    if rope["rope_type"] not in ROPE_TYPES:
        raise ModelError(f"{source}: RoPE type {rope['rope_type']!r} is not supported; Iron runs "
                         f"{' and '.join(ROPE_TYPES)}")
    if rope["rope_type"] == "llama3":
        missing = [k for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
                   if k not in rope]
        if missing:
            raise ModelError(f"{source}: llama3 RoPE scaling without {', '.join(missing)}")
    return rope


def load_config(folder: str | Path) -> LlamaConfig:
    """The config.json of a checkpoint folder (and the eos ids of generation_config.json where it has them)."""
    folder = Path(folder)
    path = folder / "config.json"
    if not folder.is_dir():
        raise ModelError(f"{folder}: no such checkpoint directory")
    if not path.is_file():
        raise ModelError(f"{folder}: no config.json (a Hugging Face checkpoint directory has config.json and "
                         "*.safetensors)")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ModelError(f"{path}: cannot read it as JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ModelError(f"{path}: a JSON {type(cfg).__name__}, not the object of a model's configuration")
    gen_path = folder / "generation_config.json"
    if cfg.get("eos_token_id") is None and gen_path.is_file():
        try:
            cfg["eos_token_id"] = json.loads(gen_path.read_text()).get("eos_token_id")
        except (OSError, ValueError, AttributeError):  # generation_config.json is optional: unreadable, ignored
            pass
    return LlamaConfig.from_dict(cfg, str(path))
