"""Llama-family model runner on Iron kernels (issue 19): load a Hugging Face checkpoint folder, prefill a prompt,
decode with a KV cache on the device, greedy or sampled. See docs/model.md.

    from iron.model import Llama, generate

    model = Llama.load("path/to/checkpoint", backend="vulkan")
    result = generate(model, [1, 17, 42], max_new_tokens=16)
    print(result.tokens, result.decode_tokens_per_s)
"""

from __future__ import annotations

from .config import LlamaConfig, ModelError, load_config
from .generate import GenerationResult, generate
from .llama import Llama
from .weights import read_checkpoint, read_safetensors, upload_weights

__all__ = ["GenerationResult", "Llama", "LlamaConfig", "ModelError", "generate", "load_config", "read_checkpoint",
           "read_safetensors", "upload_weights"]
