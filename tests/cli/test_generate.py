"""``iron generate`` through click's CliRunner on the interpreter: the JSON object's keys and the greedy tokens of
the recorded llama3 reference (tests/models/llama3/ref.json), the plain output, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from iron.cli import generate_cmd
from iron.cli.main import cli

MODELS = Path(__file__).resolve().parents[1] / "models"
LLAMA3 = MODELS / "llama3"
INFO = json.loads((LLAMA3 / "ref.json").read_text())
IDS = ",".join(str(t) for t in INFO["prompt_ids"])


def invoke(*args: str):
    return CliRunner().invoke(cli, ["generate", *args], prog_name="iron")


def test_json_greedy_tokens_match_transformers():
    result = invoke(str(LLAMA3), "--prompt-ids", IDS, "--max-new-tokens", "4", "--json", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"tokens", "last_prefill_logits", "prefill_tokens_per_s", "decode_tokens_per_s"}
    assert out["tokens"] == INFO["greedy_tokens"][:4]
    want = np.load(LLAMA3 / "ref.npz")["step_logits"][0]  # the logits at the last prompt position, float64
    got = np.array(out["last_prefill_logits"])
    assert got.shape == (256,) and np.abs(got - want).max() < 1e-4 * np.abs(want).max()
    assert out["prefill_tokens_per_s"] > 0 and out["decode_tokens_per_s"] > 0


def test_json_sampled_is_reproducible():
    args = (str(LLAMA3), "--prompt-ids", IDS, "--max-new-tokens", "3", "--json", "--backend", "cpu",
            "--temperature", "1.5", "--top-p", "0.9", "--seed", "11")
    first, second = invoke(*args), invoke(*args)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["tokens"] == json.loads(second.output)["tokens"]


def test_plain_output_and_progress(monkeypatch):
    """The tokens and both speeds; with a terminal the run goes through the progress display (which is transient)."""
    monkeypatch.setattr(generate_cmd, "_interactive", lambda: True)
    result = invoke(str(LLAMA3), "--prompt-ids", IDS, "--max-new-tokens", "3", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    want = " ".join(str(t) for t in INFO["greedy_tokens"][:3])
    assert f"tokens: {want}" in result.output
    assert "prefill: 12 tokens in" in result.output and "decode: 2 tokens in" in result.output
    assert result.output.count("tokens/s") == 2


def test_one_new_token_has_no_decode_speed():
    result = invoke(str(LLAMA3), "--prompt-ids", "1,2", "--max-new-tokens", "1", "--json", "--backend", "cpu")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert len(out["tokens"]) == 1 and out["decode_tokens_per_s"] is None


def test_missing_directory(tmp_path):
    result = invoke(str(tmp_path / "nope"), "--prompt-ids", "1,2", "--backend", "cpu")
    assert result.exit_code == 1
    assert "no such checkpoint directory" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("ids,message", [("1,x,3", "'x' is not a token id"), (",", "at least one token id"),
                                         ("1,2.5", "'2.5' is not a token id")])
def test_bad_prompt_ids(ids, message):
    result = invoke(str(LLAMA3), "--prompt-ids", ids, "--backend", "cpu")
    assert result.exit_code == 2
    assert "--prompt-ids" in result.output and message in result.output


def test_prompt_id_outside_vocabulary():
    result = invoke(str(LLAMA3), "--prompt-ids", "1,256", "--backend", "cpu")
    assert result.exit_code == 1 and "outside the vocabulary (0 .. 255)" in result.output


def test_prompt_needs_one_form_and_a_tokenizer():
    result = invoke(str(LLAMA3), "--backend", "cpu")
    assert result.exit_code == 2 and "--prompt-ids" in result.output
    result = invoke(str(LLAMA3), "--prompt", "hello", "--backend", "cpu")
    assert result.exit_code == 2 and "no tokenizer.json" in result.output


def test_unsupported_checkpoint(tmp_path):
    config = json.loads((LLAMA3 / "config.json").read_text()) | {"sliding_window": 4096}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = invoke(str(tmp_path), "--prompt-ids", "1", "--backend", "cpu")
    assert result.exit_code == 1 and "sliding-window attention" in result.output
